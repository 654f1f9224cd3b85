"""Sink tables as Airflow Assets and jobs scheduled on the tables they read.

The rule (runtime/jobmaster/assets.py) over checkpoint records, without Spark; a job DAG's Asset
events through ``dag.test()`` (real Airflow metadata DB, real Spark and Delta): once per run that
committed, none for a run that committed nothing new or failed; and the real scheduler
(``real_airflow``): a job scheduled on its inputs runs when another job commits to its table, and
only then.
"""
from __future__ import annotations

import os
import urllib.parse

import pytest

from runtime.checkpoint.checkpoint_record import CHECKPOINT, COMPLETED, DISCARDED, FAILED, CheckpointRecord
from runtime.jobmaster import JobDeployment
from runtime.jobmaster.assets import TableCommit, committed_tables, table_uri
from test_airflow_control_plane import ROOT, control_plane, dag_test, xcom  # noqa: F401  (its fixture too)
from waiting import wait_until

JOB_DIR = "/w/job"
LINES, COPIES = "/w/lines", "s3://bucket/copies"


def record(checkpoint_id, run_id, versions, status=COMPLETED, kind=CHECKPOINT):
    return CheckpointRecord(checkpoint_id, checkpoint_id, kind, status, run_id, table_versions=versions)


def test_a_run_announces_the_tables_its_checkpoints_moved_past_every_earlier_version():
    earlier = [record(1, "r1", {LINES: 0, "state/counts": 3}), record(2, "r1", {LINES: 1}, status=DISCARDED)]
    mine = [record(3, "r2", {LINES: 2, COPIES: 0}), record(4, "r2", {LINES: 2, COPIES: 0})]
    # The checkpoint that made a version, not a later one that recorded it again.
    assert committed_tables(earlier + mine, {"r2"}, JOB_DIR) == (
        TableCommit(LINES, 2, 3), TableCommit(COPIES, 0, 3))
    # Attempts of one Airflow run count together; a failed checkpoint commits nothing.
    assert committed_tables(earlier + [record(3, "a1", {LINES: 2}), record(4, "a2", {LINES: 3}),
                                       record(5, "a2", {LINES: 9}, status=FAILED)],
                            {"a1", "a2"}, JOB_DIR) == (TableCommit(LINES, 3, 4),)


def test_a_replay_that_committed_nothing_new_announces_nothing():
    earlier = [record(1, "r1", {LINES: 4}), record(2, "r2", {LINES: 5})]
    # Restored from checkpoint 1: the replayed commits were no-ops, the table stays at 5.
    assert committed_tables(earlier + [record(3, "r3", {LINES: 5})], {"r3"}, JOB_DIR) == ()
    # No new input: its checkpoint records the version it found.
    assert committed_tables(earlier + [record(3, "r3", {LINES: 5}), record(4, "r3", {})], {"r3"}, JOB_DIR) == ()
    # A crash after the sink's commit, before the checkpoint's record: the replay records the
    # version first, so it announces it (once).
    assert committed_tables(earlier + [record(3, "r4", {LINES: 6})], {"r4"}, JOB_DIR) == (TableCommit(LINES, 6, 3),)


def test_only_sink_tables_are_announced():
    own = {"state/window": 7, f"{JOB_DIR}/sources": 1, "relative/table": 2, LINES: 0}
    assert committed_tables([record(1, "r1", own)], {"r1"}, JOB_DIR) == (TableCommit(LINES, 0, 1),)
    assert committed_tables([record(1, "r1", own, kind="SAVEPOINT")], {"r1"}, JOB_DIR) == ()


def test_asset_uris_are_table_locations():
    assert table_uri("/w/lines/") == "file:///w/lines"
    assert table_uri("file:///w/a%20b") == "file:///w/a b"
    assert table_uri("s3://bucket/copies/") == "s3://bucket/copies"
    assert table_uri("rel") == "file://" + os.path.abspath("rel")
    assert TableCommit(COPIES, 3, 4).to_json() == {"table": COPIES, "uri": COPIES, "version": 3, "checkpoint_id": 4}


def test_a_deployment_schedules_on_tables_by_name():
    assert JobDeployment(schedule=["{warehouse}/lines"]).schedule == ("{warehouse}/lines",)
    for bad in ([], ["  "], [3]):
        with pytest.raises(ValueError, match="Delta tables by path or URI"):
            JobDeployment(schedule=bad)


# ---- through Airflow ---------------------------------------------------------------------------

UPSTREAM = '''
"""{name}: the lines of a folder into a Delta table, two lines an epoch (the Asset tests' upstream)."""
import os, sys
from runtime.common import Configuration, RestartStrategies, Row, Types
from runtime.datastream import StreamExecutionEnvironment
from runtime.jobmaster import JobDeployment

DEPLOYMENT = JobDeployment(args=("--input", "{{warehouse}}/{name}-input", "--output", "{{warehouse}}/{name}-lines"))


def line(text, poison):
    if text == "poison" and os.path.exists(poison):
        raise ValueError("a poisoned line")
    return Row(line=text)


def main():
    source, output = sys.argv[2], sys.argv[4]
    poison = source + "-poisoned"
    conf = Configuration()
    conf.set_string("sluice.epoch.max-records-per-split", "2")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    env.set_restart_strategy(RestartStrategies.no_restart())
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    (env.read_text_file(source)
        .map(lambda text: line(text, poison), output_type=Types.ROW_NAMED(["line"], [Types.STRING()]))
        .sink_to(output))
    env.execute("{name}")


if __name__ == "__main__":
    main()
'''

DOWNSTREAM = '''
"""{name}: runs when {upstream}'s table changes, and copies it."""
import sys
from runtime.common import Row, Types, WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import DeltaSource
from runtime.jobmaster import JobDeployment

DEPLOYMENT = JobDeployment(schedule="on-inputs",
                           args=("--input", "{{warehouse}}/{upstream}-lines", "--output", "{{warehouse}}/{name}-copies"))


def main():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    (env.from_source(DeltaSource.for_bounded_row_data(sys.argv[2]), WatermarkStrategy.no_watermarks(), "lines")
        .map(lambda row: Row(line=row["line"]), output_type=Types.ROW_NAMED(["line"], [Types.STRING()]))
        .sink_to(sys.argv[4]))
    env.execute("{name}")


if __name__ == "__main__":
    main()
'''

# The real scheduler's jobs (tests/real_airflow.py parses them before it starts).
AIRFLOW_JOBS = {"assets_up.py": UPSTREAM.format(name="assets_up"),
                "assets_down.py": DOWNSTREAM.format(name="assets_down", upstream="assets_up")}


def asset_events(uri: str) -> list:
    from sqlalchemy import select
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    with create_session() as session:
        return [(e.extra, e.source_dag_id) for e in session.scalars(
            select(AssetEvent).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.uri == uri).order_by(AssetEvent.id))]


def test_a_job_dag_emits_an_asset_event_per_run_that_committed(control_plane, monkeypatch):
    from deltalake import DeltaTable
    from airflow.utils.state import DagRunState
    from airflow.sdk import Asset, AssetAny
    from sluice_airflow.assets import sink_alias
    jobs, warehouse = control_plane / "jobs", control_plane / "warehouse"
    (jobs / "up.py").write_text(UPSTREAM.format(name="up"))
    (jobs / "down.py").write_text(DOWNSTREAM.format(name="down", upstream="up"))
    source, lines = warehouse / "up-input", str(warehouse / "up-lines")
    # A DAG file parsed outside Airflow's processes reads no Variable: the warehouse it parses with.
    monkeypatch.setenv("SLUICE_WAREHOUSE", str(warehouse))
    source.mkdir(parents=True)
    (source / "a.txt").write_text("a\nb\nc\n")

    up = parsed_dag("up")
    assert [t.task_id for t in up.topological_sort()][-2:] == ["finish", "sink_assets"]
    assert up.get_task("sink_assets").outlets == [sink_alias("up")]
    # The downstream job runs on the table its DeltaSource reads, once a compile found it (a parse
    # never runs a job script; bin/dev airflow compiles the jobs at start, as here).
    from sluice_airflow.dag_factory import main as refresh_profiles
    assert "inputs, which are not known yet" in parsed_dag("down").doc_md
    assert refresh_profiles() == 0
    assert parsed_dag("down").timetable.asset_condition == AssetAny(Asset(table_uri(lines)))

    run, tis = dag_test("up")
    first = made(run, lines)
    assert xcom(run, "sink_assets") == [{"table": lines, "uri": table_uri(lines), **first}]
    assert asset_events(table_uri(lines)) == [({**first, "job": "up"}, "up")]

    run, tis = dag_test("up")       # no new input: nothing committed, nothing announced
    assert run.state == DagRunState.SUCCESS and xcom(run, "sink_assets") == []

    (source / "b.txt").write_text("d\ne\npoison\nf\n")
    (control_plane / "warehouse" / "up-input-poisoned").write_text("")
    run, tis = dag_test("up")       # commits d, e, then fails: the run failed, no event
    assert run.state == DagRunState.FAILED and tis["sink_assets"].state == "upstream_failed"
    failed_version = DeltaTable(lines).version()
    assert failed_version > first["version"]

    os.remove(control_plane / "warehouse" / "up-input-poisoned")
    run, tis = dag_test("up")       # resumes after e: its own commit only
    assert run.state == DagRunState.SUCCESS
    last = made(run, lines)
    assert last["version"] > failed_version
    assert asset_events(table_uri(lines)) == [({**first, "job": "up"}, "up"), ({**last, "job": "up"}, "up")]
    assert sorted(DeltaTable(lines).to_pyarrow_table().column("line").to_pylist()) == list("abcdef") + ["poison"]


def made(run, table: str) -> dict:
    """The table's version now and the checkpoint (of the job's records) that first recorded it."""
    from deltalake import DeltaTable
    from runtime.checkpoint.storage import CheckpointStorage
    version = DeltaTable(table).version()
    job_dir = os.path.dirname(xcom(run, "finish")["checkpoints"])
    checkpoint = min(r.checkpoint_id for r in CheckpointStorage(job_dir).checkpoints.completed() if r.table_versions.get(table) == version)
    return {"version": version, "checkpoint_id": checkpoint}


def parsed_dag(dag_id: str):
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=os.path.join(ROOT, "dags"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags[dag_id]


def test_a_job_scheduled_on_its_inputs_runs_when_another_job_commits_to_them(real_airflow):
    site = real_airflow
    source = site.warehouse / "assets_up-input"
    source.mkdir(parents=True, exist_ok=True)
    (source / "a.txt").write_text("a\nb\nc\n")
    lines = table_uri(str(site.warehouse / "assets_up-lines"))

    def runs(dag_id):
        return site.api("GET", f"/dags/{dag_id}/dagRuns?order_by=run_after")["dag_runs"]

    def ended(dag_id, count):
        found = runs(dag_id)
        return found if len(found) >= count and all(r["state"] in ("success", "failed") for r in found) else None

    committed = site.trigger("assets_up", {})
    assert site.wait_for_run("assets_up", committed) == "success"
    # A refused restore point fails the run before it starts (a run with no new input emits
    # nothing either: test_a_job_dag_emits_an_asset_event_per_run_that_committed, via dag.test()).
    failed = site.trigger("assets_up", {"restore_from": "12345"})
    assert site.wait_for_run("assets_up", failed) == "failed"

    [down] = wait_until(lambda: ended("assets_down", 1), 600, "the downstream job's run", interval=1, log=site.log)
    assert (down["run_type"], down["state"]) == ("asset_triggered", "success")
    events = site.api("GET", f"/dags/assets_down/dagRuns/{urllib.parse.quote(down['dag_run_id'])}"
                             "/upstreamAssetEvents")["asset_events"]
    # a, b in the first epoch, c in the second: its checkpoint made the version the event names.
    assert [(e["uri"], e["source_dag_id"], e["source_run_id"], e["extra"]) for e in events] == [
        (lines, "assets_up", committed, {"version": 1, "checkpoint_id": 2, "job": "assets_up"})]
    # Every event of the table, after both upstream runs ended: the committed run's only.
    [asset] = [a for a in site.api("GET", "/assets?limit=100")["assets"] if a["uri"] == lines]
    table_events = site.api("GET", f"/assets/events?asset_id={asset['id']}")["asset_events"]
    assert [e["source_run_id"] for e in table_events] == [committed]
    assert len(runs("assets_down")) == 1
    from deltalake import DeltaTable
    copies = DeltaTable(str(site.warehouse / "assets_down-copies")).to_pyarrow_table().column("line").to_pylist()
    assert sorted(copies) == ["a", "b", "c"]

