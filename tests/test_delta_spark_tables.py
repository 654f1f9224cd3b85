"""DeltaSource over tables delta-spark writes with the features a Spark user turns on: deletion
vectors after DELETE, UPDATE and MERGE, column mapping with renamed, dropped and added columns,
v2 checkpoints, the change data feed; each read by a real Sluice job and compared with what
Spark itself reads (``spark.read.format("delta")``, ``readChangeFeed``). A feature Sluice does
not read fails before the job starts, naming the table and the feature.

The tables are written through the shared ``spark`` fixture (Sluice's session, which loads
delta-spark's jars from .jars/delta); without them the module is skipped.
"""
from __future__ import annotations

import datetime
import glob
import json
import os
import shutil

import pytest

from checkpoint_harness import kill_at
from runtime.common import WatermarkStrategy
from runtime.client import run_job
from runtime.connectors.base import EnumeratorContext
from runtime.connectors.delta import DeltaSourceEnumerator, DeltaSourceReader
from runtime.datastream.connectors import DeltaSource
from runtime.task.task_context import TaskContext
from runtime.task.task_info import TaskInfo
from runtime_env import delta_env

CDF_JOB = os.path.join(os.path.dirname(__file__), "jobs", "change_feed_copy.py")


def _plain(value):
    if isinstance(value, datetime.datetime):        # _commit_timestamp: compared as epoch ms
        return int(value.timestamp() * 1000) if value.tzinfo else value
    return value


def sluice_rows(tmp_path, source, **extra) -> list[tuple]:
    env = delta_env(tmp_path, 2, **extra)
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "delta")
    return sorted((tuple(_plain(v) for v in r) for r in stream.execute_and_collect("read delta")), key=repr)


def spark_rows(spark, path, **options) -> list[tuple]:
    df = spark.read.format("delta").options(**{k: str(v) for k, v in options.items()}).load(path)
    if "_commit_timestamp" in df.columns and df.schema["_commit_timestamp"].dataType.typeName() == "timestamp":
        df = df.selectExpr(*[f"unix_millis(`{c}`) AS `{c}`" if c == "_commit_timestamp" else f"`{c}`"
                             for c in df.columns])
    return sorted((tuple(r) for r in df.collect()), key=repr)


def log_actions(path) -> list[dict]:
    out = []
    for name in sorted(glob.glob(os.path.join(path, "_delta_log", "*.json"))):
        if ".checkpoint." in name:
            continue
        with open(name) as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def read_directly(source, max_records_per_split=None, parallelism=1, epochs=50, enumerator=None):
    """The source's enumerator and reader driven by hand (no Spark): (rows, enumerator)."""
    enumerator = enumerator or DeltaSourceEnumerator(
        source, EnumeratorContext(parallelism=parallelism, max_records_per_split=max_records_per_split))
    enumerator.check()
    reader = DeltaSourceReader(source, TaskContext(TaskInfo("Delta Source", 0, 1, 128, 0), 1_700_000_000_000, {}))
    rows = []
    for epoch in range(epochs):
        states = {}
        for reads in enumerator.plan_epoch(epoch).values():
            for split in reads:
                rows += [tuple(_plain(v) for v in r) for values, _ in reader.read(split, 3) for r in values]
                states[split.split_id] = reader.end_state(split)
        enumerator.complete_epoch(states)
        if enumerator.input_ends_with_plan:
            break
    return rows, enumerator


# ---- deletion vectors -----------------------------------------------------------------------

def test_deletion_vectors_after_delete_update_and_merge_read_as_spark_reads_them(dspark, tmp_path):
    path = str(tmp_path / "dv")
    (dspark.range(40).coalesce(1).selectExpr("id", "cast(id * 10 as string) AS v", "id % 4 AS part")
        .write.format("delta").option("delta.enableDeletionVectors", "true").partitionBy("part").save(path))
    dspark.sql(f"DELETE FROM delta.`{path}` WHERE id % 3 = 0")
    dspark.sql(f"UPDATE delta.`{path}` SET v = 'updated' WHERE id IN (4, 5)")
    dspark.range(1, 50, 7).selectExpr("id", "id % 2 = 0 AS gone").createOrReplaceTempView("merge_source")
    dspark.sql(f"""MERGE INTO delta.`{path}` t USING merge_source s ON t.id = s.id
                   WHEN MATCHED AND s.gone THEN DELETE
                   WHEN MATCHED THEN UPDATE SET v = 'merged'
                   WHEN NOT MATCHED THEN INSERT (id, v, part) VALUES (s.id, 'new', s.id % 4)""")
    # The commits did delete with deletion vectors (not by rewriting files).
    assert any((a.get("add") or {}).get("deletionVector") for a in log_actions(path))
    expected = spark_rows(dspark, path)
    assert len(expected) < 40
    assert sluice_rows(tmp_path, DeltaSource.for_bounded_row_data(path)) == expected
    # Offsets count a file's physical rows: a file read a few rows per epoch skips the deleted ones.
    rows, _ = read_directly(DeltaSource.for_bounded_row_data(path), max_records_per_split=3)
    assert sorted(rows, key=repr) == expected


def test_a_continuous_source_reads_a_snapshot_with_deletion_vectors_then_refuses_a_delete(dspark, tmp_path):
    path = str(tmp_path / "dv")
    (dspark.range(10).coalesce(1).selectExpr("id").write.format("delta")
        .option("delta.enableDeletionVectors", "true").save(path))
    dspark.sql(f"DELETE FROM delta.`{path}` WHERE id < 3")
    source = DeltaSource.for_continuous_row_data(path)
    rows, enumerator = read_directly(source, epochs=2)
    assert sorted(rows) == [(i,) for i in range(3, 10)]
    # A restored enumerator does not read them again; a later append is read, a DELETE is refused.
    restored = DeltaSourceEnumerator(source, EnumeratorContext(parallelism=1))
    restored.restore(enumerator.snapshot())
    dspark.range(100, 102).write.format("delta").mode("append").save(path)
    rows, restored = read_directly(source, epochs=2, enumerator=restored)
    assert sorted(rows) == [(100,), (101,)]
    dspark.sql(f"DELETE FROM delta.`{path}` WHERE id = 5")
    with pytest.raises(ValueError, match="removes data with deletion vectors") as error:
        restored.plan_epoch(10)
    assert path in str(error.value) and "for_change_data_feed" in str(error.value)


def test_deletion_vectors_listed_by_a_classic_checkpoint(dspark, tmp_path):
    path = str(tmp_path / "classic")
    (dspark.range(12).coalesce(1).write.format("delta").option("delta.enableDeletionVectors", "true")
        .option("delta.checkpointInterval", "2").save(path))
    dspark.sql(f"DELETE FROM delta.`{path}` WHERE id % 4 = 1")      # version 1
    dspark.sql(f"DELETE FROM delta.`{path}` WHERE id = 6")          # version 2: a classic checkpoint
    dspark.range(50, 52).write.format("delta").mode("append").save(path)
    assert os.path.exists(os.path.join(path, "_delta_log", "00000000000000000002.checkpoint.parquet"))
    expected = spark_rows(dspark, path)
    assert sorted(read_directly(DeltaSource.for_bounded_row_data(path))[0], key=repr) == expected
    # Time travel to the version before: its own deletion vector.
    assert sorted(read_directly(DeltaSource.for_bounded_row_data(path, starting_version=1))[0], key=repr) == \
        spark_rows(dspark, path, versionAsOf=1)


# ---- column mapping -------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_renamed_dropped_and_added_columns(dspark, tmp_path, mode):
    path = str(tmp_path / f"cm-{mode}")
    (dspark.range(5).selectExpr("id", "cast(id AS string) AS a", "id * 2 AS b",
                                "named_struct('x', id, 'y', cast(id AS string)) AS s")
        .write.format("delta").option("delta.columnMapping.mode", mode).save(path))
    dspark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN a TO renamed")
    dspark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN s.x TO sx")
    dspark.sql(f"ALTER TABLE delta.`{path}` DROP COLUMN b")
    dspark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (b string)")     # a new column named as the dropped one
    dspark.sql(f"INSERT INTO delta.`{path}` VALUES (7, 'seven', named_struct('sx', 70, 'y', 'y7'), 'new b')")
    expected = [tuple(r[:2]) + (tuple(r[2]), r[3]) for r in spark_rows(dspark, path)]
    got = sluice_rows(tmp_path, DeltaSource.for_bounded_row_data(path))
    got = [r[:2] + ((r[2]["sx"], r[2]["y"]) if isinstance(r[2], dict) else tuple(r[2]), r[3]) for r in got]
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    assert (1, "1", (1, "1"), None) in got and (7, "seven", (70, "y7"), "new b") in got
    assert sluice_rows(tmp_path, DeltaSource.for_bounded_row_data(path, columns=["renamed", "id"])) == \
        sorted(((r[1], r[0]) for r in expected), key=repr)


def test_a_partitioned_column_mapped_table_with_deletion_vectors_and_its_change_feed(dspark, tmp_path):
    from deltalake import DeltaTable
    path = str(tmp_path / "all")
    (dspark.range(8).selectExpr("id", "cast(id AS string) AS a", "id % 2 AS p").write.format("delta")
        .option("delta.columnMapping.mode", "name").option("delta.enableDeletionVectors", "true")
        .partitionBy("p").save(path))
    # Renames first (delta-spark refuses writes to a table with a change feed after a RENAME or
    # DROP COLUMN), then the change feed: its change files hold the columns' physical names.
    dspark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN a TO renamed")
    dspark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN p TO parity")
    dspark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    start = DeltaTable(path).version() + 1
    dspark.sql(f"UPDATE delta.`{path}` SET renamed = 'u' WHERE id = 2")
    dspark.sql(f"DELETE FROM delta.`{path}` WHERE id IN (3, 4)")
    dspark.sql(f"INSERT INTO delta.`{path}` VALUES (100, 'x', 0)")
    assert any((a.get("add") or {}).get("deletionVector") for a in log_actions(path))
    assert sluice_rows(tmp_path, DeltaSource.for_bounded_row_data(path)) == spark_rows(dspark, path)
    assert sluice_rows(tmp_path, DeltaSource.for_change_data_feed(path, start, continuous=False)) == \
        spark_rows(dspark, path, readChangeFeed="true", startingVersion=start)


# ---- v2 checkpoints -------------------------------------------------------------------------

def test_v2_checkpoints_with_deletion_vectors_bounded_continuous_and_restored(dspark, tmp_path):
    path = str(tmp_path / "v2")
    (dspark.range(6).coalesce(1).write.format("delta").option("delta.checkpointPolicy", "v2")
        .option("delta.checkpointInterval", "2").option("delta.enableDeletionVectors", "true").save(path))
    dspark.sql(f"DELETE FROM delta.`{path}` WHERE id = 2")
    for i in range(3):
        dspark.range(100 + i, 101 + i).write.format("delta").mode("append").save(path)
    dspark.sql(f"DELETE FROM delta.`{path}` WHERE id = 101")
    dspark.range(200, 201).write.format("delta").mode("append").save(path)
    logs = os.listdir(os.path.join(path, "_delta_log"))
    assert any(".checkpoint." in n and n.endswith(".json") for n in logs) and "_sidecars" in logs
    expected = spark_rows(dspark, path)
    assert sluice_rows(tmp_path, DeltaSource.for_bounded_row_data(path)) == expected
    assert sorted(read_directly(DeltaSource.for_bounded_row_data(path), max_records_per_split=2)[0], key=repr) == expected
    # Continuous: the latest snapshot (from its v2 checkpoint), then appends; a restore resumes.
    source = DeltaSource.for_continuous_row_data(path)
    rows, enumerator = read_directly(source, epochs=2)
    assert sorted(rows, key=repr) == expected
    for i in range(3):      # more v2 checkpoints while the source runs
        dspark.range(300 + i, 301 + i).write.format("delta").mode("append").save(path)
    restored = DeltaSourceEnumerator(source, EnumeratorContext(parallelism=1))
    restored.restore(enumerator.snapshot())
    assert sorted(read_directly(source, epochs=2, enumerator=restored)[0]) == [(300,), (301,), (302,)]


# ---- features Sluice does not read ------------------------------------------------------------

def test_a_reader_feature_sluice_does_not_read_fails_before_the_job_starts(dspark, tmp_path):
    path = str(tmp_path / "variant")
    dspark.sql("SELECT 1 AS id, parse_json('{\"a\": 1}') AS doc").write.format("delta").save(path)
    env = delta_env(tmp_path, 2)
    env.from_source(DeltaSource.for_bounded_row_data(path), WatermarkStrategy.no_watermarks(), "variant").print()
    with pytest.raises(NotImplementedError) as error:
        env.execute("variant")
    assert path in str(error.value) and "variantType" in str(error.value)
    assert not os.path.exists(tmp_path / "warehouse" / "variant" / "checkpoints")


# ---- change data feed -----------------------------------------------------------------------

def cdf_table(spark, path):
    """Versions 0 (6 inserts), 1 (an UPDATE of two rows), 2 (a DELETE), 3 (a MERGE: an update, a
    delete, an insert), 4 (an append), 5 (an OPTIMIZE: no change rows)."""
    (spark.range(6).coalesce(1).selectExpr("id", "cast(id AS string) AS v").write.format("delta")
        .option("delta.enableChangeDataFeed", "true").save(path))
    spark.sql(f"UPDATE delta.`{path}` SET v = concat(v, '!') WHERE id IN (1, 2)")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 3")
    spark.createDataFrame([(4, "four"), (5, None), (10, "ten")], "id long, v string").createOrReplaceTempView("cdf_src")
    spark.sql(f"""MERGE INTO delta.`{path}` t USING cdf_src s ON t.id = s.id
                  WHEN MATCHED AND s.v IS NULL THEN DELETE
                  WHEN MATCHED THEN UPDATE SET v = s.v
                  WHEN NOT MATCHED THEN INSERT *""")
    spark.createDataFrame([(20, "a"), (21, "b")], "id long, v string").coalesce(1).write.format("delta") \
        .mode("append").save(path)
    spark.sql(f"OPTIMIZE delta.`{path}`")


@pytest.mark.parametrize("starting_version", [0, 2])
def test_change_data_feed_as_spark_reads_it(dspark, tmp_path, starting_version):
    path = str(tmp_path / "cdf")
    cdf_table(dspark, path)
    expected = spark_rows(dspark, path, readChangeFeed="true", startingVersion=starting_version)
    kinds = {r[2] for r in expected}
    assert kinds == ({"insert", "update_preimage", "update_postimage", "delete"} if starting_version == 0
                     else {"insert", "update_preimage", "update_postimage", "delete"})
    source = DeltaSource.for_change_data_feed(path, starting_version, continuous=False)
    assert sluice_rows(tmp_path, source) == expected
    assert sorted(read_directly(source, max_records_per_split=1)[0], key=repr) == expected
    columns = DeltaSource.for_change_data_feed(path, starting_version, columns=["id", "_change_type"],
                                               continuous=False)
    assert sluice_rows(tmp_path, columns) == sorted(((r[0], r[2]) for r in expected), key=repr)


def test_a_continuous_change_feed_reads_later_commits_and_restores_where_it_was(dspark, tmp_path):
    path = str(tmp_path / "cdf")
    cdf_table(dspark, path)
    source = DeltaSource.for_change_data_feed(path, 1)
    rows, enumerator = read_directly(source, max_records_per_split=1, epochs=3)
    # Restored mid-way (a few change rows of version 1 read), it reads each change row once.
    restored = DeltaSourceEnumerator(source, EnumeratorContext(parallelism=1, max_records_per_split=1))
    restored.restore(enumerator.snapshot())
    dspark.sql(f"UPDATE delta.`{path}` SET v = 'late' WHERE id = 20")
    more, _ = read_directly(source, max_records_per_split=1, epochs=40, enumerator=restored)
    assert sorted(rows + more, key=repr) == spark_rows(dspark, path, readChangeFeed="true", startingVersion=1)
    # Without a starting version: the latest version's rows as inserts, then the changes.
    latest = DeltaSource.for_change_data_feed(path)
    rows, _ = read_directly(latest, epochs=2)
    version = max(r[3] for r in spark_rows(dspark, path, readChangeFeed="true", startingVersion=0))
    assert sorted(r[:3] + (r[3],) for r in rows) == sorted(
        r + ("insert", version) for r in spark_rows(dspark, path))


def test_a_change_feed_job_killed_and_stopped_resumes_at_the_right_change_exactly_once(dspark, tmp_path):
    table, out = str(tmp_path / "cdf"), str(tmp_path / "copy")
    cdf_table(dspark, table)
    expected = spark_rows(dspark, table, readChangeFeed="true", startingVersion=1)
    args = ["--table", table, "--starting-version", "1", "--out", out]
    # SIGKILLed in the middle of epoch 3 (one change row per split per epoch), then restored.
    assert kill_at(tmp_path, "mid-epoch", 3, False, "--max-records-per-split", "1",
                   job=CDF_JOB, args=args) == "killed"
    result = run_job(CDF_JOB, args, warehouse=str(tmp_path / "warehouse"), master="local[2]", quiet=True,
                     max_records_per_split=1, restore_from="latest")
    assert result.restored_from is not None
    assert spark_rows(dspark, out) == expected
    # Stopped after 2 epochs (max_epochs) and restored from its checkpoint: each change row once.
    shutil.rmtree(tmp_path / "warehouse")
    shutil.rmtree(out)
    stop = run_job(CDF_JOB, args, warehouse=str(tmp_path / "warehouse"), master="local[2]", quiet=True,
                   max_records_per_split=1, max_epochs=2)
    assert 0 < len(spark_rows(dspark, out)) < len(expected)
    run_job(CDF_JOB, args, warehouse=str(tmp_path / "warehouse"), master="local[2]", quiet=True,
            max_records_per_split=1, restore_from="latest")
    assert spark_rows(dspark, out) == expected
    assert stop is not None


def test_type_widening_reads_older_files_under_the_widened_type(dspark, tmp_path):
    path = str(tmp_path / "widened")
    (dspark.sql("SELECT cast(id AS int) AS n, cast(id AS float) AS f FROM range(3)").write.format("delta")
        .option("delta.enableTypeWidening", "true").save(path))
    dspark.sql(f"ALTER TABLE delta.`{path}` CHANGE COLUMN n TYPE bigint")
    dspark.sql(f"ALTER TABLE delta.`{path}` CHANGE COLUMN f TYPE double")
    dspark.sql(f"INSERT INTO delta.`{path}` VALUES (5000000000, 0.1)")
    assert sluice_rows(tmp_path, DeltaSource.for_bounded_row_data(path)) == spark_rows(dspark, path)


def test_every_retained_position_of_a_change_feed_resumes_at_its_change_row(dspark, tmp_path):
    """Positions taken after each epoch (what each checkpoint holds), each restored into a new
    enumerator: the rows before it and the rows after it are the feed, each row once."""
    path = str(tmp_path / "cdf")
    cdf_table(dspark, path)
    expected = spark_rows(dspark, path, readChangeFeed="true", startingVersion=1)
    source = DeltaSource.for_change_data_feed(path, 1, continuous=False)
    enumerator = DeltaSourceEnumerator(source, EnumeratorContext(parallelism=2, max_records_per_split=1))
    reader = DeltaSourceReader(source, TaskContext(TaskInfo("Delta Source", 0, 1, 128, 0), 1_700_000_000_000, {}))
    read, retained, versions = [], [({}, [])], []
    for epoch in range(100):
        states, first = {}, len(read)
        for reads in enumerator.plan_epoch(epoch).values():
            for split in reads:
                read += [tuple(_plain(v) for v in r) for values, _ in reader.read(split, 3) for r in values]
                states[split.split_id] = reader.end_state(split)
        enumerator.complete_epoch(states)
        versions.append({r[3] for r in read[first:]})
        retained.append((enumerator.snapshot(), list(read)))
        if enumerator.input_ends_with_plan:
            break
    assert sorted(read, key=repr) == expected and len(retained) > 5
    # Versions come in order across epochs: no epoch reads a version before one an earlier epoch read.
    versions = [v for v in versions if v]
    assert all(max(a) <= min(b) for a, b in zip(versions, versions[1:])), versions
    for positions, before in retained:
        restored = DeltaSourceEnumerator(source, EnumeratorContext(parallelism=1, max_records_per_split=2))
        if positions:
            restored.restore(positions)
        rest, _ = read_directly(source, max_records_per_split=2, enumerator=restored)
        assert sorted(before + rest, key=repr) == expected


def _z85_encode(data: bytes) -> str:
    from runtime.connectors.delta.deletion_vectors import _Z85
    data += b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i:i + 4], "big")
        out += [_Z85[value // 85 ** k % 85] for k in range(4, -1, -1)]
    return "".join(out)


def test_inline_and_file_deletion_vectors_decode_with_their_checks(tmp_path):
    import struct
    import zlib

    import pyarrow.fs as pafs
    from pyroaring import BitMap

    from runtime.connectors.delta.deletion_vectors import DV_MAGIC, deleted_rows, dv_file, z85_decode

    # Two 32-bit bitmaps: rows 1, 3 and 70,000 run of 5,000 in the low one, one row past 2**32.
    low = BitMap([1, 3] + list(range(70_000, 75_000)))
    low.run_optimize()
    high = BitMap([7])
    data = (struct.pack("<iq", DV_MAGIC, 2) + struct.pack("<i", 0) + low.serialize()
            + struct.pack("<i", 1) + high.serialize())
    rows = [1, 3] + list(range(70_000, 75_000)) + [2 ** 32 + 7]
    inline = {"storageType": "i", "pathOrInlineDv": _z85_encode(data), "sizeInBytes": len(data),
              "cardinality": len(rows)}
    fs = pafs.LocalFileSystem()
    assert deleted_rows(fs, str(tmp_path), inline) == rows
    # A file: a version byte, then at the offset the size (big-endian), the bitmap and its CRC.
    uid = "}P.m<z:=%dM>4M=s+]#Q"
    stored = {"storageType": "u", "pathOrInlineDv": "ab" + uid, "offset": 1, "sizeInBytes": len(data),
              "cardinality": len(rows)}
    target = dv_file(str(tmp_path), stored)
    assert target.startswith(str(tmp_path / "ab" / "deletion_vector_")) and len(z85_decode(uid)) == 16
    os.makedirs(os.path.dirname(target))
    with open(target, "wb") as f:
        f.write(b"\1" + struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data)))
    assert deleted_rows(fs, str(tmp_path), stored) == rows
    with pytest.raises(ValueError, match="holds 5003 rows, its add action says 4"):
        deleted_rows(fs, str(tmp_path), {**stored, "cardinality": 4})
    with open(target, "r+b") as f:       # a flipped bit: the CRC does not match
        f.seek(20)
        byte = f.read(1)
        f.seek(20)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(ValueError, match="damaged"):
        deleted_rows(fs, str(tmp_path), stored)
