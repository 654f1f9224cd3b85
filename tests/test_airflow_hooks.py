"""The Airflow side shaped as a provider (issue 52, item 5): SluiceHook reads the JobManager's
``sluice_default`` connection and the Spark connection's master from a real metadata database and
decides how a run deploys; each step is an operator of its own. (The plugin's imports of
``runtime`` are checked in test_layers.py.)"""
from __future__ import annotations

import os

import pytest

from seed import ROOT


@pytest.fixture
def connections(airflow_db, monkeypatch):
    """Sets the connections a test names (conn_id -> Connection kwargs, None: absent), as the API
    server reads them (the metadata database)."""
    from airflow.models import Connection
    from airflow.utils.session import create_session
    monkeypatch.setenv("_AIRFLOW_PROCESS_CONTEXT", "server")
    from sqlalchemy import insert, select
    table, names = Connection.__table__, ["spark_default", "sluice_default"]
    # The rows as stored, not decrypted: another test's Airflow may have written them with a Fernet
    # key this process does not have.
    with create_session() as session:
        saved = [dict(row) for row in session.execute(select(table).where(table.c.conn_id.in_(names))).mappings()]

    def define(**wanted):
        with create_session() as session:
            session.query(Connection).filter(Connection.conn_id.in_(list(wanted))).delete()
            for conn_id, fields in wanted.items():
                if fields is not None:
                    session.add(Connection(conn_id=conn_id, **fields))
    yield define
    with create_session() as session:
        session.query(Connection).filter(Connection.conn_id.in_(names)).delete()
        if saved:
            session.execute(insert(table), saved)


LOCAL = {"conn_type": "spark", "host": "local[2]"}
JOBMANAGER = {"conn_type": "sluice", "host": "127.0.0.1", "port": 8099}


@pytest.mark.parametrize("spark, sluice, mode, master", [
    (LOCAL, None, "in-process", "local[2]"),
    ({"conn_type": "spark", "host": "spark://master", "port": 7077}, None, "spark-submit", "spark://master:7077"),
    ({"conn_type": "spark", "host": "spark://master:7077"}, None, "spark-submit", "spark://master:7077"),
    (LOCAL, JOBMANAGER, "jobmanager", "local[2]"),     # the JobManager's connection is there: runs go to it
    ({**LOCAL, "extra": '{"sluice-deploy": "in-process"}'}, JOBMANAGER, "in-process", "local[2]"),     # said
    ({**LOCAL, "extra": '{"sluice-deploy": "spark-submit"}'}, None, "spark-submit", "local[2]"),
])
def test_the_hook_says_how_a_run_deploys(connections, spark, sluice, mode, master):
    from sluice_airflow.hooks import SluiceHook
    connections(spark_default=spark, sluice_default=sluice)
    hook = SluiceHook()
    assert (hook.deploy_mode(), hook.spark_master()) == (mode, master)
    if sluice:
        assert hook.jobmanager_url() == "http://127.0.0.1:8099"
        assert hook.get_conn().url == "http://127.0.0.1:8099"


def test_a_misconfigured_deployment_fails_with_the_fix(connections):
    from airflow.sdk.exceptions import AirflowFailException
    from sluice_airflow.hooks import SluiceHook
    connections(spark_default={**LOCAL, "extra": '{"sluice-deploy": "jobmanager"}'}, sluice_default=None)
    with pytest.raises(AirflowFailException, match="There is no Airflow connection 'sluice_default' naming the "
                                                   "Sluice JobManager: add it"):
        SluiceHook().deploy_mode()      # never a silent fall-back to in-process
    connections(spark_default={**LOCAL, "extra": '{"sluice-deploy": "jobmangaer"}'})
    with pytest.raises(AirflowFailException, match="extra sluice-deploy='jobmangaer'; use one of 'jobmanager', "
                                                   "'in-process', 'spark-submit'"):
        SluiceHook().deploy_mode()


@pytest.mark.parametrize("host, port, schema, url", [
    ("127.0.0.1", None, None, "http://127.0.0.1:8081"),
    ("jm.example.com", 443, "https", "https://jm.example.com:443"),
    ("http://10.0.0.5:9000", None, None, "http://10.0.0.5:9000"),
    ("http://10.0.0.5", 9000, None, "http://10.0.0.5:9000"),
])
def test_the_jobmanager_url_of_a_connection(host, port, schema, url):
    from sluice_airflow.hooks import url_of
    assert url_of(host, port, schema, "sluice_default") == url


def test_a_connection_without_host_or_with_another_scheme_is_refused():
    from airflow.sdk.exceptions import AirflowFailException
    from sluice_airflow.hooks import url_of
    with pytest.raises(AirflowFailException, match="Connection sluice_default names no host"):
        url_of(None, 8081, None, "sluice_default")
    with pytest.raises(AirflowFailException, match="schema 'ftp'; use http or https"):
        url_of("h", None, "ftp", "sluice_default")


def test_each_step_is_an_operator_with_its_own_template_fields():
    from sluice_airflow import dag_factory
    from sluice_airflow.operators import SluiceSavepointOperator
    from runtime.jobmaster import JobSpec
    dag = dag_factory.job_dag(JobSpec("counts", os.path.join(ROOT, "include", "jobs", "wordcount.py")),
                              warehouse="/tmp/unused-warehouse")
    kinds = {t.task_id: type(t).__name__ for t in dag.tasks}
    assert kinds == {"compile": "SluiceCompileOperator", "execution_graph": "SluiceExecutionGraphOperator",
                     "allocate_slots": "SluiceAllocateSlotsOperator", "deploy": "SluiceDeployOperator",
                     "run": "SluiceJobOperator", "finish": "SluiceFinishOperator",
                     "sink_assets": "SinkAssetsOperator"}
    assert dag.get_task("deploy").template_fields == ("job", "spark_conn_id", "sluice_conn_id")
    assert "sluice_conn_id" in dag.get_task("run").template_fields
    assert SluiceSavepointOperator.template_fields == ("job", "checkpoint", "target")
