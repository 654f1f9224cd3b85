"""SluiceJobTrigger: follows a job in the Sluice JobManager from Airflow's triggerer, so that a
run deployed there holds no worker slot while its job runs (Airflow's deferrable operators, as
the Livy and Databricks providers follow theirs).

Every ``poll_interval`` seconds it asks the JobManager for the job (REST, ``GET /jobs/<jobid>``;
the synchronous client runs in a thread, off the triggerer's event loop) and logs each change of
state in the task's log; when the job ends (FINISHED, CANCELED, FAILED) it fires one event with
the state, the failure cause, the restart strategy's last decision and a stop's savepoint, and
the task resumes in ``SluiceJobOperator.execute_complete``.

A JobManager that does not answer (restarting, say) is asked again until ``unreachable_timeout``
seconds have passed; then the trigger fails, the task is retried and the retry reattaches to the
same job. A triggerer that stops or restarts leaves the job alone (``cleanup`` does nothing to it):
another triggerer runs the trigger again. Only a user's action on the deferred task (mark failed,
clear, mark success) cancels the job: Airflow calls ``on_kill`` then.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from sluice_airflow.hooks import SluiceHook

TERMINAL = ("FINISHED", "CANCELED", "FAILED")
CANCEL_TIMEOUT_S = 20.0


class SluiceJobTrigger(BaseTrigger):
    def __init__(self, jobid: str, sluice_conn_id: str = SluiceHook.default_conn_name, poll_interval: float = 2.0,
                 unreachable_timeout: float = 600.0):
        super().__init__()
        self.jobid, self.sluice_conn_id = jobid, sluice_conn_id
        self.poll_interval, self.unreachable_timeout = poll_interval, unreachable_timeout

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("sluice_airflow.triggers.SluiceJobTrigger",
                {"jobid": self.jobid, "sluice_conn_id": self.sluice_conn_id, "poll_interval": self.poll_interval,
                 "unreachable_timeout": self.unreachable_timeout})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from runtime.jobmanager.rest_client import JobManagerError
        client = await SluiceHook(sluice_conn_id=self.sluice_conn_id).aget_conn()
        last_state, unreachable_since = None, None
        while True:
            try:
                job = await asyncio.to_thread(client.job_details, self.jobid)
            except JobManagerError as e:
                if getattr(e, "status", None) == 404:       # the JobManager lost it: the task says so and fails
                    yield TriggerEvent({"jobid": self.jobid, "state": "UNKNOWN",
                                        "failure": f"The Sluice JobManager has no job {self.jobid}: {e}"})
                    return
                now = time.monotonic()
                if unreachable_since is None:
                    unreachable_since = now
                    self.log.warning("The Sluice JobManager does not answer about job %s (%s): asking again for up "
                                     "to %.0f s.", self.jobid, e, self.unreachable_timeout)
                elif now - unreachable_since > self.unreachable_timeout:
                    raise       # the task fails; its retry reattaches to the job
                await asyncio.sleep(self.poll_interval)
                continue
            if unreachable_since is not None:
                self.log.info("The Sluice JobManager answers again.")
                unreachable_since = None
            state = job.get("state")
            if state != last_state:
                self.log.info("Job %s (%s) is %s%s", job.get("name"), self.jobid, state,
                              f", attempt {job['attempt']}" if job.get("attempt") else "")
                if state in ("RESTARTING", "FAILING") and job.get("restart"):
                    self.log.info("  %s", job["restart"])
                last_state = state
            if state in TERMINAL:
                yield TriggerEvent({"jobid": self.jobid, "name": job.get("name"), "state": state,
                                    "failure": job.get("failure-cause"), "restart": job.get("restart"),
                                    "savepoint": job.get("savepoint")})
                return
            await asyncio.sleep(self.poll_interval)

    async def on_kill(self) -> None:
        """A user failed, cleared or marked the deferred task: cancel its job (Flink's cancel)."""
        client = await SluiceHook(sluice_conn_id=self.sluice_conn_id).aget_conn()
        self.log.info("The task was stopped in Airflow: canceling job %s in the Sluice JobManager.", self.jobid)
        await asyncio.wait_for(asyncio.to_thread(client.cancel_job, self.jobid), CANCEL_TIMEOUT_S)
