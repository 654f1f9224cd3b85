"""A checkpoint's Delta sink commit, per writer: delta-rs against delta-spark, same run, alternated.

What the sink's committer does on the driver at a checkpoint, timed alone (the tasks' staging of
Parquet files is the same for both writers and is not counted):

  append   the files the writers staged (here one file of ROWS rows, written into the table folder
           as a sink writer writes it) committed in one transaction with the app transaction
  upsert   CHANGED changes (90 % updates, 5 % new keys, 5 % deletes) merged into a table of KEYS
           keys in one commit with the app transaction

Writers, through the sink's own functions:

  delta-rs     commit_sink_files / merge_upserts (deltalake 1.6.6), the path of tables it writes
  delta-spark  spark_commit_files / spark_merge_upserts (delta-spark 4.4.0 in this process's Spark,
               local[2]): the path of tables delta-rs cannot write

on two tables each: "plain" (created by delta-rs, no table features: both writers can write it)
and "row tracking" (created by delta-spark with delta.enableRowTracking: delta-spark only). Each
case runs RUNS times, the sides alternated; printed: each side's median (ms) and the ratio
delta-spark / delta-rs (plain), the cost a table that needs delta-spark pays per checkpoint.
After a delta-spark commit the sink computes the next commit's snapshot in the background
(spark_committer._warm_next_snapshot, while a job's next epoch runs): awaited before the next
timed step, so it slows no other side, and printed apart.

    .venv/bin/python bench/delta_sink.py [--runs 5] [--keys 1000000] [--changed 10000] [--big 1000000]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from runtime.connectors.delta import commit_sink_files, merge_upserts  # noqa: E402
from runtime.connectors.delta.spark_committer import spark_commit_files, spark_merge_upserts, wait_warm  # noqa: E402
from runtime.storage.delta_files import file_stats  # noqa: E402

DELETE = "_sluice_delete"


def key(i: int) -> str:
    return f"k{i:08d}"


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"key": pa.array([key(i) for i in range(start, start + n)], pa.string()),
                     "count": pa.array(range(start, start + n), pa.int64())})


def stage(table: str, data: pa.Table) -> list[dict]:
    """One staged file in the table's folder and its handle, as a sink writer returns it."""
    name = f"part-{uuid.uuid4().hex}.parquet"
    pq.write_table(data, f"{table}/{name}")
    return [{"path": name, "size": os.path.getsize(f"{table}/{name}"), "num_records": data.num_rows,
             "stats": file_stats(data), "modification_time": int(time.time() * 1000), "schema": data.schema,
             "partition_by": [], "partition_values": {}}]


def changes(keys: int, changed: int, seed: int) -> pa.Table:
    r = random.Random(seed)
    new, deletes = changed // 20, changed // 20
    existing = r.sample(range(keys), changed - new)
    names = [key(i) for i in existing] + [key(keys + seed * changed + i) for i in range(new)]
    delete = [False] * (changed - new - deletes) + [True] * deletes + [False] * new
    return pa.table({"key": pa.array(names, pa.string()),
                     "count": pa.array([r.randrange(1 << 40) for _ in names], pa.int64()),
                     DELETE: pa.array(delete, pa.bool_())})


def make_table(spark, path: str, kind: str, data: pa.Table) -> str:
    from deltalake import write_deltalake
    if kind == "plain":
        write_deltalake(path, data)
    else:
        spark.sql(f"CREATE TABLE delta.`{path}` (key STRING, count BIGINT) USING delta "
                  "TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
        spark.createDataFrame(data).write.format("delta").mode("append").save(path)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--small", type=int, default=10_000, help="rows of the small append")
    parser.add_argument("--big", type=int, default=1_000_000, help="rows of the big append")
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys of the upsert table")
    parser.add_argument("--changed", type=int, default=10_000, help="changes per upsert commit")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    from runtime.execution.spark import get_spark_session
    spark = get_spark_session("local[2]", "bench-delta-sink")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    work = args.workdir or tempfile.mkdtemp(prefix="delta-sink-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    sides = [("delta-rs", "plain"), ("delta-spark", "plain"), ("delta-spark", "row tracking")]
    cases = [(f"append {args.small:,} rows", "append", args.small), (f"append {args.big:,} rows", "append", args.big),
             (f"upsert {args.changed:,} changes into {args.keys:,} keys", "upsert", args.changed)]
    base = rows(0, args.keys)
    times: dict = {}
    warm: dict = {}
    version = 0
    for case, mode, n in cases:
        tables = {}
        for writer, kind in sides:
            path = f"{work}/{mode}-{n}-{writer}-{kind.replace(' ', '-')}"
            tables[writer, kind] = make_table(spark, path, kind, base if mode == "upsert" else rows(0, 10))
        for run in range(args.runs + 1):             # run 0: warm-up, not counted
            version += 1
            order = sides if run % 2 else sides[::-1]
            for writer, kind in order:
                table = tables[writer, kind]
                if mode == "append":
                    handles = stage(table, rows(version * 10_000_000, n))
                    started = time.perf_counter()
                    if writer == "delta-rs":
                        assert commit_sink_files(table, handles, None, "bench", version)
                    else:
                        assert spark_commit_files(table, handles, "bench", version) is not None
                else:
                    source = changes(args.keys, n, version)
                    started = time.perf_counter()
                    if writer == "delta-rs":
                        assert merge_upserts(table, [source], ["key"], "bench", version)
                    else:
                        assert spark_merge_upserts(table, source, ["key"], "bench", version, DELETE) is not None
                took = (time.perf_counter() - started) * 1000
                if writer == "delta-spark":       # its snapshot warm-up, off the commit's path: timed apart
                    started = time.perf_counter()
                    wait_warm(table)
                    if run:
                        warm.setdefault((case, kind), []).append((time.perf_counter() - started) * 1000)
                if run:
                    times.setdefault((case, writer, kind), []).append(took)
        print(f"{case}: " + ", ".join(f"{w} ({k}) {statistics.median(times[case, w, k]):,.0f} ms "
                                      f"[{', '.join(f'{t:,.0f}' for t in times[case, w, k])}]" for w, k in sides),
              flush=True)
        print(f"  then the next commit's snapshot warmed in the background (after the commit returned): " + ", ".join(
            f"{k} {statistics.median(warm[case, k]):,.0f} ms" for _, k in sides[1:]), flush=True)
    print("\n| commit | delta-rs (plain) | delta-spark (plain) | delta-spark (row tracking) | "
          "delta-spark / delta-rs (plain) | (row tracking) |")
    print("|---|---|---|---|---|---|")
    for case, _, _ in cases:
        m = {s: statistics.median(times[(case, *s)]) for s in sides}
        rs = m["delta-rs", "plain"]
        print(f"| {case} | {rs:,.0f} ms | {m['delta-spark', 'plain']:,.0f} ms | {m['delta-spark', 'row tracking']:,.0f} ms "
              f"| {m['delta-spark', 'plain'] / rs:.1f}x | {m['delta-spark', 'row tracking'] / rs:.1f}x |")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
