"""One JobMaster per job (Flink's JobMaster): it gives the job a driver process, watches it, and
when the driver dies without a result (kill -9, out of memory) applies the job's restart strategy
and starts the next attempt in a new driver from the latest completed checkpoint.

The driver restarts its own attempts in its Spark session (``runtime.execution.restarts``); the
JobMaster restarts only what a driver could not: its own death. It records that death in the
execution history as a driver records a failed attempt, with the strategy's decision
(``failure_decision``), so the next driver's attempt number, restore point (``run_options``)
and the strategy's count carry on from there.

Everything it knows is in the job's record (``job_store``) and the driver's folder, so a JobMaster
made again for the same job by a restarted JobManager adopts the running driver: it watches the
driver's pid and folder instead of a child process.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass, replace
from typing import Callable, Optional

from runtime.execution.history import FAILED as ATTEMPT_FAILED, RUNNING as ATTEMPT_RUNNING
from runtime.execution.failure_handler import failure_decision
from runtime.execution.history import CANCELED as ATTEMPT_CANCELED, ExecutionHistory, ExecutionRecord
from runtime.execution.options import ExecutionOptions
from runtime.jobmanager.driver import (ASSIGNMENT, DRIVER, RESULT, driver_alive, drivers_dir, launch_driver,
                                      pid_is_driver, read_json, write_json)
from runtime.jobmanager.job_store import CANCELED, FAILED, RESTARTING, RUNNING, DriverRef, JobRecord, JobStore
from runtime.jobmaster.plans import load_plan
from runtime.jobmaster.steps import RunRequest, restart_configuration_of, run_options
from runtime.storage.layout import job_dir

log = logging.getLogger(__name__)

POLL_S = 0.1            # how often a driver is looked at: a death is noticed this late at most
CANCEL_GRACE_S = 30.0   # a canceled driver that has not ended by then is killed


@dataclass(frozen=True)
class StartedDriver:
    """A driver given to a job: its folder, its pid, and its process when this JobManager started
    it (None: adopted after a restart, or kept by the standby pool)."""
    directory: str
    pid: Optional[int] = None
    process: object = None

    @staticmethod
    def of(directory: str, process=None, pid: Optional[int] = None) -> "StartedDriver":
        if pid is None and process is not None:
            pid = process.pid
        if pid is None:
            found = read_json(directory, DRIVER)
            pid = int(found["pid"]) if found else None
        return StartedDriver(directory, pid, process)

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None      # also reaps it: a dead child is no zombie
        # Adopted: the pid the record kept, still this folder's driver (pids are reused).
        return pid_is_driver(self.pid, self.directory) if self.pid else driver_alive(self.directory)

    def result(self) -> Optional[dict]:
        return read_json(self.directory, RESULT)

    def signal(self, signum: int) -> None:
        if self.pid and self.alive():
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass


class DriverSource:
    """Where a job's drivers come from: a warm one from the standby pool when it has one ready,
    else a new process (``launch_driver``)."""

    def __init__(self, warehouse: str, master: str, pool=None, env: Optional[dict] = None):
        self.warehouse, self.master, self.pool, self.env = warehouse, master, pool, env

    def driver_for(self, jobid: str, number: int) -> StartedDriver:
        warm = self.pool.take() if self.pool is not None else None
        if warm is not None:
            return StartedDriver.of(warm.directory, getattr(warm, "process", None))
        directory = os.path.join(drivers_dir(self.warehouse), f"{jobid}-{number}")
        return StartedDriver.of(directory, launch_driver(directory, self.warehouse, self.master, self.env))


def run_request(record: JobRecord) -> RunRequest:
    asked = record.request
    return RunRequest(restore_from=asked.get("restore_from") or "latest", max_epochs=asked.get("max_epochs"),
                      allow_non_restored_state=bool(asked.get("allow_non_restored_state")))


def assignment_of(record: JobRecord, warehouse: str, master: str) -> dict:
    """What the job's next driver runs: the plan, and the options of the run's next attempt
    (``run_options``: its number and restore point after the attempts in the history), with the
    execution options the submit's configuration sets."""
    job = load_plan(record.plan)
    options = run_options(job, run_request(record), warehouse, master, record.dag_run_id)
    options.update(record.request.get("execution_options") or {})
    return {"jobid": record.jobid, "job_name": record.job_name, "plan": record.plan, "options": options}


def record_lost_driver(warehouse: str, record: JobRecord, cause: str) -> ExecutionRecord:
    """The driver of ``record`` died without a result: its running attempt (or, when it died before
    starting one, a new attempt) is recorded FAILED in the execution history with the restart
    strategy's decision on it, as a driver records an attempt that failed; that record is returned.
    A failure already recorded since the driver started (it died waiting out its own restart's
    delay, or a JobManager recorded its death and was killed before acting on it) is not counted
    twice: its record is returned as it is."""
    history = ExecutionHistory(job_dir(warehouse, record.job_name))
    attempts = history.attempts(record.dag_run_id)
    running = [r for r in attempts if r.state == ATTEMPT_RUNNING]     # one job, one driver at a time
    started = (read_json(record.driver.directory, DRIVER) or {}).get("started_at") if record.driver else None
    if not running and attempts and attempts[-1].state == ATTEMPT_FAILED and started is not None \
            and (attempts[-1].ended_at or 0) >= started:
        return attempts[-1]
    now = time.time()
    execution = running[-1] if running else ExecutionRecord(
        f"lost-driver-{uuid.uuid4().hex[:12]}", record.job_name, ATTEMPT_FAILED, now, record.dag_run_id,
        max((r.attempt for r in attempts), default=0) + 1)
    decision = failure_decision(history, execution, restart_configuration_of(load_plan(record.plan)), now)
    return history.record(replace(execution, state=ATTEMPT_FAILED, ended_at=now, failure=cause[:4000],
                                  restart=decision.describe(), backoff_ms=decision.backoff_ms,
                                  restarting=decision.restart))


def record_canceled_driver(warehouse: str, record: JobRecord) -> None:
    """A canceled driver that had to be killed: its running attempt ends CANCELED in the history."""
    history = ExecutionHistory(job_dir(warehouse, record.job_name))
    for execution in history.attempts(record.dag_run_id):
        if execution.state == ATTEMPT_RUNNING:
            history.record(replace(execution, state=ATTEMPT_CANCELED, ended_at=time.time()))


class JobMaster:
    """Runs one job to its end in a thread of its own: a driver per attempt that dies, the restart
    strategy's delays in between; ``cancel`` ends it. ``on_end(record)`` hears of its end."""

    def __init__(self, jobid: str, store: JobStore, drivers: DriverSource,
                 on_end: Optional[Callable[[JobRecord], None]] = None, adopted: Optional[StartedDriver] = None):
        self.jobid, self.store, self.drivers, self.on_end = jobid, store, drivers, on_end
        self.driver = adopted
        self.canceled = threading.Event()
        self.closed = threading.Event()     # the JobManager stops: leave the driver running
        self.thread = threading.Thread(target=self._run, name=f"JobMaster {jobid[:8]}", daemon=True)

    @property
    def warehouse(self) -> str:
        return self.drivers.warehouse

    def start(self) -> "JobMaster":
        self.thread.start()
        return self

    def cancel(self) -> None:
        self.canceled.set()

    def close(self) -> None:
        """Stop watching (the JobManager shuts down); the driver goes on and is adopted later."""
        self.closed.set()

    def _run(self) -> None:
        try:
            self._lifecycle()
        except Exception as error:      # a bug or an unreadable plan: the job fails with the cause
            log.exception("JobMaster of job %s failed", self.jobid)
            self._end(FAILED, failure=f"the JobMaster failed: {type(error).__name__}: {error}")

    def _lifecycle(self) -> None:
        while not self.closed.is_set():
            record = self.store.get(self.jobid)
            if record.terminal:
                return
            if self.canceled.is_set() or record.cancel_requested:
                self.canceled.set()
                if self.driver is None:
                    self._end(CANCELED)
                    return
            if self.driver is None:
                if not self._wait_until(record.restart_at):
                    continue
                self.driver = self._start_driver(record)
            ended = self._watch()
            if ended is None:       # closed: the driver runs on
                return
            record = self.store.get(self.jobid)
            if ended:
                result = self.driver.result()
                self._end(result["state"], failure=result.get("failure"), savepoint=result.get("savepoint"))
                return
            self._driver_died(record)

    def _wait_until(self, when: Optional[float]) -> bool:
        """Wait for the strategy's delay; False when canceled or closed meanwhile."""
        while when is not None and time.time() < when:
            if self.canceled.wait(min(POLL_S * 5, max(0.0, when - time.time()))) or self.closed.is_set():
                return False
        return not self.closed.is_set()

    def _start_driver(self, record: JobRecord) -> StartedDriver:
        number = record.drivers + 1
        driver = self.drivers.driver_for(self.jobid, number)
        # The driver is the job's before it has work: a JobManager killed in between adopts it
        # and gives it its assignment, instead of starting a second one.
        self.store.update(self.jobid, driver=DriverRef(driver.directory, driver.pid), drivers=number, state=RUNNING,
                          start_time=record.start_time or time.time(), restart_at=None)
        try:
            self._assign(driver, record)
        except BaseException:       # no work for it ever: it must not wait for one forever
            driver.signal(signal.SIGKILL)
            raise
        log.info("job %s (%s): driver %s, pid %s", self.jobid, record.job_name, driver.directory, driver.pid)
        return driver

    def _assign(self, driver: StartedDriver, record: JobRecord) -> None:
        if read_json(driver.directory, ASSIGNMENT) is None:
            write_json(driver.directory, ASSIGNMENT, assignment_of(record, self.warehouse, self.drivers.master))

    def _watch(self) -> Optional[bool]:
        """Until the driver ends: True with a result, False dead without one, None when closed.
        A cancel is SIGTERM to the driver, then SIGKILL after the grace period."""
        record = self.store.get(self.jobid)
        self._assign(self.driver, record)       # an adopted driver the last JobManager gave none
        terminated_at = None
        while not self.closed.is_set():
            if self.driver.result() is not None:
                self._reap()
                return True
            if not self.driver.alive():
                return self.driver.result() is not None     # it may have written it as it went
            if self.canceled.is_set():
                if terminated_at is None:
                    terminated_at = time.time()
                    self.driver.signal(signal.SIGTERM)
                elif time.time() - terminated_at > CANCEL_GRACE_S:
                    log.warning("job %s: driver pid %s did not end %.0f s after SIGTERM: killed", self.jobid,
                                self.driver.pid, CANCEL_GRACE_S)
                    self.driver.signal(signal.SIGKILL)
            time.sleep(POLL_S)
        return None

    def _reap(self) -> None:
        """A driver that wrote its result exits at once: waited for briefly, so it leaves no zombie."""
        if self.driver.process is not None:
            try:
                self.driver.process.wait(timeout=10)
            except Exception:
                pass

    def _driver_died(self, record: JobRecord) -> None:
        pid = record.driver.pid if record.driver else None
        code = self.driver.process.returncode if self.driver.process is not None else None
        how = (f"killed by signal {-code}" if code is not None and code < 0 else
               f"exited with status {code}" if code is not None else "gone")
        if self.canceled.is_set():
            record_canceled_driver(self.warehouse, record)
            self._end(CANCELED)
            return
        cause = (f"The driver process of job {record.job_name} (pid {pid}) died without a result ({how}); "
                 f"its log: {os.path.join(record.driver.directory, 'driver.log') if record.driver else '?'}")
        failed = record_lost_driver(self.warehouse, record, cause)
        log.warning("job %s: %s; %s", self.jobid, cause, failed.restart)
        self.driver = None
        if failed.restarting:
            self.store.update(self.jobid, state=RESTARTING, driver=None, restart=failed.restart,
                              restart_at=(failed.ended_at or time.time()) + (failed.backoff_ms or 0) / 1000)
        else:
            self._end(FAILED, failure=failed.failure or cause, restart=failed.restart)

    def _end(self, state: str, **changes) -> None:
        record = self.store.update(self.jobid, state=state, end_time=time.time(), restart_at=None, **changes)
        log.info("job %s (%s) %s", self.jobid, record.job_name, state)
        if self.on_end is not None:
            self.on_end(record)


def execution_overrides(configuration: dict) -> tuple[dict, dict]:
    """A submit's configuration split as Flink's -D: (execution options, e.g. sluice.epoch.interval,
    as ExecutionOptions fields; the job's own configuration)."""
    return ExecutionOptions.split_properties([f"{k}={v}" for k, v in (configuration or {}).items()])
