"""A Delta sink whose stream's declared type does not fit its existing table (a NOT NULL column
the stream lacks, a field of another kind, a field the table does not have) is refused when the
job starts, naming the sink, the table, the column, both types and the fix: never after an
epoch ran (before, the first epoch's task failed on the cast, or a NOT NULL column got nulls)."""
from __future__ import annotations

import os

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from runtime.common import Row, Types
from runtime.common.typeinfo import arrow_type
from runtime.connectors.delta.schema_fit import check_stream_fits, misfit
from runtime.datastream.connectors import DeltaSink
from runtime_env import delta_env

TABLE = pa.schema([pa.field("word", pa.string(), nullable=False), pa.field("count", pa.int32()),
                   pa.field("at", pa.timestamp("us", tz="UTC")),
                   pa.field("tags", pa.list_(pa.string())),
                   pa.field("where", pa.struct([pa.field("city", pa.string(), nullable=False),
                                                pa.field("zip", pa.string())]))])


def refusal(input_type) -> str:
    with pytest.raises(ValueError) as e:
        check_stream_fits("/data/t", TABLE, input_type, "the sink 'Sink: Delta Sink'")
    return str(e.value)


def test_types_whose_values_cast_to_the_tables_fit():
    # A LONG into an int32 column (the cast checks each value), an INSTANT into a timestamp, a
    # nested row with a subset of the struct's nullable fields, any subset of the nullable columns.
    fits = Types.ROW_NAMED(["word", "count", "at", "tags", "where"],
                           [Types.STRING(), Types.LONG(), Types.INSTANT(), Types.LIST(Types.STRING()),
                            Types.ROW_NAMED(["city"], [Types.STRING()])])
    check_stream_fits("/data/t", TABLE, fits, "sink")
    check_stream_fits("/data/t", TABLE, Types.ROW_NAMED(["word"], [Types.STRING()]), "sink")
    # No declared type, or a field declared PICKLED_BYTE_ARRAY: typed by the values as they come.
    check_stream_fits("/data/t", TABLE, None, "sink")
    check_stream_fits("/data/t", TABLE, Types.ROW_NAMED(["word", "count"], [Types.STRING(),
                                                                         Types.PICKLED_BYTE_ARRAY()]), "sink")
    assert misfit(arrow_type(Types.INT()), pa.float64(), "x") is None
    # A BIG_DEC travels as its text, which casts to a decimal column; other text does not fit one.
    check_stream_fits("/data/t", pa.schema([pa.field("price", pa.decimal128(10, 2))]),
                      Types.ROW_NAMED(["price"], [Types.BIG_DEC()]), "sink")
    assert misfit(pa.string(), pa.decimal128(10, 2), "price") is not None


def test_a_field_of_another_kind_is_refused_naming_the_table_the_column_and_both_types():
    message = refusal(Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.STRING()]))
    assert ("the sink 'Sink: Delta Sink' cannot write into the Delta table /data/t: column 'count' is int32 in "
            "the table, but the stream's field is string (declared String)") in message, message
    assert "output_type=" in message and "ALTER TABLE" in message
    message = refusal(Types.ROW_NAMED(["word", "tags"], [Types.STRING(), Types.LIST(Types.LONG())]))
    assert "column 'tags[]' is string in the table, but the stream's field is int64" in message, message
    message = refusal(Types.ROW_NAMED(["word", "where"], [Types.STRING(), Types.ROW_NAMED(["zip"], [Types.STRING()])]))
    assert "struct column 'where' has NOT NULL field(s) ['city'] that the stream's lacks" in message, message


def test_a_missing_not_null_column_and_a_field_the_table_lacks_are_refused():
    message = refusal(Types.ROW_NAMED(["count"], [Types.INT()]))
    assert ("cannot write into the Delta table /data/t: its column(s) ['word'] are NOT NULL and the stream's type "
            in message and "ALTER COLUMN ... DROP NOT NULL" in message), message
    message = refusal(Types.ROW_NAMED(["word", "colour"], [Types.STRING(), Types.STRING()]))
    assert ("the stream's field(s) ['colour'] are not columns of the Delta table /data/t (its columns are "
            "['word', 'count', 'at', 'tags', 'where'])") in message, message


# ---- jobs: refused before the first epoch --------------------------------------------------

COUNT = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.STRING()])


@pytest.mark.parametrize("upsert", [False, True])
def test_a_job_whose_stream_does_not_fit_its_table_is_refused_before_the_first_epoch(spark, tmp_path, upsert):
    table = str(tmp_path / "counts")
    write_deltalake(table, pa.table({"word": ["a"], "count": pa.array([1], pa.int64())}))
    env = delta_env(tmp_path, 1)
    sink = DeltaSink.for_row_data(table)
    (env.from_collection([Row(word="b", count="two")], COUNT)
        .sink_to(sink.with_upsert_keys("word") if upsert else sink))
    with pytest.raises(ValueError, match=r"the sink 'Sink: Delta Sink' cannot write into the Delta table .*counts: "
                                         r"column 'count' is int64 in the table, but the stream's field is string"):
        env.execute("misfit")
    assert DeltaTable(table).version() == 0
    assert not os.path.exists(tmp_path / "warehouse" / "misfit" / "epoch_log")


def test_a_not_null_column_of_a_delta_spark_table_the_stream_lacks_is_refused_before_the_first_epoch(spark, tmp_path):
    if "DeltaSparkSessionExtension" not in (spark.conf.get("spark.sql.extensions", "") or ""):
        pytest.skip("the Spark session has no delta-spark")
    table = str(tmp_path / "orders")
    spark.sql(f"CREATE TABLE delta.`{table}` (id BIGINT NOT NULL, amount DOUBLE) USING delta")
    env = delta_env(tmp_path, 1)
    (env.from_collection([Row(amount=2.5)], Types.ROW_NAMED(["amount"], [Types.DOUBLE()]))
        .sink_to(DeltaSink.for_row_data(table)))
    with pytest.raises(ValueError, match=r"cannot write into the Delta table .*orders: its column\(s\) \['id'\] are "
                                         r"NOT NULL and the stream's type"):
        env.execute("no id")
    assert DeltaTable(table).version() == 0
    assert not os.path.exists(tmp_path / "warehouse" / "no-id" / "epoch_log")
