"""A job run on each new version of its input table (``schedule="on-inputs"``), and sinks whose
tables exist from the first checkpoint.

A bounded DeltaSource restored from a checkpoint reads as Structured Streaming's ``availableNow``
trigger: the versions after its checkpointed one, up to the latest as the run starts (the
enumerator, without Spark; the shipped ``wordcount_totals`` job over three runs, on Spark; and
through the real scheduler, two upstream commits making two downstream runs). A Delta sink
that received no rows leaves an empty table with the stream's schema, which delta-rs and Spark
SQL read.
"""
from __future__ import annotations

import gc
import json
import os
import urllib.parse

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from runtime.client import run_job
from runtime.connectors.base import EnumeratorContext
from runtime.connectors.delta import DeltaSourceEnumerator, DeltaSourceReader
from runtime.datastream.connectors import DeltaSource
from runtime.task.task_context import TaskContext
from runtime.task.task_info import TaskInfo
from waiting import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOTALS_JOB = os.path.join(ROOT, "include", "jobs", "wordcount_totals.py")
COUNTS = pa.schema([("word", pa.string()), ("count", pa.int64())])


def append(table, rows: list[tuple]) -> None:
    write_deltalake(str(table), pa.table({"word": [w for w, _ in rows], "count": [c for _, c in rows]},
                                         schema=COUNTS), mode="append")


def rows_of(table) -> list[dict]:
    dt = DeltaTable(str(table))
    rows = dt.to_pyarrow_table().to_pylist()
    del dt
    gc.collect()        # delta-rs's filesystem handler, dropped before exit (delta-io/delta-rs#2184)
    return rows


def totals(table) -> dict:
    return {r["word"]: r["count"] for r in rows_of(table)}


def sums(table) -> dict:
    found: dict = {}
    for r in rows_of(table):
        found[r["word"]] = found.get(r["word"], 0) + r["count"]
    return found


# ---- the enumerator: what a bounded run reads ----------------------------------------------------

def read_run(source, positions=None, between_epochs=None) -> tuple[list, dict]:
    """One run of a bounded source, a row of each file an epoch: the rows it reads and its
    positions at the end. ``between_epochs()`` runs after the first epoch (a commit while the
    run goes on)."""
    enumerator = DeltaSourceEnumerator(source, EnumeratorContext(parallelism=1, max_records_per_split=1))
    if positions is not None:
        enumerator.restore(positions)
    reader = DeltaSourceReader(source, TaskContext(TaskInfo("Delta Source", 0, 1, 128, 0), 0, {}))
    rows = []
    for epoch in range(20):
        states = {}
        for split in enumerator.plan_epoch(epoch)[0]:
            rows += [tuple(r) for values, _ in reader.read(split, 100) for r in values]
            states[split.split_id] = reader.end_state(split)
        enumerator.complete_epoch(states)
        if epoch == 0 and between_epochs:
            between_epochs()
        if enumerator.input_ends_with_plan:
            return sorted(rows), enumerator.snapshot()
    raise AssertionError("the bounded source did not end")


def test_a_restored_bounded_source_reads_the_versions_since_its_checkpoint_up_to_the_runs_start(tmp_path):
    table = tmp_path / "counts"
    append(table, [("a", 1), ("b", 2)])     # version 0
    append(table, [("c", 3)])               # version 1
    source = DeltaSource.for_bounded_row_data(str(table))

    rows, positions = read_run(source)      # a fresh run: the snapshot as it starts
    assert rows == [("a", 1), ("b", 2), ("c", 3)]

    append(table, [("d", 4), ("e", 5)])     # version 2
    append(table, [("e", 6)])               # version 3
    # Restored: versions 2 and 3 only; version 4, committed while it runs, is the next run's.
    rows, positions = read_run(source, positions, between_epochs=lambda: append(table, [("f", 6)]))
    assert rows == [("d", 4), ("e", 5), ("e", 6)]
    rows, positions = read_run(source, positions)
    assert rows == [("f", 6)]
    rows, positions = read_run(source, positions)       # nothing new: nothing read, the run ends
    assert rows == []
    # A checkpoint keeps no split read to its end: the positions do not grow run after run.
    assert list(positions) == ["_table"] and positions["_table"]["version"] == 4

    # A version that is not an append cannot be read as new rows: a clear error with the ways out.
    DeltaTable(str(table)).delete("word = 'a'")
    with pytest.raises(ValueError, match=r"version 5 of .*counts removes data .* a bounded Delta source restored "
                                         r"from a checkpoint .* restore_from 'none'"):
        read_run(source, positions)


def test_a_bounded_source_from_a_starting_version_reads_that_version_then_the_later_ones(tmp_path):
    table = tmp_path / "counts"
    append(table, [("a", 1)])
    append(table, [("b", 2)])
    append(table, [("c", 3)])
    source = DeltaSource.for_bounded_row_data(str(table), starting_version=1)
    rows, positions = read_run(source)
    assert rows == [("a", 1), ("b", 2)]
    assert read_run(source, positions)[0] == [("c", 3)]


def test_a_restored_bounded_change_feed_reads_the_changes_since_its_checkpoint(tmp_path):
    table = tmp_path / "counts"
    write_deltalake(str(table), pa.table({"word": ["a"], "count": [1]}, schema=COUNTS),
                    configuration={"delta.enableChangeDataFeed": "true"})
    source = DeltaSource.for_change_data_feed(str(table), columns=["word", "_change_type"], continuous=False)
    rows, positions = read_run(source)
    assert rows == [("a", "insert")]
    append(table, [("b", 2)])
    DeltaTable(str(table)).delete("word = 'a'")
    rows, positions = read_run(source, positions)
    assert rows == [("a", "delete"), ("b", "insert")]
    assert read_run(source, positions)[0] == []


# ---- the shipped job ---------------------------------------------------------------------------

def test_the_shipped_totals_job_is_scheduled_on_the_table_wordcount_writes(tmp_path):
    from runtime.client import compile_job
    from runtime.jobmaster import discover_jobs
    from runtime.jobmaster.assets import ON_INPUTS, source_tables
    from runtime.jobmaster.deployment import resolve_args
    specs = {s.name: s for s in discover_jobs(os.path.join(ROOT, "include", "jobs"))}
    totals_job, wordcount = specs["wordcount_totals"], specs["wordcount"]
    warehouse = str(tmp_path / "warehouse")
    written = resolve_args(wordcount.args, warehouse)
    assert totals_job.deployment.schedule == ON_INPUTS
    # The tables it is scheduled on: those its compiled job reads, with its deployment's arguments.
    job = compile_job(TOTALS_JOB, resolve_args(totals_job.args, warehouse))
    assert source_tables(job) == (written[written.index("--output") + 1],)


def test_the_shipped_totals_job_counts_every_row_once_over_runs(spark, tmp_path):
    counts, output, warehouse = tmp_path / "counts", str(tmp_path / "totals"), str(tmp_path / "warehouse")

    def run():
        run_job(TOTALS_JOB, ["--input", str(counts), "--output", output], warehouse=warehouse,
                master="local[2]", quiet=True, restore_from="latest")

    append(counts, [("to", 2), ("be", 1), ("or", 1)])
    run()
    assert totals(output) == sums(counts) == {"to": 2, "be": 1, "or": 1}
    append(counts, [("to", 1), ("not", 1)])
    append(counts, [("be", 4)])
    run()       # restored: the two new versions only
    assert totals(output) == sums(counts) == {"to": 3, "be": 5, "or": 1, "not": 1}
    run()       # nothing new
    assert totals(output) == sums(counts)


# ---- a sink that received no rows ------------------------------------------------------------------

EMPTY_SINKS_JOB = '''
import sys
from runtime.common import Encoder, Row, Types
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import FileSink
from runtime.datastream.connectors.delta import DeltaSink

EVENT = Types.ROW_NAMED(["word", "count", "day"], [Types.STRING(), Types.LONG(), Types.STRING()])
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.enable_checkpointing(1000)
keep = sys.argv[2] == "keep"
events = env.from_collection([Row(word="a", count=1, day="mon"), Row(word="b", count=2, day="tue")], EVENT)
kept = events.filter(lambda e: keep)
kept.sink_to(DeltaSink.for_row_data(sys.argv[1] + "/appended", partition_by=["day"]))
kept.sink_to(DeltaSink.for_row_data(sys.argv[1] + "/upserted").with_upsert_keys("word"))
kept.map(lambda e: e.word, output_type=Types.STRING()).sink_to(
    FileSink.for_row_format(sys.argv[1] + "/lines", Encoder.simple_string_encoder()).build())
# A field typed by its values: the table waits for them.
kept.map(lambda e: Row(word=e.word, tags=[e.day]),
         output_type=Types.ROW_NAMED(["word", "tags"], [Types.STRING(), Types.PICKLED_BYTE_ARRAY()])).sink_to(
    DeltaSink.for_row_data(sys.argv[1] + "/tagged"))
env.execute("empty sinks")
'''


SCHEMA = pa.schema([("word", pa.string()), ("count", pa.int64()), ("day", pa.string())])


def run_empty_sinks(tmp_path, keep: bool, **options):
    script, out = tmp_path / "empty_sinks.py", tmp_path / "out"
    script.write_text(EMPTY_SINKS_JOB)
    run_job(str(script), [str(out), "keep" if keep else "drop"], warehouse=str(tmp_path / "warehouse"),
            master="local[2]", quiet=True, **options)
    return out


def test_a_sink_that_received_no_rows_leaves_an_empty_table_with_the_streams_schema(spark, tmp_path):
    out = run_empty_sinks(tmp_path, keep=False)
    for name, partitions in (("appended", ["day"]), ("upserted", [])):
        dt = DeltaTable(str(out / name))
        assert (dt.to_pyarrow_table().num_rows, dt.metadata().partition_columns) == (0, partitions)
        assert pa.schema(dt.schema().to_arrow()).equals(SCHEMA)
        assert dt.transaction_version(f"sluice-empty-sinks-{name}") is None     # no output committed
        del dt
    assert os.listdir(out / "lines") == []      # a FileSink's: its folder, empty
    assert not (out / "tagged").exists()
    # The next run's rows go into those tables.
    run_empty_sinks(tmp_path, keep=True, restore_from="none")
    expected = [{"word": "a", "count": 1, "day": "mon"}, {"word": "b", "count": 2, "day": "tue"}]
    for name in ("appended", "upserted"):
        assert sorted(rows_of(out / name), key=lambda r: r["word"]) == expected
    assert sorted(rows_of(out / "tagged"), key=lambda r: r["word"]) == [
        {"word": "a", "tags": ["mon"]}, {"word": "b", "tags": ["tue"]}]


def test_a_sink_that_received_no_rows_leaves_a_table_that_reads_in_spark_sql(spark, tmp_path):
    out = run_empty_sinks(tmp_path, keep=False)
    for name in ("appended", "upserted"):
        frame = spark.read.format("delta").load(str(out / name))
        assert (frame.count(), frame.columns) == (0, ["word", "count", "day"])
    spark.sql(f"INSERT INTO delta.`{out / 'appended'}` VALUES ('c', 3, 'wed')")     # delta-spark writes to it
    assert rows_of(out / "appended") == [{"word": "c", "count": 3, "day": "wed"}]


# ---- through the real scheduler ------------------------------------------------------------------

UPSTREAM = '''
"""on_inputs_up: "word count" lines of a folder's files into a Delta table of word counts."""
import sys
from runtime.common import Row, Types
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors.delta import DeltaSink
from runtime.jobmaster import JobDeployment

DEPLOYMENT = JobDeployment(args=("--input", "{warehouse}/on_inputs_up-input", "--output", "{warehouse}/on_inputs_up-counts"))
WORD_COUNT = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])


def main():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.enable_checkpointing(1000)
    (env.read_text_file(sys.argv[2])
        .map(lambda line: Row(word=line.split()[0], count=int(line.split()[1])), output_type=WORD_COUNT)
        .sink_to(DeltaSink.for_row_data(sys.argv[4])))
    env.execute("on_inputs_up")


if __name__ == "__main__":
    main()
'''


def shipped_totals_reading(table: str) -> str:
    """The shipped wordcount_totals module, reading ``table`` instead of wordcount's results (the
    test's Airflow runs the shipped wordcount for other tests)."""
    text = open(TOTALS_JOB).read()
    assert text.count('"{warehouse}/wordcount-results"') == 1
    return text.replace('"{warehouse}/wordcount-results"', f'"{table}"')


AIRFLOW_JOBS = {"on_inputs_up.py": UPSTREAM,
                "wordcount_totals.py": shipped_totals_reading("{warehouse}/on_inputs_up-counts")}


def test_a_job_on_its_inputs_through_the_real_scheduler_counts_every_row_once(real_airflow):
    site = real_airflow
    source, counts = site.warehouse / "on_inputs_up-input", site.warehouse / "on_inputs_up-counts"
    output = site.warehouse / "word-totals"
    source.mkdir(parents=True, exist_ok=True)

    def downstream_run_of(upstream_run: str):
        """The wordcount_totals run the upstream run's Asset event triggered, once it ended."""
        for run in site.api("GET", "/dags/wordcount_totals/dagRuns?order_by=run_after")["dag_runs"]:
            status, text = site.request("GET", f"/api/v2/dags/wordcount_totals/dagRuns/"
                                               f"{urllib.parse.quote(run['dag_run_id'])}/upstreamAssetEvents")
            if status != 200:       # a run the scheduler is still creating: asked again
                return None
            if any(e["source_run_id"] == upstream_run for e in json.loads(text)["asset_events"]):
                return run if run["state"] in ("success", "failed") else None
        return None

    expected = {}
    downstream = []
    for name, lines in (("a.txt", "to 2\nbe 1\nor 1\n"), ("b.txt", "to 1\nnot 1\nbe 4\n")):
        (source / name).write_text(lines)
        for line in lines.split("\n")[:-1]:
            word, n = line.split()
            expected[word] = expected.get(word, 0) + int(n)
        upstream = site.trigger("on_inputs_up", {})
        assert site.wait_for_run("on_inputs_up", upstream) == "success"
        # The next upstream commit only once this one's downstream run ended: two runs, not one
        # run for both events.
        run = wait_until(lambda: downstream_run_of(upstream), 600, f"the wordcount_totals run of {upstream}",
                         interval=1, log=site.log)
        assert (run["run_type"], run["state"]) == ("asset_triggered", "success")
        downstream.append(run["dag_run_id"])
        assert totals(output) == sums(counts) == expected
    assert len(set(downstream)) == 2
    executions = site.executions("WordCount Totals")
    assert sorted(e.dag_run_id for e in executions) == sorted(downstream)
