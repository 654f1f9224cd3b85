"""The Dispatcher (Flink's): accepts jobs, starts a JobMaster for each, answers for all of them,
and on start recovers every job a JobManager before it left unfinished.

Its answers are JSON-able dicts in the shapes and with the field names of Flink's REST API
(``rest_server`` only adapts them to HTTP). A refusal raises ``RestHandlerException`` with the
HTTP status and a message that names the thing and the fix.
"""
from __future__ import annotations

import functools
import logging
import os
import threading
import time
import uuid
from importlib.metadata import PackageNotFoundError, version
from typing import Optional

from runtime.checkpoint.checkpoint_record import (CHECKPOINT, COMPLETED, DISCARDED, FAILED as CHECKPOINT_FAILED,
                                                 SAVEPOINT)
from runtime.checkpoint.completed_checkpoint_store import CompletedCheckpointStore
from runtime.checkpoint.epoch_log import EpochLog
from runtime.client import JobScriptError, compile_job
from runtime.execution.history import ExecutionHistory
from runtime.execution.preflight import check_job_folder, claim_job_folder
from runtime.jobmanager.job_master import DriverSource, JobMaster, StartedDriver, execution_overrides
from runtime.jobmanager.job_store import (CANCELED, CANCELLING, CREATED, FAILED, FINISHED, INITIALIZING, RESTARTING,
                                          RUNNING, JobRecord, JobStore, StopRequest, new_job_id)
from runtime.jobmaster import overview
from runtime.jobmaster.deployment import CONTROL_PLANE_CONFIGURATION, JobSpec
from runtime.jobmaster.plans import PlanNotFoundError, load_plan, store_plan
from runtime.jobmaster.steps import RUN_PARAMETERS, RunRequest, RunRequestError, resolve_restore_point
from runtime.jobmaster.stop import StopRefusedException, request_stop
from runtime.metrics.epoch_timings import last_epoch_timings
from runtime.storage.layout import job_dir

log = logging.getLogger(__name__)

SUBMIT_FIELDS = {"plan", "script", "args", "configuration", "submission_key", "dag_run_id", *RUN_PARAMETERS}


class RestHandlerException(Exception):
    """A request the JobManager refuses (Flink's RestHandlerException): the HTTP status and why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _ms(t: Optional[float]) -> int:
    return -1 if t is None else int(t * 1000)


@functools.lru_cache(maxsize=128)
def _plan(folder: str):
    return load_plan(folder)


_compile_lock = threading.Lock()     # a job script's compile sets sys.argv: one at a time


class Dispatcher:
    def __init__(self, warehouse: str, master: str, pool=None, driver_env: Optional[dict] = None):
        self.warehouse, self.master, self.pool = os.path.abspath(warehouse), master, pool
        self.store = JobStore(self.warehouse)
        self.drivers = DriverSource(self.warehouse, master, pool, driver_env)
        self.masters: dict[str, JobMaster] = {}
        self._lock = threading.RLock()

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> "Dispatcher":
        """Recover every unfinished job: a live driver is adopted (watched by its pid and folder);
        a dead one is a failure its restart strategy decides on; a job waiting to restart waits on."""
        for record in self.store.all():
            if record.terminal:
                continue
            adopted = StartedDriver.of(record.driver.directory, pid=record.driver.pid) if record.driver else None
            log.info("recovering job %s (%s, %s)%s", record.jobid, record.job_name, record.state,
                     f": adopting driver pid {adopted.pid}" if adopted else "")
            self._start_master(record.jobid, adopted)
        if self.pool is not None:
            self.pool.start()
        return self

    def close(self) -> None:
        """Stop watching the jobs (their drivers run on, for the next JobManager to adopt)."""
        with self._lock:
            for master in self.masters.values():
                master.close()
        if self.pool is not None:
            self.pool.stop()

    def _start_master(self, jobid: str, adopted: Optional[StartedDriver] = None) -> None:
        with self._lock:
            self.masters[jobid] = JobMaster(jobid, self.store, self.drivers, self._ended, adopted).start()

    def _ended(self, record: JobRecord) -> None:
        with self._lock:
            self.masters.pop(record.jobid, None)

    # ---- submit ------------------------------------------------------------------------------

    def submit(self, body: dict) -> dict:
        """A new job from a stored plan or a job script, or, for a ``submission_key`` already
        submitted, that job again: {"jobid", "existing"}."""
        if not isinstance(body, dict):
            raise RestHandlerException(400, 'POST /jobs takes a JSON object: {"plan": folder} or {"script": path}')
        unknown = set(body) - SUBMIT_FIELDS
        if unknown:
            raise RestHandlerException(400, f"Unknown field(s) {sorted(unknown)} in the submit: use "
                                            f"{', '.join(sorted(SUBMIT_FIELDS))}.")
        if bool(body.get("plan")) == bool(body.get("script")):
            raise RestHandlerException(400, 'A submit names the job once: {"plan": a stored plan folder} or '
                                            '{"script": a job script, "args": [...]}, not both or neither.')
        with self._lock:
            key = body.get("submission_key")
            found = self.store.find(key) if key else None
            if found is not None:
                return {"jobid": found.jobid, "existing": True}
            jobid = new_job_id()
            try:
                request = RunRequest.from_conf({k: body[k] for k in RUN_PARAMETERS if k in body},
                                               JobSpec(body.get("plan") or body["script"], body.get("plan") or body["script"]))
                options, configuration = execution_overrides(body.get("configuration") or {})
                plan = self._plan_of(body, jobid, request, configuration)
                job = _plan(plan)
                resolve_restore_point(job, request, self.warehouse)      # a wrong restore point fails the submit
            except RestHandlerException:
                raise
            except (RunRequestError, JobScriptError, PlanNotFoundError, ValueError, FileNotFoundError) as e:
                raise RestHandlerException(400, str(e)) from e
            except Exception as e:      # the job's own code, or a checkpoint that does not fit it
                raise RestHandlerException(400, f"{type(e).__name__}: {e}") from e
            name = job.job_graph.job_name
            running = [r for r in self.store.all() if not r.terminal and r.job_name == name]
            if running:
                raise RestHandlerException(409, f"Job '{name}' is already running as {running[0].jobid}: two runs of "
                                                f"one job would write the same checkpoints and sinks. Cancel or "
                                                f"stop it first (sluice cancel {running[0].jobid}).")
            now = time.time()
            asked = {"restore_from": request.restore_from, "max_epochs": request.max_epochs,
                     "allow_non_restored_state": request.allow_non_restored_state, "execution_options": options,
                     **{k: body[k] for k in ("script", "args", "parallelism", "configuration") if k in body}}
            record = JobRecord(jobid, name, plan, body.get("dag_run_id") or f"jobmanager__{jobid}", asked,
                               submission_key=key, created_at=now, last_modification=now)
            self.store.put(record)
            log.info("job %s (%s) submitted: plan %s", jobid, name, plan)
            self._start_master(jobid)
            return {"jobid": jobid, "existing": False}

    def _plan_of(self, body: dict, jobid: str, request: RunRequest, configuration: dict) -> str:
        """The plan folder a submit names, or the job script compiled here and stored as a plan."""
        if body.get("plan"):
            if configuration or body.get("args") or body.get("parallelism"):
                raise RestHandlerException(400, "A stored plan runs as it was compiled: drop args, parallelism and "
                                                "the job's configuration (execution options such as "
                                                "sluice.epoch.interval may stay), or submit the script instead.")
            return body["plan"]
        script = os.path.abspath(body["script"])
        args = [str(a) for a in body.get("args") or ()]
        with _compile_lock:
            try:
                job = compile_job(script, args, request.parallelism, {**CONTROL_PLANE_CONFIGURATION, **configuration})
            except SystemExit as e:     # argparse, having said why on the JobManager's stderr
                raise RestHandlerException(400, f"{script} exited with status {e.code} while compiling with "
                                                f"arguments {args}: check them.") from None
        folder = job_dir(self.warehouse, job.job_graph.job_name)
        check_job_folder(job.job_graph, self.warehouse, folder)
        claim_job_folder(job.job_graph, folder)
        summary = {"job_name": job.job_graph.job_name, "job_id": job.job_graph.job_id, "script": script,
                   "args": args, "requested_parallelism": request.parallelism, "submitted_as": jobid}
        return store_plan(job, self.warehouse, f"jobmanager-{jobid}", summary)

    # ---- queries -----------------------------------------------------------------------------

    def record(self, jobid: str) -> JobRecord:
        record = self.store.get(jobid) if jobid.isalnum() else None
        if record is None:
            raise RestHandlerException(404, f"Job {jobid} not found: list the jobs with GET /jobs (sluice list -a).")
        return record

    def overview(self) -> dict:
        records = self.store.all()
        count = lambda *states: sum(r.state in states for r in records)  # noqa: E731
        try:
            sluice_version = version("sluice")
        except PackageNotFoundError:
            sluice_version = "unknown"
        return {"jobs-running": count(INITIALIZING, CREATED, RUNNING, RESTARTING, CANCELLING),
                "jobs-finished": count(FINISHED), "jobs-cancelled": count(CANCELED), "jobs-failed": count(FAILED),
                "standby-drivers": self.pool.ready_count() if self.pool is not None else 0,
                "sluice-version": sluice_version, "warehouse": self.warehouse, "master": self.master}

    def list_jobs(self) -> dict:
        return {"jobs": [{"id": r.jobid, "status": r.state} for r in self.store.all()]}

    def jobs_overview(self, submission_key: Optional[str] = None) -> dict:
        return {"jobs": [self._summary(r) for r in self.store.all()
                         if submission_key is None or r.submission_key == submission_key]}

    def _summary(self, record: JobRecord) -> dict:
        end = record.end_time if record.terminal else None
        start = record.start_time or record.created_at
        return {"jid": record.jobid, "name": record.job_name, "state": record.state, "start-time": _ms(start),
                "end-time": _ms(end), "duration": int(((end or time.time()) - start) * 1000),
                "last-modification": _ms(record.last_modification), "submission-key": record.submission_key}

    def details(self, jobid: str) -> dict:
        record = self.record(jobid)
        attempts = self._attempts(record)
        try:
            vertices = [{"id": v.vertex_id, "name": v.name, "parallelism": v.parallelism}
                        for v in _plan(record.plan).job_graph.vertices]
        except Exception:       # the plan was removed since: the job's record still answers
            vertices = []
        return {**self._summary(record), "now": _ms(time.time()), "dag-run-id": record.dag_run_id,
                "attempt": attempts[-1].attempt if attempts else 0, "failure-cause": record.failure,
                "restart": record.restart, "savepoint": record.savepoint, "plan": record.plan,
                "driver": ({"directory": record.driver.directory, "pid": record.driver.pid} if record.driver else None),
                "drivers": record.drivers, "vertices": vertices}

    def _attempts(self, record: JobRecord) -> list:
        return ExecutionHistory(job_dir(self.warehouse, record.job_name)).attempts(record.dag_run_id)

    def checkpoints(self, jobid: str) -> dict:
        """Flink's checkpoint statistics of the job (its attempts' checkpoints and savepoints)."""
        record = self.record(jobid)
        attempts = self._attempts(record)
        runs = {a.run_id for a in attempts}
        taken = [c for c in CompletedCheckpointStore(job_dir(self.warehouse, record.job_name)).history() if c.run_id in runs]

        def stats(c):      # a subsumed checkpoint completed once: Flink lists it COMPLETED, discarded
            return {"id": c.checkpoint_id, "status": COMPLETED if c.status in (COMPLETED, DISCARDED) else c.status,
                    "discarded": c.status == DISCARDED, "is_savepoint": c.kind == SAVEPOINT,
                    "trigger_timestamp": _ms(c.started_at), "latest_ack_timestamp": _ms(c.completed_at),
                    "state_size": c.state_bytes, "end_to_end_duration": c.duration_ms,
                    "external_path": c.external_path, "epoch": c.epoch}
        completed = [c for c in taken if c.status in (COMPLETED, DISCARDED)]
        failed = [c for c in taken if c.status == CHECKPOINT_FAILED]
        first = attempts[0] if attempts else None
        restored = None
        if first is not None and first.restored_from is not None:
            restored = {"id": first.restored_from, "is_savepoint": bool(first.restored_savepoint),
                        "external_path": first.restored_savepoint, "restore_timestamp": _ms(first.started_at)}
        latest = lambda found: stats(found[-1]) if found else None  # noqa: E731
        return {"counts": {"restored": int(restored is not None), "total": len(taken), "in_progress": 0,
                           "completed": len(completed), "failed": len(failed)},
                "latest": {"completed": latest([c for c in completed if c.kind == CHECKPOINT]),
                           "savepoint": latest([c for c in completed if c.kind == SAVEPOINT]),
                           "failed": latest(failed), "restored": restored},
                "history": [stats(c) for c in reversed(taken)]}

    def metrics(self, jobid: str) -> dict:
        """Flink's job metrics ([{"id", "value"}], values as strings) and the epochs Sluice counts."""
        record = self.record(jobid)
        attempts = self._attempts(record)
        runs = {a.run_id for a in attempts}
        epochs = [e for e in EpochLog(job_dir(self.warehouse, record.job_name)).epoch_metrics(every_run=True)
                  if e["run_id"] in runs]
        checkpoints = self.checkpoints(jobid)
        last = checkpoints["latest"]["completed"]
        start = record.start_time or record.created_at
        values = {"numRestarts": max(0, len(attempts) - 1),
                  "uptime": int(((record.end_time if record.terminal else time.time()) - start) * 1000),
                  "numberOfCompletedCheckpoints": checkpoints["counts"]["completed"],
                  "numberOfFailedCheckpoints": checkpoints["counts"]["failed"],
                  "lastCheckpointSize": last["state_size"] if last else -1,
                  "lastCheckpointDuration": last["end_to_end_duration"] if last else -1,
                  "numEpochs": len(epochs), "numRecordsIn": sum(e.get("records_in") or 0 for e in epochs),
                  # Where the latest epoch's time went and how late its records became visible (-1: not known).
                  **last_epoch_timings(epochs)}
        return [{"id": k, "value": str(v)} for k, v in values.items()]

    # ---- cancel, stop --------------------------------------------------------------------------

    def cancel(self, jobid: str) -> dict:
        record = self.record(jobid)
        if record.terminal:
            raise RestHandlerException(409, f"Job {jobid} ({record.job_name}) is already {record.state}: "
                                            "there is nothing to cancel.")
        self.store.update(jobid, cancel_requested=True, state=CANCELLING)
        with self._lock:
            master = self.masters.get(jobid)
        if master is not None:
            master.cancel()
        return {}

    def stop(self, jobid: str, target_directory: Optional[str] = None, drain: bool = False) -> dict:
        """Flink's stop with savepoint: the driver ends after its current epoch with a savepoint."""
        record = self.record(jobid)
        if drain:
            raise RestHandlerException(400, "drain=true (end of input before the savepoint) is not supported: "
                                            "stop without drain, then run the job to its end from the savepoint.")
        if record.state != RUNNING:
            raise RestHandlerException(409, f"Job {jobid} ({record.job_name}) is {record.state}: only a RUNNING "
                                            "job stops with a savepoint" +
                                       (" (wait until it runs again, or cancel it)." if not record.terminal else "."))
        if record.stop is not None:
            return {"request-id": record.stop.request_id}
        try:
            request_stop(self.warehouse, record.job_name, record.dag_run_id, target_directory,
                         requested_by=f"JobManager (job {jobid})")
        except StopRefusedException as e:
            raise RestHandlerException(409, str(e)) from e
        stop = StopRequest(uuid.uuid4().hex, target_directory, time.time())
        self.store.update(jobid, stop=stop)
        return {"request-id": stop.request_id}

    def savepoint_status(self, jobid: str, request_id: str) -> dict:
        record = self.record(jobid)
        if record.stop is None or record.stop.request_id != request_id:
            raise RestHandlerException(404, f"No savepoint request {request_id} for job {jobid}: stop it with "
                                            f"POST /jobs/{jobid}/stop, which returns the request-id.")
        if not record.terminal:
            return {"status": {"id": "IN_PROGRESS"}, "operation": None}
        if record.savepoint:
            return {"status": {"id": "COMPLETED"}, "operation": {"location": record.savepoint}}
        cause = record.failure or f"the job ended {record.state} without a savepoint"
        return {"status": {"id": "COMPLETED"}, "operation": {"failure-cause": cause}}

    # ---- the web view's data (runtime.jobmaster.overview) ----------------------------------------

    def web_jobs(self) -> list:
        return [overview.job_summary(job) for job in overview.list_jobs(self.warehouse)]

    def web_job(self, name: str, part: Optional[str] = None, checkpoint: Optional[int] = None):
        job = overview.find_job(name, self.warehouse)
        if job is None:
            raise RestHandlerException(404, f"No job module {name} in the jobs folder: GET /sluice/jobs lists them.")
        if part is None:
            return overview.job_details(job)
        if part == "checkpoints":
            return [overview.checkpoint_json(r) for r in job.checkpoints]
        if part == "executions":
            return [overview.execution_json(r) for r in job.executions]
        if part == "metrics":
            return overview.charts_json(overview.job_charts(job, checkpoint))
        if part == "graph":
            return overview.graph_json(job)
        raise RestHandlerException(404, f"/sluice/jobs/{name}/{part}: use checkpoints, executions, metrics or graph.")

