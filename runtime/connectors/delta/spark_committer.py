"""A Delta sink's commit through delta-spark, for the tables delta-rs cannot write.

delta-rs (``deltalake``) commits a checkpoint's staged files in milliseconds, but refuses a table
whose protocol names a writer feature it does not implement: row tracking, in-commit
timestamps, liquid clustering, domain metadata, Iceberg compatibility (UniForm), which the tables
of a delta-spark or Databricks estate carry. delta-spark, in the job's own Spark session, writes
them as Spark does: the commit assigns row ids and row commit versions, the in-commit timestamp,
the row-tracking high-water mark; clustered tables take the files as unclustered ones (as an
``INSERT`` does; ``OPTIMIZE`` clusters them).

The writer is chosen per table from its protocol (``choose_writer``), unless the sink names one
(``DeltaSink.with_writer``). Both writers record the same app transaction (``txn``: the sink's
app id, the checkpoint id), so a table moves between them without a checkpoint committed twice,
and a replayed commit is a no-op on either:

- appends (``spark_commit_files``): the files the tasks staged (under a column-mapped table's
  physical names and field ids, as for delta-rs) are committed as they are, in one delta-spark
  transaction (``DeltaLog.startTransaction().commit``) with a ``txn`` action. A table that does
  not exist yet is created by a DataFrame write of the staged rows (``txnAppId``/``txnVersion``
  write options), the staged files deleted after.
- upserts (``spark_merge_upserts``): delta-spark's ``MERGE`` with the session's
  ``spark.databricks.delta.write.txnAppId``/``txnVersion``, which MERGE checks and records.

After a commit that the next one would pay a state reconstruction for (a row-tracking append, a
MERGE), the new snapshot's state is computed in the background (``_warm_next_snapshot``).
"""
from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Optional
from urllib.parse import quote

import pyarrow as pa

from runtime.connectors.delta.protocol import delta_rs_can_write

log = logging.getLogger(__name__)

DELTA_RS = "delta-rs"
DELTA_SPARK = "delta-spark"
WRITERS = (DELTA_RS, DELTA_SPARK)

# The table features delta-spark 4.4.0 knows (its TableFeature.allSupportedFeaturesMap): what
# the delta-spark path writes; a feature outside it and delta-rs's is refused before the job runs.
DELTA_SPARK_FEATURES = frozenset({
    "adaptiveMetadata-preview", "allowColumnDefaults", "appendOnly", "catalogManaged", "changeDataFeed",
    "checkConstraints", "checkpointProtection", "clustering", "columnMapping", "coordinatedCommits-preview",
    "deletionVectors", "domainMetadata", "generatedColumns", "geospatial", "geospatial-dev", "icebergCompatV1",
    "icebergCompatV2", "icebergCompatV3", "identityColumns", "inCommitTimestamp", "invariants",
    "materializePartitionColumns", "rowTracking", "timestampNtz", "typeWidening", "typeWidening-preview",
    "v2Checkpoint", "vacuumProtocolCheck", "variantShredding", "variantShredding-preview", "variantType",
    "variantType-preview"})
_SPARK_KNOWS = {f.lower() for f in DELTA_SPARK_FEATURES}


@dataclass(frozen=True)
class WriterChoice:
    """Which writer commits to a table, and why (logged once per table and choice)."""

    writer: str
    reason: str


def unknown_features(protocol) -> list[str]:
    """The features of ``protocol`` (``runtime.storage.delta_log``'s) that no writer Sluice has
    knows: delta-spark's are a superset of delta-rs's."""
    if protocol.min_writer_version > 7 or protocol.min_reader_version > 3:
        return [f"reader version {protocol.min_reader_version}, writer version {protocol.min_writer_version}"]
    features = set(protocol.writer_features or ()) | set(protocol.reader_features or ())
    return sorted(f for f in features if f.lower() not in _SPARK_KNOWS) if protocol.min_writer_version == 7 else []


def choose_writer(table_path: str, protocol, forced: Optional[str] = None, metadata=None) -> WriterChoice:
    """The writer of a sink's commit to the table whose protocol is ``protocol`` (None: no table
    yet; ``metadata`` its metadata, for ``delta_rs_can_write``): delta-rs where it writes the protocol, delta-spark where it does not; ``forced`` (the
    sink's ``with_writer``) wins when it can write the table. Fails, naming the table, the
    feature and the fix, when the forced writer, or every writer, cannot."""
    unknown = unknown_features(protocol) if protocol is not None else []
    if unknown:
        raise ValueError(
            f"the Delta sink to {table_path} cannot write the table: its protocol needs {unknown}, which "
            f"neither delta-rs nor delta-spark 4.4 writes. Write to a table without the feature (ALTER TABLE "
            f"... DROP FEATURE ..., if Delta lets you drop it), or upgrade delta-spark (include/maven/delta/pom.xml "
            "and pyproject.toml) to a version that writes it")
    lacking = delta_rs_can_write(protocol, metadata) if protocol is not None else None
    if forced == DELTA_RS:
        if lacking:
            raise ValueError(
                f"the Delta sink to {table_path} is set to write with delta-rs (with_writer(\"delta-rs\")), "
                f"which cannot write it: {lacking}. Leave the writer to Sluice (with_writer(None)) or set "
                "with_writer(\"delta-spark\")")
        return WriterChoice(DELTA_RS, "set by the sink (with_writer(\"delta-rs\"))")
    if forced == DELTA_SPARK:
        return WriterChoice(DELTA_SPARK, "set by the sink (with_writer(\"delta-spark\"))")
    if lacking:
        return WriterChoice(DELTA_SPARK, lacking)
    if protocol is None:
        return WriterChoice(DELTA_RS, "the table does not exist yet: delta-rs creates it")
    return WriterChoice(DELTA_RS, "delta-rs writes every feature of the table's protocol")


# ---- the session ----------------------------------------------------------------------------

def spark_session(table_path: str):
    """The run's SparkSession with delta-spark (the commit runs in the driver, which has it)."""
    from pyspark.sql import SparkSession
    session = SparkSession.getActiveSession() or SparkSession._instantiatedSession
    if session is None:
        raise RuntimeError(f"the Delta sink to {table_path} commits with delta-spark, which needs the run's Spark "
                           "session, and this process has none: run the job on Spark (env.execute())")
    if "DeltaSparkSessionExtension" not in (session.conf.get("spark.sql.extensions", "") or ""):
        raise RuntimeError(
            f"the Delta sink to {table_path} commits with delta-spark, and the Spark session has no delta-spark: "
            "bin/dev's set-up puts its jars in .jars/delta (SLUICE_JARS names another folder)")
    return session


def _seq(jvm, items):
    values = jvm.java.util.ArrayList()
    for item in items:
        values.add(item)
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(values).toList()


def _delta_log(spark, table_path: str):
    return spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table_path)


def _done_version(txn, table, app_id: str) -> int:
    """The last checkpoint id ``app_id`` committed to the table (-1: none). delta-rs (``table``,
    the sink's one load of the log) reads it in milliseconds; delta-spark's ``txnVersion``
    reconstructs the snapshot's state with Spark jobs (about a second), so it is the fallback."""
    try:
        done = table.transaction_version(app_id)
    except Exception:                   # a reader feature delta-rs lacks: ask delta-spark
        return int(txn.txnVersion(app_id))
    return -1 if done is None else int(done)


# ---- the next commit's snapshot ---------------------------------------------------------------

_warming: dict = {}


def _warm_next_snapshot(spark, table_path: str) -> None:
    """Compute the state of the snapshot the table's next commit reads, now, off the checkpoint's
    path. delta-spark 4.4 reads a row-tracking table's row-id high-water mark (RowId.
    extractHighWatermark) and MERGE reads the file list from the commit's read snapshot, and each
    commit leaves a new snapshot (``DeltaLog.unsafeVolatileSnapshot``) whose state is not computed
    yet: its ``domainMetadata`` (Snapshot.computedState, which ignores the CRC's copy) reconstructs
    it with 3 Spark jobs. Computed here, in a daemon thread while the next epoch runs, the next
    commit finds it (a lazy val: a commit that comes first waits for it, nothing runs twice); if
    another writer commits in between, the next commit reads the newer snapshot as before."""
    snapshot = _delta_log(spark, table_path).unsafeVolatileSnapshot()

    def warm() -> None:
        try:
            snapshot.domainMetadata()
        except Exception as error:          # the session stopped; the commit computes it as before
            log.debug("warming the Delta snapshot of %s failed: %s", table_path, error)

    thread = threading.Thread(target=warm, name=f"sluice-delta-snapshot {table_path}", daemon=True)
    _warming[table_path] = thread
    thread.start()


def wait_warm(table_path: str, timeout: Optional[float] = None) -> None:
    """Wait for ``_warm_next_snapshot``'s work on the table (benchmarks time the commit alone)."""
    thread = _warming.pop(table_path, None)
    if thread is not None:
        thread.join(timeout)


ICEBERG_CONVERTER = "org.apache.spark.sql.delta.icebergShaded.IcebergConverter"
_warned_uniform: set = set()


def warn_without_iceberg(spark, table_path: str, configuration) -> None:
    """UniForm (``delta.universalFormat.enabledFormats`` naming iceberg) writes Iceberg metadata
    after each commit through delta-iceberg's converter; a session without that jar commits the
    Delta side only (as delta-spark's own INSERT does) and Iceberg readers do not see the commit:
    said once per table."""
    formats = (configuration or {}).get("delta.universalFormat.enabledFormats", "") or ""
    if "iceberg" not in formats.lower() or table_path in _warned_uniform:
        return
    if not spark._jvm.org.apache.spark.util.Utils.classIsLoadable(ICEBERG_CONVERTER):
        _warned_uniform.add(table_path)
        log.warning("The Delta table %s asks for Iceberg metadata (delta.universalFormat.enabledFormats = %s) and "
                    "the Spark session has no delta-iceberg: the sink's commits reach Delta readers only. Put "
                    "io.delta:delta-iceberg_2.13 (delta-spark's version) in include/maven/delta/pom.xml, or the "
                    "folder SLUICE_JARS names", table_path, formats)


# ---- appends ----------------------------------------------------------------------------------

def spark_commit_files(table_path: str, handles: list, app_id: str, version: int) -> Optional[int]:
    """Commit a checkpoint's staged files to the table through delta-spark in ONE transaction
    carrying the app transaction (app_id, version): the table's version after it, or None when
    the table already holds ``version`` for ``app_id`` (a replay: nothing is committed)."""
    from deltalake import DeltaTable
    spark = spark_session(table_path)
    if not DeltaTable.is_deltatable(table_path):
        return _rewrite_files(spark, table_path, handles, app_id, version)
    table = DeltaTable(table_path)
    warn_without_iceberg(spark, table_path, table.metadata().configuration)
    jvm = spark._jvm
    txn = _delta_log(spark, table_path).startTransaction()
    if _done_version(txn, table, app_id) >= version:
        return None
    now = int(time.time() * 1000)
    action = jvm.org.apache.spark.sql.delta.actions.Action.fromJson
    actions = [action(json.dumps({"add": {
        "path": quote(h["path"], safe="/="), "partitionValues": dict(h.get("partition_values") or {}),
        "size": int(h["size"]), "modificationTime": int(h.get("modification_time") or now), "dataChange": True,
        "stats": h.get("stats") or json.dumps({"numRecords": h["num_records"]})}})) for h in handles]
    actions.append(action(json.dumps({"txn": {"appId": app_id, "version": version, "lastUpdated": now}})))
    none = jvm.scala.Option.empty()
    operation = jvm.org.apache.spark.sql.delta.DeltaOperations.Write(
        jvm.org.apache.spark.sql.SaveMode.Append, none, none, none, none, none, none, none, none)
    committed = int(txn.commit(_seq(jvm, actions), operation))
    if "rowTracking" in (table.protocol().writer_features or ()):
        _warm_next_snapshot(spark, table_path)   # the next append reads its row-id high-water mark
    return committed


def _rewrite_files(spark, table_path: str, handles: list, app_id: str, version: int) -> Optional[int]:
    """The staged files' rows (their partition values put back) written by delta-spark into the
    table it creates, with the app transaction as write options; the staged files deleted after."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable
    from runtime.storage.filesystems import filesystem
    fs, root = filesystem(table_path)
    schema = handles[0]["schema"]
    partition_by = list(handles[0].get("partition_by") or ())
    parts = []
    for h in handles:
        part = pq.read_table(f"{root}/{h['path']}", filesystem=fs)
        for name in partition_by:
            value = (h.get("partition_values") or {}).get(name)
            part = part.append_column(name, pa.array([value] * part.num_rows, pa.string()).cast(schema.field(name).type))
        parts.append(part.select(schema.names))
    writer = (spark.createDataFrame(pa.concat_tables(parts)).write.format("delta").mode("append")
              .option("txnAppId", app_id).option("txnVersion", str(version)))
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(table_path)
    for h in handles:
        fs.delete_file(f"{root}/{h['path']}")
    return DeltaTable(table_path).version()


# ---- upserts ----------------------------------------------------------------------------------

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def _quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def spark_merge_upserts(table_path: str, source: pa.Table, keys, app_id: str, version: int,
                        delete_column: str) -> Optional[int]:
    """Merge each key's last change (``source``: one row per key, ``delete_column`` true for a
    delete) into the table with delta-spark's MERGE, in ONE commit carrying the app transaction:
    the table's version after it, or None for a replay (MERGE checks the session's
    txnAppId/txnVersion and does nothing)."""
    from deltalake import DeltaTable
    spark = spark_session(table_path)
    dt = DeltaTable(table_path)
    before = dt.version()
    warn_without_iceberg(spark, table_path, dt.metadata().configuration)
    target = pa.schema(dt.schema().to_arrow())
    columns = [f.name for f in target if f.name in source.column_names]
    for name in columns:        # the table's types (a table made before the job, e.g. int32 counts)
        i = source.column_names.index(name)
        if source.schema.field(i).type != target.field(name).type:
            source = source.set_column(i, name, source.column(i).cast(target.field(name).type))
    view = f"sluice_upserts_{uuid.uuid4().hex}"
    spark.createDataFrame(source).createOrReplaceTempView(view)
    delete = f"s.{_quoted(delete_column)}"
    on = " AND ".join(f"t.{_quoted(k)} = s.{_quoted(k)}" for k in keys)
    sets = ", ".join(f"t.{_quoted(c)} = s.{_quoted(c)}" for c in columns)
    names = ", ".join(_quoted(c) for c in columns)
    values = ", ".join(f"s.{_quoted(c)}" for c in columns)
    table = "delta.`" + table_path.replace("`", "``") + "`"
    conf = spark.conf
    conf.set(TXN_APP_ID, app_id)
    conf.set(TXN_VERSION, str(version))
    try:
        spark.sql(f"MERGE INTO {table} t USING {view} s ON {on} "
                  f"WHEN MATCHED AND {delete} THEN DELETE "
                  f"WHEN MATCHED THEN UPDATE SET {sets} "
                  f"WHEN NOT MATCHED AND NOT {delete} THEN INSERT ({names}) VALUES ({values})")
    finally:
        conf.unset(TXN_APP_ID)
        conf.unset(TXN_VERSION)
        spark.catalog.dropTempView(view)
    after = DeltaTable(table_path).version()
    if after == before:
        return None
    _warm_next_snapshot(spark, table_path)      # the next MERGE reads its file list
    return after
