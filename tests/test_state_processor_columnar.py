"""The state processor's columnar paths: a keyed state's DataFrame read by Spark from the state
files (runtime/state_processor/dataframe.py), and a ValueState bootstrapped from columns
(ValueStateBootstrapFunction). Each is checked against the row-at-a-time path it stands in for:
the same state read both ways, the same data bootstrapped both ways, and a job restored from a
columnar bootstrap at another parallelism, on heap and RocksDB.
"""
import os

import pyarrow as pa
import pytest

from checkpoint_harness import write_input
from runtime.common import Types
from runtime.datastream.state import ValueStateDescriptor
from runtime.state.snapshot_format import StateSerializationException
from runtime.state.snapshot_reader import CorruptStateException
from runtime.state_processor import dataframe
from runtime.state_processor.bootstrap import KeyedStateBootstrapFunction, OperatorTransformation, \
    ValueStateBootstrapFunction
from runtime.state_processor.reader import SavepointReader, to_dataframe
from runtime.state_processor.writer import SavepointWriter
from test_state_processor import bootstrapped_running, job_dir, run
from checkpoint_harness import table_rows


def rows_of(df) -> list:
    return sorted((tuple(sorted(r.asDict(recursive=True).items(), key=lambda kv: kv[0])) for r in df.collect()),
                  key=repr)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_keyed_state_read_by_spark_from_the_files_equals_the_arrow_view(spark, tmp_path, backend, monkeypatch):
    write_input(tmp_path / "in", seed=12)
    run(tmp_path, max_epochs=2, backend=backend, incremental=False)
    monkeypatch.setattr(dataframe, "SPARK_READ_ROWS", 0)     # the job's few keys: read by Spark all the same
    reader = SavepointReader.read(job_dir(tmp_path))
    by_spark = []
    for name in ("count", "max_ts", "total", "stamps", "buckets", "last", "window-contents"):
        df = reader.read_keyed_state(spark, "every-state" if name != "window-contents" else "window-counts", name)
        arrow = to_dataframe(spark, reader.keyed_state("every-state" if name != "window-contents" else "window-counts",
                                                       name))
        assert df.dtypes == arrow.dtypes, name
        assert rows_of(df) == rows_of(arrow) and df.count() > 0, name
        if df.inputFiles():
            by_spark.append(name)
    # Every void-namespace state with its values typed is read by Spark; window contents (a
    # namespace per window, decoded to window_start/window_end) by the Arrow view.
    assert by_spark == ["count", "max_ts", "total", "stamps", "buckets", "last"]
    # sluice state --sql's views are those DataFrames.
    reader.register_views(spark, "every-state")
    assert rows_of(spark.sql("SELECT key, value FROM count")) == rows_of(
        to_dataframe(spark, reader.keyed_state("every-state", "count")).select("key", "value"))
    # The files Spark reads are verified against their checksums first.
    state_file = next(f["path"] for f in reader.point.files() if f["operator_id"] == reader.operator(
        "every-state")["operator_id"])
    size = os.path.getsize(state_file)
    with open(state_file, "r+b") as f:
        f.seek(size // 3)       # a data page: the footer reads, the checksum does not match
        f.write(bytes(255 - b for b in f.read(8)))
    with pytest.raises(CorruptStateException, match="differ from the checksum"):
        reader.read_keyed_state(spark, "every-state", "count")
    with open(state_file, "r+b") as f:
        f.seek(size - 4)        # the footer's magic bytes
        f.write(b"XXXX")
    with pytest.raises(CorruptStateException, match="corrupt"):
        reader.read_keyed_state(spark, "every-state", "count")


@pytest.mark.slow
def test_an_incremental_chain_is_read_by_the_arrow_view(spark, tmp_path, monkeypatch):
    write_input(tmp_path / "in", seed=13)
    run(tmp_path, max_epochs=1)
    run(tmp_path, max_epochs=1, restore_from="latest")
    monkeypatch.setattr(dataframe, "SPARK_READ_ROWS", 0)
    reader = SavepointReader.read(job_dir(tmp_path))
    assert any(f.get("increment") for f in reader.point.files())
    df = reader.read_keyed_state(spark, "every-state", "count")
    assert df.inputFiles() == [] and rows_of(df) == rows_of(to_dataframe(spark, reader.keyed_state("every-state",
                                                                                                  "count")))


class SetFrom(KeyedStateBootstrapFunction):
    """The row-at-a-time function a ValueStateBootstrapFunction stands for."""

    def __init__(self, descriptor, column):
        self.descriptor, self.column = descriptor, column

    def open(self, ctx):
        self.state = ctx.get_state(self.descriptor)

    def process_element(self, value, ctx):
        self.state.update(value[self.column])


def bootstrap(tmp_path, name, data, key_type, function, parallelism=3) -> SavepointReader:
    transformation = OperatorTransformation.bootstrap_with(data).key_by("k", key_type=key_type).transform(function)
    path = SavepointWriter.new_savepoint(128).with_operator(
        "op", transformation.set_parallelism(parallelism)).write(str(tmp_path / name))
    return SavepointReader.read(path)


def files_of(reader) -> list:
    return sorted((f["subtask"], f["rows"], f["key_group_min"], f["key_group_max"])
                  for f in reader.operator("op")["files"])


@pytest.mark.parametrize("key_type, keys", [
    # Distinct keys of one hash too ("Aa" and "BB" are one Java hash code, so are "AaBB" and "BBBB").
    (Types.STRING(), [f"key-{i % 700}" for i in range(1000)] + ["Aa", "BB", "AaBB", "BBBB", "Aa", "BBAa"]),
    (Types.INT(), [i % 700 - 300 for i in range(1000)]),            # not text: keys stored pickled
])
@pytest.mark.parametrize("parallelism, found_by_passes", [(3, 8), (3, 1), (1, 8)])
def test_a_columnar_value_state_bootstrap_writes_what_the_function_per_key_writes(tmp_path, key_type, keys,
                                                                                 parallelism, found_by_passes,
                                                                                 monkeypatch):
    # Keys given twice (the last value wins), null values (update(None) clears), Row values; each
    # subtask's rows found by a pass over the rows, or by one sort of them, or every row one
    # subtask's; files of several row groups (each taken from the columns as it is written).
    import pyarrow.parquet as pq
    from runtime.state import snapshot_writer
    from runtime.state_processor import bootstrap as bootstrapping
    monkeypatch.setattr(bootstrapping, "FOUND_BY_PASSES", found_by_passes)
    monkeypatch.setattr(bootstrapping, "ROUTE_SLICE", 150)      # keys hashed by threads, a few slices each
    monkeypatch.setattr(snapshot_writer, "SNAPSHOT_CHUNK", 128)
    n = len(keys)
    data = pa.table({"k": keys, "n": [None if i % 97 == 0 else i for i in range(n)],
                     "row": [{"a": i, "b": str(i)} for i in range(n)]})
    for column, descriptor in (("n", ValueStateDescriptor("count", Types.LONG())),
                               ("row", ValueStateDescriptor("last", Types.ROW_NAMED(["a", "b"], [Types.INT(),
                                                                                            Types.STRING()])))):
        columnar = ValueStateBootstrapFunction(descriptor, column)
        per_key = bootstrap(tmp_path, f"per-key-{column}", data, key_type, SetFrom(descriptor, column), parallelism)
        by_columns = bootstrap(tmp_path, f"columnar-{column}", data, key_type, columnar, parallelism)
        expected = per_key.keyed_state("op", descriptor.name).sort_by("key")
        got = by_columns.keyed_state("op", descriptor.name).sort_by("key")
        assert got.equals(expected), column
        assert files_of(by_columns) == files_of(per_key), column
        last_at = {str(k): i for i, k in enumerate(keys)}
        for f in by_columns.point.files():         # each file's rows in the data's order
            at = [last_at[k] for k in pq.read_table(f["path"], columns=["key"]).column("key").to_pylist()]
            assert at == sorted(at) and len(at) == f["rows"], column
            assert pq.read_metadata(f["path"]).num_row_groups == -(-f["rows"] // 128), column
        last = {}
        for k, v in zip(keys, data.column(column).to_pylist()):
            last[k] = v
        assert {r["key"]: r["value"] for r in got.to_pylist()} == {
            str(k) if key_type == Types.STRING() else k: v for k, v in last.items() if v is not None}


def test_a_column_that_does_not_fit_the_state_type_is_refused_naming_both(tmp_path):
    data = pa.table({"k": ["a", "b"], "n": ["one", "two"]})
    with pytest.raises(StateSerializationException, match=r"'count' is declared as .*Long.* string"):
        bootstrap(tmp_path, "bad", data, Types.STRING(),
                  ValueStateBootstrapFunction(ValueStateDescriptor("count", Types.LONG()), "n"))
    with pytest.raises(KeyError, match="no column 'nope'.*k, n"):
        bootstrap(tmp_path, "missing", data, Types.STRING(),
                  ValueStateBootstrapFunction(ValueStateDescriptor("count", Types.LONG()), "nope"))


@pytest.mark.slow
@pytest.mark.parametrize("backend, source, incremental", [("hashmap", "arrow", False), ("rocksdb", "spark", False),
                                                         ("hashmap", "spark", True), ("rocksdb", "arrow", True)])
def test_a_job_restored_from_a_columnar_bootstrap_at_another_parallelism(spark, tmp_path, backend, source,
                                                                         incremental):
    events = write_input(tmp_path / "in", seed=14)
    start = {f"w{i}": 100 * i for i in range(25)}
    extra = 200_000         # keys the input never sees, bootstrapped beside them
    table = pa.table({"word": list(start) + [f"x{i}" for i in range(extra)],
                      "n": list(start.values()) + list(range(extra))})
    data = table if source == "arrow" else spark.createDataFrame(table).repartition(3)
    transformation = (OperatorTransformation.bootstrap_with(data).key_by("word", key_type=Types.STRING())
                      .transform(ValueStateBootstrapFunction(ValueStateDescriptor("count", Types.LONG()), "n")))
    assert transformation.columnar
    path = SavepointWriter.new_savepoint(128).with_operator("every-state", transformation.set_parallelism(4)) \
        .write(str(tmp_path / "savepoint"))
    files = SavepointReader.read(path).operator("every-state")["files"]
    assert sorted(f["subtask"] for f in files) == [0, 1, 2, 3], "a file per subtask, its keys routed to it"
    assert all(f["key_group_min"] >= 32 * f["subtask"] and f["key_group_max"] < 32 * (f["subtask"] + 1) for f in files)
    run(tmp_path, "--parallelism", "3", restore_from=path, max_records_per_split=None, backend=backend,
        incremental=incremental)
    assert table_rows(tmp_path / "running") == bootstrapped_running(events, start)
    counts = SavepointReader.read(job_dir(tmp_path)).keyed_state("every-state", "count")
    got = dict(zip(counts.column("key").to_pylist(), counts.column("value").to_pylist()))
    assert len(got) == len(start) + extra
    assert all(got[f"x{i}"] == i for i in range(0, extra, 101))


def test_a_string_column_hashes_as_each_key_does_one_at_a_time():
    # The columnar bootstrap routes a key column with key_by's hash: bit for bit the scalar one.
    from runtime.state.key_groups import assign_key_groups, assign_to_key_group
    words = ["", "a", "word", "ünïcødé", "日本語", "emoji 🙂", "k" * 300] + [f"k{i}" for i in range(1000)]
    for array in (pa.array(words), pa.array(words, pa.large_string()), pa.chunked_array([words[:3], words[3:]])):
        assert assign_key_groups(array, 128, Types.STRING()).tolist() == [
            assign_to_key_group(w, 128, Types.STRING()) for w in words]
    with pytest.raises(ValueError, match="must not be null"):
        assign_key_groups(pa.array(["a", None]), 128, Types.STRING())


def old_layout_value_state(directory, groups, keys: pa.Array, values: pa.Array):
    """A value state's file as write_value_state wrote it before it left out its null columns
    (every base column, the state name plain): the layout of checkpoints written until then."""
    from runtime.state.snapshot_format import state_rows, types_metadata
    from runtime.state.snapshot_writer import write_state_file
    n = len(keys)
    table = state_rows(n, 0, "count", {"key_group": pa.array(groups, pa.int32()), "namespace": pa.nulls(n, pa.string()),
                                       "key": keys, "key_bytes": pa.nulls(n, pa.binary()), "value_count": values})
    return write_state_file(table.replace_schema_metadata(types_metadata({"count": Types.LONG()})), str(directory),
                            "op", 0)


def test_a_bootstrapped_state_file_leaves_out_its_null_columns_and_reads_as_the_old_layout(spark, tmp_path,
                                                                                          monkeypatch):
    import pyarrow.parquet as pq
    from runtime.state.key_groups import assign_key_groups
    from runtime.state.snapshot_format import BASE_SCHEMA
    from runtime.state.snapshot_reader import read_state_file, read_state_parts, table_to_snapshot
    from runtime.state.snapshot_writer import write_value_state
    from state_helpers import ALL, keyed_backend
    keys = pa.array([f"k{i}" for i in range(250_000)] + ["ünïcødé"])
    values = pa.array(range(len(keys)), pa.int64())
    groups = assign_key_groups(keys, 128, Types.STRING())
    new = write_value_state("count", Types.LONG(), groups, keys, values, str(tmp_path / "new"), "op", 0, "op")
    old = old_layout_value_state(tmp_path / "old", groups, keys, values)
    stored = pq.read_schema(new.path)
    assert stored.names == ["subtask", "key_group", "state_name", "key", "value_count"]
    assert pa.types.is_dictionary(stored.field("state_name").type)
    assert pq.read_schema(old.path).names == BASE_SCHEMA.names + ["value_count"]
    assert new.schema.names == pq.read_schema(old.path).names, "the state table's schema is the same"
    # Read whole, or a row group at a time as a restore reads: the same rows in either layout.
    assert read_state_file(new.path, checksum=new.checksum).equals(read_state_file(old.path, checksum=old.checksum))
    for kind in ("hashmap", "rocksdb"):
        restored = []
        for f in (new, old):
            backend = keyed_backend(kind, tmp_path / f"{kind}-{len(restored)}")
            backend.key_type = Types.STRING()      # as the job's key_by declares it
            state = backend.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
            backend.restore(table_to_snapshot(read_state_parts(f.path, ALL, f.checksum))["keyed"])
            got = {}
            for i in (0, 1, 4_999, 249_999, 250_000):
                backend.set_current_key(keys[i].as_py())
                got[i] = state.value()
            restored.append(got)
            backend.dispose()
        assert restored[0] == restored[1] == {i: i for i in (0, 1, 4_999, 249_999, 250_000)}, kind
    # Spark reads both layouts' files itself, and gets what the Arrow view gets.
    monkeypatch.setattr(dataframe, "SPARK_READ_ROWS", 0)
    frames = [dataframe.read_keyed_state_files(spark, [{"path": f.path, "checksum": f.checksum}], "count")
              for f in (new, old)]
    assert frames[0].dtypes == frames[1].dtypes == [("key_group", "int"), ("key", "string"), ("namespace", "string"),
                                                    ("value", "bigint")]
    expected = sorted(zip(groups.tolist(), keys.to_pylist(), values.to_pylist()))
    for df in frames:
        assert sorted((r["key_group"], r["key"], r["value"]) for r in df.collect()) == expected
        assert df.where("namespace IS NOT NULL").count() == 0


@pytest.mark.parametrize("given, expected", [
    ({}, "-XX:+UseSerialGC -Xms64m -XX:+TieredCompilation"),
    ({"spark.driver.extraJavaOptions": "-Xms1g"}, "-XX:+UseSerialGC -XX:+TieredCompilation -Xms1g"),
    # The caller's own choice of compiler comes last, and wins.
    ({"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"},
     "-XX:+UseSerialGC -Xms64m -XX:+TieredCompilation -XX:TieredStopAtLevel=1"),
])
def test_the_session_state_is_read_in_compiles_with_c2_where_a_local_session_takes_c1_alone(given, expected,
                                                                                          monkeypatch):
    from runtime.execution.spark import CLASS_ARCHIVE_ENV, DRIVER_JAVA_OPTIONS, JVM_OPTION_VARIABLES, \
        with_local_jvm_options
    from runtime.state_processor import session
    for variable in (*JVM_OPTION_VARIABLES, CLASS_ARCHIVE_ENV):
        monkeypatch.delenv(variable, raising=False)
    started, before = [], dict(given)
    monkeypatch.setattr(session, "get_spark_session", lambda master, name, settings: started.append(settings))
    session.state_processor_session(settings=given)
    settings = started[0]
    with_local_jvm_options(settings)        # what get_spark_session adds for a local session
    assert settings[DRIVER_JAVA_OPTIONS] == expected
    assert given == before                  # the caller's settings as they were


def test_the_last_row_of_each_key_given_twice_is_kept_keys_arrow_groups_or_not():
    # Candidates share a hash (as "Aa" and "BB" do): grouped by Arrow (text), or compared one at
    # a time (struct keys, which Arrow does not group).
    import numpy as np
    from runtime.state_processor.bootstrap import _last_of_each_key
    hashes = np.array([7, 7, 7, 9, 7, 1], np.int32)
    for keys in (pa.array(["a", "b", "a", "c", "b", "d"]),
                 pa.array([{"x": 1}, {"x": 2}, {"x": 1}, {"x": 3}, {"x": 2}, {"x": 4}])):
        keep = _last_of_each_key(hashes, lambda at, keys=keys: keys.take(pa.array(at)))
        assert keep.tolist() == [False, False, True, True, True, True], keys.type
    assert _last_of_each_key(np.array([1, 2, 3], np.int32), None) is None     # no hash twice: nothing to drop
