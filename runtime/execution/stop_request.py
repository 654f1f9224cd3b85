"""A request to stop a running job with a savepoint (Flink's ``stop --savepointPath``), as a file in
the job's folder: ``<job>/stop-request.json``. Whoever asks (the web view, ``sluice stop``) writes
it; the run's driver reads it at each epoch boundary, ends after that epoch with a savepoint of the
epoch's checkpoint, and removes it. One run holds a job at a time (the epoch log's claim), so one
file is enough; it names the Airflow run it is for, or none for whichever run holds the job.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Optional

from runtime.storage.filesystems import exists, join, read_bytes, remove, write_bytes

STOP_REQUEST = "stop-request.json"


@dataclass(frozen=True)
class StopRequest:
    dag_run_id: Optional[str] = None        # the Airflow run to stop; None: whichever run holds the job
    savepoint_dir: Optional[str] = None     # the savepoint goes in a new folder under it (default: <job>/savepoints)
    requested_at: float = 0.0
    requested_by: str = ""

    def is_for(self, dag_run_id: Optional[str]) -> bool:
        return self.dag_run_id is None or self.dag_run_id == (dag_run_id or None)


def request_path(job_dir: str) -> str:
    return join(job_dir, STOP_REQUEST)


def write_request(job_dir: str, request: StopRequest) -> str:
    path = request_path(job_dir)
    write_bytes(path, json.dumps(asdict(request) | {"requested_at": request.requested_at or time.time()}).encode())
    return path


def pending_request(job_dir: str, dag_run_id: Optional[str]) -> Optional[StopRequest]:
    """The stop request for the run ``dag_run_id`` (None: a run outside Airflow), if there is one."""
    path = request_path(job_dir)
    if not exists(path):
        return None
    request = StopRequest(**json.loads(read_bytes(path)))       # written whole (write_bytes)
    return request if request.is_for(dag_run_id) else None


def clear_request(job_dir: str, dag_run_id: Optional[str]) -> None:
    """The run ended: a request for it is done (one for another run stays)."""
    if pending_request(job_dir, dag_run_id) is not None:
        remove(request_path(job_dir))
