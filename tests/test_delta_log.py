"""The one reader of a Delta table's log (runtime.storage.delta_log), on logs delta-rs and
delta-spark write: commits, each kind of checkpoint (classic, multi-part, v2 with sidecars in JSON
and in Parquet), the protocol and metadata, and commit timestamps (in-commit timestamps when the
table has them). Every snapshot is compared with what delta-rs or Spark lists for the version."""
from __future__ import annotations

import glob
import os

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from runtime.storage.delta_log import DeltaLog, Protocol, is_log_file


def log_names(path) -> list[str]:
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(path, "_delta_log", "*")))


def spark_files(spark, path) -> set:
    """The data files Spark reads for the table's latest version (relative to the table)."""
    rows = spark.read.format("delta").load(path).selectExpr("_metadata.file_path AS f").distinct().collect()
    root = "file:" + path if not path.startswith("file:") else path
    return {r.f.replace(root + "/", "").replace("file://" + path + "/", "") for r in rows}


def drop_commits_before(path, version):
    """Delete the commits before ``version`` (a cleaned-up log: the checkpoint must answer)."""
    for name in log_names(path):
        if len(name) == 25 and name.endswith(".json") and name[:20].isdigit() and int(name[:20]) < version:
            os.remove(os.path.join(path, "_delta_log", name))


# ---- delta-rs ------------------------------------------------------------------------------

def test_a_delta_rs_table_with_a_classic_checkpoint(tmp_path):
    path = str(tmp_path / "t")
    for i in range(3):
        write_deltalake(path, pa.table({"k": [i], "part": [str(i % 2)]}), mode="append", partition_by=["part"])
    dt = DeltaTable(path)
    dt.create_checkpoint()
    write_deltalake(path, pa.table({"k": [9], "part": ["1"]}), mode="append", partition_by=["part"])
    dt.delete("k = 0")
    dt.update_incremental()
    log = DeltaLog(path)
    checkpoint = log.checkpoint()
    assert (checkpoint.version, checkpoint.kind, len(checkpoint.paths)) == (2, "classic", 1)
    assert log.latest_version() == dt.version() == 4
    assert log.last_checkpoint_hint() == 2
    snapshot = log.snapshot()
    assert set(snapshot.files) == {a for a in dt.get_add_actions(flatten=True).column("path").to_pylist()}
    assert snapshot.metadata.partition_columns == ("part",)
    assert [f["name"] for f in snapshot.metadata.fields] == ["k", "part"]
    protocol = dt.protocol()
    assert snapshot.protocol == Protocol(protocol.min_reader_version, protocol.min_writer_version,
                                         frozenset(protocol.reader_features or ()),
                                         frozenset(protocol.writer_features or ()))
    # An older version replays from no checkpoint; the checkpoint's version from it alone.
    assert len(log.snapshot(1).files) == 2 and log.checkpoint(1) is None
    at_checkpoint = log.snapshot(2)
    assert len(at_checkpoint.files) == 3
    drop_commits_before(path, 3)
    assert set(DeltaLog(path).snapshot(2).files) == set(at_checkpoint.files)
    assert DeltaLog(path).protocol_and_metadata(2)[1].partition_columns == ("part",)
    # Commits: their actions, and the file's modification time as the timestamp.
    actions = log.commit(3)
    assert any("add" in a for a in actions)
    mtime = os.stat(os.path.join(path, "_delta_log", f"{3:020d}.json")).st_mtime_ns // 1_000_000
    assert log.commit_timestamp(3) == mtime
    with pytest.raises(FileNotFoundError, match=r"the Delta commit .*00000000000000000000\.json is gone"):
        log.commit(0)
    assert [e.version for e in log.entries()] == sorted(e.version for e in log.entries())
    assert all(is_log_file(e.path) for e in log.entries())
    assert not is_log_file(os.path.join(path, "part=1", "x.parquet"))


def test_a_folder_without_a_log(tmp_path):
    log = DeltaLog(str(tmp_path))
    assert not log.exists() and log.latest_version() == -1 and log.checkpoint() is None and log.entries() == []
    with pytest.raises(FileNotFoundError, match="there is no Delta table at"):
        log.snapshot()


def test_a_writer_finds_the_version_of_its_app_transaction_without_listing_the_log(tmp_path):
    from deltalake import CommitProperties, Transaction
    path = str(tmp_path / "t")
    rows = pa.table({"a": [1]})
    write_deltalake(path, rows)                                                       # version 0
    write_deltalake(path, rows, mode="append")                                        # another writer's 1
    write_deltalake(path, rows, mode="append", commit_properties=CommitProperties(
        app_transactions=[Transaction("job-sink", 7)]))                               # ours: 2
    log = DeltaLog(path)
    assert log.version_with_transaction("job-sink", 7, after=1) == 2
    assert log.version_with_transaction("job-sink", 7, after=0) == 2                  # one came first
    assert log.version_with_transaction("job-sink", 7, after=0, reads=1) is None      # not in the next one
    assert log.version_with_transaction("job-sink", 6, after=1) is None               # another checkpoint's
    assert log.version_with_transaction("other", 7, after=1) is None
    assert log.version_with_transaction("job-sink", 7, after=2) is None               # past the log's end


# ---- delta-spark ---------------------------------------------------------------------------

def _spark_table(spark, path, properties: dict, versions: int = 4):
    props = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, v STRING) USING delta TBLPROPERTIES ({props})")
    for i in range(versions):
        spark.sql(f"INSERT INTO delta.`{path}` VALUES ({i}, 'v{i}'), ({i + 100}, 'w{i}')")


def _assert_snapshot_as_spark_reads(spark, path):
    log = DeltaLog(path)
    snapshot = log.snapshot()
    assert set(snapshot.files) == spark_files(spark, path)
    assert snapshot.version == spark.sql(f"DESCRIBE HISTORY delta.`{path}`").selectExpr("max(version)").first()[0]
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert snapshot.protocol.min_reader_version == detail.minReaderVersion
    assert snapshot.protocol.min_writer_version == detail.minWriterVersion
    if snapshot.protocol.min_writer_version == 7:       # table features listed (not implied by a version)
        assert set(detail.tableFeatures) == snapshot.protocol.reader_features | snapshot.protocol.writer_features
    assert snapshot.metadata.configuration == dict(detail.properties)
    return log, snapshot


def test_delta_spark_classic_and_multi_part_checkpoints(dspark, tmp_path):
    classic = str(tmp_path / "classic")
    _spark_table(dspark, classic, {"delta.checkpointInterval": "3"})
    log, _ = _assert_snapshot_as_spark_reads(dspark, classic)
    assert (log.checkpoint().version, log.checkpoint().kind) == (3, "classic")
    multi = str(tmp_path / "multi")
    dspark.conf.set("spark.databricks.delta.checkpoint.partSize", "2")     # actions per part
    try:
        _spark_table(dspark, multi, {"delta.checkpointInterval": "3"})
    finally:
        dspark.conf.unset("spark.databricks.delta.checkpoint.partSize")
    log, snapshot = _assert_snapshot_as_spark_reads(dspark, multi)
    checkpoint = log.checkpoint()
    assert checkpoint.kind == "multi-part" and len(checkpoint.paths) > 1, log_names(multi)
    drop_commits_before(multi, checkpoint.version + 1)
    assert set(DeltaLog(multi).snapshot().files) == set(snapshot.files)     # from the parts alone
    # A multi-part checkpoint with a part missing (a writer died while writing it) is not used.
    os.remove(checkpoint.paths[-1])
    assert DeltaLog(multi).checkpoint() is None


@pytest.mark.parametrize("top_level", ["json", "parquet"])
def test_delta_spark_v2_checkpoints_with_sidecars(dspark, tmp_path, top_level):
    path = str(tmp_path / "v2")
    dspark.conf.set("spark.databricks.delta.checkpointV2.topLevelFileFormat", top_level)
    try:
        _spark_table(dspark, path, {"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2"}, versions=5)
    finally:
        dspark.conf.unset("spark.databricks.delta.checkpointV2.topLevelFileFormat")
    log, snapshot = _assert_snapshot_as_spark_reads(dspark, path)
    checkpoint = log.checkpoint()
    assert checkpoint.kind == "v2" and checkpoint.paths[0].endswith("." + top_level), log_names(path)
    assert os.listdir(os.path.join(path, "_delta_log", "_sidecars"))
    assert "v2Checkpoint" in snapshot.protocol.reader_features
    drop_commits_before(path, checkpoint.version + 1)
    again = DeltaLog(path)
    assert set(again.snapshot().files) == set(snapshot.files)       # the adds from the sidecars
    protocol, metadata = again.protocol_and_metadata()
    assert protocol == snapshot.protocol and metadata == snapshot.metadata


def test_in_commit_timestamps_are_the_commits_timestamps(dspark, tmp_path):
    path = str(tmp_path / "ict")
    _spark_table(dspark, path, {"delta.enableInCommitTimestamps": "true"}, versions=2)
    log = DeltaLog(path)
    history = {r.version: r.timestamp for r in dspark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()}
    for version, when in history.items():
        # The in-commit timestamp, not the file's time: touching the file does not change it.
        os.utime(log.commit_path(version), (0, 0))
        assert log.commit_timestamp(version) == int(when.timestamp() * 1000), version
    assert "inCommitTimestamp" in log.snapshot().protocol.writer_features
