"""Ending a run from outside (runtime/jobmaster/stop.py): a Cancel or a stop with savepoint is
decided from the job's execution history, so one that arrives as the run finished is refused
instead of failing a completed DAG run. Spark-free: the history's records are written here as
a run's driver writes them. The stop itself, end to end: test_cli.py (``sluice stop``) and
test_airflow_ui_runs.py (the web view's button)."""
from __future__ import annotations

import time

import pytest

from runtime.execution.history import CANCELED, FAILED, FINISHED, RUNNING, ExecutionHistory, ExecutionRecord
from runtime.execution.stop_request import pending_request
from runtime.jobmaster.stop import StopRefusedException, cancel_refusal, request_stop, stop_refusal
from runtime.storage.layout import job_dir


def record(warehouse, run_id, state, attempt=1, restarting=None, dag_run_id="manual__1"):
    now = time.time()
    ExecutionHistory(job_dir(str(warehouse), "job")).record(ExecutionRecord(
        run_id, "job", state, now, dag_run_id, attempt, ended_at=None if state == RUNNING else now,
        restarting=restarting))


def test_a_cancel_is_refused_once_the_runs_last_attempt_ended(tmp_path):
    assert cancel_refusal(str(tmp_path), "job", "manual__1") is None         # not started yet: may cancel
    record(tmp_path, "a1", RUNNING)
    assert cancel_refusal(str(tmp_path), "job", "manual__1") is None
    record(tmp_path, "a1", FAILED, restarting=True)                           # waits to restart
    assert cancel_refusal(str(tmp_path), "job", "manual__1") is None
    record(tmp_path, "a2", RUNNING, attempt=2)
    record(tmp_path, "a2", FINISHED, attempt=2)                               # finished as the Cancel came
    refusal = cancel_refusal(str(tmp_path), "job", "manual__1")
    assert refusal.startswith("Run 'manual__1' of job 'job' is no longer running: its attempt 2 ended FINISHED")
    assert refusal.endswith("so there is nothing to cancel.")
    assert cancel_refusal(str(tmp_path), "job", "manual__2") is None          # another run: its own history
    for state in (CANCELED, FAILED):
        record(tmp_path, "b1", state, dag_run_id="manual__3")
        assert "no longer running" in cancel_refusal(str(tmp_path), "job", "manual__3")


def test_a_stop_is_asked_of_a_running_attempt_only_and_once(tmp_path):
    warehouse = str(tmp_path)
    record(tmp_path, "a1", RUNNING)
    path = request_stop(warehouse, "job", "manual__1", str(tmp_path / "points"), requested_by="admin")
    assert path == job_dir(warehouse, "job") + "/stop-request.json"
    request = pending_request(job_dir(warehouse, "job"), "manual__1")
    assert (request.dag_run_id, request.savepoint_dir, request.requested_by) == (
        "manual__1", str(tmp_path / "points"), "admin")
    assert pending_request(job_dir(warehouse, "job"), "manual__2") is None    # not another run's
    with pytest.raises(StopRefusedException, match="already requested"):
        request_stop(warehouse, "job", "manual__1")
    record(tmp_path, "a1", FAILED, restarting=True)
    assert "waiting to restart" in stop_refusal(warehouse, "job", "manual__1")
    record(tmp_path, "a2", CANCELED, attempt=2)
    with pytest.raises(StopRefusedException, match="no longer running: its attempt 2 ended CANCELED"):
        request_stop(warehouse, "job", "manual__1")


def test_a_stop_outside_airflow_needs_a_live_run(tmp_path):
    assert stop_refusal(str(tmp_path), "job", None) == "Job 'job' has never run: there is nothing to stop."
    record(tmp_path, "r1", RUNNING, dag_run_id="")      # a RUNNING row nobody holds the job for (killed)
    assert "no live process holds the job" in stop_refusal(str(tmp_path), "job", None)
