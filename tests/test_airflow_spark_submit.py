"""The run task's spark-submit deployment end to end: real Airflow (``dag.test()``), the Spark
provider's real spark-submit (its own JVM and Python driver, running ``sluice run``), real
Delta tables.

The spark_default connection is ``local[2]`` with ``"sluice-deploy": "spark-submit"``, so the
run task submits the job instead of running it in this process. The session-wide ``spark``
fixture still starts this process's SparkSession (the control plane's other steps and the
checks use none of it; it is there so the submitted job is shown to run beside it, in a JVM
of its own, as it would beside a worker's).
"""
from __future__ import annotations

import json
import os

import pytest

from checkpoint_harness import expected_running, expected_windows, table_rows
from test_airflow_control_plane import checkpoints, dag_test, executions, write_job, xcom


@pytest.fixture
def spark_submit_plane(airflow_db, spark, tmp_path, monkeypatch):
    """As the control_plane fixture, with spark_default deploying through spark-submit."""
    from airflow.models import Connection, Pool, Variable
    from airflow.utils.session import create_session
    (tmp_path / "jobs").mkdir()
    monkeypatch.setenv("SLUICE_JOBS_FOLDER", str(tmp_path / "jobs"))
    Variable.set("sluice_warehouse", str(tmp_path / "warehouse"))
    Pool.create_or_update_pool("spark_slots", 4, "Spark slots (tests)", include_deferred=False)
    with create_session() as session:
        session.query(Connection).filter(Connection.conn_id == "spark_default").delete()
        session.add(Connection(conn_id="spark_default", conn_type="spark", host="local[2]",
                               extra=json.dumps({"sluice-deploy": "spark-submit"})))
    yield tmp_path
    Variable.delete("sluice_warehouse")
    with create_session() as session:     # later tests get the in-process default back
        session.query(Connection).filter(Connection.conn_id == "spark_default").delete()
        session.add(Connection(conn_id="spark_default", conn_type="spark", host="local[2]"))


def history_pids(tmp_path, job_name) -> set:
    """The process ids that wrote the job's execution history (the table's ``pid`` column)."""
    from runtime.jobmaster.history import ExecutionHistory
    from runtime.jobmaster.steps import job_dir
    return {row["pid"] for row in ExecutionHistory(job_dir(str(tmp_path / "warehouse"), job_name))._rows()}


def test_job_dag_runs_through_spark_submit(spark_submit_plane):
    from airflow.utils.state import DagRunState
    job = write_job(spark_submit_plane, "counts_submit")
    run, tis = dag_test("counts_submit")
    assert run.state == DagRunState.SUCCESS
    assert {task: ti.state for task, ti in tis.items()} == dict.fromkeys(tis, "success")
    deployed = xcom(run, "deploy")
    assert (deployed["mode"], deployed["master"]) == ("spark-submit", "local[2]")

    # The job ran in the spark-submit driver, not here, and knew its Airflow run and try.
    [record] = executions(spark_submit_plane, "counts_submit")
    completed = checkpoints(spark_submit_plane, "counts_submit")
    assert (record.state, record.dag_run_id, record.attempt) == ("FINISHED", run.run_id, 1)
    assert record.epochs == 5 and record.records_in == len(job["events"])
    assert record.last_checkpoint == completed[-1].checkpoint_id
    assert os.getpid() not in history_pids(spark_submit_plane, "counts_submit")

    assert table_rows(job["running"]) == expected_running(job["events"])
    assert table_rows(job["windows"]) == expected_windows(job["events"])

    assert xcom(run, "run")["run_id"] == record.run_id
    finish = xcom(run, "finish")
    assert (finish["state"], finish["run_id"], finish["records_in"]) == ("FINISHED", record.run_id, len(job["events"]))
    assert finish["checkpoint_id"] == completed[-1].checkpoint_id
    assert finish["checkpoints"] == str(spark_submit_plane / "warehouse" / "counts_submit" / "checkpoints")
    assert finish["sinks"] == sorted([job["running"], job["windows"]])


def test_fixed_delay_restart_recovers_through_spark_submit(spark_submit_plane):
    from airflow.utils.state import DagRunState
    job = write_job(spark_submit_plane, "counts_submit_flaky", "RestartStrategies.fixed_delay_restart(2, 200)",
                    f"cc.FailAt(25_000, {str(spark_submit_plane / 'failed-once')!r})")
    run, tis = dag_test("counts_submit_flaky")
    assert run.state == DagRunState.SUCCESS
    assert tis["run"].try_number == 2 and tis["finish"].state == "success"

    # The failed submission's exit status became a retry because the history says "restarting".
    second, first = executions(spark_submit_plane, "counts_submit_flaky")
    assert (first.state, first.attempt, first.dag_run_id) == ("FAILED", 1, run.run_id)
    assert (second.state, second.attempt, second.dag_run_id) == ("FINISHED", 2, run.run_id)
    assert "injected failure" in first.failure and first.failed_tasks
    assert first.restart.startswith("restarting in 200 ms after failure 1")
    # The retry restored the latest checkpoint the failed attempt completed.
    assert first.last_checkpoint is not None and second.restored_from == first.last_checkpoint
    assert os.getpid() not in history_pids(spark_submit_plane, "counts_submit_flaky")

    # Each result once: nothing the failed attempt staged after its checkpoint was committed twice.
    assert table_rows(job["running"]) == expected_running(job["events"])
    assert table_rows(job["windows"]) == expected_windows(job["events"])
    finish = xcom(run, "finish")
    assert finish["run_id"] == second.run_id and finish["restored_from"] == first.last_checkpoint
    assert finish["checkpoint_id"] == checkpoints(spark_submit_plane, "counts_submit_flaky")[-1].checkpoint_id
