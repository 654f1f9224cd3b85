"""What ``execute_async()`` returns (``pyflink.common.JobClient``): the job runs in a thread of
this process; the client asks for its status, cancels it, or waits for its result. As PyFlink's,
``get_job_status``, ``cancel`` and ``get_job_execution_result`` return futures (``.result()``)."""
from __future__ import annotations

import enum
import threading
from concurrent.futures import Future
from typing import Callable


class JobStatus(enum.Enum):
    """Flink's JobStatus, the states a JobClient reports here."""
    CREATED = 0
    RUNNING = 1
    FAILED = 3
    CANCELLING = 4
    CANCELED = 5
    FINISHED = 6

    def is_globally_terminal_state(self) -> bool:
        return self in (JobStatus.FAILED, JobStatus.CANCELED, JobStatus.FINISHED)

    def is_terminal_state(self) -> bool:
        return self.is_globally_terminal_state()


class JobClient:
    """A job started by ``execute_async``. ``cancel`` stops it after the epoch it is in (an epoch
    commits as one unit): the run ends CANCELED, its checkpoints stay, as Flink's cancel."""

    def __init__(self, job_id: str, run: Callable[[threading.Event], object]):
        self._job_id = job_id
        self._stop = threading.Event()
        self._result: Future = Future()
        self._status = JobStatus.CREATED
        self._thread = threading.Thread(target=self._run, args=(run,), name=f"sluice-job-{job_id}", daemon=True)
        self._thread.start()

    def _run(self, run) -> None:
        self._status = JobStatus.RUNNING
        try:
            result = run(self._stop)
        except BaseException as e:      # a KeyboardInterrupt too: the run was canceled
            self._status = JobStatus.CANCELED if self._stop.is_set() else JobStatus.FAILED
            self._result.set_exception(e)
            return
        self._status = JobStatus.CANCELED if self._stop.is_set() else JobStatus.FINISHED
        self._result.set_result(result)

    def get_job_id(self) -> str:
        return self._job_id

    def get_job_status(self) -> Future:
        return _done(self._status)

    def cancel(self) -> Future:
        if not self._result.done():
            self._stop.set()
            self._status = JobStatus.CANCELLING
        return _done(None)

    def get_job_execution_result(self) -> Future:
        """Completes with the JobExecutionResult when the job ends (its failure if it failed)."""
        return self._result


def _done(value) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future
