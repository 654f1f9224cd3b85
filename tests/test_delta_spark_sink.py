"""Delta sinks into the tables a delta-spark estate has: row tracking, in-commit timestamps, liquid
clustering (CLUSTER BY), and those with deletion vectors, change data feed and v2 checkpoints, as a
new estate table has them. Each table is created by delta-spark in the test; the sink commits
through delta-spark where delta-rs cannot write the table (runtime/connectors/delta/spark_committer.py)
and through delta-rs where it can, each exactly once per checkpoint, also across kills of the
driver at each sink fault point (tests/jobs/estate_sinks.py under tests/checkpoint_harness.kill_at).
Tables are read back with Spark SQL, and with delta-rs.
"""
from __future__ import annotations

import collections
import glob
import json
import os
import random
from types import SimpleNamespace

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from checkpoint_harness import kill_at
from runtime.client import run_job
from runtime.connectors.base import CommitterContext
from runtime.connectors.delta.spark_committer import (
    DELTA_RS, DELTA_SPARK, choose_writer, spark_commit_files, spark_merge_upserts, unknown_features)
from runtime.connectors.delta.protocol import delta_rs_can_write
from runtime.datastream.connectors import DeltaSink
from runtime_env import delta_env

JOB = os.path.join(os.path.dirname(__file__), "jobs", "estate_sinks.py")
LINES = 80                      # per input file; the job reads 40 lines of a file per epoch
FEATURES = {
    "row_tracking": "TBLPROPERTIES ('delta.enableRowTracking' = 'true')",
    "in_commit_timestamps": "TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')",
    "clustered": "CLUSTER BY (word)",
    # What a new table of a delta-spark or Databricks estate carries, all together.
    "estate": "CLUSTER BY (word) TBLPROPERTIES ('delta.enableRowTracking' = 'true', "
              "'delta.enableInCommitTimestamps' = 'true', 'delta.enableDeletionVectors' = 'true', "
              "'delta.enableChangeDataFeed' = 'true', 'delta.checkpointPolicy' = 'v2')",
    # Features delta-rs writes: these stay on delta-rs.
    "dv_cdf_v2": "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.enableChangeDataFeed' = 'true', "
                 "'delta.checkpointPolicy' = 'v2')",
}
ROW_TRACKED = ("row_tracking", "estate")
# deltalake 1.6.6 reads tables without reader features (deletion vectors and v2 checkpoints are).
DELTA_RS_READS = ("row_tracking", "in_commit_timestamps", "clustered")


def run_result():
    """The run's JobExecutionResult, as far as a Delta committer fills it."""
    return SimpleNamespace(sink_files={})


def create(spark, path, columns: str, features: str, seed_rows: str) -> str:
    spark.sql(f"CREATE TABLE delta.`{path}` ({columns}) USING delta {features}")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES {seed_rows}")
    return str(path)


def spark_rows(spark, path, *columns) -> list[tuple]:
    cols = ", ".join(f"`{c}`" if "." not in c else c for c in columns)
    return sorted(tuple(r) for r in spark.sql(f"SELECT {cols} FROM delta.`{path}`").collect())


def delta_rs_rows(path, *columns) -> list[tuple]:
    table = DeltaTable(str(path)).to_pyarrow_table(columns=list(columns))
    return sorted(tuple(r[c] for c in columns) for r in table.to_pylist())


def log_actions(path) -> list[list[dict]]:
    """Each commit's actions, in version order."""
    out = []
    for name in sorted(glob.glob(os.path.join(str(path), "_delta_log", "*.json"))):
        with open(name) as f:
            out.append([json.loads(line) for line in f if line.strip()])
    return out


def txn_versions(path) -> list[int]:
    return [a["txn"]["version"] for commit in log_actions(path) for a in commit if "txn" in a]


def engines(path) -> list[str]:
    """Which writer made each commit after the table's creation and seed rows."""
    out = []
    for commit in log_actions(path)[2:]:
        info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
        out.append(DELTA_SPARK if "Delta-Lake" in info.get("engineInfo", "") else DELTA_RS)
    return out


def protocol(writer_features=(), reader_features=(), writer=7, reader=3):
    return SimpleNamespace(min_writer_version=writer, min_reader_version=reader,
                           writer_features=list(writer_features), reader_features=list(reader_features))


# ---- the choice ---------------------------------------------------------------------------------

def test_the_writer_is_chosen_per_table_from_its_protocol():
    assert choose_writer("t", None).writer == DELTA_RS
    assert choose_writer("t", protocol(writer=2, reader=1)).writer == DELTA_RS
    plain = protocol(["deletionVectors", "changeDataFeed", "v2Checkpoint", "appendOnly", "invariants"],
                     ["deletionVectors", "v2Checkpoint"])
    assert choose_writer("t", plain).writer == DELTA_RS
    assert choose_writer("t", plain, DELTA_SPARK).writer == DELTA_SPARK
    tracked = protocol(["domainMetadata", "rowTracking", "inCommitTimestamp", "clustering", "appendOnly"])
    choice = choose_writer("t", tracked)
    assert choice.writer == DELTA_SPARK
    assert "['clustering', 'domainMetadata', 'inCommitTimestamp', 'rowTracking']" in choice.reason
    assert delta_rs_can_write(plain) is None and unknown_features(tracked) == []


def test_a_writer_that_cannot_write_the_table_is_refused_naming_the_table_the_feature_and_the_fix():
    tracked = protocol(["domainMetadata", "rowTracking"])
    with pytest.raises(ValueError, match=r"the Delta sink to t1 .*delta-rs.* \['domainMetadata', 'rowTracking'\].*"
                                         r"with_writer\(\"delta-spark\"\)"):
        choose_writer("t1", tracked, DELTA_RS)
    future = protocol(["rowTracking", "quantumClustering"], ["quantumClustering"])
    with pytest.raises(ValueError, match=r"the Delta sink to t2 .*\['quantumClustering'\].*neither delta-rs nor "
                                         r"delta-spark.*DROP FEATURE"):
        choose_writer("t2", future)
    with pytest.raises(ValueError, match=r"writer version 8"):
        choose_writer("t3", protocol(writer=8))
    with pytest.raises(ValueError, match=r"with_writer\('spark'\).*'delta-rs' or 'delta-spark'"):
        DeltaSink.for_row_data("t").with_writer("spark")
    assert DeltaSink.for_row_data("t").with_writer("delta-spark").writer == DELTA_SPARK


def test_a_table_no_writer_writes_is_refused_before_the_first_epoch(tmp_path):
    """A protocol naming a feature neither writer knows, or a forced delta-rs on a row-tracking
    table: the run fails in its preflight, before any epoch (no checkpoint, the table untouched)."""
    future = tmp_path / "future"
    os.makedirs(future / "_delta_log")
    with open(future / "_delta_log" / "00000000000000000000.json", "w") as f:
        f.write(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 7,
                                         "writerFeatures": ["appendOnly", "quantumClustering"]}}) + "\n")
        f.write(json.dumps({"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}},
                                         "schemaString": json.dumps({"type": "struct", "fields": [
                                             {"name": "word", "type": "string", "nullable": True, "metadata": {}}]}),
                                         "partitionColumns": [], "configuration": {}, "createdTime": 0}}) + "\n")
    tracked = tmp_path / "tracked"
    os.makedirs(tracked / "_delta_log")
    with open(tracked / "_delta_log" / "00000000000000000000.json", "w") as f:
        f.write(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 7,
                                         "writerFeatures": ["domainMetadata", "rowTracking"]}}) + "\n")
        f.write(open(future / "_delta_log" / "00000000000000000000.json").read().splitlines()[1] + "\n")
    for table, writer, wanted in ((future, None, r"needs \['quantumClustering'\].*neither"),
                                  (tracked, DELTA_RS, r"with_writer\(\"delta-rs\"\).*\['domainMetadata', 'rowTracking'\]")):
        env = delta_env(tmp_path)
        env.from_collection(["a", "b"]).map(lambda w: {"word": w}).sink_to(
            DeltaSink.for_row_data(str(table)).with_writer(writer))
        with pytest.raises(ValueError, match=f"the sink 'Sink: Delta Sink'.*{table}.*{wanted}"):
            env.execute("refused")
        assert os.listdir(table / "_delta_log") == ["00000000000000000000.json"]


# ---- the commits, driven by hand ------------------------------------------------------------------

def staged(table, words, counts=None) -> dict:
    """A file a sink writer staged in the table's folder, and its handle."""
    from runtime.connectors.delta import DeltaSinkWriter
    from runtime.common import Row, Types
    from runtime.task.sink_writer import WriterInitContext
    kind = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])
    writer = DeltaSinkWriter(DeltaSink.for_row_data(str(table)),
                             WriterInitContext("Sink: Delta Sink", 0, 1, 0, 0, input_type=kind))
    writer.write([Row(word=w, count=c) for w, c in zip(words, counts or range(len(words)))])
    return writer.finish()


@pytest.mark.slow
@pytest.mark.delta_spark
def test_a_table_moves_between_writers_without_a_checkpoint_committed_twice(dspark, tmp_path):
    """delta-rs and delta-spark record the same app transaction: a checkpoint one committed is a
    no-op for the other, in either direction, for appends and for MERGE."""
    from runtime.connectors.delta import commit_sink_files, merge_upserts
    table = create(dspark, tmp_path / "t", "word STRING, count BIGINT", "", "('seed', 0)")
    assert commit_sink_files(table, staged(table, ["a"]), None, "app", 1)
    assert spark_commit_files(table, staged(table, ["a"]), "app", 1) is None       # delta-rs did it
    assert spark_commit_files(table, staged(table, ["b"]), "app", 2) == 3
    assert not commit_sink_files(table, staged(table, ["b"]), None, "app", 2)        # delta-spark did it
    change = pa.table({"word": ["a"], "count": pa.array([9], pa.int64()), "_sluice_delete": [False]})
    assert spark_merge_upserts(table, change, ["word"], "app", 3, "_sluice_delete") == 4
    assert not merge_upserts(table, [change], ["word"], "app", 3)
    assert merge_upserts(table, [change.set_column(1, "count", pa.array([10], pa.int64()))], ["word"], "app", 4)
    assert spark_merge_upserts(table, change, ["word"], "app", 4, "_sluice_delete") is None
    assert spark_rows(dspark, table, "word", "count") == [("a", 10), ("b", 0), ("seed", 0)]
    assert txn_versions(table) == [1, 2, 3, 4]
    assert engines(table) == [DELTA_RS, DELTA_SPARK, DELTA_SPARK, DELTA_RS]
    new = str(tmp_path / "new")                     # a table delta-spark creates (with_writer("delta-spark"))
    handles = staged(new, ["x", "y"])
    assert spark_commit_files(new, handles, "app", 1) == 0
    assert spark_commit_files(new, staged(new, ["x", "y"]), "app", 1) is None
    assert spark_rows(dspark, new, "word", "count") == [("x", 0), ("y", 1)]
    assert not os.path.exists(os.path.join(new, handles[0]["path"]))        # the staged file, rewritten


@pytest.mark.slow
@pytest.mark.delta_spark
@pytest.mark.parametrize("kind", sorted(FEATURES))
def test_each_feature_alone_and_together_takes_appends_and_upserts_as_delta_spark_writes_them(dspark, tmp_path, kind):
    """Through the sink's committer: appends and upserts into a table created with the feature(s),
    the writer chosen from its protocol, a replayed commit a no-op; Spark SQL and delta-rs read the
    same rows; row ids unique and kept by an update; one commit per checkpoint."""
    from runtime.connectors.delta import DeltaCommitter, DeltaSinkWriter
    from runtime.common import Row, Types
    from runtime.task.sink_writer import WriterInitContext
    table = create(dspark, tmp_path / kind, "word STRING, count BIGINT", FEATURES[kind], "('seed', 0)")
    needs_spark = kind != "dv_cdf_v2"
    kind_type = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])
    appends = DeltaCommitter(DeltaSink.for_row_data(table), CommitterContext("job", 1, "op", "app-a", run_result()))
    appends.commit([staged(table, ["a", "b"], [1, 2])], 1)
    appends.commit([staged(table, ["a", "b"], [1, 2])], 1)             # a replay
    appends.commit([staged(table, ["c"], [3])], 2)
    upsert_sink = DeltaSink.for_row_data(table).with_upsert_keys("word")
    upserts = DeltaCommitter(upsert_sink, CommitterContext("job", 2, "op2", "app-u", run_result()))
    writer = DeltaSinkWriter(upsert_sink, WriterInitContext("Sink: Delta Sink", 0, 1, 3, 0, input_type=kind_type))
    writer.write([Row(word="c", count=30), Row(word="z", count=26)])
    change = writer.finish()
    upserts.commit([change], 1)
    upserts.commit([change], 1)                                         # a replay
    expected = [("a", 1), ("b", 2), ("c", 30), ("seed", 0), ("z", 26)]
    assert spark_rows(dspark, table, "word", "count") == expected
    if kind in DELTA_RS_READS:
        assert delta_rs_rows(table, "word", "count") == expected
    assert engines(table) == [DELTA_SPARK if needs_spark else DELTA_RS] * 3
    assert txn_versions(table) == [1, 2, 1]
    history = dspark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    assert len(history) == 2 + 3                                        # create, seed, 3 checkpoints
    if kind in ROW_TRACKED:
        ids = dict(spark_rows(dspark, table, "word", "_metadata.row_id"))
        assert len(set(ids.values())) == len(ids) == 5
        assert ids["seed"] == 0
        commits = dict(spark_rows(dspark, table, "word", "_metadata.row_commit_version"))
        assert commits["a"] == commits["b"] == 2 and commits["c"] == commits["z"] == 4
    if kind in ("in_commit_timestamps", "estate"):
        infos = [next(a["commitInfo"] for a in c if "commitInfo" in a) for c in log_actions(table)]
        assert all(i.get("inCommitTimestamp") for i in infos)


# ---- a checkpointed job, killed at each sink fault point ----------------------------------------

KILL_LINES = 120                # per input file: 3 epochs of 40 lines
# A delta-spark commit to a row-tracking table and a MERGE are Spark jobs of seconds: the killed job
# appends to each feature alone and to all together, upserts into all together and into a table
# delta-rs writes; each feature alone takes upserts and replays in the test above.
KILL_UPSERTS = ("estate", "dv_cdf_v2")


def write_lines(folder, seed: int) -> list[tuple[str, str]]:
    """Two files of "word id" lines, each id once."""
    r = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    events = []
    for f in range(2):
        with open(os.path.join(folder, f"part-{f}.txt"), "w") as out:
            for i in range(KILL_LINES):
                word, id_ = f"w{r.randrange(12)}", f"f{f}-{i:04d}"
                out.write(f"{word} {id_}\n")
                events.append((word, id_))
    return events


@pytest.mark.slow
@pytest.mark.delta_spark
def test_a_job_killed_at_each_sink_fault_point_appends_and_upserts_each_row_once(dspark, tmp_path):
    """A checkpointed job appends each line to, and upserts each word's count into, a table of each
    kind (each feature alone, all together, and one delta-rs writes), killed (SIGKILL of the
    driver) while its sinks commit, after them and while its checkpoint record is written, each
    run restoring the latest checkpoint; then a run to the end. Each row once, each count right,
    row ids unique and kept, one commit per checkpoint, in Spark SQL and in delta-rs."""
    events = write_lines(tmp_path / "in", seed=53)
    appends = {k: create(dspark, tmp_path / f"append-{k}", "word STRING, id STRING", FEATURES[k], "('seed', 's0')")
               for k in FEATURES}
    upserts = {k: create(dspark, tmp_path / f"upsert-{k}", "word STRING, count BIGINT", FEATURES[k], "('seed', 0)")
               for k in KILL_UPSERTS}
    args = ["--input", str(tmp_path / "in"), "--append", ",".join(appends.values()), "--upsert", ",".join(upserts.values())]
    outcomes, kept_ids = [], {}
    for i, (point, epoch) in enumerate([("after-state-files", 1), ("after-sink-commit", 1),
                                        ("during-checkpoint-record", 2)]):
        outcomes.append(f"{point}@{epoch}: {kill_at(tmp_path, point, epoch, i > 0, job=JOB, args=args)}")
        if i == 1:      # epochs 0 and 1 are in the tables, epoch 1's checkpoint record is not
            kept_ids = {k: dict(((w, i_), r) for w, i_, r in spark_rows(dspark, appends[k], "word", "id", "_metadata.row_id"))
                        for k in ROW_TRACKED}
            assert all(len(ids) == 1 + 2 * 2 * 40 for ids in kept_ids.values()), outcomes
    assert all("killed" in o for o in outcomes), outcomes
    run_job(JOB, args, warehouse=str(tmp_path / "warehouse"), master="local[2]", quiet=True,
            max_records_per_split=40, restore_from="latest")
    lines = sorted([("seed", "s0")] + events)
    counts = sorted([("seed", 0)] + list(collections.Counter(w for w, _ in events).items()))
    for kind in FEATURES:
        writer = DELTA_RS if kind == "dv_cdf_v2" else DELTA_SPARK
        tables = [(appends[kind], lines, ("word", "id"))]
        if kind in upserts:
            tables.append((upserts[kind], counts, ("word", "count")))
        for table, expected, columns in tables:
            assert spark_rows(dspark, table, *columns) == expected, (kind, table, outcomes)
            if kind in DELTA_RS_READS:
                assert delta_rs_rows(table, *columns) == expected, (kind, table)
            versions = txn_versions(table)
            assert versions == sorted(set(versions)) and len(versions) >= 3, (kind, table, versions)
            history = dspark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
            assert len(history) == 2 + len(versions), (kind, table, [r.operation for r in history])
            assert set(engines(table)) == {writer}, (kind, table)
        if kind in ROW_TRACKED:
            ids = {(w, i_): r for w, i_, r in spark_rows(dspark, appends[kind], "word", "id", "_metadata.row_id")}
            assert len(set(ids.values())) == len(ids) == len(lines)
            assert {k: ids[k] for k in kept_ids[kind]} == kept_ids[kind]
        if kind in ROW_TRACKED and kind in upserts:
            upsert_ids = [r for _, r in spark_rows(dspark, upserts[kind], "word", "_metadata.row_id")]
            assert len(set(upsert_ids)) == len(upsert_ids)


@pytest.mark.slow
@pytest.mark.delta_spark
def test_a_uniform_table_takes_appends_and_upserts_and_iceberg_reads_them_when_the_session_converts(
        dspark, tmp_path, caplog):
    """UniForm (Iceberg metadata of a Delta table) needs icebergCompatV2 and column mapping: the
    sink commits through delta-spark (the files staged under the physical column names); the rows
    read in Spark SQL. Iceberg's metadata is written by delta-iceberg's converter: without its
    jar in the session the sink says so once; with it, pyiceberg reads the same rows."""
    from runtime.connectors.delta import DeltaCommitter, DeltaSinkWriter
    from runtime.common import Row, Types
    from runtime.task.sink_writer import WriterInitContext
    table = create(dspark, tmp_path / "uniform", "word STRING, count BIGINT",
                   "TBLPROPERTIES ('delta.enableIcebergCompatV2' = 'true', 'delta.columnMapping.mode' = 'name', "
                   "'delta.universalFormat.enabledFormats' = 'iceberg')", "('seed', 0)")
    appends = DeltaCommitter(DeltaSink.for_row_data(table), CommitterContext("job", 1, "op", "app-a", run_result()))
    appends.commit([staged(table, ["a", "b"], [1, 2])], 1)
    appends.commit([staged(table, ["a", "b"], [1, 2])], 1)             # a replay
    upsert_sink = DeltaSink.for_row_data(table).with_upsert_keys("word")
    writer = DeltaSinkWriter(upsert_sink, WriterInitContext(
        "Sink: Delta Sink", 0, 1, 3, 0, input_type=Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])))
    writer.write([Row(word="b", count=20), Row(word="z", count=26)])
    DeltaCommitter(upsert_sink, CommitterContext("job", 2, "op2", "app-u", run_result())).commit([writer.finish()], 1)
    expected = [("a", 1), ("b", 20), ("seed", 0), ("z", 26)]
    assert spark_rows(dspark, table, "word", "count") == expected
    assert engines(table) == [DELTA_SPARK, DELTA_SPARK]
    converts = dspark._jvm.org.apache.spark.util.Utils.classIsLoadable(
        "org.apache.spark.sql.delta.icebergShaded.IcebergConverter")
    if not converts:
        assert "has no delta-iceberg" in caplog.text
        pytest.skip("the session has no delta-iceberg jar (io.delta:delta-iceberg_2.13): no Iceberg metadata to read")
    pyiceberg = pytest.importorskip("pyiceberg.table")
    metadata = sorted(glob.glob(os.path.join(table, "metadata", "*.metadata.json")))[-1]
    iceberg = pyiceberg.StaticTable.from_metadata(metadata).scan().to_arrow()
    assert sorted(zip(iceberg.column("word").to_pylist(), iceberg.column("count").to_pylist())) == expected
