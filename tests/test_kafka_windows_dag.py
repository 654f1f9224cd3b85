"""The shipped Kafka job (include/jobs/kafka_windows.py) through its Airflow DAG against the test
run's broker: two scheduled-style runs through dag.test() (its deployment: one epoch a run, ending
in a checkpoint) with records produced between them, and a run a user triggers from the trigger
form of the real Airflow (scheduler and API server). The Delta table and the output topic (read
as a read_committed consumer) hold exactly the windows the watermark has passed, each once."""
import collections
import json
import os
import sys
import time

import pytest
from deltalake import DeltaTable

import kafka_env
from test_airflow_control_plane import ROOT, control_plane, dag_test, xcom  # noqa: F401 (fixture)

from runtime.jobmaster import JobDeployment, JobSpec, find_job

JOBS = os.path.join(ROOT, "include", "jobs")
# The shipped deployment (schedule, one epoch a run, parallelism, the broker of the kafka_default
# connection), on this test's topics.
JOB_TEMPLATE = '''
"""kafka_windows_run: the shipped kafka_windows job on the test's topics."""
import dataclasses
import sys
sys.path.insert(0, {jobs!r})
from kafka_windows import DEPLOYMENT, main

DEPLOYMENT = dataclasses.replace(DEPLOYMENT, args={args!r})

if __name__ == "__main__":
    main()
'''
# The shipped job for the real Airflow: its topics and table are the test's, read when the job
# runs (the broker's port is the test run's, chosen after Airflow parsed its DAGs).
UI_JOB = '''
"""kafka_windows_ui: the shipped kafka_windows job on the topics of kafka_windows_ui.json."""
import dataclasses
import json
import os
import sys
sys.path.insert(0, {jobs!r})
import kafka_windows

DEPLOYMENT = dataclasses.replace(kafka_windows.DEPLOYMENT, schedule=None, args=())


def main(argv=None):
    # Until the test writes it (its DAG is built before), the shipped arguments: compiled, not run.
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka_windows_ui.json")
    kafka_windows.main(json.load(open(path)) if os.path.exists(path) else
                       [a.replace("{{warehouse}}", "/tmp") for a in kafka_windows.DEPLOYMENT.args])


if __name__ == "__main__":
    main()
'''
AIRFLOW_JOBS = {"kafka_windows_ui.py": UI_JOB.format(jobs=JOBS)}
# A multiple of the 10 s window, within the broker's retention (7 days: older records are deleted).
T0 = int(time.time() * 1000) // 600_000 * 600_000 - 600_000


def windows(rows) -> collections.Counter:
    return collections.Counter((r["word"], r["window_start"] - T0, r["window_end"] - T0, r["count"]) for r in rows)


def kafka_connection(bootstrap: str) -> str:
    """The kafka_default connection as an AIRFLOW_CONN_ variable: the Apache Kafka provider's type."""
    return json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}})


def test_two_runs_of_the_kafka_windows_dag_write_each_closed_window_once(control_plane, kafka_broker,  # noqa: F811
                                                                          monkeypatch):
    sys.path.insert(0, JOBS)
    from kafka_windows import BOOTSTRAP_SERVERS, DEPLOYMENT
    from airflow.utils.state import DagRunState
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.storage.layout import job_dir
    bootstrap = kafka_broker.bootstrap
    events = kafka_env.create_topic(bootstrap, "events", 2)
    counts = kafka_env.create_topic(bootstrap, "window-counts", 1)
    table = control_plane / "warehouse" / "tables" / "kafka-window-counts"     # outside the job's folder
    # The broker is the kafka_default connection's, as a user sets it in Airflow's UI.
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", kafka_connection(bootstrap))
    args = ("--bootstrap-servers", BOOTSTRAP_SERVERS, "--input-topic", events, "--output-topic", counts,
            "--table", "{warehouse}/tables/kafka-window-counts", "--group-id", f"{events}-group",
            "--transactional-id-prefix", events)
    (control_plane / "jobs" / "kafka_windows_run.py").write_text(JOB_TEMPLATE.format(jobs=JOBS, args=args))
    assert DEPLOYMENT.schedule == "@hourly" and DEPLOYMENT.max_epochs == 1

    def produce(by_partition):
        for p, records in by_partition.items():
            kafka_env.produce(bootstrap, events, [w for w, _ in records], partition=p,
                              timestamps=[T0 + ms for _, ms in records])

    def run():
        run, tis = dag_test("kafka_windows_run")
        assert run.state == DagRunState.SUCCESS, {t: ti.state for t, ti in tis.items()}
        assert xcom(run, "compile")["args"][:2] == ["--bootstrap-servers", bootstrap]   # the connection's
        return xcom(run, "finish")

    # Run 1: partition 0 reaches 12 s, partition 1 15 s; the watermark (2 s out of orderness) is
    # the lower one's, 9.999 s: [0, 10 s) fires, [10 s, 20 s) stays open in the checkpoint.
    produce({0: [("a", 1000), ("b", 2000), ("a", 12000)], 1: [("a", 3000), ("b", 15000)]})
    first = run()
    closed = collections.Counter({("a", 0, 10000, 2): 1, ("b", 0, 10000, 1): 1})
    assert windows(DeltaTable(str(table)).to_pyarrow_table().to_pylist()) == closed
    assert windows(json.loads(v) for v in kafka_env.read_committed(bootstrap, counts)) == closed
    # Run 2 restores it: records of the open window and later ones; [10 s, 20 s) closes whole.
    produce({0: [("a", 18000), ("c", 31000)], 1: [("b", 33000)]})
    second = run()
    closed.update({("a", 10000, 20000, 2): 1, ("b", 10000, 20000, 1): 1})
    assert windows(DeltaTable(str(table)).to_pyarrow_table().to_pylist()) == closed
    assert windows(json.loads(v) for v in kafka_env.read_committed(bootstrap, counts)) == closed
    assert kafka_env.committed_offsets(bootstrap, f"{events}-group", events, 2) == {0: 5, 1: 3}
    assert first["epochs"] == second["epochs"] == 1, (first, second)
    # Each run's epoch ended in a checkpoint, and the epoch log has each partition's figures.
    store = CheckpointStorage(job_dir(str(control_plane / "warehouse"), "Kafka Window Counts"))
    assert [r.epoch for r in store.checkpoints.completed()][-2:] == [0, 1]
    (source,) = [v for v in store.epoch_log.epoch_metrics()[-1]["vertices"].values() if v.get("splits")]
    assert source["splits"] == {f"{events}-0": {"offset": 5, "latest": 5, "lag": 0},
                                f"{events}-1": {"offset": 3, "latest": 3, "lag": 0}}


def test_the_kafka_job_triggered_from_the_trigger_form_writes_each_closed_window_once(real_airflow, kafka_broker):
    bootstrap = kafka_broker.bootstrap
    events = kafka_env.create_topic(bootstrap, "ui-events", 2)
    counts = kafka_env.create_topic(bootstrap, "ui-window-counts", 1)
    table = real_airflow.warehouse / "kafka-window-counts-ui"
    args = ["--bootstrap-servers", bootstrap, "--input-topic", events, "--output-topic", counts,
            "--table", str(table), "--group-id", f"{events}-group", "--transactional-id-prefix", events]
    (real_airflow.warehouse.parent / "jobs" / "kafka_windows_ui.json").write_text(json.dumps(args))
    for p, records in {0: [("a", 1000), ("b", 2000), ("a", 12000)], 1: [("a", 3000), ("b", 15000)]}.items():
        kafka_env.produce(bootstrap, events, [w for w, _ in records], partition=p,
                          timestamps=[T0 + ms for _, ms in records])
    # What the trigger form posts: its fields as the run's conf.
    run = real_airflow.trigger("kafka_windows_ui", {"restore_from": "none", "parallelism": 2, "max_epochs": 1})
    assert real_airflow.wait_for_run("kafka_windows_ui", run) == "success"
    closed = collections.Counter({("a", 0, 10000, 2): 1, ("b", 0, 10000, 1): 1})
    assert windows(DeltaTable(str(table)).to_pyarrow_table().to_pylist()) == closed
    assert windows(json.loads(v) for v in kafka_env.read_committed(bootstrap, counts)) == closed
    assert kafka_env.committed_offsets(bootstrap, f"{events}-group", events, 2) == {0: 3, 1: 2}


def render_args(spec: JobSpec) -> tuple:
    """The job's deployment arguments as its DAG's tasks render them (Airflow's templating)."""
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk.execution_time.context import ConnectionAccessor
    from sluice_airflow.operators import with_rendered_args
    return with_rendered_args(EmptyOperator(task_id="compile"), spec, {"conn": ConnectionAccessor()}).args


def test_the_shipped_kafka_job_takes_its_broker_from_the_kafka_default_connection(monkeypatch):
    """Pointing the DAG at another broker is a change of the connection, in Airflow's UI; the job
    script (which never imports Airflow) gets the servers as its argument."""
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", kafka_connection("broker-1:9093,broker-2:9093"))
    spec = find_job(os.path.join(JOBS, "kafka_windows.py"))
    args = render_args(spec)
    assert args[:2] == ("--bootstrap-servers", "broker-1:9093,broker-2:9093")
    assert args[2:] == spec.args[2:]        # the other arguments as they are


def test_a_missing_connection_fails_naming_the_argument_and_the_fix(monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException
    monkeypatch.delenv("AIRFLOW_CONN_SLUICE_NO_SUCH_KAFKA", raising=False)
    missing = JobSpec("kafka_job", "/jobs/kafka_job.py", JobDeployment(
        args=("--bootstrap-servers", "{{ conn.sluice_no_such_kafka.extra_dejson['bootstrap.servers'] }}")))
    with pytest.raises(AirflowFailException) as err:
        render_args(missing)
    assert "Job kafka_job: its DEPLOYMENT argument" in str(err.value) and "sluice_no_such_kafka" in str(err.value)
    assert "isn't defined" in str(err.value) and "Admin > Connections" in str(err.value)
    # A connection without the key: the argument would be empty, which the job would take as no broker.
    monkeypatch.setenv("AIRFLOW_CONN_SLUICE_NO_SUCH_KAFKA", json.dumps({"conn_type": "kafka", "extra": {}}))
    with pytest.raises(AirflowFailException, match="renders empty"):
        render_args(missing)
