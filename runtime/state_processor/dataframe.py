"""A keyed state as a DataFrame Spark reads itself from the state files (``spark.read.parquet``
over the operator's files; the state's rows selected by a pushed-down filter on ``state_name``
when the files hold other states too, the namespace, null throughout, not scanned), instead of
rows decoded in the driver and shipped through ``spark.createDataFrame``: the executors read
and decode the columns, the driver only the files' footers.

It applies when the rows are the DataFrame as they stand, which the footers' statistics tell:
the files are one full snapshot (no increment: each key and namespace once), and in the state's
row groups the keys are text (``key_bytes`` null), the namespace is the void one (no window to
decode) and the values are in their typed column (``value`` null) of a type Spark reads as
Arrow gives it. Otherwise, and for a state of fewer rows than ``SPARK_READ_ROWS`` (where
``createDataFrame`` of the Arrow view is the faster one), the caller takes the Arrow view.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import pyarrow as pa
import pyarrow.parquet as pq

from runtime.state.snapshot_format import value_column
from runtime.state.snapshot_reader import read_state_metadata, verify_state_file
from runtime.storage.filesystems import file_uri

# Below this many rows the Arrow view is taken. Written to Spark's noop sink on a loaded machine
# (load 22-37 on 2 cores, 2026-11-28): 100,000 rows read by Spark from the files in 1.3-4.9 s, by
# createDataFrame of the Arrow view in 4.7-6.8 s; 1,000,000 rows in 9-18 s against 35-96 s.
SPARK_READ_ROWS = 100_000
_MUST_BE_NULL = ("key_bytes", "namespace", "value")


def read_keyed_state_files(spark, files: list[dict], name: str):
    """The DataFrame (key_group, key, namespace, value) of keyed state ``name`` in ``files`` (a
    checkpoint's files of one operator: path, checksum, increment), read by Spark; None when
    the state's rows need the driver's decoding, or are too few to be worth a Spark scan."""
    if not files or any(f.get("increment") for f in files):
        return None
    column = value_column(name)
    schemas, rows, every_row = set(), 0, True
    for f in files:
        metadata = read_state_metadata(f["path"])
        schema = metadata.schema.to_arrow_schema().remove_metadata()
        schemas.add(schema)
        counted = _rows_of(metadata, name)
        if counted is None or column not in schema.names or not _spark_reads_alike(schema.field(column).type):
            return None
        rows += counted
        every_row = every_row and counted == metadata.num_rows
    if len(schemas) != 1 or rows < SPARK_READ_ROWS:
        return None
    # The checkpoint's checksums, as the Arrow view verifies them (hashing runs outside the GIL).
    with ThreadPoolExecutor(min(len(files), 4)) as pool:
        list(pool.map(lambda f: verify_state_file(f["path"], f["checksum"]) if f.get("checksum") else None, files))
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema
    # The columns read (state_name only when the files hold other states too), typed as the
    # footers say: given no schema, Spark runs a job to read a footer again for it.
    read = ["key_group", "key", column] + ([] if every_row else ["state_name"])
    fields = [f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f
              for f in map(schemas.pop().field, read)]
    df = spark.read.schema(from_arrow_schema(pa.schema(fields))).parquet(*(file_uri(f["path"]) for f in files))
    if not every_row:
        df = df.where(F.col("state_name") == name)
    # The namespace is null throughout (the statistics said so): not scanned either.
    return df.select("key_group", "key", F.lit(None).cast("string").alias("namespace"), F.col(column).alias("value"))


def _rows_of(metadata: pq.FileMetaData, name: str) -> Optional[int]:
    """The rows of state ``name`` in the file, from its row groups' statistics; None when a row
    group holding them is not of that state alone, or has keys, namespaces or values the
    DataFrame could not take as they are."""
    rows = 0
    for i in range(metadata.num_row_groups):
        group = metadata.row_group(i)
        stats = {group.column(j).path_in_schema: group.column(j).statistics for j in range(group.num_columns)}
        state = stats.get("state_name")
        if state is None or not state.has_min_max:
            return None
        if not state.min <= name <= state.max:
            continue
        # A column the file left out (snapshot_format.with_base_columns) is null throughout.
        if state.min != state.max or any(c in stats and (stats[c] is None or stats[c].null_count != group.num_rows)
                                         for c in _MUST_BE_NULL):
            return None
        rows += group.num_rows
    return rows


def _spark_reads_alike(t: pa.DataType) -> bool:
    """Whether Spark reads a Parquet column of Arrow type ``t`` as createDataFrame types it
    (numbers, text, bytes and their structs, lists and maps; not times, which Spark may read
    as timestamp_ntz)."""
    if pa.types.is_struct(t):
        return all(_spark_reads_alike(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _spark_reads_alike(t.key_type) and _spark_reads_alike(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _spark_reads_alike(t.value_type)
    return pa.types.is_integer(t) and not pa.types.is_unsigned_integer(t) or pa.types.is_floating(t) \
        or pa.types.is_boolean(t) or pa.types.is_string(t) or pa.types.is_large_string(t) \
        or pa.types.is_binary(t) or pa.types.is_large_binary(t)
