"""The Delta sink into column-mapped tables delta-spark made (``delta.columnMapping.mode`` name and
id), with renamed, dropped and added columns: appends and upserts land in the physical columns the
table's schema names (files carry physical names and field ids, as delta-spark writes them), and
read back right through Spark SQL and delta-rs. Before the physical names were written, an append
failed in delta-rs's commit (``TypeError: '<' not supported between instances of 'NoneType' and
'str'``, its statistics keyed by names the table does not have)."""
from __future__ import annotations

import gc
import os
from types import SimpleNamespace
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder

from runtime.common import Row, RowKind, Types
from runtime.connectors.base import CommitterContext
from runtime.connectors.delta import DeltaCommitter, DeltaSinkWriter
from runtime.connectors.delta.protocol import delta_rs_can_write
from runtime.datastream.connectors import DeltaSink
from runtime.storage.delta_log import DeltaLog
from runtime.task.sink_writer import WriterInitContext
from runtime_env import delta_env

ROW = Types.ROW_NAMED(["word", "total", "extra"], [Types.STRING(), Types.LONG(), Types.STRING()])


def mapped_table(spark, path, mode, partitioned=False):
    """A table delta-spark made with ``mode`` column mapping (versions 0-4): two rows, then
    ``count`` renamed to ``total``, ``note`` dropped and ``extra`` added, so its columns' physical
    names are no longer their names."""
    part = " PARTITIONED BY (day)" if partitioned else ""
    day = ", day STRING" if partitioned else ""
    spark.sql(f"CREATE TABLE delta.`{path}` (word STRING, count BIGINT, note STRING{day}) USING delta{part} "
              f"TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}')")
    values = ", 'd1'" if partitioned else ""
    spark.sql(f"INSERT INTO delta.`{path}` VALUES ('a', 1, 'x'{values}), ('b', 2, 'y'{values})")
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN count TO total")
    spark.sql(f"ALTER TABLE delta.`{path}` DROP COLUMN note")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (extra STRING)")


def spark_rows(spark, path, *columns) -> list[tuple]:
    spark.catalog.clearCache()
    return sorted(tuple(r) for r in spark.sql(f"SELECT {', '.join(columns)} FROM delta.`{path}`").collect())


def delta_rs_rows(path, *columns) -> list[tuple]:
    """The rows as delta-rs's query engine reads them (its ``to_pyarrow_table`` ignores column
    mapping: it reads every column of these tables as nulls, Spark's own rows too)."""
    dt = DeltaTable(path)
    query = f"SELECT {', '.join(columns)} FROM t"
    out = sorted(tuple(r.values()) for r in pa.table(QueryBuilder().register("t", dt).execute(query).read_all()).to_pylist())
    del dt
    gc.collect()        # delta-rs's filesystem handler, dropped before exit (delta-io/delta-rs#2184)
    return out


def sink_commit(path, records, version, sink=None, input_type=ROW):
    """One epoch of the sink driven by hand: a writer's files, committed as checkpoint ``version``."""
    sink = sink or DeltaSink.for_row_data(path)
    writer = DeltaSinkWriter(sink, WriterInitContext("Sink: Delta Sink", 0, 1, version, 0, input_type=input_type))
    writer.write(records)
    result = SimpleNamespace(sink_files={})     # the run's result, as far as a committer fills it
    return DeltaCommitter(sink, CommitterContext("job", 1, "op", "sluice-job-sink", result, input_type=input_type)
                          ).commit([writer.finish()], version)


def physical_names(path) -> dict:
    """{logical column: (physical name, field id)} of the table's schema."""
    _, metadata = DeltaLog(path).protocol_and_metadata()
    return {f["name"]: (f["metadata"]["delta.columnMapping.physicalName"], f["metadata"]["delta.columnMapping.id"])
            for f in metadata.fields}


def added_files(path, version) -> list[str]:
    """The data files commit ``version`` added."""
    return [os.path.join(path, unquote(a["add"]["path"])) for a in DeltaLog(path).commit(version) if "add" in a]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_appends_land_in_the_physical_columns_of_renamed_and_added_columns(dspark, tmp_path, mode):
    path = str(tmp_path / "t")
    mapped_table(dspark, path, mode)
    protocol, metadata = DeltaLog(path).protocol_and_metadata()
    assert delta_rs_can_write(protocol, metadata) is None
    sink_commit(path, [Row(word="c", total=3, extra="new"), Row(word="d", total=4, extra=None)], 1)
    expected = [("a", 1, None), ("b", 2, None), ("c", 3, "new"), ("d", 4, None)]
    assert spark_rows(dspark, path, "word", "total", "extra") == expected
    assert delta_rs_rows(path, "word", "total", "extra") == expected
    # The file holds the physical names and field ids (the logical names are nowhere in it).
    names = physical_names(path)
    (written,) = added_files(path, 5)
    schema = pq.read_schema(written)
    assert schema.names == [names["word"][0], names["total"][0], names["extra"][0]]
    assert [int(f.metadata[b"PARQUET:field_id"]) for f in schema] == [names[c][1] for c in ("word", "total", "extra")]
    # Its statistics are keyed by the physical names too: Spark skips files by them.
    assert dspark.sql(f"SELECT word FROM delta.`{path}` WHERE total > 3").collect()[0].word == "d"
    # A replayed commit is a no-op.
    sink_commit(path, [Row(word="c", total=3, extra="new")], 1)
    assert spark_rows(dspark, path, "word", "total", "extra") == expected


def test_a_partitioned_mapped_table_takes_appends_under_its_physical_partition_column(dspark, tmp_path):
    path = str(tmp_path / "t")
    mapped_table(dspark, path, "name", partitioned=True)
    row = Types.ROW_NAMED(["word", "total", "day", "extra"], [Types.STRING(), Types.LONG(), Types.STRING(),
                                                              Types.STRING()])
    sink_commit(path, [Row(word="c", total=3, day="d2", extra="e"), Row(word="d", total=4, day="d1", extra=None)],
                1, input_type=row)
    expected = [("a", 1, "d1", None), ("b", 2, "d1", None), ("c", 3, "d2", "e"), ("d", 4, "d1", None)]
    assert spark_rows(dspark, path, "word", "total", "day", "extra") == expected
    assert delta_rs_rows(path, "word", "total", "day", "extra") == expected
    assert dspark.sql(f"SELECT word FROM delta.`{path}` WHERE day = 'd2'").collect()[0].word == "c"


@pytest.mark.parametrize("mode", ["name", "id"])
def test_upserts_update_and_insert_through_renamed_columns(dspark, tmp_path, mode):
    path = str(tmp_path / "t")
    mapped_table(dspark, path, mode)
    sink = DeltaSink.for_row_data(path).with_upsert_keys("word")
    sink_commit(path, [Row(word="a", total=10, extra="upd"), Row(word="c", total=3, extra="ins"),
                       Row.of_kind(RowKind.DELETE, word="b", total=0, extra=None)], 1, sink=sink)
    expected = [("a", 10, "upd"), ("c", 3, "ins")]
    assert spark_rows(dspark, path, "word", "total", "extra") == expected
    assert delta_rs_rows(path, "word", "total", "extra") == expected
    sink_commit(path, [Row(word="a", total=99, extra="again")], 1, sink=sink)      # replayed: a no-op
    assert spark_rows(dspark, path, "word", "total", "extra") == expected


def test_a_checkpointed_job_appends_and_upserts_into_mapped_tables(dspark, tmp_path):
    appended, upserted = str(tmp_path / "appended"), str(tmp_path / "upserted")
    mapped_table(dspark, appended, "name")
    mapped_table(dspark, upserted, "id")
    env = delta_env(tmp_path, 2, **{"sluice.epoch.max-records-per-split": 2})
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    records = [Row(word=w, total=n, extra=f"e{n}") for n, w in enumerate("c d a e".split(), start=3)]
    stream = env.from_collection(records, ROW)
    stream.sink_to(DeltaSink.for_row_data(appended))
    stream.sink_to(DeltaSink.for_row_data(upserted).with_upsert_keys("word"))
    env.execute("mapped sinks")
    assert spark_rows(dspark, appended, "word", "total", "extra") == sorted(
        [("a", 1, None), ("b", 2, None)] + [(r.word, r.total, r.extra) for r in records])
    assert spark_rows(dspark, upserted, "word", "total", "extra") == [
        ("a", 5, "e5"), ("b", 2, None), ("c", 3, "e3"), ("d", 4, "e4"), ("e", 6, "e6")]
    # One commit per checkpoint that had rows, each carrying its own app transaction version.
    for path in (appended, upserted):
        txns = [a["txn"]["version"] for v in range(5, DeltaLog(path).latest_version() + 1)
                for a in DeltaLog(path).commit(v) if "txn" in a]
        assert txns and len(txns) == len(set(txns)) == DeltaLog(path).latest_version() - 4, (path, txns)
