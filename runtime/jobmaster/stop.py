"""Ending a running job from outside: Flink's ``cancel`` and ``stop --savepointPath``.

    cancel_refusal   why a cancel of an Airflow run must be refused (it is no longer running), or None
    stop_refusal     the same for a stop with savepoint
    request_stop     ask the run's driver to end after its current epoch with a savepoint (FINISHED)

Both decide from the job's execution history, not from the orchestrator's state: a run whose
driver recorded FINISHED is finished even while its DAG run is still on its ``finish`` task.
The driver learns of a stop at its next epoch boundary (``runtime.execution.stop_request``).
"""
from __future__ import annotations

import time
from typing import Optional

from runtime.execution.history import FAILED, RUNNING, ExecutionHistory, ExecutionRecord
from runtime.execution.stop_request import StopRequest, pending_request, write_request
from runtime.storage.filesystems import absolute
from runtime.storage.layout import job_dir


class StopRefusedException(ValueError):
    """A stop (or cancel) that cannot be done; the message says why and what to do instead."""


def _last_attempt(warehouse: str, job_name: str, dag_run_id: Optional[str]) -> Optional[ExecutionRecord]:
    history = ExecutionHistory(job_dir(warehouse, job_name))
    if dag_run_id:
        attempts = history.attempts(dag_run_id)
        return attempts[-1] if attempts else None
    runs = history.executions()
    return runs[0] if runs else None


def _ended(record: ExecutionRecord) -> bool:
    """The run is over: its last attempt ended and no restart follows it."""
    return record.state != RUNNING and not (record.state == FAILED and record.restarting)


def cancel_refusal(warehouse: str, job_name: str, dag_run_id: str) -> Optional[str]:
    """Why a cancel of ``dag_run_id`` must be refused, or None when the run may be canceled: it has
    not started its epochs yet, runs them, or waits to restart. A run whose last attempt ended
    (FINISHED, CANCELED, FAILED for good) is refused: canceling it would fail its DAG run and skip
    its ``finish``."""
    last = _last_attempt(warehouse, job_name, dag_run_id)
    if last is None or not _ended(last):
        return None
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(last.ended_at)) if last.ended_at else "already"
    return (f"Run '{dag_run_id}' of job '{job_name}' is no longer running: its attempt {last.attempt} ended "
            f"{last.state} ({when}), so there is nothing to cancel.")


def stop_refusal(warehouse: str, job_name: str, dag_run_id: Optional[str]) -> Optional[str]:
    """Why a stop with savepoint of ``dag_run_id`` (None: the job's run outside Airflow) must be
    refused, or None. Only a running attempt can stop with a savepoint."""
    last = _last_attempt(warehouse, job_name, dag_run_id)
    which = f"Run '{dag_run_id}' of job '{job_name}'" if dag_run_id else f"Job '{job_name}'"
    if last is None:
        return None if dag_run_id else f"{which} has never run: there is nothing to stop."
    if last.state == RUNNING and not dag_run_id and not _held(warehouse, job_name):
        return (f"{which} is not running: its last run {last.run_id} is RUNNING in the execution history, but no "
                f"live process holds the job (it was killed), so there is nothing to stop.")
    if last.state == RUNNING:
        return None
    if not _ended(last):
        return (f"{which} is waiting to restart after a failure (attempt {last.attempt}): cancel it, or "
                f"stop it once it runs again.")
    return f"{which} is no longer running: its attempt {last.attempt} ended {last.state}, so there is nothing to stop."


def _held(warehouse: str, job_name: str) -> bool:
    """Whether a live run holds the job (the epoch log's claim, its process alive or its lease fresh)."""
    from runtime.checkpoint.epoch_log import EpochLog
    from runtime.checkpoint.job_lease import JobLease
    from runtime.execution.options import ExecutionOptions
    directory = job_dir(warehouse, job_name)
    return JobLease(EpochLog(directory), directory).running_holder(ExecutionOptions().lease_timeout_s) is not None


def running_attempt(warehouse: str, job_name: str, dag_run_id: Optional[str] = None) -> Optional[ExecutionRecord]:
    """The attempt a stop would end: the run's last attempt (or the job's last run) while RUNNING."""
    last = _last_attempt(warehouse, job_name, dag_run_id)
    return last if last is not None and last.state == RUNNING else None


def wait_for_end(warehouse: str, job_name: str, run_id: str, timeout_s: float) -> Optional[ExecutionRecord]:
    """The execution ``run_id`` once it is no longer RUNNING, or None after ``timeout_s``."""
    history = ExecutionHistory(job_dir(warehouse, job_name))
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        record = next((r for r in history.executions() if r.run_id == run_id), None)
        if record is not None and record.state != RUNNING:
            return record
        time.sleep(0.5)
    return None


def request_stop(warehouse: str, job_name: str, dag_run_id: Optional[str] = None,
                 savepoint_dir: Optional[str] = None, requested_by: str = "") -> str:
    """Ask the running run ``dag_run_id`` (None: whichever run holds the job, e.g. ``sluice run``)
    to end after its current epoch with a savepoint in a new folder under ``savepoint_dir``
    (default: the job's ``savepoints/``); the run ends FINISHED. Returns the request file's path.
    Raises StopRefusedException when the run is not running."""
    refusal = stop_refusal(warehouse, job_name, dag_run_id)
    if refusal:
        raise StopRefusedException(refusal)
    directory = job_dir(warehouse, job_name)
    if pending_request(directory, dag_run_id) is not None:
        raise StopRefusedException(f"A stop of {'run ' + repr(dag_run_id) if dag_run_id else 'job ' + repr(job_name)}"
                                   f" is already requested: the run ends after its current epoch.")
    return write_request(directory, StopRequest(dag_run_id or None, absolute(savepoint_dir) if savepoint_dir else None,
                                                time.time(), requested_by))
