"""Which run holds the job (Flink's leader election, here a lease in the epoch log): a run claims
the job with a "run" row before it writes anything, and releases it with its end; a claim held
by a live process on this host, or by one on another host that logged within the lease timeout
(sluice.lease-timeout), refuses a second run.

The claim is committed at the exact version after what the run read, so of two runs starting
together one wins; every later append of the run commits the same way (``EpochLog.append``),
so a run that was taken over stops at its next one.
"""
from __future__ import annotations

import os
import socket
import time
from typing import Optional

from runtime.checkpoint.epoch_log import EpochLog, Fenced, JobAlreadyRunningException


class JobLease:
    def __init__(self, epoch_log: EpochLog, job_dir: str):
        self.log = epoch_log
        self.job_dir = job_dir      # named in the refusal

    def claim(self, run_id: str, lease_timeout_s: float) -> None:
        """Register this run as the job's only writer, or refuse if another run holds the job."""
        for _ in range(3):
            holder = self.running_holder(lease_timeout_s)
            if holder is not None:
                raise JobAlreadyRunningException(already_running(self.job_dir, holder))
            self.log.open()
            try:
                self.log.append([{"run_id": run_id, "kind": "run", "status": "RUNNING"}])
                return
            except Fenced:
                continue
        raise JobAlreadyRunningException(f"{self.job_dir}: another run claimed the job while this one started")

    def release(self, run_id: str, status: str) -> None:
        """The run's end (FINISHED, FAILED, CANCELED), after the epoch log's last plan."""
        self.log.close([{"run_id": run_id, "kind": "run", "status": status}])

    def running_holder(self, lease_timeout_s: float) -> Optional[dict]:
        """The run holding the job (its claim row, with its ``last_activity``), None when free."""
        runs: dict = {}
        last_activity: dict = {}
        for row in self.log.rows():
            last_activity[row["run_id"]] = row["logged_at"]
            if row["kind"] == "run":
                runs[row["run_id"]] = row
        for run_id, row in runs.items():
            if row["status"] != "RUNNING":
                continue
            if row["host"] == socket.gethostname():
                if _pid_alive(row["pid"]):
                    return {**row, "last_activity": last_activity[run_id]}
            elif time.time() - last_activity[run_id].timestamp() < lease_timeout_s:
                return {**row, "last_activity": last_activity[run_id]}
        return None


def already_running(job_dir: str, holder: dict) -> str:
    return (f"Job at {job_dir} is already running: run {holder['run_id']} (pid {holder['pid']} on "
            f"{holder['host']}, last active {holder['last_activity']}). Two runs of one job would "
            f"write the same checkpoints and sinks, so this one is refused. Stop the other run first "
            f"(Ctrl-C, or kill {holder['pid']}); a crashed run on this host is detected at once, "
            f"one on another host after the lease timeout (sluice.lease-timeout).")


def _pid_alive(pid) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:    # a killed process not yet reaped by its parent is gone for our purpose
        with open(f"/proc/{int(pid)}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return True
