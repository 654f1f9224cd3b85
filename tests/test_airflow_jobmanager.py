"""A job DAG deployed to a real Sluice JobManager (issue 52, item 3), run with ``dag.test()``
(which runs the deferred task's trigger in line): the run step submits the stored plan with the
DAG run's submission key, defers, and completes with the run's outcome when the job ends; a retried
try finds the job its run submitted (the task state store's id, or the submission key when the try
died before it stored it) and never submits a second one. The DAGs through the real scheduler and
triggerer: test_airflow_deferred_runs.py."""
from __future__ import annotations

import os

import pytest

from checkpoint_harness import expected_windows, table_rows
from test_airflow_control_plane import ROOT, control_plane, dag_test, write_job, xcom  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow


@pytest.fixture
def jobmanager(control_plane, monkeypatch):  # noqa: F811
    """A JobManager on the test's warehouse, named by sluice_default; spark_default says nothing of
    the deployment, so the connection's presence sends the runs there. (The connection is in the
    environment: dag.test() runs the trigger in this process, where no metadata database is read.)"""
    import airflow_jobmanager
    from airflow.models import Connection
    from airflow.utils.session import create_session
    jm = airflow_jobmanager.start(control_plane, str(control_plane / "warehouse"))
    with create_session() as session:
        session.query(Connection).filter(Connection.conn_id == "spark_default").delete()
        session.add(Connection(conn_id="spark_default", conn_type="spark", host="local[2]"))
    for name, value in airflow_jobmanager.connection_env(jm).items():
        monkeypatch.setenv(name, value)
    yield jm
    jm.stop()


class Store(dict):
    """The task state store of a try (its get and set)."""

    def set(self, key, value, retention=None):
        self[key] = value


def test_a_run_deploys_to_the_jobmanager_defers_and_a_retry_finds_its_job(jobmanager, control_plane):  # noqa: F811
    from airflow.sdk.exceptions import TaskDeferred
    from airflow.utils.state import DagRunState
    from sluice_airflow.operators import JOBID_KEY
    job = write_job(control_plane, "counts_deployed")
    run, tis = dag_test("counts_deployed")
    assert run.state == DagRunState.SUCCESS, {t: ti.state for t, ti in tis.items()}
    deployed, result = xcom(run, "deploy"), xcom(run, "run")
    assert (deployed["mode"], deployed["jobmanager"]) == ("jobmanager", jobmanager.url)
    # One job in the JobManager, keyed by the DAG run; the run's outcome is its driver's record.
    key = f"counts_deployed/{run.run_id}"
    [found] = [j for j in jobmanager.client().list_jobs() if j["submission-key"] == key]
    assert found["state"] == "FINISHED" and result["jobid"] == found["jid"]
    assert (result["dag_run_id"], result["state"]) == (run.run_id, "FINISHED")
    assert xcom(run, "finish")["state"] == "FINISHED"
    assert table_rows(job["windows"]) == expected_windows(job["events"])     # each window once

    # A retried try: its store holds the job's id, so it reattaches (and defers to the same job); a try
    # that died between the submit and storing the id submits again, and the key gives the same job.
    from types import SimpleNamespace
    from airflow.dag_processing.dagbag import DagBag
    from runtime.jobmaster import find_job
    from runtime.jobmaster.steps import RunRequest
    dag = DagBag(dag_folder=os.path.join(ROOT, "dags")).dags["counts_deployed"]
    operator = dag.get_task("run")
    for store in (Store({JOBID_KEY: found["jid"]}), Store()):
        context = {"dag": dag, "run_id": run.run_id, "ti": SimpleNamespace(try_number=2), "task_state_store": store}
        with pytest.raises(TaskDeferred) as deferred:
            operator._deploy_to_jobmanager(context, find_job(operator.job), RunRequest(max_epochs=4), deployed)
        assert deferred.value.trigger.jobid == found["jid"] and store[JOBID_KEY] == found["jid"]
    assert [j["jid"] for j in jobmanager.client().list_jobs() if j["submission-key"].startswith(key)] == [found["jid"]]
