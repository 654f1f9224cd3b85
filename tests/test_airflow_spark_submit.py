"""The run task's spark-submit deployment (``SluiceJobOperator._submit``).

End to end: real Airflow (``dag.test()``), the Spark provider's real spark-submit (a JVM and a
Python driver of its own, running ``sluice run``), real Delta tables. The spark_default
connection is ``local[2]`` with ``"sluice-deploy": "spark-submit"``, so the run task submits
the job instead of running it in the worker's process, where the session-wide ``spark``
fixture keeps its own SparkSession: the job must not use it (the history's pid shows it).

Then, without a JVM: the submission's arguments and environment, and how a failed
submission's exit is mapped to a retry or a failure by the history's restart decision.
"""
from __future__ import annotations

import json
import os
import sys

import pytest

from jvm_options import share_spark_classes
from test_airflow_control_plane import (
    checkpoints, recover_from_one_failure, write_job, xcom)


@pytest.fixture
def spark_submit_plane(airflow_db, spark, tmp_path, monkeypatch):
    """As the control_plane fixture, with spark_default deploying through spark-submit."""
    from airflow.models import Connection, Pool, Variable
    from airflow.utils.session import create_session
    share_spark_classes()       # for spark-submit's drivers
    (tmp_path / "jobs").mkdir()
    monkeypatch.setenv("SLUICE_JOBS_FOLDER", str(tmp_path / "jobs"))
    # _submit puts the environment's bin/ on PATH when spark-submit is not there: undo it after.
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))
    monkeypatch.setenv("SLUICE_WAREHOUSE", str(tmp_path / "warehouse"))     # this process's parses read it
    Variable.set("sluice_warehouse", str(tmp_path / "warehouse"))
    Pool.create_or_update_pool("spark_slots", 4, "Spark slots (tests)", include_deferred=False)
    with create_session() as session:
        session.query(Connection).filter(Connection.conn_id == "spark_default").delete()
        session.add(Connection(conn_id="spark_default", conn_type="spark", host="local[2]",
                               extra=json.dumps({"sluice-deploy": "spark-submit"})))
    yield tmp_path
    Variable.delete("sluice_warehouse")
    with create_session() as session:     # later tests get the in-process connection back
        session.query(Connection).filter(Connection.conn_id == "spark_default").delete()
        session.add(Connection(conn_id="spark_default", conn_type="spark", host="local[2]"))


def history_pids(tmp_path, job_name) -> set:
    """The process ids that wrote the job's execution history (the table's ``pid`` column)."""
    from deltalake import DeltaTable
    from runtime.execution.history import ExecutionHistory
    from runtime.storage.layout import job_dir
    path = ExecutionHistory(job_dir(str(tmp_path / "warehouse"), job_name)).path
    return set(DeltaTable(path).to_pyarrow_table(columns=["pid"]).column("pid").to_pylist())


def test_job_dag_runs_through_spark_submit_and_restarts_a_failed_submission(spark_submit_plane):
    """One DAG run, two submissions: the job fails once mid-input under fixed-delay(2, 200 ms); the
    failed submission's exit became a retry because the history said "restarting", and the second
    submission restored the first's latest checkpoint (recover_from_one_failure checks the sinks)."""
    from checkpoint_harness import LINES_PER_EPOCH
    run, first, second = recover_from_one_failure(spark_submit_plane, "counts_submit")
    deployed = xcom(run, "deploy")
    assert (deployed["mode"], deployed["master"]) == ("spark-submit", "local[2]")

    # Each attempt ran in its spark-submit driver, not here, and knew its Airflow run and try.
    assert os.getpid() not in history_pids(spark_submit_plane, "counts_submit")
    completed = checkpoints(spark_submit_plane, "counts_submit")
    assert (second.state, second.dag_run_id, second.attempt) == ("FINISHED", run.run_id, 2)
    # A checkpoint per epoch of 2 x LINES_PER_EPOCH lines: the second attempt read the rest, and
    # the input's end (5 epochs in all: 4 of input, 1 at its end).
    events = sum(len(f.read_text().splitlines()) for f in (spark_submit_plane / "in").iterdir())
    restored = first.last_checkpoint
    assert second.epochs == 5 - restored and second.records_in == events - restored * 2 * LINES_PER_EPOCH
    assert second.last_checkpoint == completed[-1].checkpoint_id

    assert xcom(run, "run")["run_id"] == second.run_id
    finish = xcom(run, "finish")
    assert (finish["state"], finish["run_id"], finish["records_in"]) == ("FINISHED", second.run_id, second.records_in)
    assert finish["restored_from"] == restored and finish["checkpoint_id"] == completed[-1].checkpoint_id
    assert finish["checkpoints"] == str(spark_submit_plane / "warehouse" / "counts_submit" / "checkpoints")
    assert finish["sinks"] == sorted([str(spark_submit_plane / "running"), str(spark_submit_plane / "windows")])


# ---- without a JVM: the submission and the exit-status mapping -----------------------------

class Submissions:
    """Stands in for SparkSubmitOperator.execute: records what would be submitted, and fails
    (as the provider does on a non-zero exit) while ``fail`` is set."""

    def __init__(self):
        self.submitted, self.fail, self.jars = [], False, []

    def __call__(self, operator, context):
        from airflow.sdk.exceptions import AirflowException
        self.submitted.append((list(operator.application_args), dict(operator.env_vars)))
        self.jars.append(operator.jars)
        if self.fail:
            raise AirflowException("Cannot execute: spark-submit ... Error code is: 1.")


@pytest.fixture
def submit(tmp_path, monkeypatch):
    """A run task of a job written to tmp_path, whose spark-submit is a Submissions."""
    from dataclasses import replace
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from runtime.jobmaster import find_job
    from sluice_airflow.operators import SluiceJobOperator
    (tmp_path / "jobs").mkdir()
    job = write_job(tmp_path, "counts_args")
    spec = find_job(str(tmp_path / "jobs" / "counts_args.py"))
    spec = replace(spec, deployment=replace(spec.deployment, args=(*spec.args, "--out", "{warehouse}/results")))
    submissions = Submissions()
    monkeypatch.setattr(SparkSubmitOperator, "execute", lambda operator, context: submissions(operator, context))
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))
    operator = SluiceJobOperator(task_id="run", job=spec.path, slot_profile=[["default", 2, True, 1]])
    warehouse = str(tmp_path / "warehouse")

    plans = {}

    def attempt(request, dag_run_id, n):
        from runtime.jobmaster.steps import compile_step
        # As in the DAG: the run's compile step runs once, its attempts share the plan.
        if dag_run_id not in plans:
            plans[dag_run_id] = compile_step(spec, request, warehouse, dag_run_id)["plan"]
        plan = plans[dag_run_id]
        return operator._submit({}, spec, request, plan, warehouse, "local[2]", dag_run_id, n, "counts_args")
    return attempt, submissions, spec, job, warehouse


def record_attempt(warehouse, dag_run_id, attempt, state, restart=None, restarting=None):
    import time
    from runtime.execution.history import ExecutionHistory, ExecutionRecord
    from runtime.storage.layout import job_dir
    ExecutionHistory(job_dir(warehouse, "counts_args")).record(ExecutionRecord(
        f"run-{dag_run_id}-{attempt}", "counts_args", state, time.time(), dag_run_id, attempt,
        ended_at=None if state == "RUNNING" else time.time(), restart=restart, restarting=restarting))


def test_submission_arguments_and_environment(submit):
    from runtime.jobmaster.plans import load_plan
    from runtime.jobmaster.steps import RunRequest
    attempt, submissions, spec, job, warehouse = submit
    attempt(RunRequest("none", parallelism=3, max_epochs=2, allow_non_restored_state=True), "manual__1", 1)
    record_attempt(warehouse, "manual__1", 1, "FAILED", "restarting in 0 ms after failure 1 (test)", True)
    attempt(RunRequest("none"), "manual__1", 2)
    (first_args, env), (second_args, second_env) = submissions.submitted
    # The driver runs the stored plan (the job script does not run again) with the run's options
    # as Flink's dynamic properties; a deliberate fresh start is passed on (unset, a run resumes).
    plan = os.path.join(warehouse, "counts_args", "plans", "manual__1")
    assert first_args == [
        "run", spec.path, "--plan", plan,
        "-D", f"sluice.warehouse={warehouse}", "-D", "sluice.spark.master=local[2]",
        "-D", "sluice.epoch.max-epochs=2", "-D", "execution.savepoint.path=none",
        "-D", "sluice.airflow.dag-run-id=manual__1", "-D", "sluice.airflow.attempt=1",
        "-D", "execution.savepoint.ignore-unclaimed-state=True", "-D", "sluice.subtask-attempts={}"]
    assert env["PYSPARK_PYTHON"] == os.environ.get("PYSPARK_PYTHON", sys.executable)
    # delta-spark's jars from bin/dev's set-up, on the driver's class path (--jars), once per attempt.
    from runtime.execution.spark import delta_jars
    assert delta_jars() and submissions.jars == [",".join(delta_jars())] * 2
    # The plan was compiled at the asked parallelism, with {warehouse} in the job's arguments
    # resolved to this run's warehouse.
    assert load_plan(plan).stream_graph.settings.default_parallelism == 3
    with open(os.path.join(plan, "compiled.json")) as f:
        assert json.load(f)["args"] == ["--input", job["input"], "--out", f"{warehouse}/results"]
    # A restart restores the latest checkpoint, whatever the first attempt asked (Flink's failover).
    assert second_args[4:14] == [
        "-D", f"sluice.warehouse={warehouse}", "-D", "sluice.spark.master=local[2]",
        "-D", "execution.savepoint.path=latest", "-D", "sluice.airflow.dag-run-id=manual__1",
        "-D", "sluice.airflow.attempt=2"]
    assert second_args[14] == "-D" and second_args[15].startswith("sluice.subtask-attempts={")


def test_a_failed_submission_retries_only_when_the_history_says_restarting(submit):
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
    from runtime.jobmaster.steps import RunRequest
    attempt, submissions, spec, job, warehouse = submit
    submissions.fail = True

    # The decision is the record's field; its words are only said.
    record_attempt(warehouse, "restarts", 1, "FAILED", "the strategy's words (test)", True)
    with pytest.raises(AirflowException, match="the strategy's words") as retry:
        attempt(RunRequest(), "restarts", 1)
    assert not isinstance(retry.value, AirflowFailException)        # an Airflow retry

    record_attempt(warehouse, "gives-up", 1, "FAILED", "restarting, said the old words (test)", False)
    with pytest.raises(AirflowFailException, match="said the old words"):
        attempt(RunRequest(), "gives-up", 1)

    record_attempt(warehouse, "gives-up-2", 1, "FAILED", "not restarting after failure 1: the restart "
                                                         "strategy gave up (test)", False)
    with pytest.raises(AirflowFailException, match="the restart strategy gave up"):
        attempt(RunRequest(), "gives-up-2", 1)

    with pytest.raises(AirflowFailException, match="failed before it started"):
        attempt(RunRequest(), "never-started", 1)

    record_attempt(warehouse, "driver-died", 1, "RUNNING")
    with pytest.raises(AirflowFailException, match="attempt 1 ended while it was RUNNING"):
        attempt(RunRequest(), "driver-died", 1)
