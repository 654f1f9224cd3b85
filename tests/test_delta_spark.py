"""Sluice's tables in a Spark estate (issue 36): every Delta table a real Sluice job writes (its
sinks, and its own checkpoints, state, epoch log and executions tables) reads in Spark SQL
through delta-spark (the jars bin/dev's set-up fetches with Maven into .jars/delta):
``spark.read.format("delta")``, ``DESCRIBE HISTORY`` and time travel (``versionAsOf``), with the
same rows as delta-rs reads, at the latest version and at earlier ones still in the log."""
import datetime
import decimal
import math
import os
import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from checkpoint_harness import JOB, LINES_PER_EPOCH, job_args, write_input
from runtime.client import run_job
from runtime.execution.spark import DELTA_CATALOG, DELTA_EXTENSION, delta_jars, delta_jars_folder

JOB_DIR = "checkpointed-counts"
# What the job writes: its two sinks, and its own tables in the warehouse.
TABLES = ("windows", "running", f"warehouse/{JOB_DIR}/checkpoints", f"warehouse/{JOB_DIR}/epoch_log",
          f"warehouse/{JOB_DIR}/executions", f"warehouse/{JOB_DIR}/state/running-count",
          f"warehouse/{JOB_DIR}/state/window-counts",
          # the state tables as the first run left them: 3 checkpoints, none discarded yet, so
          # every version's files are there to time-travel to (later, a discarded checkpoint's
          # state files go, and the versions that list them with them)
          f"first-run/{JOB_DIR}/state/running-count", f"first-run/{JOB_DIR}/state/window-counts")
STATE_AFTER_DISCARDS = {f"warehouse/{JOB_DIR}/state/running-count", f"warehouse/{JOB_DIR}/state/window-counts"}


def test_the_session_loads_delta_spark_from_the_set_ups_folder(spark):
    folder = delta_jars_folder()
    assert folder, ".jars/delta is missing: bin/dev's set-up fetches delta-spark's jars with Maven (include/maven/delta/pom.xml)"
    conf = spark.sparkContext.getConf()
    loaded = conf.get("spark.jars", "").split(",")
    assert delta_jars() and set(delta_jars()) <= set(loaded)
    assert any(os.path.basename(j).startswith("delta-spark_2.13-") for j in loaded)
    assert DELTA_EXTENSION in conf.get("spark.sql.extensions", "").split(",")
    assert conf.get("spark.sql.catalog.spark_catalog") == DELTA_CATALOG
    assert "spark.jars.packages" not in dict(conf.getAll())     # nothing downloaded as the session starts


@pytest.fixture(scope="module")
def job_tables(spark, tmp_path_factory):
    """A real run of the checkpointed counts job (keyed state, event-time windows, two Delta
    sinks, a checkpoint every epoch) over 3 epochs, then one more run restoring the latest
    checkpoint: every table has several versions. Sluice's own tables keep 10 minutes of log
    (``sluice.maintenance.log-retention``): the retention they declare, within which delta-spark
    time-travels (it refuses versions older than a table's ``delta.deletedFileRetentionDuration``)."""
    tmp = tmp_path_factory.mktemp("delta-spark")
    write_input(tmp / "in", seed=36, lines=4 * LINES_PER_EPOCH)
    warehouse = str(tmp / "warehouse")
    retention = {"sluice.maintenance.log-retention": "600"}
    run_job(JOB, job_args(tmp), warehouse=warehouse, master="local[2]", quiet=True, configuration=retention,
            max_records_per_split=LINES_PER_EPOCH, max_epochs=3)
    shutil.copytree(os.path.join(warehouse, JOB_DIR, "state"), tmp / "first-run" / JOB_DIR / "state")
    run_job(JOB, job_args(tmp), warehouse=warehouse, master="local[2]", quiet=True, configuration=retention,
            max_records_per_split=LINES_PER_EPOCH, restore_from="latest")
    found = {os.path.relpath(d, tmp) for d, subdirs, _ in os.walk(tmp) if "_delta_log" in subdirs}
    assert set(TABLES) <= found, f"the job wrote {sorted(found)}"
    return {name: str(tmp / name) for name in found}


def _plain(value):
    """A value as both readers' rows can be compared: binary as bytes, instants in UTC, NaN as
    text, maps and structs as sorted items."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.timezone.utc).replace(tzinfo=None) if value.tzinfo else value
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, decimal.Decimal):
        return value.normalize()
    if isinstance(value, dict):
        return tuple(sorted((k, _plain(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    return value


def _rows(table: pa.Table) -> list:
    return sorted((_plain(r) for r in table.to_pylist()), key=repr)


def _spark_rows(df) -> list:
    # toArrow: Spark's own Arrow conversion, timestamps as instants (no local-time round trip)
    return _rows(df.toArrow())


def _log_versions(path: str) -> tuple[list[int], list[int]]:
    """The versions whose commit files are in the log, and those with a Delta checkpoint."""
    names = os.listdir(os.path.join(path, "_delta_log"))
    commits = sorted(int(n[:20]) for n in names if n.endswith(".json") and n[:20].isdigit())
    checkpoints = sorted({int(n[:20]) for n in names if ".checkpoint." in n and n[:20].isdigit()})
    return commits, checkpoints


def _readable_versions(path: str) -> list[int]:
    """Versions a reader can rebuild from the log as it is: from version 0 while every commit
    since is there, or from a Delta checkpoint on (Sluice cleans its own tables' logs)."""
    commits, checkpoints = _log_versions(path)
    start = 0 if 0 in commits else min(checkpoints)
    readable = []
    for v in range(start, commits[-1] + 1):
        if v in checkpoints or (v in commits and (not readable or readable[-1] == v - 1)):
            readable.append(v)
    return readable


def _files_kept(path: str, version: int) -> bool:
    old = DeltaTable(path)
    old.load_as_version(version)
    return all(os.path.exists(uri.removeprefix("file://")) for uri in old.file_uris())


@pytest.mark.parametrize("name", TABLES)
def test_a_sluice_table_reads_in_spark_sql_as_in_delta_rs(spark, job_tables, name):
    path = job_tables[name]
    dt = DeltaTable(path)
    latest = dt.version()
    # A state table commits at most once a second: the first run's (3 epochs, no discards) at
    # its first checkpoint and once more at least.
    assert latest >= (1 if name.startswith("first-run/") else 2), f"{name} has {latest + 1} version(s)"

    # The latest version: the same rows.
    expected = _rows(dt.to_pyarrow_table())
    assert _spark_rows(spark.read.format("delta").load(path)) == expected
    assert _spark_rows(spark.sql(f"SELECT * FROM delta.`{path}`")) == expected

    # DESCRIBE HISTORY: the versions delta-rs sees, the newest first, with their operations.
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version", "operation").collect()
    assert history and history[0].version == latest
    rs_history = {h["version"]: h.get("operation") for h in dt.history()}
    assert [h.version for h in history] == sorted((v for v in rs_history if v in {h.version for h in history}),
                                                  reverse=True)
    assert all(h.operation for h in history)

    # Time travel: earlier versions still in the log whose files are still there (a state
    # table's files go with the checkpoint they belong to once it is no longer retained), as
    # delta-rs reads them.
    readable = [v for v in _readable_versions(path) if v < latest and _files_kept(path, v)]
    if name in STATE_AFTER_DISCARDS:
        assert any(not _files_kept(path, v) for v in _readable_versions(path))
    else:
        assert readable, f"{name}: no earlier version left in the log {_log_versions(path)}"
    for version in sorted({readable[0], readable[len(readable) // 2], readable[-1]} if readable else ()):
        old = DeltaTable(path)
        old.load_as_version(version)
        at_version = _rows(old.to_pyarrow_table())
        assert _spark_rows(spark.read.format("delta").option("versionAsOf", version).load(path)) == at_version, \
            f"{name} at version {version}"
        assert _spark_rows(spark.sql(f"SELECT * FROM delta.`{path}` VERSION AS OF {version}")) == at_version


def _Builder():
    """A SparkSession.Builder with options of its own (PySpark's builders share one class-level
    options dict, which would leak into the test run's session)."""
    from pyspark.sql import SparkSession
    builder = SparkSession.Builder()
    builder._options = {}
    return builder


def test_without_the_folder_spark_starts_without_delta_unless_the_download_is_asked_for(tmp_path, monkeypatch,
                                                                                          caplog):
    import runtime.execution.spark as spark_module
    monkeypatch.setattr(spark_module, "_PROJECT_ROOT", str(tmp_path))     # no .jars/delta there
    monkeypatch.delenv("SLUICE_JARS", raising=False)
    monkeypatch.delenv("SLUICE_DELTA_PIP", raising=False)
    monkeypatch.setattr(spark_module, "_said_no_delta", False)
    caplog.set_level("INFO", "runtime.spark")
    assert delta_jars_folder() is None and delta_jars() == []
    for _ in range(2):
        assert spark_module._with_delta(_Builder(), {})._options == {}
    said = [r for r in caplog.records if "without delta-spark" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "INFO"
    assert 'spark.read.format("delta") needs its jars' in said[0].getMessage()

    # SLUICE_DELTA_PIP=1: delta-spark's configure_spark_with_delta_pip, a download as Spark starts.
    monkeypatch.setenv("SLUICE_DELTA_PIP", "1")
    caplog.clear()
    options = spark_module._with_delta(_Builder(), {})._options
    # (delta-spark 4.4.0's helper names the Spark-4.2 build, io.delta:delta-spark_4.2_2.13)
    assert options["spark.jars.packages"] == "io.delta:delta-spark_4.2_2.13:4.4.0"
    assert options["spark.sql.extensions"] == DELTA_EXTENSION
    assert options["spark.sql.catalog.spark_catalog"] == DELTA_CATALOG
    assert any("Spark downloads them" in r.getMessage() for r in caplog.records)


def test_sluice_jars_names_the_folder_and_the_jobs_own_jars_and_extensions_are_kept(tmp_path, monkeypatch, caplog):
    import runtime.execution.spark as spark_module
    folder = tmp_path / "delta-jars"
    folder.mkdir()
    for name in ("delta-spark_2.13-4.4.0.jar", "delta-storage-4.4.0.jar", ".pom-sha256"):
        (folder / name).write_text("")
    monkeypatch.setenv("SLUICE_JARS", str(folder))
    assert delta_jars_folder() == str(folder)
    assert delta_jars() == [str(folder / "delta-spark_2.13-4.4.0.jar"), str(folder / "delta-storage-4.4.0.jar")]
    options = spark_module._with_delta(_Builder(), {"spark.jars": "/job/udfs.jar",
                                                   "spark.sql.extensions": "com.example.Ext"})._options
    assert options["spark.jars"] == ",".join(delta_jars() + ["/job/udfs.jar"])
    assert options["spark.sql.extensions"] == f"{DELTA_EXTENSION},com.example.Ext"
    assert options["spark.sql.catalog.spark_catalog"] == DELTA_CATALOG
    # A folder named but empty: said, and Spark starts without Delta.
    monkeypatch.setenv("SLUICE_JARS", str(tmp_path / "nothing-here"))
    caplog.set_level("WARNING", "runtime.spark")
    assert delta_jars_folder() is None
    assert any("holds no jar" in r.getMessage() for r in caplog.records)


def test_sluices_own_tables_declare_the_log_retention_they_keep(tmp_path):
    """delta-spark refuses time travel past a table's declared deletedFileRetentionDuration:
    Sluice's own tables declare sluice.maintenance.log-retention (30 s unless a job sets it)."""
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.execution.history import ExecutionHistory
    from runtime.storage.maintenance import OWN_TABLE_PROPERTIES, own_table_properties
    assert OWN_TABLE_PROPERTIES["delta.deletedFileRetentionDuration"] == "interval 30 seconds"
    assert OWN_TABLE_PROPERTIES["delta.logRetentionDuration"] == "interval 30 seconds"
    assert own_table_properties(600)["delta.deletedFileRetentionDuration"] == "interval 600 seconds"
    assert own_table_properties(0.5)["delta.logRetentionDuration"] == "interval 1 seconds"
    assert CheckpointStorage(str(tmp_path), log_retention_s=600).checkpoints.table_properties == own_table_properties(600)
    assert ExecutionHistory(str(tmp_path), 600).table_properties == own_table_properties(600)
