"""``bin/dev airflow-settings`` (``python -m include.local_airflow.settings``): airflow_settings.yaml (astro format) into a real metadata database.

The database is shared with other test files: objects created here have names of their own,
except the project file's, which other tests expect as the file defines them.
"""
import os
import subprocess
import sys
import textwrap

import pytest
from airflow.models import Connection, Pool, Variable
from include.local_airflow.settings import (AirflowSettingsError, Change, ConnectionSetting, PoolSetting,
                                            VariableSetting, apply_airflow_settings, main, read_airflow_settings)

from seed import ROOT

PROJECT_FILE = os.path.join(ROOT, "airflow_settings.yaml")


def write(tmp_path, text, name="airflow_settings.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


@pytest.fixture
def project_settings(airflow_db):
    """The project file, loaded; the warehouse variable and the JobManager's connection are dropped
    again if this test created them, since sluice_airflow.warehouse_root() would send other tests to
    the project's warehouse, and the connection their dag.test() runs to a JobManager."""
    from airflow.utils.session import create_session
    had_variable = Variable.get("sluice_warehouse", default_var=None) is not None
    with create_session() as session:
        had_connection = session.query(Connection).filter(Connection.conn_id == "sluice_default").count() > 0
    yield read_airflow_settings(PROJECT_FILE)
    if not had_variable:
        Variable.delete("sluice_warehouse")
    if not had_connection:
        with create_session() as session:
            session.query(Connection).filter(Connection.conn_id == "sluice_default").delete()


def test_project_file_parses():
    settings = read_airflow_settings(PROJECT_FILE)
    assert settings.connections == (ConnectionSetting("sluice_default", "sluice", host="127.0.0.1", port=8081,
                                                      schema="http"),
                                    ConnectionSetting("spark_default", "spark", host="local[*]",
                                                      extra={"deploy-mode": "client"}),
                                    ConnectionSetting("kafka_default", "kafka",
                                                      extra={"bootstrap.servers": "127.0.0.1:9092"}))
    # The pool stands for the cluster's slots, which a run deferred to the JobManager still holds.
    assert [(p.name, p.slots, p.include_deferred) for p in settings.pools] == [("spark_slots", 4, True)]
    assert settings.variables == (VariableSetting("sluice_warehouse", "warehouse"),)


def test_project_file_loads_into_airflow_and_a_second_load_changes_nothing(project_settings):
    first = apply_airflow_settings(project_settings)
    assert [(c.kind, c.name) for c in first] == [
        ("connection", "sluice_default"), ("connection", "spark_default"), ("connection", "kafka_default"),
        ("pool", "spark_slots"), ("variable", "sluice_warehouse")]
    # The shipped Kafka job's broker, in the Apache Kafka provider's connection type and extra.
    from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook
    kafka = Connection.get_connection_from_secrets(KafkaBaseHook.default_conn_name)
    assert (kafka.conn_type, kafka.extra_dejson) == (KafkaBaseHook.conn_type, {"bootstrap.servers": "127.0.0.1:9092"})
    spark = Connection.get_connection_from_secrets("spark_default")
    assert (spark.conn_type, spark.host, spark.extra_dejson) == ("spark", "local[*]", {"deploy-mode": "client"})
    assert spark.login is None and spark.port is None
    assert (Pool.get_pool("spark_slots").slots, Pool.get_pool("spark_slots").include_deferred) == (4, True)
    # The JobManager's connection, as the Sluice hook reads it.
    from sluice_airflow.hooks import SluiceHook, url_of
    jobmanager = Connection.get_connection_from_secrets(SluiceHook.default_conn_name)
    assert url_of(jobmanager.host, jobmanager.port, jobmanager.schema, "sluice_default") == "http://127.0.0.1:8081"
    assert Variable.get("sluice_warehouse") == "warehouse"
    assert {c.action for c in apply_airflow_settings(project_settings)} == {"unchanged"}


def test_changes_update_and_objects_not_in_the_file_stay(airflow_db, tmp_path):
    first = write(tmp_path, """\
        airflow:
          connections:
            - conn_id: sluice_test_update_conn
              conn_type: spark
              conn_host: spark://one:7077
              conn_port:
          pools:
            - pool_name: sluice_test_update_pool
              pool_slot: 2
          variables:
            - variable_name: sluice_test_update_var
              variable_value: {epochs: 3, tags: [a, b]}
            - variable_name: sluice_test_update_flag
              variable_value: true
        """)
    assert {c.action for c in apply_airflow_settings(read_airflow_settings(first))} == {"created"}
    assert Variable.get("sluice_test_update_var", deserialize_json=True) == {"epochs": 3, "tags": ["a", "b"]}
    assert Variable.get("sluice_test_update_flag") == "true"

    second = write(tmp_path, """\
        airflow:
          connections:
            - conn_id: sluice_test_update_conn
              conn_type: spark
              conn_host: spark://two:7077
              conn_extra: {deploy-mode: cluster}
          pools:
            - pool_name: sluice_test_update_pool
              pool_slot: 3
              pool_description: three now
          variables:
            - variable_name: sluice_test_update_var
              variable_value: {epochs: 3, tags: [a, b]}
        """, name="second.yaml")
    assert apply_airflow_settings(read_airflow_settings(second)) == [
        Change("connection", "sluice_test_update_conn", "updated"),
        Change("pool", "sluice_test_update_pool", "updated"),
        Change("variable", "sluice_test_update_var", "unchanged")]
    conn = Connection.get_connection_from_secrets("sluice_test_update_conn")
    assert (conn.host, conn.extra_dejson) == ("spark://two:7077", {"deploy-mode": "cluster"})
    pool = Pool.get_pool("sluice_test_update_pool")
    assert (pool.slots, pool.description) == (3, "three now")
    assert Variable.get("sluice_test_update_flag") == "true"      # not in the second file: left alone


def test_a_changed_spark_slots_pool_updates(project_settings, tmp_path):
    apply_airflow_settings(project_settings)
    resized = write(tmp_path, open(PROJECT_FILE).read().replace("pool_slot: 4", "pool_slot: 6"))
    try:
        changes = apply_airflow_settings(read_airflow_settings(resized))
        assert Change("pool", "spark_slots", "updated") in changes
        assert Pool.get_pool("spark_slots").slots == 6
    finally:
        apply_airflow_settings(project_settings)     # other tests expect the project's 4 slots
    assert Pool.get_pool("spark_slots").slots == 4


def test_template_placeholders_and_uris_load_as_astro_does(tmp_path):
    path = write(tmp_path, """\
        airflow:
          connections:
            - conn_id:
              conn_type:
            - conn_id: sluice_test_uri
              conn_uri: postgres://user:secret@db:5432/sluice
          pools:
            - pool_name:
              pool_slot:
          variables:
        """)
    assert read_airflow_settings(path).connections == (
        ConnectionSetting("sluice_test_uri", uri="postgres://user:secret@db:5432/sluice"),)


@pytest.mark.parametrize("text, message", [
    ("""\
     airflow:
       pools:
         - pool_name: spark_slots
     """, "pools[0] (spark_slots): missing pool_slot"),
    ("""\
     airflow:
       pools:
         - pool_name: spark_slots
           pool_slot: -1
     """, "pools[0] (spark_slots): pool_slot must be a non-negative integer, got -1"),
    ("""\
     airflow:
       pools:
         - pool_name: spark_slots
           pool_slot: four
     """, "pools[0] (spark_slots): pool_slot must be a non-negative integer, got 'four'"),
    ("""\
     airflow:
       pools:
         - pool_name: spark_slots
           pool_slot: 4
           pool_include_deferred: sometimes
     """, "pools[0] (spark_slots): pool_include_deferred must be true or false, got 'sometimes'"),
    ("""\
     airflow:
       connections:
         - conn_type: spark
     """, "connections[0]: missing conn_id"),
    ("""\
     airflow:
       connections:
         - conn_id: spark_default
           conn_host: local[*]
     """, "connections[0] (spark_default): missing conn_type"),
    ("""\
     airflow:
       connections:
         - conn_id: spark_default
           conn_type: spark
           conn_extra: [deploy-mode, client]
     """, "connections[0] (spark_default): conn_extra must be a mapping"),
    ("""\
     airflow:
       connections:
         - conn_id: spark_default
           conn_type: spark
           conn_hots: local[*]
     """, "connections[0] (spark_default): unknown key 'conn_hots'"),
    ("""\
     airflow:
       connections:
         - conn_id: spark_default
           conn_type: spark
           conn_login: yes
     """, "connections[0] (spark_default): conn_login must be a string, got True; quote it"),
    ("""\
     airflow:
       variables:
         - variable_name: sluice_warehouse
     """, "variables[0] (sluice_warehouse): missing variable_value"),
    ("""\
     airflow:
       pools:
         - pool_name: spark_slots
           pool_slot: 4
         - pool_name: spark_slots
           pool_slot: 8
     """, "pools[1] (spark_slots): duplicate pool_name, already given by pools[0] (spark_slots)"),
    ("""\
     airflow:
       pool:
         - pool_name: spark_slots
     """, "unknown key 'airflow.pool'; expected connections, pools or variables"),
    ("""\
     airflow: {}
     connections: []
     """, "unknown top-level key 'connections'"),
    ("""\
     airflow:
       variables: sluice_warehouse
     """, "airflow.variables must be a list of entries"),
    ("""\
     airflow:
       pools:
         - pool_name: spark_slots
           pool_slot: [4
     """, "invalid YAML at line 5, column 1"),
])
def test_bad_input_names_the_file_the_entry_and_the_fix(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(AirflowSettingsError) as e:
        read_airflow_settings(path)
    assert f"{path}: {message}" in str(e.value)


def test_every_problem_is_reported_at_once(tmp_path):
    path = write(tmp_path, """\
        airflow:
          pools:
            - pool_name: a
            - pool_name: b
              pool_slot: 1.5
        """)
    with pytest.raises(AirflowSettingsError) as e:
        read_airflow_settings(path)
    assert str(e.value).splitlines() == [
        f"{path}: pools[0] (a): missing pool_slot: the number of task slots, e.g. pool_slot: 4",
        f"{path}: pools[1] (b): pool_slot must be a non-negative integer, got 1.5; e.g. pool_slot: 4"]


def test_cli_dry_run_writes_nothing_then_loads(airflow_db, tmp_path, capsys):
    path = write(tmp_path, """\
        airflow:
          pools:
            - pool_name: sluice_test_cli_pool
              pool_slot: 5
          variables:
            - variable_name: sluice_test_cli_var
              variable_value: 42
        """)
    assert main(["--file", path, "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "pool sluice_test_cli_pool: would be created", "variable sluice_test_cli_var: would be created",
        "2 created, 0 updated, 0 unchanged (dry run: nothing written)"]
    assert Pool.get_pool("sluice_test_cli_pool") is None
    assert Variable.get("sluice_test_cli_var", default_var=None) is None

    assert main(["--file", path]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "pool sluice_test_cli_pool: created", "variable sluice_test_cli_var: created",
        "2 created, 0 updated, 0 unchanged"]
    assert Pool.get_pool("sluice_test_cli_pool").slots == 5
    assert Variable.get("sluice_test_cli_var", deserialize_json=True) == 42


def test_cli_reads_the_project_file_by_default(airflow_db, capsys):
    assert main(["--dry-run"]) == 0
    assert "pool spark_slots: " in capsys.readouterr().out


def test_cli_reports_a_bad_file(tmp_path, capsys):
    path = write(tmp_path, "airflow:\n  pools:\n    - pool_name: p\n")
    assert main(["--file", path]) == 1
    assert capsys.readouterr().err == (f"airflow-settings: {path}: pools[0] (p): missing pool_slot: "
                                       "the number of task slots, e.g. pool_slot: 4\n")


def test_cli_refuses_a_database_that_was_never_migrated(tmp_path):
    home = tmp_path / "airflow"
    home.mkdir()
    env = dict(os.environ, AIRFLOW_HOME=str(home),
               AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db")
    env["PYTHONPATH"] = os.path.join(ROOT, "plugins")
    result = subprocess.run([sys.executable, "-m", "include.local_airflow.settings"], capture_output=True, text=True,
                            env=env, cwd=ROOT)
    assert result.returncode == 1
    assert f"airflow-settings: the Airflow metadata database sqlite:///{home}/airflow.db is not " \
           "initialised for Airflow 3.3.2: run `airflow db migrate` first" in result.stderr
    assert "Traceback" not in result.stderr
