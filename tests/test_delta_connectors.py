"""Delta source and sink on real Delta tables (delta-rs) in tmp_path, jobs on real Spark.

Expected rows are written out in each test.
"""
from __future__ import annotations

import gc
import glob
import json
import os
import threading
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from runtime.common import Row, Types, WatermarkStrategy
from runtime.connectors.base import EnumeratorContext
from runtime.connectors.delta import (
    DeltaSinkWriter, DeltaSourceEnumerator, DeltaSourceReader, commit_sink_files)
from runtime.datastream.connectors import DeltaSink, DeltaSource
from runtime.task.task_context import TaskContext
from runtime.task.task_info import TaskInfo
from runtime.task.sink_writer import WriterInitContext
from runtime_env import delta_env


def read_rows(path, key=None) -> list[dict]:
    dt = DeltaTable(str(path))
    rows = dt.to_pyarrow_table().to_pylist()
    # delta-rs's filesystem handler can abort the interpreter at exit if it is still alive then
    # (delta-io/delta-rs#2184): drop it now.
    del dt
    gc.collect()
    return sorted(rows, key=key) if key else rows


def task_ctx(subtask=0, parallelism=1) -> TaskContext:
    return TaskContext(TaskInfo("Delta Source", subtask, parallelism, 128, 0), 1_700_000_000_000, {})


def writer_ctx(subtask=0, parallelism=1, input_type=None) -> WriterInitContext:
    return WriterInitContext("Sink: Delta Sink", subtask, parallelism, 0, 1_700_000_000_000, input_type=input_type)


def people_table(path):
    write_deltalake(str(path), pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["ann", "bob", "cy"],
                                          "score": [1.5, 2.5, None]}))                    # version 0
    write_deltalake(str(path), pa.table({"id": pa.array([4, 5], pa.int64()), "name": ["dee", "eve"],
                                          "score": [4.0, 5.0]}), mode="append")          # version 1


# ---- sink: files and commits -------------------------------------------------------------

def test_an_epoch_commits_in_one_transaction_and_a_replayed_commit_is_a_no_op(tmp_path):
    table = str(tmp_path / "out")
    sink = DeltaSink.for_row_data(table)
    handles = []
    for subtask, records in enumerate([[Row(word="a", n=1), Row(word="b", n=2)], [Row(word="c", n=3)], []]):
        writer = DeltaSinkWriter(sink, writer_ctx(subtask, 3))
        writer.write(records)
        handles += writer.finish()
    assert len(handles) == 2                            # one file per subtask with records, none for empty
    assert sorted(h["num_records"] for h in handles) == [1, 2]
    assert all(h["path"].startswith("part-") and h["path"].endswith(".parquet") for h in handles)

    assert commit_sink_files(table, handles, None, "sluice-job-sink", 1) is True
    dt = DeltaTable(table)
    assert dt.version() == 0 and dt.transaction_version("sluice-job-sink") == 1
    assert len(dt.file_uris()) == 2                     # both files in the one commit
    del dt
    assert commit_sink_files(table, handles, None, "sluice-job-sink", 1) is False     # the replay
    assert DeltaTable(table).version() == 0
    assert read_rows(table, key=lambda r: r["n"]) == [
        {"word": "a", "n": 1}, {"word": "b", "n": 2}, {"word": "c", "n": 3}]

    writer = DeltaSinkWriter(sink, writer_ctx())
    writer.write([Row(word="d", n=4)])
    more = writer.finish()
    assert commit_sink_files(table, more, None, "sluice-job-sink", 2) is True
    assert commit_sink_files(table, more, None, "sluice-job-sink", 2) is False
    assert commit_sink_files(table, [], None, "sluice-job-sink", 3) is False        # nothing to commit
    dt = DeltaTable(table)
    assert dt.version() == 1 and dt.transaction_version("sluice-job-sink") == 2
    del dt
    assert [r["word"] for r in read_rows(table, key=lambda r: r["n"])] == ["a", "b", "c", "d"]


def test_records_become_columns_tuples_as_f0_f1_dicts_by_key_values_as_f0(tmp_path):
    cases = {
        "tuples": ([("x", 1), ("y", None)], [{"f0": "x", "f1": 1}, {"f0": "y", "f1": None}]),
        "dicts": ([{"k": "x", "v": 1.5}, {"k": "y"}], [{"k": "x", "v": 1.5}, {"k": "y", "v": None}]),
        "values": (["p", "q"], [{"f0": "p"}, {"f0": "q"}]),
        "nested": ([Row(id=1, tags=["a", "b"], pos=Row(x=1, y=2))],
                   [{"id": 1, "tags": ["a", "b"], "pos": {"x": 1, "y": 2}}]),
    }
    for name, (records, expected) in cases.items():
        table = str(tmp_path / name)
        writer = DeltaSinkWriter(DeltaSink.for_row_data(table), writer_ctx())
        writer.write(records)
        assert commit_sink_files(table, writer.finish(), None, "app", 1)
        assert read_rows(table) == expected, name


def test_partitioned_sink_and_appending_to_an_existing_table_casts_to_its_schema(tmp_path):
    table = str(tmp_path / "events")
    write_deltalake(table, pa.table({"country": ["nl"], "clicks": pa.array([7], pa.int32())}),
                    partition_by=["country"])
    writer = DeltaSinkWriter(DeltaSink.for_row_data(table, partition_by=["country"]), writer_ctx())
    writer.write([Row(country="nl", clicks=1), Row(country="a b/c", clicks=2), Row(country=None, clicks=3),
                  Row(country="nl", clicks=4)])
    handles = writer.finish()
    assert sorted((h["partition_values"]["country"], h["num_records"]) for h in handles
                  if h["partition_values"]["country"]) == [("a b/c", 1), ("nl", 2)]
    assert commit_sink_files(table, handles, None, "app", 1)
    dt = DeltaTable(table)
    assert pa.schema(dt.schema().to_arrow()).field("clicks").type == pa.int32()
    del dt
    assert read_rows(table, key=lambda r: r["clicks"]) == [
        {"country": "nl", "clicks": 1}, {"country": "a b/c", "clicks": 2}, {"country": None, "clicks": 3},
        {"country": "nl", "clicks": 4}, {"country": "nl", "clicks": 7}]
    # A record with a field the table lacks is refused with the table's columns named.
    writer.write([Row(country="nl", clicks=1, extra="x")])
    with pytest.raises(ValueError, match="extra"):
        writer.finish()


def test_a_job_sinks_rows_to_a_delta_table_one_commit_per_epoch(spark, tmp_path):
    table = str(tmp_path / "scores")
    data = [Row(name=n, score=s) for n, s in [("ann", 3), ("bob", 5), ("cy", 7), ("dee", 9), ("eve", 11)]]
    env = delta_env(tmp_path, 2, **{"sluice.epoch.max-records-per-split": 2})
    (env.from_collection(data, Types.ROW_NAMED(["name", "score"], [Types.STRING(), Types.LONG()]))
        .map(lambda r: Row(name=r.name, score=r.score * 10),
             output_type=Types.ROW_NAMED(["name", "score"], [Types.STRING(), Types.LONG()]))
        .sink_to(DeltaSink.for_row_data(table)))
    result = env.execute("scores to delta")
    assert len(result.epochs) == 3          # 5 records, 2 per epoch
    assert read_rows(table, key=lambda r: r["name"]) == [
        {"name": "ann", "score": 30}, {"name": "bob", "score": 50}, {"name": "cy", "score": 70},
        {"name": "dee", "score": 90}, {"name": "eve", "score": 110}]
    dt = DeltaTable(table)
    assert dt.version() == 2                # one commit per epoch
    (handles,) = result.sink_files.values()
    assert sorted(os.path.basename(u) for u in dt.file_uris()) == sorted(os.path.basename(h["path"]) for h in handles)
    (app_id,) = {json.loads(line)["txn"]["appId"]
                 for log in glob.glob(os.path.join(table, "_delta_log", "*.json"))
                 for line in open(log) if '"txn"' in line}
    assert app_id.startswith("sluice-scores-to-delta-")   # without checkpoints: per run
    assert dt.transaction_version(app_id) == 3     # epoch numbers + 1


def test_each_checkpoint_records_the_version_its_sink_commit_made_while_others_write(spark, tmp_path):
    """A checkpoint's record names the sink table's version holding its commit (Assets announce
    it), found from the process's kept handle: also when another writer commits between epochs."""
    from runtime.checkpoint.storage import CheckpointStorage
    table = str(tmp_path / "scores")
    write_deltalake(table, pa.table({"name": ["zed"], "score": pa.array([0], pa.int64())}))
    seen = []

    def another_writer(r):              # runs in the epoch's task: a commit by someone else
        if r.score == 30:
            write_deltalake(table, pa.table({"name": ["other"], "score": pa.array([-1], pa.int64())}), mode="append")
        return r

    env = delta_env(tmp_path, 1, **{"sluice.epoch.max-records-per-split": 2})
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    SCORE = Types.ROW_NAMED(["name", "score"], [Types.STRING(), Types.LONG()])
    (env.from_collection([Row(name=n, score=s) for n, s in [("ann", 10), ("bob", 20), ("cy", 30), ("dee", 40)]], SCORE)
        .map(another_writer, output_type=SCORE)
        .sink_to(DeltaSink.for_row_data(table)))
    env.execute("scores checkpointed")
    records = CheckpointStorage(str(tmp_path / "warehouse" / "scores-checkpointed")).checkpoints.completed()
    for record in records:
        if table not in record.table_versions:
            continue
        version = record.table_versions[table]
        txns = [json.loads(line)["txn"] for line in open(os.path.join(table, "_delta_log", f"{version:020d}.json"))
                if '"txn"' in line]
        seen.append((record.checkpoint_id, [t["version"] for t in txns]))
    assert len(seen) == 2 and all(txn == [checkpoint] for checkpoint, txn in seen)
    assert DeltaTable(table).version() == 3     # the first table, the other writer's and two epochs' commits
    assert sorted(r["name"] for r in read_rows(table)) == ["ann", "bob", "cy", "dee", "other", "zed"]


# ---- sink: the stream's declared type ------------------------------------------------------

def table_schema(path) -> pa.Schema:
    dt = DeltaTable(str(path))
    schema = pa.schema(dt.schema().to_arrow())
    del dt
    gc.collect()
    return schema


def write_typed(table, records, type_info, subtask=0):
    """One subtask's epoch through the writer, committed as the committer does."""
    writer = DeltaSinkWriter(DeltaSink.for_row_data(table), writer_ctx(subtask, input_type=type_info))
    writer.write(records)
    return writer.finish()


PEOPLE = Types.ROW_NAMED(["name", "age", "height", "member", "born", "tags"],
                         [Types.STRING(), Types.INT(), Types.FLOAT(), Types.BOOLEAN(), Types.LOCAL_DATE(),
                          Types.LIST(Types.STRING())])


def test_a_declared_row_is_the_tables_schema_float_as_32_bits(tmp_path):
    import datetime
    table = str(tmp_path / "people")
    handles = write_typed(table, [Row(name="ann", age=41, height=1.7, member=True, born=datetime.date(1984, 2, 1),
                                      tags=["a", "b"])], PEOPLE)
    assert commit_sink_files(table, handles, None, "app", 1)
    assert table_schema(table) == pa.schema([
        ("name", pa.string()), ("age", pa.int32()), ("height", pa.float32()), ("member", pa.bool_()),
        ("born", pa.date32()), ("tags", pa.list_(pa.string()))])
    (row,) = read_rows(table)
    assert row == {"name": "ann", "age": 41, "height": pa.scalar(1.7, pa.float32()).as_py(), "member": True,
                   "born": datetime.date(1984, 2, 1), "tags": ["a", "b"]}


def test_a_declared_scalar_type_is_column_f0_of_its_type(tmp_path):
    table = str(tmp_path / "floats")
    assert commit_sink_files(table, write_typed(table, [1, 2.5, None], Types.FLOAT()), None, "app", 1)
    assert table_schema(table) == pa.schema([("f0", pa.float32())])
    assert read_rows(table) == [{"f0": 1.0}, {"f0": 2.5}, {"f0": None}]


def test_a_first_batch_of_nulls_does_not_decide_the_schema(tmp_path):
    """Guessed from the values, a column of nulls only would become a string column, and the
    numbers of later epochs strings cast into it; declared, it has its type from the start."""
    typed, guessed = str(tmp_path / "typed"), str(tmp_path / "guessed")
    t = Types.TUPLE([Types.STRING(), Types.LONG()])
    assert commit_sink_files(typed, write_typed(typed, [("a", None), ("b", None)], t), None, "app", 1)
    assert commit_sink_files(typed, write_typed(typed, [("c", 3)], t), None, "app", 2)
    assert table_schema(typed) == pa.schema([("f0", pa.string()), ("f1", pa.int64())])
    assert read_rows(typed, key=lambda r: r["f0"]) == [{"f0": "a", "f1": None}, {"f0": "b", "f1": None},
                                                      {"f0": "c", "f1": 3}]
    assert commit_sink_files(guessed, write_typed(guessed, [("a", None)], None), None, "app", 1)
    assert table_schema(guessed).field("f1").type == pa.string()        # today's guess, kept for undeclared streams


def test_subtasks_with_and_without_records_agree_on_the_declared_schema(tmp_path):
    table = str(tmp_path / "t")
    t = Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.DOUBLE()])
    handles = write_typed(table, [], t, 0) + write_typed(table, [Row(k="a", v=None)], t, 1) \
        + write_typed(table, [Row(k="b", v=2)], t, 2)           # an int declared DOUBLE is a double
    assert len(handles) == 2
    assert commit_sink_files(table, handles, None, "app", 1)
    assert table_schema(table) == pa.schema([("k", pa.string()), ("v", pa.float64())])
    assert read_rows(table, key=lambda r: r["k"]) == [{"k": "a", "v": None}, {"k": "b", "v": 2.0}]


def test_a_record_that_does_not_fit_the_declared_type_is_named_with_the_sink_and_the_column(tmp_path):
    table = str(tmp_path / "scores")
    t = Types.ROW_NAMED(["name", "score"], [Types.STRING(), Types.LONG()])
    with pytest.raises(TypeError, match=r"Sink: Delta Sink \(1/1\), table .*scores: record Row\(name='bob', "
                                        r"score='many'\) does not fit the stream's declared type "
                                        r"Row\(name: String, score: Long\): column 'score' \(Long\): "):
        write_typed(table, [Row(name="ann", score=1), Row(name="bob", score="many")], t)
    with pytest.raises(TypeError, match=r"record \('cy',\) does not fit .*: \('cy',\) has 1 fields"):
        write_typed(table, [("ann", 1), ("cy",)], t)
    assert not os.path.exists(table)


def test_a_job_writes_its_streams_declared_type(spark, tmp_path):
    """Through the job: the sink's declared type is its input's (a side output's is its tag's);
    the first epoch's nulls do not make the schema; a bad record fails the job naming it."""
    from runtime.datastream import OutputTag
    from runtime.datastream.functions import ProcessFunction
    ratios, names = str(tmp_path / "ratios"), str(tmp_path / "names")
    tag = OutputTag("names", Types.STRING())

    class Split(ProcessFunction):
        def process_element(self, value, ctx):
            yield Row(key=value[0], ratio=value[1])
            yield tag, value[0]

    env = delta_env(tmp_path, 1, **{"sluice.epoch.max-records-per-split": 2})
    stream = env.from_collection([("a", None), ("b", None), ("c", 0.1)],
                                 Types.TUPLE([Types.STRING(), Types.DOUBLE()]))
    out = stream.process(Split(), output_type=Types.ROW_NAMED(["key", "ratio"], [Types.STRING(), Types.FLOAT()]))
    out.sink_to(ratios)
    out.get_side_output(tag).sink_to(names)
    assert len(env.execute("declared").epochs) == 2
    assert table_schema(ratios) == pa.schema([("key", pa.string()), ("ratio", pa.float32())])
    assert read_rows(ratios, key=lambda r: r["key"]) == [
        {"key": "a", "ratio": None}, {"key": "b", "ratio": None}, {"key": "c", "ratio": pa.scalar(0.1, pa.float32()).as_py()}]
    assert table_schema(names) == pa.schema([("f0", pa.string())])

    env = delta_env(tmp_path, 1)
    (env.from_collection(["x", "y"]).map(lambda w: (w, w), output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
        .sink_to(str(tmp_path / "bad")))
    with pytest.raises(Exception, match=r"record \('x', 'x'\) does not fit the stream's declared type "
                                        r"Tuple2<String, Long>: column 'f1' \(Long\)"):
        env.execute("bad record")


# ---- source -------------------------------------------------------------------------------

def test_bounded_source_reads_the_latest_version_or_a_starting_version(spark, tmp_path):
    table = tmp_path / "people"
    people_table(table)
    env = delta_env(tmp_path, 2)
    stream = env.from_source(DeltaSource.for_bounded_row_data(str(table)), WatermarkStrategy.no_watermarks(),
                             "people")
    got = sorted(stream.execute_and_collect("bounded delta"), key=lambda r: r.id)
    assert got == [Row(id=1, name="ann", score=1.5), Row(id=2, name="bob", score=2.5),
                   Row(id=3, name="cy", score=None), Row(id=4, name="dee", score=4.0),
                   Row(id=5, name="eve", score=5.0)]

    env = delta_env(tmp_path, 2)
    stream = env.from_source(DeltaSource.for_bounded_row_data(str(table), columns=["name", "id"],
                                                              starting_version=0),
                             WatermarkStrategy.no_watermarks(), "people v0")
    got = sorted(stream.execute_and_collect("bounded delta v0"), key=lambda r: r.id)
    assert got == [Row(name="ann", id=1), Row(name="bob", id=2), Row(name="cy", id=3)]


def test_bounded_source_offsets_are_rows_of_a_file(tmp_path):
    table = tmp_path / "people"
    people_table(table)
    source = DeltaSource.for_bounded_row_data(str(table), columns=["id"])
    enumerator = DeltaSourceEnumerator(source, EnumeratorContext(parallelism=1, max_records_per_split=2))
    reader = DeltaSourceReader(source, task_ctx())
    epochs = []
    for epoch in range(10):
        plan = enumerator.plan_epoch(epoch)
        states, ids = {}, []
        for split in plan[0]:
            ids += [r.id for values, _ in reader.read(split, 1) for r in values]
            states[split.split_id] = reader.end_state(split)
        enumerator.complete_epoch(states)
        epochs.append(sorted(ids))
        if enumerator.input_ends_with_plan:
            break
    assert enumerator.finished
    # Files of 3 rows (version 0) and 2 rows (version 1), at most 2 rows of each per epoch.
    assert sorted(i for e in epochs for i in e) == [1, 2, 3, 4, 5]
    assert len(epochs) == 2 and sorted(map(len, epochs)) == [1, 4]


def test_continuous_source_reads_versions_committed_while_the_job_runs(spark, tmp_path):
    table = tmp_path / "people"
    people_table(table)
    warehouse = tmp_path / "warehouse"

    def append_after_first_epoch():
        # The epoch log's version 2 is epoch 0's plan (0: the table, 1: the run's start).
        deadline = time.time() + 60
        while time.time() < deadline and not glob.glob(str(warehouse / "*" / "epoch_log" / "_delta_log" / "*2.json")):
            time.sleep(0.01)
        write_deltalake(str(table), pa.table({"id": pa.array([6], pa.int64()), "name": ["fay"],
                                               "score": [6.0]}), mode="append")             # version 2

    appender = threading.Thread(target=append_after_first_epoch, daemon=True)
    appender.start()
    # The append lands between epoch 0 and 1 (or, on a very busy machine, 1 and 2): epoch 2 is
    # the last, and the rows must be read exactly once either way.
    env = delta_env(tmp_path, 2, **{"sluice.epoch.max-epochs": 3, "sluice.epoch.interval": 1000})
    stream = env.from_source(DeltaSource.for_continuous_row_data(str(table), columns=["id", "name"]),
                             WatermarkStrategy.no_watermarks(), "people")
    got = list(stream.execute_and_collect("continuous delta"))
    appender.join(5)
    assert sorted(got, key=lambda r: r.id) == [
        Row(id=1, name="ann"), Row(id=2, name="bob"), Row(id=3, name="cy"), Row(id=4, name="dee"),
        Row(id=5, name="eve"), Row(id=6, name="fay")]


def test_continuous_source_from_a_starting_version_reads_changes_only(tmp_path):
    table = tmp_path / "people"
    people_table(table)
    source = DeltaSource.for_continuous_row_data(str(table), starting_version=1)
    enumerator = DeltaSourceEnumerator(source, EnumeratorContext(parallelism=2))
    reader = DeltaSourceReader(source, task_ctx())

    def epoch(n):
        rows, states = [], {}
        for reads in enumerator.plan_epoch(n).values():
            for split in reads:
                rows += [r for values, _ in reader.read(split, 10) for r in values]
                states[split.split_id] = reader.end_state(split)
        enumerator.complete_epoch(states)
        assert not enumerator.input_ends_with_plan and not enumerator.finished
        return sorted(rows, key=lambda r: r.id)

    assert epoch(0) == [Row(id=4, name="dee", score=4.0), Row(id=5, name="eve", score=5.0)]
    assert epoch(1) == []
    write_deltalake(str(table), pa.table({"id": pa.array([6], pa.int64()), "name": ["fay"], "score": [None]},
                                         schema=pa.schema([("id", pa.int64()), ("name", pa.string()),
                                                           ("score", pa.float64())])), mode="append")
    assert epoch(2) == [Row(id=6, name="fay", score=None)]
    # A restored enumerator continues after the last version it read.
    restored = DeltaSourceEnumerator(source, EnumeratorContext(parallelism=2))
    restored.restore(enumerator.snapshot())
    assert all(not reads for reads in restored.plan_epoch(3).values())
    # Deleting rows is not an append: the continuous source stops with a clear error.
    DeltaTable(str(table)).delete("id = 1")
    with pytest.raises(ValueError, match="removes data"):
        enumerator.plan_epoch(3)


def test_a_missing_table_is_a_clear_error(tmp_path):
    source = DeltaSource.for_bounded_row_data(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="no Delta table"):
        DeltaSourceEnumerator(source, EnumeratorContext(parallelism=1)).plan_epoch(0)


def test_delta_to_delta_job(spark, tmp_path):
    source_table, sink_table = tmp_path / "people", str(tmp_path / "upper")
    people_table(source_table)
    env = delta_env(tmp_path, 2)
    (env.from_source(DeltaSource.for_bounded_row_data(str(source_table), columns=["id", "name"]),
                     WatermarkStrategy.no_watermarks(), "people")
        .filter(lambda r: r.id % 2 == 1)
        .map(lambda r: (r.id, r.name.upper()), output_type=Types.TUPLE([Types.LONG(), Types.STRING()]))
        .sink_to(sink_table))
    env.execute("delta to delta")
    assert read_rows(sink_table, key=lambda r: r["f0"]) == [
        {"f0": 1, "f1": "ANN"}, {"f0": 3, "f1": "CY"}, {"f0": 5, "f1": "EVE"}]
