"""Keyed-state benchmark (issue 15): small epochs over a large keyed state, Sluice's state backends
against Spark Structured Streaming's RocksDB state store, in one invocation.

    .venv/bin/python bench/keyed_state.py                          # N = 1,000 and 1,000,000 keys
    .venv/bin/python bench/keyed_state.py --with-10m               # ... and 10,000,000 (long)
    .venv/bin/python bench/keyed_state.py --sizes 1k,100k --epochs 6 --hashmap-incremental
    .venv/bin/python bench/keyed_state.py --sizes 1k --variants rocksdb-incremental,sss

The shape of issue 15, per size N: a first epoch (micro-batch) of N records that builds N keys
(``w{(i * 2654435761) % N}`` for the record index i: a permutation of the N keys), then --epochs
small epochs of --small-records records (default 10,000) over those keys, the same words for every
competitor. Every competitor runs in its own subprocess (so its peak RSS, JVM and Python workers
included, is its own), one after the other, on local[--parallelism]:

  default              Sluice with no state configuration (issue 35): the heap (hashmap) kept in
                       each subtask's Python worker between epochs, incremental checkpoints
  hashmap-objects      the default with sluice.state.heap.compact-after-entries: 0 (every entry a
                       Python object; by default a state's map past 262,144 entries packs them into
                       columns: runtime.state.state_map)
  hashmap-full         Sluice, state.backend.type: hashmap, execution.checkpointing.incremental: false
                       (the kept heap, snapshotted whole every epoch; before issue 35 each epoch
                       also restored the whole state from files)
  rocksdb-incremental  Sluice, state.backend.type: rocksdb, incremental true (the local store stays
                       on the executor's disk between epochs; a checkpoint writes only the changes)
  rocksdb-full         Sluice, rocksdb, incremental false (local store, full snapshot every epoch)
  hashmap-incremental  Sluice, hashmap, incremental true (only with --hashmap-incremental)
  sss                  Spark Structured Streaming (the project's pyspark): readStream.text(folder)
                       with maxFilesPerTrigger=1 -> groupBy(word).count() -> update mode, noop sink,
                       RocksDBStateStoreProvider with changelog checkpointing, shuffle partitions =
                       parallelism. One file per micro-batch, moved into the folder before each
                       processAllAvailable(): a checkpoint (offsets, state, commit) every batch.

The Sluice job: DataGeneratorSource -> key_by(word) -> a KeyedProcessFunction keeping the count per
word in ValueState[LONG] (uid "word-counts", emits nothing), a checkpoint every epoch
(set_checkpoint_interval_epochs(1)). One run: epoch 0 reads N records, epochs 1.. read
--small-records each (the source's per-split epoch size, sluice.epoch.max-records-per-split, is
switched by the benchmark after epoch 0: a source controlled per epoch, as the Structured
Streaming role controls its files). Then a second run restored from the latest checkpoint
("latest") takes one small epoch: its first epoch rebuilds the N-key state from the Delta state
table (restore_from resets the local stores) -- the restore figure.

Figures per size and competitor:

  small epoch ms       median over the small epochs (Sluice: the time from an epoch's start to the
                       next one's, EpochSummary.started_at: a checkpoint completes in the background
                       while the next epoch runs, and the next epoch waits for it before its own;
                       the last epoch: its duration plus its checkpoint; Structured Streaming: the batch's
                       durationMs.triggerExecution; the wall time around processAllAvailable() is
                       kept in the JSON) and its ratio to Structured Streaming's median.
  ckpt bytes / epoch   Sluice: EpochSummary.state_bytes_written (snapshot files the tasks wrote),
                       median and mean over the small epochs (the mean carries the periodic full
                       snapshot of the incremental policy); Structured Streaming: the growth of its
                       checkpoint folder per batch (median, mean).
  local-store hits     Sluice: local_store_hits / local_stores over the small epochs.
  peak RSS             the competitor's process tree (Python driver, JVM, Python workers), polled
                       every 0.1 s as bench/wordcount.py does, over start-up, the run and the
                       restored run (not the benchmark's own checks, which hold the whole state in
                       an Arrow table; every phase's peak is in the JSON, peak_by_phase).
  peak PSS             the same tree's proportional set size: a page shared by several processes
                       (a forked Python worker's imports, shared with its daemon) counted once in
                       all, as the machine spends it; the RSS sum counts it once per process.
  restart              the whole restored run (one small epoch): Sluice from building the job to the
                       epoch's checkpoint, the state rebuilt from Delta; Structured Streaming: the
                       query started again on its checkpoint until one more small batch is done
                       (its state store loaded from the checkpoint), in the same session.
  restore              the restored run's first epoch (rebuild from Delta + one small epoch), and
                       its difference to the small-epoch median (the rebuild's share); against
                       Spark reading the same rows (the checkpoint's N-key state, one Parquet file
                       per subtask, zstd) with spark.read.parquet -> noop, median of --repeat.
  build ms             the first epoch (N records, N new keys).

Checks (exit code 1 if one fails): the last checkpoint's state (its chain of snapshot files merged
in order, deletions applied) holds exactly N keys, each with the count the generator implies, after
the run and again after the restored epoch; Structured Streaming's final state (read with Spark's
state data source, format "statestore") holds the same exact counts. A Markdown table of every
size and competitor is printed at the end.

The script is also its own subprocess entry point (``--role sluice|sss --spec FILE``).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import time

import competitor
import keyed_count
from keyed_count import STATE_UID

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

MULT = 2654435761                 # a prime: i -> (i * MULT) % N permutes 0..N-1 for N = 2^a 5^b
DEFAULT_SIZES = "1k,1m"
TARGET_VS_SSS = 0.5               # issue 15: at most half of Structured Streaming's micro-batch
TARGET_VS_1K = 1.5                # ... and at most 1.5x the same epoch over 1,000 keys
DEFAULT = "default"               # issue 35: no state configuration at all

# variant -> (state.backend.type, execution.checkpointing.incremental[, more configuration])
SLUICE_VARIANTS = {
    DEFAULT: (None, None),
    "hashmap-objects": (None, None, {"sluice.state.heap.compact-after-entries": "0"}),
    "hashmap-full": ("hashmap", "false"),
    "rocksdb-incremental": ("rocksdb", "true"),
    "rocksdb-full": ("rocksdb", "false"),
    "hashmap-incremental": ("hashmap", "true"),
}
SSS = "sss"


# =========================================================================================
# The words (the same for every competitor)
# =========================================================================================

def word_of(i, keys):
    return f"w{(i * MULT) % keys}"


def epoch_totals(keys, small_records, parallelism, epochs):
    """Records per split and per epoch: epoch 0 builds the keys, then `epochs` small epochs.
    Sluice's generator splits are read round-robin (subtask s: indexes s, s + p, ...), so an
    epoch of k records per split reads the global indexes [start, start + k * p)."""
    build_split = -(-keys // parallelism)
    small_split = -(-small_records // parallelism)
    return build_split, small_split, build_split * parallelism, small_split * parallelism


def check_state(keys_col, counts_col, keys, total, label):
    """The state holds exactly `keys` keys w0..w{keys-1}, key k holding the number of indexes i in
    [0, total) with (i * MULT) % keys == k."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    n = len(keys_col)
    if n != keys:
        return False, f"{label}: MISMATCH ({n:,} keys, expected {keys:,})"
    k = pc.cast(pc.utf8_slice_codeunits(keys_col, 1), pa.int64()).to_numpy(zero_copy_only=False)
    got = pc.cast(counts_col, pa.int64()).to_numpy(zero_copy_only=False)
    inverse = pow(MULT, -1, keys)
    j = (k % keys) * (inverse % keys) % keys
    expected = total // keys + (j < total % keys)
    distinct = len(np.unique(k)) == keys and int(k.min()) == 0 and int(k.max()) == keys - 1
    wrong = int((got != expected).sum())
    ok = distinct and wrong == 0
    return ok, (f"{label}: {'OK' if ok else 'MISMATCH'} ({n:,} keys{'' if distinct else ' (not w0..wN-1)'}, "
                f"counts add up to {int(got.sum()):,} of {total:,} records; {wrong:,} keys with a wrong count)")


# =========================================================================================
# Sluice (a subprocess)
# =========================================================================================

def run_sluice_job(spark, spec, keys, warehouse, epochs, build_split, small_split, restore=False):
    """One run: epoch 0 reads build_split records per split, later epochs small_split (a restored
    run reads small_split from its first epoch). Returns (runner, result, driver restore ms)."""
    graph = keyed_count.build_graph(
        functools.partial(word_of, keys=keys), spec["parallelism"], f"bench keyed state {keys} {spec['variant']}",
        configuration={**{k: v for k, v in (("state.backend.type", spec["backend"]),
                                            ("execution.checkpointing.incremental", spec["incremental"]))
                          if v is not None}, **spec.get("configuration", {})})

    def size_epochs(runner):
        for enumerator in runner.sources.enumerators.values():
            plan_epoch = enumerator.plan_epoch

            def sized(epoch, _plan=plan_epoch, _e=enumerator):
                _e.max_records_per_split = build_split if epoch == 0 else small_split
                return _plan(epoch)
            enumerator.plan_epoch = sized
    return keyed_count.run_job(spark, graph, spec["parallelism"], warehouse, epochs, small_split,
                               verbose=spec["verbose"], restore=restore, before_run=None if restore else size_epochs)


def checkpoint_state(runner, checkpoint_id=None):
    """A completed checkpoint's (default: the last one's) word-counts state as one Arrow table (the
    chain of snapshot files merged in order: the last row of a key wins, deleted rows removed):
    (record, table, files)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from runtime.checkpoint.restore import RestorePoint
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.state.snapshot_format import value_column
    storage = CheckpointStorage(runner.job_dir)
    completed = storage.checkpoints.completed()
    record = next(r for r in completed if r.checkpoint_id == checkpoint_id) if checkpoint_id else completed[-1]
    op_ids = {n.operator_id for v in runner.job_graph.vertices for n in v.operators if n.uid == STATE_UID}
    files = [f for f in RestorePoint(record, storage.job_dir).files() if f["operator_id"] in op_ids]
    value = value_column("count")
    columns = None
    parts = []
    for f in files:                               # chain order: full snapshot, then increments
        t = pq.read_table(f["path"])
        if columns is None:
            columns = [c for c in t.column_names if c != "deleted"]
        t = t.filter(pc.equal(t.column("state_name"), "count"))
        deleted = (t.column("deleted").fill_null(False) if "deleted" in t.column_names
                   else pa.array([False] * t.num_rows))
        parts.append(t.select(columns).append_column("deleted", deleted))
    if not parts:
        return record, pa.table({"key": pa.array([], pa.string()), value: pa.array([], pa.int64())}), files
    table = pa.concat_tables(parts, promote_options="permissive").combine_chunks()
    table = table.append_column("_row", pa.array(range(table.num_rows), pa.int64()))
    last = table.group_by("key").aggregate([("_row", "max")]).column("_row_max")
    table = table.take(last)
    table = table.filter(pc.invert(table.column("deleted"))).drop_columns(["_row", "deleted"])
    return record, table, files


def parquet_copy(table, folder, parallelism):
    """The state rows as Parquet, one file per subtask, zstd (as the state files); its bytes."""
    import pyarrow.parquet as pq
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    n = table.num_rows
    for s in range(parallelism):
        lo, hi = n * s // parallelism, n * (s + 1) // parallelism
        pq.write_table(table.slice(lo, hi - lo), os.path.join(folder, f"part-{s}.parquet"), compression="zstd")
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))


def spark_read(spark, folder, repeat):
    """The Parquet copy read back in full by Spark (spark.read.parquet -> noop sink) `repeat`
    times: (median ms, all)."""
    reads = []
    for _ in range(repeat):
        t = time.perf_counter()
        spark.read.parquet(folder).write.format("noop").mode("overwrite").save()
        reads.append((time.perf_counter() - t) * 1000)
    return statistics.median(reads), reads


def _epoch_dict(e):
    return {"epoch": e.epoch, "records_in": e.records_in, "duration_ms": e.duration_ms,
            "checkpoint_ms": e.checkpoint_ms, "started_at": e.started_at, "state_bytes_written": e.state_bytes_written,
            "local_stores": e.local_stores, "local_store_hits": e.local_store_hits}


def role_sluice(spec):
    sys.path.insert(0, REPO)
    from runtime.execution.spark import get_spark_session
    m = {"checks": []}
    p, keys, epochs = spec["parallelism"], spec["keys"], spec["epochs"]
    build_split, small_split, build_total, small_total = epoch_totals(keys, spec["small_records"], p, epochs)
    t = time.perf_counter()
    # Its job is one pipeline whose keyed subtasks keep their state: it runs in the slots' pools.
    spark = get_spark_session(f"local[{p}]", f"sluice: bench keyed state {spec['variant']}", slot_pools=True)
    warm = os.path.join(spec["workdir"], "warm-up")      # the first jobs of a session are slow
    run_sluice_job(spark, spec, 200, warm, 3, 100, 50)
    import pyarrow as pa
    parquet_copy(pa.table({"key": ["a", "b"], "value_count": [1, 2]}), os.path.join(warm, "parquet"), p)
    spark_read(spark, os.path.join(warm, "parquet"), 2)
    shutil.rmtree(warm, ignore_errors=True)
    m["startup_s"] = time.perf_counter() - t

    # -- the run: epoch 0 builds N keys, then small epochs ----------------------------------------
    warehouse = os.path.join(spec["workdir"], "warehouse")
    competitor.set_phase(spec["phase"], "run")
    t = time.perf_counter()
    runner, result, _ = run_sluice_job(spark, spec, keys, warehouse, 1 + epochs, build_split, small_split)
    m["run_s"] = time.perf_counter() - t
    m["epochs"] = [_epoch_dict(e) for e in result.epochs]
    total = sum(e.records_in for e in result.epochs)
    expected_total = build_total + epochs * small_total
    m["checks"].append((total == expected_total, f"records read {total:,} (expected {expected_total:,}): "
                                                 f"{'OK' if total == expected_total else 'MISMATCH'}"))
    from runtime.checkpoint.storage import CheckpointStorage
    checkpoint_id = CheckpointStorage(runner.job_dir).checkpoints.completed()[-1].checkpoint_id
    del runner, result

    # -- the restored run: one small epoch, the state rebuilt from Delta ---------------------------
    competitor.set_phase(spec["phase"], "restore")
    t = time.perf_counter()
    runner, restored, driver_ms = run_sluice_job(spark, spec, keys, warehouse, 1, build_split, small_split,
                                                 restore=True)
    m["restore_run_s"] = time.perf_counter() - t
    m["restore_driver_ms"] = driver_ms
    m["restored_from"] = restored.restored_from
    m["restored_epochs"] = [_epoch_dict(e) for e in restored.epochs]
    ok = restored.restored_from == checkpoint_id
    m["checks"].append((ok, f"restored from checkpoint {restored.restored_from} (expected "
                            f"{checkpoint_id}): {'OK' if ok else 'MISMATCH'}"))

    # -- the checks, after every measured phase: they hold a whole state in this process ----------
    # (both checkpoints are retained: a job keeps its last 3)
    competitor.set_phase(spec["phase"], "check")
    from runtime.state.snapshot_format import value_column
    record, table, files = checkpoint_state(runner, checkpoint_id)
    m["checkpoint_id"], m["state_rows"], m["state_bytes"] = record.checkpoint_id, record.state_rows, record.state_bytes
    m["chain_files"] = len(files)
    m["checks"].append(check_state(table.column("key"), table.column(value_column("count")), keys, total,
                                   f"checkpoint {record.checkpoint_id} ({len(files)} files in its chain)"))
    parquet = os.path.join(spec["workdir"], "parquet")
    m["spark_parquet_bytes"], m["spark_rows"] = parquet_copy(table, parquet, p), table.num_rows
    del table
    after, table_after, files_after = checkpoint_state(runner)
    m["checks"].append(check_state(table_after.column("key"), table_after.column(value_column("count")), keys,
                                   total + sum(e.records_in for e in restored.epochs),
                                   f"checkpoint {after.checkpoint_id} after the restored epoch"))
    del runner, restored, table_after

    # -- Spark reading the same rows as Parquet ---------------------------------------------------
    competitor.set_phase(spec["phase"], "spark-read")
    m["spark_read_ms"], m["spark_reads_ms"] = spark_read(spark, parquet, spec["repeat"])
    m["ok"] = True
    return m


# =========================================================================================
# Spark Structured Streaming (a subprocess)
# =========================================================================================

def write_words(path, start, count, keys):
    """One word per line for the record indexes [start, start + count), written elsewhere first."""
    import numpy as np
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        step = 1_000_000
        for lo in range(start, start + count, step):
            hi = min(lo + step, start + count)
            idx = (np.arange(lo, hi, dtype=np.int64) * (MULT % keys)) % keys
            f.write("w" + "\nw".join(map(str, idx.tolist())) + "\n")
    return tmp


def folder_files(folder):
    out = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            try:
                out[path] = os.path.getsize(path)
            except OSError:
                pass
    return out


def _sss_session(p):
    spark = competitor.structured_streaming_session("structured streaming bench keyed state", p)
    spark.conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
    return spark


def _sss_start(spark, input_folder, checkpoint):
    from pyspark.sql import functions as F
    words = spark.readStream.option("maxFilesPerTrigger", 1).text(input_folder)
    counts = words.groupBy(F.col("value").alias("word")).count()
    return (counts.writeStream.outputMode("update").format("noop")
            .option("checkpointLocation", checkpoint).start())


def _sss_batches(spark, folder, keys, sizes, first_batch=0, start=0):
    """Run a query over one file per micro-batch (a query started again on the folder's checkpoint
    when ``first_batch`` > 0, from record ``start``); returns (per-batch figures, checkpoint folder)."""
    inbox, incoming, checkpoint = (os.path.join(folder, d) for d in ("input", "incoming", "checkpoint"))
    for d in (inbox, incoming):
        os.makedirs(d, exist_ok=True)
    pending = []
    for b, n in enumerate(sizes, first_batch):    # written before the clock; moved in one by one
        pending.append(write_words(os.path.join(incoming, f"batch-{b:05d}.txt"), start, n, keys))
        start += n
    batches, query = [], None
    seen = {}
    try:
        for b, tmp in enumerate(pending, first_batch):
            os.replace(tmp, os.path.join(inbox, f"batch-{b:05d}.txt"))
            started_ms = 0.0
            if query is None:
                t = time.perf_counter()
                query = _sss_start(spark, inbox, checkpoint)
                started_ms = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            query.processAllAvailable()
            wall = (time.perf_counter() - t) * 1000
            files = folder_files(checkpoint)
            new_bytes = sum(size for path, size in files.items() if seen.get(path) != size)
            batches.append({"batch": b, "wall_ms": wall, "start_ms": started_ms,
                            "checkpoint_bytes": sum(files.values()), "new_bytes": new_bytes})
            seen = files
        progress = {p["batchId"]: p for p in query.recentProgress if p.get("numInputRows")}
        for rec in batches:
            p = progress.get(rec["batch"])
            if p is not None:
                rec["trigger_ms"] = p["durationMs"].get("triggerExecution")
                rec["rows"] = p["numInputRows"]
                rec["state_rows"] = sum(o.get("numRowsTotal", 0) for o in p.get("stateOperators", []))
                rec["state_updated"] = sum(o.get("numRowsUpdated", 0) for o in p.get("stateOperators", []))
    finally:
        if query is not None:
            query.stop()
    return batches, checkpoint


def role_sss(spec):
    m = {"checks": []}
    p, keys, epochs = spec["parallelism"], spec["keys"], spec["epochs"]
    _, _, build_total, small_total = epoch_totals(keys, spec["small_records"], p, epochs)
    t = time.perf_counter()
    spark = _sss_session(p)
    warm = os.path.join(spec["workdir"], "warm-up")    # code generation, class loading, RocksDB
    _sss_batches(spark, warm, 200, [200, 50, 50])
    shutil.rmtree(warm, ignore_errors=True)
    m["startup_s"] = time.perf_counter() - t

    competitor.set_phase(spec["phase"], "run")
    t = time.perf_counter()
    batches, checkpoint = _sss_batches(spark, os.path.join(spec["workdir"], "run"), keys,
                                       [build_total] + [small_total] * epochs)
    m["run_s"] = time.perf_counter() - t
    m["batches"] = batches
    total = build_total + epochs * small_total
    rows = sum(b.get("rows", 0) for b in batches)
    m["checks"].append((rows == total and len(batches) == epochs + 1,
                        f"{len(batches)} micro-batches, {rows:,} rows (expected {epochs + 1} and {total:,}): "
                        f"{'OK' if rows == total and len(batches) == epochs + 1 else 'MISMATCH'}"))
    # The restart: the query started again on its checkpoint, one more small batch.
    competitor.set_phase(spec["phase"], "restore")
    restart, checkpoint = _sss_batches(spark, os.path.join(spec["workdir"], "run"), keys, [small_total],
                                       first_batch=epochs + 1, start=total)
    m["restart_ms"] = restart[0]["wall_ms"] + restart[0]["start_ms"]
    total += small_total
    # The final state, as Spark's state data source reads it from the checkpoint.
    competitor.set_phase(spec["phase"], "check")
    try:
        # key: struct<value: string> (the grouping column), value: struct<count: bigint>
        table = spark.read.format("statestore").load(checkpoint).selectExpr("key.*", "value.*").toArrow()
        m["checks"].append(check_state(table.column(0), table.column("count"), keys, total,
                                       "Structured Streaming's state store (format statestore)"))
    except Exception as e:
        m["checks"].append((False, f"Structured Streaming's state: not read ({type(e).__name__}: {e})"))
    spark.stop()
    m["ok"] = True
    return m


ROLES = {"sluice": role_sluice, "sss": role_sss}
# What the peak RSS figure covers: start-up, the run, the restored run; not the benchmark's own
# checks and Parquet copy (an Arrow table of the whole state in the driver).
MEASURED_PHASES = (competitor.STARTUP, "run", "restore")


def run_role(name, spec_path):
    return competitor.run_role(ROLES, name, spec_path)


# =========================================================================================
# The parent: a subprocess per competitor (bench/competitor.py), its peak RSS
# =========================================================================================

def run_competitor(name, role, spec, workdir, timeout):
    spec = dict(spec, workdir=os.path.join(workdir, name), metrics=os.path.join(workdir, f"{name}.json"),
                phase=os.path.join(workdir, f"{name}.phase"))
    os.makedirs(spec["workdir"], exist_ok=True)
    log_path = os.path.join(workdir, f"{name}.log")
    metrics = competitor.run(
        sys.executable, os.path.abspath(__file__), role, spec, os.path.join(workdir, f"{name}.spec.json"),
        log_path, timeout, cwd=REPO, phase_path=spec["phase"], measured_phases=MEASURED_PHASES,
        announce=lambda load: print(f"-- {name}: running (log {log_path}; load average {load:.2f})", flush=True))
    metrics.setdefault("checks", [] if metrics.get("ok") else [(False, metrics.get("error"))])
    if not metrics.get("ok"):
        print(f"   FAILED: {metrics.get('error')}\n{competitor.tail(log_path, 25)}", flush=True)
    return metrics


# =========================================================================================
# Figures
# =========================================================================================

def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def _f(x, spec=",.0f"):
    return "-" if x is None else format(x, spec)


def _bytes(n):
    if n is None:
        return "-"
    return f"{n / 2**20:,.2f} MiB" if n >= 2**20 else f"{n / 2**10:,.1f} KiB"


def summarise(name, m):
    """The figures of one competitor at one size."""
    s = {"name": name, "ok": bool(m.get("ok")), "peak_rss": m.get("peak_rss"), "peak_rss_jvm": m.get("peak_rss_jvm"),
         "peak_pss": m.get("peak_pss"), "peak_processes": m.get("peak_processes") or [],
         "checks": m.get("checks", []), "error": m.get("error"), "load": m.get("load_before")}
    if not m.get("ok"):
        return s
    if name == SSS:
        small = m["batches"][1:]
        s["build_ms"] = m["batches"][0].get("trigger_ms")
        s["epochs_ms"] = [b.get("trigger_ms") for b in small]
        s["walls_ms"] = [b["wall_ms"] for b in small]
        s["wall_ms"] = _median(s["walls_ms"])
        growth = [b["checkpoint_bytes"] - a["checkpoint_bytes"] for a, b in zip(m["batches"], m["batches"][1:])]
        s["bytes_median"], s["bytes_mean"] = _median(growth), _mean(growth)
        s["new_bytes_median"] = _median([b["new_bytes"] for b in small])
        s["restart_ms"] = m.get("restart_ms")
    else:
        small = m["epochs"][1:]
        s["build_ms"] = m["epochs"][0]["duration_ms"]
        s["epochs_ms"] = keyed_count.epoch_costs(small)
        s["commit_ms"] = _median([e["checkpoint_ms"] for e in small])
        written = [e["state_bytes_written"] for e in small]
        s["bytes_median"], s["bytes_mean"] = _median(written), _mean(written)
        stores = sum(e["local_stores"] for e in small)
        s["hit_rate"] = sum(e["local_store_hits"] for e in small) / stores if stores else None
        first = m["restored_epochs"][0] if m.get("restored_epochs") else None
        s["restore_epoch_ms"] = keyed_count.epoch_costs([first])[0] if first else None
        s["restore_driver_ms"] = m.get("restore_driver_ms")
        s["restart_ms"] = m["restore_run_s"] * 1000 if m.get("restore_run_s") is not None else None
        s["restore_hits"] = f"{first['local_store_hits']}/{first['local_stores']}" if first else "-"
        s["spark_read_ms"] = m.get("spark_read_ms")
        s["spark_parquet_bytes"] = m.get("spark_parquet_bytes")
        s["state_rows"], s["state_bytes"] = m.get("spark_rows"), m.get("state_bytes")
    s["epoch_ms"] = _median(s["epochs_ms"])
    if s.get("restore_epoch_ms") is not None and s["epoch_ms"] is not None:
        s["rebuild_ms"] = s["restore_epoch_ms"] - s["epoch_ms"] + (s.get("restore_driver_ms") or 0)
    return s


def print_size(keys, rows):
    sss = next((r for r in rows if r["name"] == SSS and r["ok"]), None)
    print(f"\n== {keys:,} keys: results", flush=True)
    for r in rows:
        if not r["ok"]:
            print(f"  {r['name']:<20} FAILED: {r['error']}")
            continue
        ratio = (r["epoch_ms"] / sss["epoch_ms"]) if sss and r["name"] != SSS and sss["epoch_ms"] else None
        each = ", ".join(_f(x) for x in r["epochs_ms"])
        line = (f"  {r['name']:<20} small epochs {_f(r['epoch_ms'])} ms median ({each})"
                + (f" = {ratio:.2f}x Structured Streaming" if ratio else "")
                + f"; build {_f(r['build_ms'])} ms; checkpoint bytes/epoch median {_bytes(r['bytes_median'])}, "
                  f"mean {_bytes(r['bytes_mean'])}; peak RSS {_bytes(r['peak_rss'])} (JVM {_bytes(r['peak_rss_jvm'])}), "
                  f"peak PSS {_bytes(r.get('peak_pss'))}")
        if r["name"] == SSS:
            line += (f"; wall around processAllAvailable {_f(r['wall_ms'])} ms median; new checkpoint files "
                     f"{_bytes(r['new_bytes_median'])} per batch (median)")
        else:
            hit = "-" if r["hit_rate"] is None else f"{100 * r['hit_rate']:.0f} %"
            line += (f"; commit {_f(r['commit_ms'])} ms; local-store hits {hit}; restored run's first epoch "
                     f"{_f(r['restore_epoch_ms'])} ms (driver restore {_f(r['restore_driver_ms'])} ms, local stores "
                     f"{r['restore_hits']}; minus a small epoch: {_f(r.get('rebuild_ms'))} ms) vs Spark reading "
                     f"the {r['state_rows'] or 0:,}-row state as Parquet {_f(r['spark_read_ms'])} ms")
        line += f"; restart (one small epoch) {_f(r.get('restart_ms'))} ms"
        print(line)
        if r["peak_processes"]:
            print(f"      at the peak (RSS / PSS MiB): {competitor.breakdown(r['peak_processes'])}")
        for ok, msg in r["checks"]:
            print(f"      {'ok  ' if ok else 'FAIL'} {msg}")


def _default_verdict(keys, r, sss) -> str:
    """Issue 35's targets for the default configuration, at one size."""
    def check(label, mine, theirs, at_most=1.0):
        if mine is None or not theirs:
            return f"{label}: not measured"
        ratio = mine / theirs
        return f"{label}: {'met' if ratio <= at_most else 'NOT met'} ({ratio:.2f}x)"
    parts = [check(f"small epoch at most {TARGET_VS_SSS:g}x Structured Streaming's", r["epoch_ms"], sss["epoch_ms"],
                   TARGET_VS_SSS),
             check("building the state at most Structured Streaming's", r["build_ms"], sss["build_ms"]),
             check("restart at most Structured Streaming's", r.get("restart_ms"), sss.get("restart_ms")),
             check("peak RSS at most Structured Streaming's", r["peak_rss"], sss["peak_rss"]),
             check("peak PSS at most Structured Streaming's", r.get("peak_pss"), sss.get("peak_pss"))]
    return f"At {keys:,} keys, default configuration: " + "; ".join(parts) + "."


def report(results, args):
    base = {}       # variant -> its small-epoch median at 1,000 keys
    for keys, rows in results:
        if keys == 1000:
            base = {r["name"]: r["epoch_ms"] for r in rows if r["ok"]}
    md = ["| keys | competitor | small epoch ms (median) | / Structured Streaming | / same at 1,000 keys "
          "| build epoch ms | ckpt bytes per small epoch (median / mean) | local-store hits "
          "| peak RSS MiB (JVM) | peak PSS MiB | restart ms | restored first epoch ms (rebuild) | Spark Parquet read ms | counts |",
          "|" + "---|" * 14]
    verdicts = []
    for keys, rows in results:
        sss = next((r for r in rows if r["name"] == SSS and r["ok"]), None)
        for r in rows:
            checks = "OK" if r["checks"] and all(ok for ok, _ in r["checks"]) else "FAILED"
            if not r["ok"]:
                md.append(f"| {keys:,} | {r['name']} | FAILED: {str(r['error'])[:80]} |" + " |" * 10 + f" {checks} |")
                continue
            ratio = r["epoch_ms"] / sss["epoch_ms"] if sss and r["name"] != SSS and sss["epoch_ms"] else None
            vs1k = r["epoch_ms"] / base[r["name"]] if base.get(r["name"]) and keys != 1000 else None
            restore = ("-" if r["name"] == SSS else
                       f"{_f(r['restore_epoch_ms'])} ({_f(r.get('rebuild_ms'))})")
            hits = "-" if r.get("hit_rate") is None else f"{100 * r['hit_rate']:.0f} %"
            md.append(f"| {keys:,} | {r['name']} | {_f(r['epoch_ms'])} | {_f(ratio, '.2f')}{'x' if ratio else ''} "
                      f"| {_f(vs1k, '.2f')}{'x' if vs1k else ''} | {_f(r['build_ms'])} "
                      f"| {_bytes(r['bytes_median'])} / {_bytes(r['bytes_mean'])} | {hits} "
                      f"| {_f(r['peak_rss'] / 2**20 if r['peak_rss'] else None)} "
                      f"({_f(r['peak_rss_jvm'] / 2**20 if r['peak_rss_jvm'] else None)}) "
                      f"| {_f(r['peak_pss'] / 2**20 if r.get('peak_pss') else None)} | {_f(r.get('restart_ms'))} "
                      f"| {restore} "
                      f"| {_f(r.get('spark_read_ms'))} | {checks} |")
            if keys >= 1_000_000 and r["name"] == DEFAULT and sss:
                verdicts.append(_default_verdict(keys, r, sss))
            if keys >= 1_000_000 and r["name"] == "rocksdb-incremental":
                v1 = "met" if ratio is not None and ratio <= TARGET_VS_SSS else "NOT met"
                v2 = "met" if vs1k is not None and vs1k <= TARGET_VS_1K else "NOT met"
                verdicts.append(f"At {keys:,} keys, rocksdb-incremental: at most {TARGET_VS_SSS:g}x Structured "
                                f"Streaming's micro-batch: {v1} ({_f(ratio, '.2f')}x); at most {TARGET_VS_1K:g}x "
                                f"its epoch at 1,000 keys: {v2} ({_f(vs1k, '.2f')}x).")
    return "\n".join(md + [""] + verdicts)


# =========================================================================================
# main
# =========================================================================================

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--role", choices=sorted(ROLES), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=keyed_count.parse_sizes, default=None,
                        help=f"keys of the state, comma-separated, k and m suffixes (default {DEFAULT_SIZES})")
    parser.add_argument("--with-10m", action="store_true", help="add 10,000,000 keys (takes long on 2 cores)")
    parser.add_argument("--epochs", type=int, default=6, help="small epochs after the build epoch (default 6)")
    parser.add_argument("--small-records", type=int, default=10_000,
                        help="records per small epoch (default 10,000)")
    parser.add_argument("--parallelism", type=int, default=os.cpu_count() or 2,
                        help="Spark cores, job parallelism and shuffle partitions (default: cores)")
    parser.add_argument("--variants", default="default,rocksdb-incremental,sss",
                        help="competitors, comma-separated: " + ", ".join([*SLUICE_VARIANTS, SSS]))
    parser.add_argument("--hashmap-incremental", action="store_true",
                        help="add the heap backend with incremental checkpoints")
    parser.add_argument("--repeat", type=int, default=3, help="Spark Parquet reads per competitor (default 3)")
    parser.add_argument("--timeout", type=int, default=7200, help="seconds per competitor (default 7200)")
    parser.add_argument("--workdir", help="where everything goes (default: a temp folder, deleted)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--verbose", action="store_true", help="the engine's progress lines (in the logs)")
    args = parser.parse_args(argv)
    if args.role:
        return run_role(args.role, args.spec)
    if args.epochs < 2:
        parser.error("--epochs must be at least 2")
    sizes = args.sizes or keyed_count.parse_sizes(DEFAULT_SIZES)
    if args.with_10m and 10_000_000 not in sizes:
        sizes.append(10_000_000)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if args.hashmap_incremental and "hashmap-incremental" not in variants:
        variants.insert(-1 if SSS in variants else len(variants), "hashmap-incremental")
    unknown = [v for v in variants if v not in SLUICE_VARIANTS and v != SSS]
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)}")

    workdir = keyed_count.make_workdir(args.workdir, "sluice-bench-keyed-state-")
    print(f"Keyed-state benchmark: {', '.join(f'{s:,}' for s in sizes)} keys; a build epoch, then {args.epochs} "
          f"epochs of {args.small_records:,} records; parallelism {args.parallelism}; {', '.join(variants)}; "
          f"work folder {workdir}", flush=True)
    results = []
    for keys in sizes:
        folder = os.path.join(workdir, f"keys-{keys}")
        os.makedirs(folder, exist_ok=True)
        print(f"\n== {keys:,} keys", flush=True)
        rows = []
        for name in variants:
            spec = {"keys": keys, "epochs": args.epochs, "small_records": args.small_records,
                    "parallelism": args.parallelism, "repeat": args.repeat, "verbose": args.verbose,
                    "variant": name}
            if name in SLUICE_VARIANTS:
                spec["backend"], spec["incremental"] = SLUICE_VARIANTS[name][:2]
                spec["configuration"] = dict(SLUICE_VARIANTS[name][2:] and SLUICE_VARIANTS[name][2])
            m = run_competitor(name, SSS if name == SSS else "sluice", spec, folder, args.timeout)
            rows.append(summarise(name, m))
            rows[-1]["raw"] = m
        print_size(keys, rows)
        results.append((keys, rows))
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)

    print(f"\n== results (Markdown; parallelism {args.parallelism}, {args.epochs} small epochs of "
          f"{args.small_records:,} records, {time.strftime('%Y-%m-%d')}, load average "
          f"{os.getloadavg()[0]:.1f})\n")
    print(report(results, args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"keys": k, "competitors": rows} for k, rows in results], f, indent=1, default=str)
    failed = [msg for _, rows in results for r in rows for ok, msg in r["checks"] if not ok]
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    if failed:
        print("\nFAILED checks:\n  " + "\n  ".join(str(m) for m in failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
