"""The state processor (runtime/state_processor): a checkpoint's state read as Arrow and Spark
DataFrames, savepoints written from data, state schema evolution on restore. Every test runs
tests/jobs/every_state.py on the shared Spark session and checks against what its input implies.
"""
import collections
import json
import os

import pyarrow as pa
import pytest

from checkpoint_harness import (
    LINES_PER_EPOCH, expected_running, expected_windows, first_lines, table_rows, write_input)
from runtime.checkpoint.incremental import INCREMENTAL
from runtime.checkpoint.savepoint import take_savepoint
from runtime.checkpoint.checkpoint_record import CheckpointException
from runtime.checkpoint.storage import CheckpointStorage
from runtime.cli import main as sluice
from runtime.client import run_job
from runtime.common import Types
from runtime.datastream.state import ListStateDescriptor, ValueStateDescriptor
from runtime.execution.history import ExecutionHistory
from runtime.state.backend import STATE_BACKEND
from runtime.state_processor.bootstrap import KeyedStateBootstrapFunction, OperatorTransformation
from runtime.state_processor.reader import SavepointReader
from runtime.state_processor.writer import SavepointWriter

JOB = os.path.join(os.path.dirname(__file__), "jobs", "every_state.py")
JOB_NAME = "every-state"


def run(tmp_path, *extra, backend="hashmap", incremental=True, **options):
    options.setdefault("max_records_per_split", LINES_PER_EPOCH)
    configuration = {STATE_BACKEND: backend, INCREMENTAL: str(incremental).lower()}
    args = ["--input", str(tmp_path / "in"), "--running", str(tmp_path / "running"),
            "--windows", str(tmp_path / "windows"), *extra]
    return run_job(JOB, args, warehouse=str(tmp_path / "warehouse"), master="local[2]", quiet=True,
                   configuration=configuration, **options)


def job_dir(tmp_path) -> str:
    return str(tmp_path / "warehouse" / JOB_NAME)


def by_word(events) -> dict:
    out = collections.defaultdict(list)
    for w, ts in events:
        out[w].append(ts)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("incremental", [True, False])
def test_every_state_kind_and_the_timers_read_as_the_input_implies(spark, tmp_path, backend, incremental, capsys):
    write_input(tmp_path / "in", seed=3)
    run(tmp_path, max_epochs=1, backend=backend, incremental=incremental)
    run(tmp_path, max_epochs=1, backend=backend, incremental=incremental, restore_from="latest")
    seen = by_word(first_lines(tmp_path / "in", 2 * LINES_PER_EPOCH))
    reader = SavepointReader.read(job_dir(tmp_path))
    assert reader.point.record.checkpoint_id == 2
    assert set(reader.state_names("every-state")) >= {"count", "last", "stamps", "buckets", "max_ts", "total"}

    def column(name, field="value"):
        rows = reader.keyed_state("every-state", name).to_pylist()
        assert len(rows) == len({r["key"] for r in rows}), "one row per key"
        return {r["key"]: r[field] for r in rows}

    assert column("count") == {w: len(ts) for w, ts in seen.items()}
    assert column("max_ts") == {w: max(ts) for w, ts in seen.items()}
    assert column("total") == {w: sum(ts) for w, ts in seen.items()}
    assert {w: sorted(v) for w, v in column("stamps").items()} == {w: sorted(ts) for w, ts in seen.items()}
    assert {w: dict(v) for w, v in column("buckets").items()} == {
        w: dict(collections.Counter(f"b{t % 3}" for t in ts)) for w, ts in seen.items()}
    assert {w: v["seen"] for w, v in column("last").items()} == {w: float(len(ts)) for w, ts in seen.items()}
    timers = reader.timers("every-state").to_pylist()
    assert {(t["key"], t["timestamp"]) for t in timers} == {
        (w, t + 10 ** 12) for w, ts in seen.items() for t in ts}
    assert {t["domain"] for t in timers} == {"event"}
    # Window contents: one row per key and window, the window decoded.
    windows = reader.keyed_state("window-counts", "window-contents").to_pylist()
    assert windows and all(r["window_end"] - r["window_start"] == 10_000 for r in windows)
    assert all(r["value"]["word"] == r["key"] for r in windows)
    # Operator state: the watermark generators' union state, a row per subtask, and the source's
    # split positions (Flink's SourceReaderState), a row per input file.
    generators = reader.operator_state("timestamps", "generator").to_pylist()
    assert {r["distribution"] for r in generators} == {"union"} and len(generators) == 2
    source = next(op["operator_id"] for op in reader.point.record.operators if op["files"] and op["uid"] is None)
    splits = reader.operator_state(source, "SourceReaderState").to_pylist()
    assert sorted(r["value"]["f0"] for r in splits) == sorted(str(p) for p in (tmp_path / "in").iterdir())
    # The same as a DataFrame, typed by the descriptors.
    df = reader.read_keyed_state(spark, "every-state", "buckets")
    assert dict(df.dtypes)["value"] == "map<string,bigint>" and df.count() == len(seen)
    last = reader.read_keyed_state(spark, "every-state", "last")
    assert dict(last.dtypes)["value"] == "struct<ts:int,seen:float>"
    # sluice state --sql: the states as views named after them, the timers as `timers`.
    capsys.readouterr()
    assert sluice(["state", JOB, "--warehouse", str(tmp_path / "warehouse"), "--operator", "every-state",
                   "--format", "json", "--sql",
                   "SELECT c.key, c.value AS n, m.value AS latest, (SELECT count(*) FROM timers t WHERE t.key = c.key) "
                   "AS timers FROM count c JOIN max_ts m USING (key)", "--", "--input", "x", "--running", "y",
                   "--windows", "z"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert {r["key"]: (r["n"], r["latest"], r["timers"]) for r in rows} == {
        w: (len(ts), max(ts), len(set(ts))) for w, ts in seen.items()}


class CountFrom(KeyedStateBootstrapFunction):
    """Bootstraps the job's count of each word from the data's ``n``, and a timer per key."""

    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.stamps = ctx.get_list_state(ListStateDescriptor("stamps", Types.LONG()))

    def process_element(self, value, ctx):
        self.count.update(value.n)
        self.stamps.add(-1)
        ctx.timer_service().register_event_time_timer(10 ** 13)


def bootstrapped_running(events, start: dict) -> collections.Counter:
    totals = collections.Counter(w for w, _ in events)
    return collections.Counter((w, start.get(w, 0) + k) for w, n in totals.items() for k in range(1, n + 1))


@pytest.mark.slow
def test_a_savepoint_bootstrapped_from_an_arrow_table_restores_at_another_parallelism(spark, tmp_path):
    events = write_input(tmp_path / "in", seed=5)
    start = {f"w{i}": 100 * i for i in range(25)}
    data = pa.table({"word": list(start), "n": list(start.values())})
    path = (SavepointWriter.new_savepoint(128)
            .with_operator("every-state", OperatorTransformation.bootstrap_with(data)
                           .key_by("word", key_type=Types.STRING()).transform(CountFrom()).set_parallelism(4))
            .write(str(tmp_path / "savepoint")))
    reader = SavepointReader.read(path)
    assert {r["key"]: r["value"] for r in reader.keyed_state("every-state", "count").to_pylist()} == start
    assert len(reader.timers("every-state")) == 25
    run(tmp_path, "--parallelism", "3", restore_from=path, max_records_per_split=None)
    assert table_rows(tmp_path / "running") == bootstrapped_running(events, start)
    final = SavepointReader.read(job_dir(tmp_path))
    stamps = {r["key"]: r["value"] for r in final.keyed_state("every-state", "stamps").to_pylist()}
    assert {w: sorted(v) for w, v in stamps.items()} == {w: sorted([-1] + ts) for w, ts in by_word(events).items()}


@pytest.mark.slow
def test_a_savepoint_bootstrapped_from_a_million_rows_in_spark(spark, tmp_path):
    from pyspark.sql import functions as F
    events = write_input(tmp_path / "in", seed=6)
    rows = 1_000_000
    data = spark.range(rows).select(
        F.when(F.col("id") < 25, F.concat(F.lit("w"), F.col("id").cast("string")))
        .otherwise(F.concat(F.lit("k"), F.col("id").cast("string"))).alias("word"),
        (F.col("id") % 7).alias("n"))
    path = (SavepointWriter.new_savepoint(128)
            .with_operator("every-state", OperatorTransformation.bootstrap_with(data)
                           .key_by("word", key_type=Types.STRING()).transform(CountFrom()).set_parallelism(4))
            .write(str(tmp_path / "savepoint")))
    run(tmp_path, "--parallelism", "2", restore_from=path, max_records_per_split=None)
    start = {f"w{i}": i % 7 for i in range(25)}
    assert table_rows(tmp_path / "running") == bootstrapped_running(events, start)
    counts = SavepointReader.read(job_dir(tmp_path)).keyed_state("every-state", "count")
    assert counts.num_rows == rows
    got = dict(zip(counts.column("key").to_pylist(), counts.column("value").to_pylist()))
    totals = collections.Counter(w for w, _ in events)
    assert all(got[f"k{i}"] == i % 7 for i in range(25, rows, 997))
    assert all(got[w] == start[w] + totals[w] for w in start)


def savepoint_after_two_epochs(tmp_path, **options) -> str:
    run(tmp_path, max_epochs=2, **options)
    return take_savepoint(CheckpointStorage(job_dir(tmp_path)), str(tmp_path / "savepoint"))


@pytest.mark.slow
def test_a_removed_operator_state_restores_without_allowing_non_restored_state(spark, tmp_path):
    events = write_input(tmp_path / "in", seed=8)
    base = savepoint_after_two_epochs(tmp_path)
    with pytest.raises(CheckpointException, match="window-counts"):
        run(tmp_path, "--window-uid", "renamed", restore_from=base)
    path = SavepointWriter.from_existing_savepoint(base).remove_operator("window-counts").write(str(tmp_path / "sp2"))
    reader = SavepointReader.read(path)
    assert "window-counts" not in [op["uid"] for op in reader.point.record.operators]
    assert reader.point.record.source_offsets == SavepointReader.read(base).point.record.source_offsets
    result = run(tmp_path, "--window-uid", "renamed", restore_from=path)
    assert result.restored_from == 2
    # The running counts continue from the savepoint's, the input after its source positions only.
    assert table_rows(tmp_path / "running") == expected_running(events)
    with pytest.raises(CheckpointException, match="no operator 'nope'"):
        SavepointWriter.from_existing_savepoint(base).remove_operator("nope")


@pytest.mark.slow
def test_a_changed_max_parallelism_moves_every_key_to_its_new_key_group(spark, tmp_path):
    events = write_input(tmp_path / "in", seed=9)
    base = savepoint_after_two_epochs(tmp_path)
    keys = {"every-state": Types.STRING(), "window-counts": Types.STRING()}
    path = SavepointWriter.from_existing_savepoint(base).change_max_parallelism(64, keys).write(str(tmp_path / "sp2"))
    run(tmp_path, "--max-parallelism", "64", "--parallelism", "3", restore_from=path)
    assert table_rows(tmp_path / "running") == expected_running(events)
    assert table_rows(tmp_path / "windows") == expected_windows(events)


RESTART_TWICE = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "2",
                 "restart-strategy.fixed-delay.delay": "0 s"}


def run_variant(tmp_path, name, last_type, savepoint, backend):
    """The job restored from ``savepoint`` with the value state ``last`` of another type, into
    sinks and a warehouse of its own, under a restart strategy that would restart it twice at
    once; returns its folder."""
    root = tmp_path / name
    args = ["--input", str(tmp_path / "in"), "--running", str(root / "running"), "--windows", str(root / "windows"),
            "--last-type", last_type]
    run_job(JOB, args, warehouse=str(root / "warehouse"), master="local[2]", quiet=True,
            max_records_per_split=LINES_PER_EPOCH, configuration={STATE_BACKEND: backend, **RESTART_TWICE}, restore_from=savepoint)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_row_state_that_gained_lost_or_widened_fields_restores_and_others_are_refused(spark, tmp_path, backend):
    events = write_input(tmp_path / "in", seed=10)
    base = savepoint_after_two_epochs(tmp_path, backend=backend)
    before = {r["key"]: r["value"] for r in SavepointReader.read(base).keyed_state("every-state", "last").to_pylist()}
    after_base = collections.Counter(w for w, _ in events) - collections.Counter(
        w for w, _ in first_lines(tmp_path / "in", 2 * LINES_PER_EPOCH))
    expected = {
        # the job writes ts and seen again for the words of the later input; the others keep the
        # restored values, migrated
        "gained": ("struct<ts:int,seen:float,note:string>", lambda w, v: v if after_base[w] else {**before[w], "note": None}),
        "lost": ("struct<ts:int>", lambda w, v: {"ts": before[w]["ts"]}),
        "widened": ("struct<ts:bigint,seen:double>", lambda w, v: v if after_base[w] else before[w]),
    }
    for variant, (spark_type, value_of) in expected.items():
        root = run_variant(tmp_path, variant, variant, base, backend)
        assert table_rows(root / "running") == expected_running(events) - expected_running(
            first_lines(tmp_path / "in", 2 * LINES_PER_EPOCH)), variant
        reader = SavepointReader.read(str(root / "warehouse" / JOB_NAME))
        df = reader.read_keyed_state(spark, "every-state", "last")
        assert dict(df.dtypes)["value"] == spark_type, variant
        got = {r["key"]: r["value"] for r in reader.keyed_state("every-state", "last").to_pylist()}
        assert got == {w: value_of(w, got[w]) for w in before}, variant
        if variant == "gained":
            assert all(v["note"] is None for v in got.values())
    for variant, field in (("narrowed", "Integer cannot become Short"), ("retyped", "Integer cannot become String")):
        with pytest.raises(Exception) as refused:
            run_variant(tmp_path, variant, variant, base, backend)
        message = str(refused.value)
        assert "every-state" in message or "EveryState" in message or "process" in message.lower(), message
        for part in ("'last'", "Row(ts: Integer, seen: Float)", field, "SavepointWriter"):
            assert part in message, message
        assert "open() failed: StateMigrationException" in message and "on record" not in message, message
        assert not os.path.exists(tmp_path / variant / "running" / "_delta_log"), "nothing was committed"
        # Refused at once: a restart would restore the same state into the same type.
        [attempt] = ExecutionHistory(str(tmp_path / variant / "warehouse" / JOB_NAME)).executions()
        assert (attempt.state, attempt.restarting, attempt.restored_from) == ("FAILED", False, 2)
        assert "a restart would fail alike" in attempt.restart, attempt.restart


@pytest.mark.slow
def test_a_read_while_the_job_runs_never_blocks_or_changes_it(spark, tmp_path):
    import threading
    events = write_input(tmp_path / "in", seed=11)
    outcome = {}
    job = threading.Thread(target=lambda: outcome.setdefault("result", run(tmp_path, max_records_per_split=10)))
    job.start()
    storage = CheckpointStorage(job_dir(tmp_path))
    reads, counts = 0, []
    while job.is_alive():
        try:
            if not storage.checkpoints.completed():
                job.join(0.2)
                continue
            reader = SavepointReader.read(job_dir(tmp_path))
            state = reader.keyed_state("every-state", "count")
        except (CheckpointException, OSError):     # no checkpoint yet, or retention discarded the one read
            job.join(0.2)
            continue
        reads += 1
        counts.append((reader.point.record.checkpoint_id, sum(state.column("value").to_pylist())))
    job.join()
    assert outcome["result"].epochs and reads >= 2, "reads completed while the job ran"
    # Each read saw a checkpoint as it was: its total count is the events of its epochs.
    assert all(total == sum(1 for _ in first_lines(tmp_path / "in", 10 * cid)) for cid, total in counts), counts
    assert table_rows(tmp_path / "running") == expected_running(events)
    assert table_rows(tmp_path / "windows") == expected_windows(events)
