"""The JobManager's own state in the warehouse: a JSON file per job,
``<warehouse>/jobmanager/jobs/<jobid>.json`` (Flink's JobResultStore and ExecutionPlanStore in one),
so a JobManager started again after a crash finds every job it had, with its driver.

A record is replaced whole (written to a temporary file, then renamed over the old one), so a
reader never sees half of one. The folder is on local disk: the JobManager watches its drivers'
pids and driver folders, which only a local folder can hold.
"""
from __future__ import annotations

import os
import threading
import time
import uuid
from dataclasses import asdict, dataclass, replace
from typing import Optional

from runtime.jobmanager.driver import drivers_dir, read_json, write_json
from runtime.storage.filesystems import is_uri

# Flink's JobStatus names.
INITIALIZING, CREATED, RUNNING, FAILING, FAILED = "INITIALIZING", "CREATED", "RUNNING", "FAILING", "FAILED"
CANCELLING, CANCELED, FINISHED, RESTARTING, SUSPENDED = "CANCELLING", "CANCELED", "FINISHED", "RESTARTING", "SUSPENDED"
TERMINAL = (FINISHED, CANCELED, FAILED)


def new_job_id() -> str:
    """A JobID in Flink's form: 32 hex digits."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class DriverRef:
    """The driver process running a job's current attempt: its folder (driver.json, assignment.json,
    result.json, driver.log) and its pid."""
    directory: str
    pid: Optional[int] = None


@dataclass(frozen=True)
class StopRequest:
    """A stop with savepoint asked over REST: its request id (Flink's trigger id) and target folder."""
    request_id: str
    target_directory: Optional[str] = None
    requested_at: float = 0.0


@dataclass(frozen=True)
class JobRecord:
    jobid: str
    job_name: str                       # the name the script gives env.execute(): its folder in the warehouse
    plan: str                           # the stored plan the drivers run (runtime.jobmaster.plans)
    dag_run_id: str                     # the run whose attempts the execution history groups
    request: dict                       # what the submit asked (restore_from, max_epochs, options ...)
    state: str = INITIALIZING
    submission_key: Optional[str] = None
    created_at: float = 0.0
    start_time: Optional[float] = None
    end_time: Optional[float] = None
    last_modification: float = 0.0
    drivers: int = 0                    # driver processes started for the job so far
    driver: Optional[DriverRef] = None  # the current one
    failure: Optional[str] = None       # why the job FAILED
    restart: Optional[str] = None       # the restart strategy's last decision, in words
    restart_at: Optional[float] = None  # when a RESTARTING job's next driver starts
    stop: Optional[StopRequest] = None
    savepoint: Optional[str] = None     # the savepoint a stop took
    cancel_requested: bool = False

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(data: dict) -> "JobRecord":
        data = dict(data)
        data["driver"] = DriverRef(**data["driver"]) if data.get("driver") else None
        data["stop"] = StopRequest(**data["stop"]) if data.get("stop") else None
        return JobRecord(**data)

    def changed(self, **changes) -> "JobRecord":
        return replace(self, **changes, last_modification=time.time())


def jobmanager_dir(warehouse: str) -> str:
    """``<warehouse>/jobmanager``: a local folder (``drivers_dir`` says why)."""
    return os.path.dirname(drivers_dir(os.path.abspath(warehouse) if not is_uri(warehouse) else warehouse))


class JobStore:
    """The job records under ``<warehouse>/jobmanager/jobs``; safe to use from the JobMasters' threads."""

    def __init__(self, warehouse: str):
        self.folder = os.path.join(jobmanager_dir(warehouse), "jobs")
        os.makedirs(self.folder, exist_ok=True)
        self._lock = threading.Lock()

    def put(self, record: JobRecord) -> JobRecord:
        write_json(self.folder, f"{record.jobid}.json", record.to_json())
        return record

    def get(self, jobid: str) -> Optional[JobRecord]:
        found = read_json(self.folder, f"{jobid}.json")
        return JobRecord.from_json(found) if found is not None else None

    def all(self) -> list[JobRecord]:
        """Every job, oldest first."""
        records = [self.get(name[:-5]) for name in os.listdir(self.folder) if name.endswith(".json")]
        return sorted((r for r in records if r is not None), key=lambda r: r.created_at)

    def find(self, submission_key: str) -> Optional[JobRecord]:
        return next((r for r in self.all() if r.submission_key == submission_key), None)

    def update(self, jobid: str, **changes) -> JobRecord:
        """Change fields of a stored record (read, replaced, written under the store's lock)."""
        with self._lock:
            return self.put(self.get(jobid).changed(**changes))

