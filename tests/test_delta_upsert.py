"""The upsert Delta sink (DeltaSink.with_upsert_keys): one row per key, changelog rows as Flink's
upsert sinks read them, exactly once across replays and kills. Real Delta tables (delta-rs) in
tmp_path, jobs on real Spark; the kills SIGKILL a real driver (tests/checkpoint_harness.kill_at)
running tests/jobs/upsert_counts.py.
"""
from __future__ import annotations

import collections
import gc
import glob
import json
import os

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from checkpoint_harness import LINES_PER_EPOCH, first_lines, kill_at, write_input
from runtime.client import run_job
from runtime.common import Row, RowKind, Types
from runtime.connectors.base import CommitterContext
from runtime.connectors.delta import DeltaCommitter, DeltaSinkWriter, merge_upserts
from runtime.datastream import KeyedProcessFunction
from runtime.datastream.connectors import DeltaSink
from runtime.datastream.state import ValueStateDescriptor
from runtime.task.sink_writer import WriterInitContext
from runtime_env import delta_env

JOB = os.path.join(os.path.dirname(__file__), "jobs", "upsert_counts.py")
COUNT = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])


def rows(path, *columns) -> list[tuple]:
    dt = DeltaTable(str(path))
    out = sorted(tuple(r[c] for c in columns) for r in dt.to_pyarrow_table(columns=list(columns)).to_pylist())
    del dt
    gc.collect()        # delta-rs's filesystem handler, dropped before exit (delta-io/delta-rs#2184)
    return out


def writer(table, subtask=0, parallelism=1, epoch=0, keys=("word",), input_type=COUNT) -> DeltaSinkWriter:
    return DeltaSinkWriter(DeltaSink.for_row_data(str(table)).with_upsert_keys(*keys),
                           WriterInitContext("Sink: Delta Sink", subtask, parallelism, epoch, 0, input_type=input_type))


def commit(table, committables, version, app="sluice-job-sink") -> dict:
    sink = DeltaSink.for_row_data(str(table)).with_upsert_keys("word")
    return DeltaCommitter(sink, CommitterContext("job", 1, "op", app)).commit(committables, version)


def txn_versions(table, app) -> list[int]:
    """Every version of ``app``'s transaction the table's log holds, one per commit."""
    return sorted(json.loads(line)["txn"]["version"]
                  for log in glob.glob(os.path.join(str(table), "_delta_log", "*.json"))
                  for line in open(log) if '"txn"' in line and json.loads(line)["txn"]["appId"] == app)


# ---- the writer and the merge ---------------------------------------------------------------

def test_an_epochs_last_change_per_key_wins_and_update_before_is_ignored(tmp_path):
    table = tmp_path / "counts"
    w = writer(table)
    w.write([Row(word="a", count=1), Row(word="b", count=1),
             Row.of_kind(RowKind.UPDATE_BEFORE, word="a", count=1), Row.of_kind(RowKind.UPDATE_AFTER, word="a", count=2),
             Row.of_kind(RowKind.DELETE, word="b", count=1), Row(word="c", count=1),
             Row.of_kind(RowKind.UPDATE_BEFORE, word="z", count=9)])        # a -U alone changes nothing
    (change,) = w.finish()
    assert change["upsert"].to_pylist() == [{"word": "a", "count": 2, "_sluice_delete": False},
                                            {"word": "b", "count": 1, "_sluice_delete": True},
                                            {"word": "c", "count": 1, "_sluice_delete": False}]
    assert commit(table, [[change]], 1) == {str(table): 0}
    assert rows(table, "word", "count") == [("a", 2), ("c", 1)]
    assert DeltaTable(str(table)).schema().to_arrow() is not None
    assert [f.name for f in pa.schema(DeltaTable(str(table)).schema().to_arrow())] == ["word", "count"]


def test_a_replayed_commit_is_a_no_op_and_later_checkpoints_merge(tmp_path):
    table = tmp_path / "counts"
    app = "sluice-job-sink"
    w = writer(table)
    w.write([Row(word="a", count=1), Row(word="b", count=1)])
    first = w.finish()
    commit(table, [first], 1)
    commit(table, [first], 1)                                   # the replay: nothing
    assert DeltaTable(str(table)).version() == 0
    # Checkpoint 2 holds two epochs of two subtasks: applied in epoch, then subtask order.
    e1s0, e1s1, e2s0 = writer(table, 0, 2, 1), writer(table, 1, 2, 1), writer(table, 0, 2, 2)
    e1s0.write([Row(word="a", count=2)])
    e1s1.write([Row(word="c", count=1), Row.of_kind(RowKind.DELETE, word="b", count=1)])
    e2s0.write([Row(word="a", count=3), Row.of_kind(RowKind.DELETE, word="c", count=1)])
    staged = [e1s0.finish(), e1s1.finish(), e2s0.finish()]
    assert commit(table, staged, 2) == {str(table): 1}
    assert rows(table, "word", "count") == [("a", 3)]
    for _ in range(2):                                          # replays of checkpoints 1 and 2
        commit(table, staged, 2)
        commit(table, [first], 1)
    assert rows(table, "word", "count") == [("a", 3)]
    dt = DeltaTable(str(table))
    assert dt.version() == 1 and dt.transaction_version(app) == 2
    assert txn_versions(table, app) == [1, 2]                   # one commit each
    assert dt.history(1)[0]["operation"] == "MERGE"


def test_the_merge_keeps_an_existing_tables_types_and_columns(tmp_path):
    """A table made before the job (int32 counts, an extra column) keeps its schema; a key that
    is new is inserted with nulls in the columns the records do not have."""
    table = str(tmp_path / "counts")
    write_deltalake(table, pa.table({"word": ["a", "b"], "count": pa.array([1, 1], pa.int32()),
                                     "note": ["x", "y"]}))
    w = writer(table)
    w.write([Row(word="a", count=5), Row(word="n", count=1), Row.of_kind(RowKind.DELETE, word="b", count=1)])
    assert merge_upserts(table, [c["upsert"] for c in w.finish()], ("word",), "app", 1)
    assert rows(table, "word", "count", "note") == [("a", 5, "x"), ("n", 1, None)]
    assert pa.schema(DeltaTable(table).schema().to_arrow()).field("count").type == pa.int32()


def test_keys_of_several_columns(tmp_path):
    table = tmp_path / "cells"
    t = Types.ROW_NAMED(["x", "y", "v"], [Types.INT(), Types.STRING(), Types.DOUBLE()])
    w = writer(table, keys=("x", "y"), input_type=t)
    w.write([Row(x=1, y="a", v=1.0), Row(x=1, y="b", v=2.0), Row(x=1, y="a", v=3.0)])
    merge_upserts(str(table), [c["upsert"] for c in w.finish()], ("x", "y"), "app", 1)
    w.write([Row(x=1, y="b", v=4.0), Row(x=2, y="a", v=5.0)])
    merge_upserts(str(table), [c["upsert"] for c in w.finish()], ("x", "y"), "app", 2)
    assert rows(table, "x", "y", "v") == [(1, "a", 3.0), (1, "b", 4.0), (2, "a", 5.0)]


# ---- bad input and misuse ----------------------------------------------------------------------

def test_with_upsert_keys_and_sink_to_check_the_keys_when_the_job_is_built(tmp_path):
    sink = DeltaSink.for_row_data(str(tmp_path / "t"))
    assert sink.with_upsert_keys(["a", "b"]).upsert_keys == ("a", "b")
    assert sink.with_upsert_keys("a").upsert and not sink.upsert
    with pytest.raises(ValueError, match="at least one key column"):
        sink.with_upsert_keys()
    with pytest.raises(TypeError, match="non-empty strings"):
        sink.with_upsert_keys(0)
    with pytest.raises(ValueError, match="named twice"):
        sink.with_upsert_keys("a", "a")
    env = delta_env(tmp_path, 2)
    stream = env.from_collection([Row(word="a", count=1)], COUNT)
    with pytest.raises(ValueError, match=r"with_upsert_keys\('name',\)\) to .*t: the key column\(s\) \['name'\] are "
                                         r"not fields of the stream's record type .*its fields are \['word', 'count'\]"):
        stream.sink_to(sink.with_upsert_keys("name"))


def test_a_record_without_the_key_or_with_a_null_key_is_named_with_the_sink_and_the_fix(tmp_path):
    w = writer(tmp_path / "t", input_type=None)
    with pytest.raises(ValueError, match=r"Sink: Delta Sink: the upsert Delta sink to .*t \(keys \['word'\]\) got a "
                                         r"record without the key field 'word': Row\(name='a'\)\. Give every "
                                         r"record the key columns"):
        w.write([Row(name="a")])
    with pytest.raises(ValueError, match=r"got a record whose key field 'word' is null: Row\(word=None, count=1\)\. "
                                         r"A key column cannot be null"):
        w.write([Row(word=None, count=1)])


def test_a_null_key_in_a_job_fails_naming_the_sink_the_field_and_the_task(spark, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "words.txt").write_text("a\nb\n-\nc\n")
    env = delta_env(tmp_path, 1)
    (env.read_text_file(str(tmp_path / "in"))
        .map(lambda w: Row(word=None if w == "-" else w, count=1), output_type=COUNT)
        .sink_to(DeltaSink.for_row_data(str(tmp_path / "out")).with_upsert_keys("word")))
    with pytest.raises(Exception) as failure:
        env.execute("null key")
    message = str(failure.value)
    assert "the upsert Delta sink to" in message and "key field 'word' is null" in message, message
    # Raised where the stream is keyed for the sink: in the task that made the record.
    assert "Row(word=None, count=1)" in message and "Source: Custom File Source -> Map (1/1) failed" in message, message
    assert not os.path.exists(tmp_path / "out" / "_delta_log")


def test_an_existing_table_without_the_key_column_is_refused_before_the_first_epoch(spark, tmp_path):
    table = str(tmp_path / "out")
    write_deltalake(table, pa.table({"name": ["a"], "count": [1]}))
    env = delta_env(tmp_path, 1)
    (env.from_collection([Row(word="a", count=1)], COUNT)
        .sink_to(DeltaSink.for_row_data(table).with_upsert_keys("word")))
    with pytest.raises(ValueError, match=r"the sink 'Sink: Delta Sink' upserts by key column\(s\) \['word'\] that its "
                                         r"table .*out does not have \(its columns are \['name', 'count'\]\)"):
        env.execute("missing key column")
    assert DeltaTable(table).version() == 0
    assert not os.path.exists(tmp_path / "warehouse" / "missing-key-column" / "epoch_log")


# ---- jobs ----------------------------------------------------------------------------------

class Latest(KeyedProcessFunction):
    """The latest value per key, retracting a key when the value is negative."""

    def open(self, ctx):
        self.seen = ctx.get_state(ValueStateDescriptor("seen", Types.BOOLEAN()))

    def process_element(self, value, ctx):
        if value.count < 0:
            yield Row.of_kind(RowKind.DELETE, word=value.word, count=0)
        else:
            yield Row.of_kind(RowKind.UPDATE_AFTER if self.seen.value() else RowKind.INSERT, word=value.word,
                              count=value.count)
        self.seen.update(value.count >= 0)


def test_a_rolling_count_per_word_is_one_row_per_word_and_deletes_retract_keys(spark, tmp_path):
    """Two subtasks, an epoch of 3 records per split, a checkpoint every 2 epochs: the table holds
    each word's latest count once, whichever subtask and epoch its last change came from."""
    words = "a b a c b a d a e b c a f".split()
    env = delta_env(tmp_path, 2, **{"sluice.epoch.max-records-per-split": 3})
    env.get_checkpoint_config().set_checkpoint_interval_epochs(2)
    counts = (env.from_collection([Row(word=w, count=1) for w in words], COUNT)
              .key_by("word").sum("count"))
    counts.sink_to(DeltaSink.for_row_data(str(tmp_path / "counts")).with_upsert_keys("word"))
    changes = [("a", 5), ("b", 1), ("a", -1), ("c", 7), ("b", 2), ("c", -1), ("c", 3), ("d", -1)]
    (env.from_collection([Row(word=w, count=n) for w, n in changes], COUNT)
        .key_by("word").process(Latest(), output_type=COUNT)
        .sink_to(DeltaSink.for_row_data(str(tmp_path / "latest")).with_upsert_keys("word")))
    result = env.execute("rolling counts")
    assert len(result.epochs) >= 3
    assert rows(tmp_path / "counts", "word", "count") == sorted(collections.Counter(words).items())
    assert rows(tmp_path / "latest", "word", "count") == [("b", 2), ("c", 3)]
    # One MERGE per checkpoint that had changes, each with its own transaction version.
    for name in ("counts", "latest"):
        (app,) = {json.loads(line)["txn"]["appId"] for log in glob.glob(str(tmp_path / name / "_delta_log" / "*.json"))
                  for line in open(log) if '"txn"' in line}
        versions = txn_versions(tmp_path / name, app)
        assert len(versions) == len(set(versions)) == DeltaTable(str(tmp_path / name)).version() + 1
    # The run again from its last checkpoint: nothing new, no commit.
    before = DeltaTable(str(tmp_path / "counts")).version()
    env = delta_env(tmp_path, 2, **{"sluice.epoch.max-records-per-split": 3})
    env.get_checkpoint_config().set_checkpoint_interval_epochs(2)
    (env.from_collection([Row(word=w, count=1) for w in words], COUNT).key_by("word").sum("count")
        .sink_to(DeltaSink.for_row_data(str(tmp_path / "counts")).with_upsert_keys("word")))
    (env.from_collection([Row(word=w, count=n) for w, n in changes], COUNT)
        .key_by("word").process(Latest(), output_type=COUNT)
        .sink_to(DeltaSink.for_row_data(str(tmp_path / "latest")).with_upsert_keys("word")))
    env.execute("rolling counts")
    assert DeltaTable(str(tmp_path / "counts")).version() == before
    assert rows(tmp_path / "counts", "word", "count") == sorted(collections.Counter(words).items())


# ---- kills between the merge and the checkpoint record ------------------------------------------

def upsert_args(folder) -> list[str]:
    return ["--input", str(folder / "in"), "--totals", str(folder / "totals"), "--latest", str(folder / "latest")]


def test_kills_after_the_merge_and_during_the_record_then_restore_leave_each_keys_row(spark, tmp_path):
    """kill -9 of the driver after an epoch's merge (after-sink-commit) and while its checkpoint
    record is written (during-checkpoint-record), each run restoring the latest checkpoint and
    replaying the epoch whose merge is already in the table; then a run to the end. Each word's
    row is what a single run leaves, each checkpoint merged once."""
    events = write_input(tmp_path / "in", seed=36)
    outcomes = []
    for i, (point, epoch) in enumerate([("after-sink-commit", 1), ("during-checkpoint-record", 2),
                                        ("after-sink-commit", 2), ("during-checkpoint-record", 3)]):
        outcome = kill_at(tmp_path, point, epoch, i > 0, job=JOB, args=upsert_args(tmp_path))
        outcomes.append(f"{point}@{epoch}: {outcome}")
        if i == 0:      # the first kill: epoch 1's merge is in the tables, its record is not
            seen = collections.Counter(w for w, _ in first_lines(tmp_path / "in", 2 * LINES_PER_EPOCH))
            assert rows(tmp_path / "totals", "word", "count") == sorted(seen.items()), outcomes
    assert all("killed" in o for o in outcomes), outcomes
    run_job(JOB, upsert_args(tmp_path), warehouse=str(tmp_path / "warehouse"), master="local[2]", quiet=True,
            max_records_per_split=LINES_PER_EPOCH, restore_from="latest")
    totals = collections.Counter(w for w, _ in events)
    assert rows(tmp_path / "totals", "word", "count") == sorted(totals.items()), outcomes
    assert rows(tmp_path / "latest", "word", "count") == sorted((w, n) for w, n in totals.items() if n % 7), outcomes
    assert len(rows(tmp_path / "latest", "word")) < len(totals)        # some keys were retracted
    for name in ("totals", "latest"):
        (app,) = {json.loads(line)["txn"]["appId"] for log in glob.glob(str(tmp_path / name / "_delta_log" / "*.json"))
                  for line in open(log) if '"txn"' in line}
        versions = txn_versions(tmp_path / name, app)
        assert versions == sorted(set(versions)), (name, versions)    # no checkpoint merged twice


def test_a_merge_that_a_compaction_overtook_is_read_and_merged_again(tmp_path, monkeypatch):
    """`sluice maintain` compacts the table between the merge's read and its commit: delta-rs
    refuses the stale commit (no row twice, none lost) and the merge runs again on the new version."""
    import runtime.connectors.delta.committer as delta
    from runtime.storage.maintenance import compact_files
    table = str(tmp_path / "counts")
    for i in range(4):
        write_deltalake(table, pa.table({"word": [f"w{i}"], "count": pa.array([i], pa.int64())}), mode="append")
    real, calls = delta._merge, []

    def overtaken(dt, *args):
        calls.append(dt.version())
        if len(calls) == 1:
            assert compact_files(DeltaTable(table), None, 1 << 20) == (4, 1)
        return real(dt, *args)

    monkeypatch.setattr(delta, "_merge", overtaken)
    w = writer(table)
    w.write([Row(word="w1", count=10), Row(word="w9", count=9), Row.of_kind(RowKind.DELETE, word="w2", count=2)])
    assert merge_upserts(table, [c["upsert"] for c in w.finish()], ("word",), "app", 1)
    assert calls == [3, 4]
    assert rows(table, "word", "count") == [("w0", 0), ("w1", 10), ("w3", 3), ("w9", 9)]
    assert DeltaTable(table).transaction_version("app") == 1
