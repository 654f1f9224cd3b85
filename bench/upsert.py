"""The upsert sink's commit: delta-rs's MERGE against delta-spark's, on the same table.

A Delta table of 1,000,000 keys (key: string, count: long), then EPOCHS epochs of 10,000 changed
keys each (9,000 updates of existing keys, 500 new keys, 500 deletes), each merged in one Delta
commit that carries the app transaction (app id, epoch), as the upsert sink commits an epoch:

  delta-rs     DeltaTable.merge(source, "t.key = s.key", commit_properties=CommitProperties(
               app_transactions=[Transaction(app, v)])) with when_matched_delete /
               when_matched_update / when_not_matched_insert, in this process (Sluice's driver)
  delta-spark  MERGE INTO delta.`path` USING the epoch's changes (a DataFrame from the same Arrow
               table), spark.databricks.delta.write.txnAppId/txnVersion set for the commit,
               on local Spark (local[2], shuffle and snapshot partitions 2) with the jars from .jars/delta (SLUICE_JARS)

Both start from a copy of the same table written by delta-rs. Printed: each side's per-epoch
times (ms), the median, and the ratio. delta-spark's side runs only when its jars are there.

    .venv/bin/python bench/upsert.py [--keys 1000000] [--changed 10000] [--epochs 6]
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

import pyarrow as pa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def key(i: int) -> str:
    return f"k{i:08d}"


def base_table(n: int) -> pa.Table:
    return pa.table({"key": pa.array([key(i) for i in range(n)], pa.string()),
                     "count": pa.array(range(n), pa.int64())})


def changes(n: int, changed: int, epoch: int) -> pa.Table:
    """``changed`` changes: 90 % updates of existing keys, 5 % new keys, 5 % deletes."""
    r = random.Random(epoch)
    new = changed // 20
    deletes = changed // 20
    existing = r.sample(range(n), changed - new)
    keys = [key(i) for i in existing] + [key(n + epoch * changed + i) for i in range(new)]
    delete = [False] * (changed - new - deletes) + [True] * deletes + [False] * new
    return pa.table({"key": pa.array(keys, pa.string()),
                     "count": pa.array([r.randrange(1 << 40) for _ in keys], pa.int64()),
                     "_sluice_delete": pa.array(delete, pa.bool_())})


def delta_rs_merge(path: str, source: pa.Table, app: str, version: int) -> None:
    from deltalake import CommitProperties, DeltaTable, Transaction
    dt = DeltaTable(path)
    (dt.merge(source, "t.key = s.key", source_alias="s", target_alias="t",
              commit_properties=CommitProperties(app_transactions=[Transaction(app, version)]))
       .when_matched_delete("s._sluice_delete")
       .when_matched_update({"count": "s.count"}, "NOT s._sluice_delete")
       .when_not_matched_insert({"key": "s.key", "count": "s.count"}, "NOT s._sluice_delete")
       .execute())


def spark_session(jars: list[str]):
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master("local[2]").appName("upsert-bench")
            .config("spark.jars", ",".join(jars))
            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.databricks.delta.snapshotPartitions", "2")      # Delta's default 50: 50 tasks per log replay
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .getOrCreate())


def spark_merge(spark, path: str, source: pa.Table, app: str, version: int) -> None:
    spark.conf.set("spark.databricks.delta.write.txnAppId", app)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(version))
    spark.createDataFrame(source.to_pandas()).createOrReplaceTempView("changes")
    spark.sql(f"""MERGE INTO delta.`{path}` AS t USING changes AS s ON t.key = s.key
                  WHEN MATCHED AND s._sluice_delete THEN DELETE
                  WHEN MATCHED THEN UPDATE SET count = s.count
                  WHEN NOT MATCHED AND NOT s._sluice_delete THEN INSERT (key, count) VALUES (s.key, s.count)""")


def rows(path: str) -> dict:
    from deltalake import DeltaTable
    t = DeltaTable(path).to_pyarrow_table()
    return dict(zip(t.column("key").to_pylist(), t.column("count").to_pylist()))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--changed", type=int, default=10_000)
    parser.add_argument("--epochs", type=int, default=6, help="merges per side; the first is warm-up")
    args = parser.parse_args(argv)
    from deltalake import DeltaTable, write_deltalake

    work = tempfile.mkdtemp(prefix="sluice-upsert-bench-")
    try:
        seed = os.path.join(work, "seed")
        started = time.perf_counter()
        write_deltalake(seed, base_table(args.keys))
        print(f"table of {args.keys:,} keys written in {time.perf_counter() - started:.1f} s "
              f"({len(DeltaTable(seed).file_uris())} file(s)); {args.changed:,} changes per epoch, "
              f"{args.epochs} epochs (the first is warm-up)")
        epochs = [changes(args.keys, args.changed, e) for e in range(1, args.epochs + 1)]

        rs_path = os.path.join(work, "rs")
        shutil.copytree(seed, rs_path)
        rs = []
        for version, source in enumerate(epochs, 1):
            t0 = time.perf_counter()
            delta_rs_merge(rs_path, source, "bench", version)
            rs.append((time.perf_counter() - t0) * 1000)
        # A replayed epoch is a no-op for the sink: the check it does first.
        t0 = time.perf_counter()
        assert DeltaTable(rs_path).transaction_version("bench") == len(epochs)
        check_ms = (time.perf_counter() - t0) * 1000
        print(f"delta-rs     merge ms per epoch: {', '.join(f'{t:.0f}' for t in rs)}; "
              f"median after warm-up {statistics.median(rs[1:]):.0f} ms (replay check {check_ms:.0f} ms)")

        folder = os.environ.get("SLUICE_JARS") or os.path.join(ROOT, ".jars", "delta")
        jars = sorted(glob.glob(os.path.join(folder, "*.jar")))
        if not jars:
            print(f"delta-spark: no jars in {folder}; its side is skipped")
            return
        sp_path = os.path.join(work, "spark")
        shutil.copytree(seed, sp_path)
        t0 = time.perf_counter()
        spark = spark_session(jars)
        spark.range(1).collect()
        start_ms = (time.perf_counter() - t0) * 1000
        sp = []
        for version, source in enumerate(epochs, 1):
            t0 = time.perf_counter()
            spark_merge(spark, sp_path, source, "bench", version)
            sp.append((time.perf_counter() - t0) * 1000)
        spark.stop()
        print(f"delta-spark  merge ms per epoch: {', '.join(f'{t:.0f}' for t in sp)}; "
              f"median after warm-up {statistics.median(sp[1:]):.0f} ms (session start {start_ms:.0f} ms, not counted)")
        assert DeltaTable(sp_path).transaction_version("bench") == len(epochs)
        same = rows(rs_path) == rows(sp_path)
        print(f"same rows on both sides: {same}")
        print(f"ratio delta-spark / delta-rs (medians): {statistics.median(sp[1:]) / statistics.median(rs[1:]):.2f}x")
        if not same:
            sys.exit("the two sides' tables differ")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
