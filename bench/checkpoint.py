"""Checkpoint benchmark: checkpoint duration, state size and restore time of a word-count state of
10 thousand, 1 million and 10 million keys, against writing and reading the same rows as plain
Parquet with Spark in the same run.

    .venv/bin/python bench/checkpoint.py                          # 10k, 1M and 10M keys
    .venv/bin/python bench/checkpoint.py --sizes 10k,1m           # skip 10M (the long one)
    .venv/bin/python bench/checkpoint.py --sizes 10000 --epochs 3 --workdir /tmp/cp

The job (one per size N): an unbounded DataGeneratorSource of words ``w{i % N}`` -> key_by(word)
-> a KeyedProcessFunction (uid "word-counts") keeping the count per word in
``ValueStateDescriptor("count", Types.LONG())`` and emitting nothing. Each epoch reads N records
(``sluice.epoch.max-records-per-split`` = N / parallelism; subtask s generates the indexes
s, s + p, ...), so every epoch touches every key once and the state holds N keys from epoch 0 on.
Everything runs in this process on one SparkSession (local[parallelism]):

  plain         the job without checkpoints, --epochs epochs. Every epoch still snapshots its
                state (executors keep nothing between epochs: state goes from one epoch to the
                next through snapshot files in a per-run scratch folder).
  checkpointed  the same with a checkpoint every epoch (set_checkpoint_interval_epochs(1)): the
                snapshot files go into the state table's folder and the driver commits them
                (state table, source state, checkpoint record; old checkpoints are discarded).
                EpochSummary.checkpoint_ms is that commit, which runs in the background while
                the next epoch runs: an epoch's time is from its start to the next one's.
  restored      the checkpointed job once more with restore_from="latest", one epoch. The driver
                part of the restore (Recovery.restore: choose and validate the checkpoint,
                assign files to subtasks) is timed around the runner's method.
  in the tasks  the task side cannot be timed from inside Spark, so the engine's own task code
                (TaskStateManager.restore and .snapshot, plus the functions they call, for
                a breakdown) is run in this process on the last checkpoint's files, subtask by
                subtask, with the garbage collector off as in a task. The subtasks of an epoch
                run in parallel, one per core: the figure used is the slowest subtask.
  spark         the word-counts rows of the last checkpoint (the same rows and columns) read into
                a cached DataFrame, then written with df.write.parquet (zstd, as the state files,
                one file per subtask) and read back in full (spark.read.parquet -> the "noop"
                sink, which reads and materialises every column without collecting), --repeat
                times each; medians.

Figures per size:

  checkpoint overhead  commit time (checkpoint_ms) and the difference of the steady epochs'
                       medians (epochs 1.., with minus without checkpoints), each as % of the
                       epoch time without checkpoints. Target: at most 10 % at 1 million keys.
  snapshot in tasks    what every epoch pays to hand its state over, checkpoint or not.
  checkpoint duration  snapshot in the tasks (slowest subtask) + commit, against the Spark write.
  state size           rows and bytes of the checkpoint (the checkpoints table's state_rows and
                       state_bytes, source state included) and of the Spark Parquet copy.
  restore              driver restore + task restore (slowest subtask: read the files, decode the
                       rows, load the heap backend), against the Spark read. Target: within 2x.
                       Cross-check: the restored run's first epoch minus the checkpointed run's
                       epoch 0 (which has no state to restore).

The counts are checked: after E epochs the last checkpoint must hold N keys whose counts add
up to the records read, and E + 1 epochs' worth after the restored epoch. The exit code is 1
when a check fails. A Markdown table of all sizes is printed at the end.
"""
from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import shutil
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import keyed_count  # noqa: E402
from keyed_count import STATE_UID, epoch_costs  # noqa: E402

DEFAULT_SIZES = "10k,1m,10m"
TARGET_OVERHEAD = 0.10          # checkpoint overhead at most 10 % of the epoch time (at 1M keys)
TARGET_RESTORE = 2.0            # restore within 2x of the plain Parquet read


# =========================================================================================
# The job (bench/keyed_count.py)
# =========================================================================================

def word_of(i, keys):
    return f"w{i % keys}"


# =========================================================================================
# Running the engine
# =========================================================================================

def run_job(spark, args, keys, warehouse, checkpointed, epochs, restore=False):
    """One run of the job; returns (JobRunner, JobExecutionResult, driver restore ms or None)."""
    graph = keyed_count.build_graph(functools.partial(word_of, keys=keys), args.parallelism,
                                    f"bench checkpoint {keys}", checkpoint_every_epoch=checkpointed)
    return keyed_count.run_job(spark, graph, args.parallelism, warehouse, epochs, -(-keys // args.parallelism),
                               verbose=args.verbose, restore=restore)


def state_vertex(job_graph):
    for v in job_graph.vertices:
        for n in v.operators:
            if n.uid == STATE_UID:
                return v, n
    raise RuntimeError(f"no operator with uid {STATE_UID!r} in the job graph")


def checkpoint_files(storage, record, operator_id=None):
    """The files of a checkpoint as RestorePoint.files() gives them (absolute paths)."""
    from runtime.checkpoint.restore import RestorePoint
    files = RestorePoint(record, storage.job_dir).files()
    return [f for f in files if operator_id is None or f["operator_id"] == operator_id]


def check_counts(files, keys, expected_total, label):
    """The checkpointed state: `keys` keys whose counts add up to expected_total."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    tables = [pq.read_table(f["path"], columns=["key", "state_name", "value_count"]) for f in files]
    n_keys = total = 0
    for t in tables:
        rows = t.filter(pc.equal(t.column("state_name"), "count"))
        n_keys += rows.num_rows
        total += pc.sum(rows.column("value_count")).as_py() or 0
    ok = n_keys == keys and total == expected_total
    msg = (f"{label}: {'OK' if ok else 'MISMATCH'} ({n_keys:,} keys, counts add up to {total:,}; "
           f"expected {keys:,} keys and {expected_total:,})")
    return ok, msg


# =========================================================================================
# The task side, run in this process
# =========================================================================================

def measure_tasks(runner, record, snapshot_root, epoch):
    """TaskStateManager.restore and .snapshot of every subtask of the word-counts vertex on the files
    of `record`, with a breakdown; returns a list of dicts (one per subtask), times in ms."""
    from runtime.checkpoint.restore import assign_state
    from runtime.state.snapshot_format import state_table_name
    from runtime.state.snapshot_reader import read_state_file, table_to_snapshot
    from runtime.state.snapshot_writer import snapshot_to_table, write_state_file
    from runtime.task.stream_task import Acknowledgement, StreamTask, TaskDeploymentDescriptor

    storage, job_graph = runner.storage, runner.job_graph
    vertex, node = state_vertex(job_graph)
    files = [f for f in checkpoint_files(storage, record) if not f.get("source_state")]
    parallelism = {op["operator_id"]: op["parallelism"] for op in record.operators}
    assigned = assign_state(files, parallelism, job_graph)
    out = []
    for s in range(vertex.parallelism):
        restored = assigned.get((vertex.id, s))

        def tdd(folder):
            return TaskDeploymentDescriptor(
                job_vertex_id=vertex.id, subtask_index=s, attempt_number=0, epoch=epoch,
                processing_time=int(time.time() * 1000), end_of_input=False, splits=(),
                restored_state=restored, snapshot_dir=os.path.join(snapshot_root, folder, "{table}"))

        m = {"subtask": s}
        gc.collect()
        gc.disable()
        try:
            # What a task does: restore, open, (process), close, snapshot.
            task = StreamTask(job_graph, tdd("task"), dict(job_graph.stream_graph.settings.job_parameters))
            t = time.perf_counter()
            task.state.restore(task.chain.all_operators, Acknowledgement(vertex.id, s))
            m["restore_ms"] = (time.perf_counter() - t) * 1000
            ops = task.chain.all_operators
            for op in reversed(ops):
                op.open()
            for op in ops:
                op.close()
            op = task.operators[node.id]
            m["keys"] = sum(len(t) for t in op.backend.tables.values())
            ack = Acknowledgement(vertex.id, s)
            t = time.perf_counter()
            task.state.snapshot(ops, ack)
            m["snapshot_ms"] = (time.perf_counter() - t) * 1000
            m["snapshot_bytes"] = sum(f.size for f in ack.state_files)
            m["snapshot_rows"] = sum(f.rows for f in ack.state_files)

            # The same steps once more, one function at a time (a breakdown, timed apart).
            kgr = task.ctx.key_group_range
            paths = restored.files.get(node.operator_id, ()) if restored else ()
            t = time.perf_counter()
            tables = [read_state_file(p, kgr) for p in paths]
            m["read_ms"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            table_to_snapshot(tables)
            m["decode_ms"] = (time.perf_counter() - t) * 1000
            del tables
            m["load_ms"] = max(0.0, m["restore_ms"] - m["read_ms"] - m["decode_ms"])
            t = time.perf_counter()
            snap = op.snapshot()
            m["rows_ms"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            table = snapshot_to_table(snap, s, f"{op.name} {task.ctx.subtask_label}")
            m["arrow_ms"] = (time.perf_counter() - t) * 1000
            del snap
            t = time.perf_counter()
            write_state_file(table, os.path.join(snapshot_root, "breakdown", state_table_name(node)),
                             node.operator_id, s)
            m["write_ms"] = (time.perf_counter() - t) * 1000
            del table, task, op, ops
        finally:
            gc.enable()
        gc.collect()
        out.append(m)
    return out


# =========================================================================================
# Spark: the same rows as plain Parquet
# =========================================================================================

def spark_parquet(spark, files, folder, parallelism, repeat, compression):
    """Write and read back the rows of `files` with Spark; times in ms (medians over `repeat`)."""
    import pyarrow.parquet as pq
    columns = [c for c in pq.read_schema(files[0]).names]
    df = spark.read.parquet(*files).select(*columns).coalesce(parallelism).cache()
    rows = df.count()
    writes, reads, sizes = [], [], []
    try:
        for r in range(repeat):
            out = os.path.join(folder, f"copy-{r}")
            t = time.perf_counter()
            df.write.mode("overwrite").option("compression", compression).parquet(out)
            writes.append((time.perf_counter() - t) * 1000)
            sizes.append(sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".parquet")))
        for r in range(repeat):
            out = os.path.join(folder, f"copy-{r}")
            t = time.perf_counter()
            spark.read.parquet(out).write.format("noop").mode("overwrite").save()
            reads.append((time.perf_counter() - t) * 1000)
        read_rows = spark.read.parquet(os.path.join(folder, "copy-0")).count()
        n_files = len([f for f in os.listdir(os.path.join(folder, "copy-0")) if f.endswith(".parquet")])
    finally:
        df.unpersist()
    return {"rows": rows, "read_rows": read_rows, "files": n_files, "bytes": sizes[0],
            "write_ms": statistics.median(writes), "read_ms": statistics.median(reads),
            "writes_ms": writes, "reads_ms": reads}


# =========================================================================================
# One size
# =========================================================================================

def _load():
    return os.getloadavg()[0]


def _median(xs):
    return statistics.median(xs) if xs else None


def _ms(xs):
    return ", ".join(f"{x:.0f}" for x in xs)


def _mib(n):
    return f"{n / 2**20:,.1f} MiB"


def _f(x, spec=".0f"):
    return "n/a" if x is None else format(x, spec)


def _pct(x):
    return "n/a" if x is None else f"{100 * x:.1f} %"


def bench_size(spark, args, keys, workdir):
    from runtime.checkpoint.storage import CheckpointStorage
    res = {"keys": keys, "epochs": args.epochs, "parallelism": args.parallelism, "checks": []}
    per_split = -(-keys // args.parallelism)
    per_epoch = per_split * args.parallelism
    print(f"\n== {keys:,} keys: {args.epochs} epochs of {per_epoch:,} records per run, parallelism "
          f"{args.parallelism} (load average {_load():.2f})", flush=True)
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)

    # -- without checkpoints -----------------------------------------------------------------
    res["load_plain"] = _load()
    _, plain, _ = run_job(spark, args, keys, os.path.join(workdir, "plain"), False, args.epochs)
    res["plain_epochs_ms"] = epoch_costs(plain.epochs)
    res["plain_ms"] = _median(res["plain_epochs_ms"][1:])
    print(f"  without checkpoints : epochs {_ms(res['plain_epochs_ms'])} ms; steady (1..) median "
          f"{res['plain_ms']:.0f} ms", flush=True)

    # -- a checkpoint every epoch --------------------------------------------------------------
    res["load_checkpointed"] = _load()
    runner, ckpt, _ = run_job(spark, args, keys, os.path.join(workdir, "checkpointed"), True, args.epochs)
    res["ckpt_epochs_ms"] = epoch_costs(ckpt.epochs)
    res["commit_epochs_ms"] = [e.checkpoint_ms for e in ckpt.epochs]
    res["ckpt_ms"] = _median(res["ckpt_epochs_ms"][1:])
    res["commit_ms"] = _median(res["commit_epochs_ms"][1:])
    print(f"  checkpoint per epoch: epochs {_ms(res['ckpt_epochs_ms'])} ms; steady median {res['ckpt_ms']:.0f} ms; "
          f"commit (checkpoint_ms) {_ms(res['commit_epochs_ms'])} ms, steady median {res['commit_ms']:.0f} ms",
          flush=True)
    storage = CheckpointStorage(runner.job_dir)
    record = storage.checkpoints.completed()[-1]
    _, node = state_vertex(runner.job_graph)
    state_files = checkpoint_files(storage, record, node.operator_id)
    res["checkpoint_id"] = record.checkpoint_id
    res["state_rows"], res["state_bytes"] = record.state_rows, record.state_bytes
    res["wc_rows"] = sum(f["rows"] for f in state_files)
    res["wc_bytes"] = sum(f["size"] for f in state_files)
    res["wc_files"] = len(state_files)
    ok, msg = check_counts(state_files, keys, per_epoch * args.epochs, f"checkpoint {record.checkpoint_id}")
    res["checks"].append((ok, msg))
    print(f"  checkpoint {record.checkpoint_id}: {record.state_rows:,} rows, {_mib(record.state_bytes)} "
          f"(word-counts: {res['wc_rows']:,} rows in {res['wc_files']} files, {_mib(res['wc_bytes'])}; "
          f"{res['wc_bytes'] / max(1, res['wc_rows']):.1f} B/row); {msg}", flush=True)

    # -- the task side, in this process, on the last checkpoint's files ---------------------------
    try:
        subtasks = measure_tasks(runner, record, os.path.join(workdir, "tasks"), record.epoch + 1)
        res["subtasks"] = subtasks
        slow_r = max(subtasks, key=lambda m: m["restore_ms"])
        slow_s = max(subtasks, key=lambda m: m["snapshot_ms"])
        res["task_restore_ms"], res["task_snapshot_ms"] = slow_r["restore_ms"], slow_s["snapshot_ms"]
        loaded = sum(m["keys"] for m in subtasks)
        ok = loaded == keys
        res["checks"].append((ok, f"tasks restored {loaded:,} keys: {'OK' if ok else 'MISMATCH'}"))
        for m in subtasks:
            print(f"  subtask {m['subtask']}: {m['keys']:,} keys; restore {m['restore_ms']:.0f} ms "
                  f"(read {m['read_ms']:.0f} + decode {m['decode_ms']:.0f} + load ~{m['load_ms']:.0f}); "
                  f"snapshot {m['snapshot_ms']:.0f} ms (rows {m['rows_ms']:.0f} + arrow {m['arrow_ms']:.0f} "
                  f"+ parquet {m['write_ms']:.0f}), {_mib(m['snapshot_bytes'])}", flush=True)
    except Exception as e:     # the engine's task internals may have moved
        res["task_error"] = f"{type(e).__name__}: {e}"
        res["task_restore_ms"] = res["task_snapshot_ms"] = None
        print(f"  task side: NOT MEASURED ({res['task_error']})\n{traceback.format_exc()}", flush=True)
    del runner
    gc.collect()

    # -- Spark: the same rows as plain Parquet --------------------------------------------------
    res["load_spark"] = _load()
    sp = spark_parquet(spark, [f["path"] for f in state_files], os.path.join(workdir, "spark"),
                       args.parallelism, args.repeat, args.compression)
    res["spark"] = sp
    ok = sp["rows"] == res["wc_rows"] == sp["read_rows"]
    res["checks"].append((ok, f"Spark copy: {sp['rows']:,} rows written, {sp['read_rows']:,} read back: "
                              f"{'OK' if ok else 'MISMATCH'}"))
    print(f"  Spark Parquet ({args.compression}, {sp['files']} files): write {_ms(sp['writes_ms'])} ms "
          f"(median {sp['write_ms']:.0f}), {_mib(sp['bytes'])}; read (full scan, noop sink) "
          f"{_ms(sp['reads_ms'])} ms (median {sp['read_ms']:.0f})", flush=True)

    # -- restore --------------------------------------------------------------------------------
    res["load_restored"] = _load()
    runner, restored, driver_ms = run_job(spark, args, keys, os.path.join(workdir, "checkpointed"), True, 1,
                                          restore=True)
    res["restore_driver_ms"] = driver_ms
    res["restored_from"] = restored.restored_from
    res["restored_epoch_ms"] = epoch_costs(restored.epochs)[0] if restored.epochs else None
    res["restored_commit_ms"] = restored.epochs[0].checkpoint_ms if restored.epochs else None
    ok = restored.restored_from == record.checkpoint_id
    res["checks"].append((ok, f"restored from checkpoint {restored.restored_from} "
                              f"(expected {record.checkpoint_id}): {'OK' if ok else 'MISMATCH'}"))
    storage = CheckpointStorage(runner.job_dir)
    after = storage.checkpoints.completed()[-1]
    ok, msg = check_counts(checkpoint_files(storage, after, node.operator_id), keys,
                           per_epoch * (args.epochs + 1), f"checkpoint {after.checkpoint_id} after the restored epoch")
    res["checks"].append((ok, msg))
    res["restore_e2e_ms"] = (None if res["restored_epoch_ms"] is None else
                             res["restored_epoch_ms"] - res["ckpt_epochs_ms"][0] + (driver_ms or 0))
    print(f"  restored run: driver restore {_f(driver_ms)} ms; first epoch {_f(res['restored_epoch_ms'])} ms "
          f"(commit {_f(res['restored_commit_ms'])} ms) vs the checkpointed run's epoch 0 (nothing to restore) "
          f"{res['ckpt_epochs_ms'][0]:.0f} ms; {msg}", flush=True)
    del runner

    # -- the figures -----------------------------------------------------------------------------
    plain_ms = res["plain_ms"]
    res["overhead_commit"] = res["commit_ms"] / plain_ms if plain_ms else None
    res["overhead_diff_ms"] = res["ckpt_ms"] - plain_ms
    res["overhead_diff"] = res["overhead_diff_ms"] / plain_ms if plain_ms else None
    res["snapshot_share"] = (res["task_snapshot_ms"] / plain_ms
                             if plain_ms and res["task_snapshot_ms"] is not None else None)
    res["checkpoint_duration_ms"] = (None if res["task_snapshot_ms"] is None
                                     else res["task_snapshot_ms"] + res["commit_ms"])
    res["restore_ms"] = (None if res["task_restore_ms"] is None
                         else res["task_restore_ms"] + (driver_ms or 0))
    res["write_ratio"] = (res["checkpoint_duration_ms"] / sp["write_ms"]
                          if res["checkpoint_duration_ms"] is not None else None)
    res["restore_ratio"] = res["restore_ms"] / sp["read_ms"] if res["restore_ms"] is not None else None
    res["restore_e2e_ratio"] = (res["restore_e2e_ms"] / sp["read_ms"]
                                if res["restore_e2e_ms"] is not None else None)

    fmt = _f
    print(f"  => checkpoint overhead: commit {res['commit_ms']:.0f} ms = {_pct(res['overhead_commit'])} of the "
          f"epoch without checkpoints ({plain_ms:.0f} ms); epoch difference {res['overhead_diff_ms']:+.0f} ms = "
          f"{_pct(res['overhead_diff'])} (target: at most {TARGET_OVERHEAD:.0%} at 1M keys)")
    print(f"  => snapshot in the tasks (every epoch, checkpoint or not; slowest subtask): "
          f"{fmt(res['task_snapshot_ms'])} ms = {_pct(res['snapshot_share'])} of the epoch")
    print(f"  => checkpoint duration (snapshot {fmt(res['task_snapshot_ms'])} + commit {res['commit_ms']:.0f}) "
          f"{fmt(res['checkpoint_duration_ms'])} ms vs Spark write {sp['write_ms']:.0f} ms: "
          f"{fmt(res['write_ratio'], '.2f')}x")
    print(f"  => restore (driver {fmt(driver_ms)} + tasks {fmt(res['task_restore_ms'])}) "
          f"{fmt(res['restore_ms'])} ms vs Spark read {sp['read_ms']:.0f} ms: {fmt(res['restore_ratio'], '.2f')}x "
          f"(target: within {TARGET_RESTORE:g}x); end-to-end estimate (driver + restored run's first epoch - "
          f"checkpointed run's epoch 0; noisy below a second) {fmt(res['restore_e2e_ms'])} ms = "
          f"{fmt(res['restore_e2e_ratio'], '.2f')}x", flush=True)
    for ok, msg in res["checks"]:
        if not ok:
            print(f"  CHECK FAILED: {msg}", flush=True)
    return res


# =========================================================================================
# The report
# =========================================================================================

def report(results, args):
    def f(x, spec=".0f"):
        return "-" if x is None else format(x, spec)

    md = ["| keys | epoch ms (no ckpt) | epoch ms (ckpt) | commit ms | overhead: commit | overhead: epoch diff "
          "| snapshot in tasks ms | checkpoint ms (snapshot + commit) | Spark write ms | ckpt / write "
          "| state rows | state MiB | Spark Parquet MiB | restore ms (driver + tasks) | Spark read ms "
          "| restore / read | restore e2e ms | counts |",
          "|" + "---|" * 18]
    for r in results:
        if "error" in r:
            md.append(f"| {r['keys']:,} | FAILED: {r['error'][:100]} |" + " |" * 16)
            continue
        sp = r["spark"]
        checks = "OK" if all(ok for ok, _ in r["checks"]) else "MISMATCH"
        md.append(
            f"| {r['keys']:,} | {f(r['plain_ms'])} | {f(r['ckpt_ms'])} | {f(r['commit_ms'])} "
            f"| {_pct(r['overhead_commit'])} | {_pct(r['overhead_diff'])} | {f(r['task_snapshot_ms'])} "
            f"| {f(r['checkpoint_duration_ms'])} | {f(sp['write_ms'])} | {f(r['write_ratio'], '.2f')}x "
            f"| {r['state_rows']:,} | {r['state_bytes'] / 2**20:,.1f} | {sp['bytes'] / 2**20:,.1f} "
            f"| {f(r['restore_ms'])} ({f(r['restore_driver_ms'])} + {f(r['task_restore_ms'])}) | {f(sp['read_ms'])} "
            f"| {f(r['restore_ratio'], '.2f')}x | {f(r['restore_e2e_ms'])} | {checks} |")
    lines = ["\n".join(md), ""]
    at_1m = [r for r in results if r["keys"] == 1_000_000 and "error" not in r]
    if at_1m:
        r = at_1m[0]
        verdict = "met" if r["overhead_commit"] is not None and r["overhead_commit"] <= TARGET_OVERHEAD else "NOT met"
        lines.append(f"Target 1 (checkpoint overhead at most {TARGET_OVERHEAD:.0%} of epoch time at 1M keys): "
                     f"{verdict}: commit {_pct(r['overhead_commit'])}, epoch difference {_pct(r['overhead_diff'])}.")
    else:
        lines.append("Target 1 (checkpoint overhead at 1M keys): not measured (1,000,000 not in --sizes).")
    for r in results:
        if "error" in r or r["restore_ratio"] is None:
            continue
        verdict = "met" if r["restore_ratio"] <= TARGET_RESTORE else "NOT met"
        lines.append(f"Target 2 (restore within {TARGET_RESTORE:g}x of the Parquet read) at {r['keys']:,} keys: "
                     f"{verdict} ({r['restore_ratio']:.2f}x; end-to-end estimate "
                     f"{'-' if r['restore_e2e_ratio'] is None else format(r['restore_e2e_ratio'], '.2f')}x).")
    return "\n".join(lines)


# =========================================================================================
# main
# =========================================================================================

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=keyed_count.parse_sizes, default=keyed_count.parse_sizes(DEFAULT_SIZES),
                        help=f"keys of the word-count state, comma-separated; k and m suffixes "
                             f"(default {DEFAULT_SIZES}; 10m takes long on 2 cores)")
    parser.add_argument("--epochs", type=int, default=4,
                        help="epochs per run (default 4: epoch 0 builds the state, 1.. are measured)")
    parser.add_argument("--parallelism", type=int, default=os.cpu_count() or 2,
                        help="Spark cores and job parallelism (default: cores)")
    parser.add_argument("--repeat", type=int, default=3, help="Spark writes and reads per size (default 3)")
    parser.add_argument("--compression", default="zstd",
                        help="Spark's Parquet codec (default zstd, the codec of the state files)")
    parser.add_argument("--workdir", help="where warehouses and Parquet copies go (default: a new temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep each size's files (default: deleted after it)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--verbose", action="store_true", help="the engine's progress lines")
    args = parser.parse_args(argv)
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (epoch 0 builds the state)")

    workdir = keyed_count.make_workdir(args.workdir, "sluice-bench-checkpoint-")
    print(f"Checkpoint benchmark: word-count state of {', '.join(f'{s:,}' for s in args.sizes)} keys; "
          f"{args.epochs} epochs per run, parallelism {args.parallelism}, Spark Parquet {args.compression} "
          f"x{args.repeat}; work folder {workdir}", flush=True)

    from runtime.execution.spark import get_spark_session
    t = time.perf_counter()
    spark = get_spark_session(f"local[{args.parallelism}]", "sluice: bench checkpoint")
    # A small warm-up run: the first Spark jobs of a session are slow (JIT, class loading).
    warm = os.path.join(workdir, "warm-up")
    runner, _, _ = run_job(spark, args, 1000, os.path.join(warm, "job"), True, 2)
    try:    # and the task-side code paths measured in this process
        from runtime.checkpoint.storage import CheckpointStorage
        record = CheckpointStorage(runner.job_dir).checkpoints.completed()[-1]
        measure_tasks(runner, record, os.path.join(warm, "tasks"), record.epoch + 1)
    except Exception:
        pass    # reported by the first size
    df = spark.range(1000).selectExpr("id", "cast(id as string) as key")
    df.write.mode("overwrite").option("compression", args.compression).parquet(os.path.join(warm, "parquet"))
    spark.read.parquet(os.path.join(warm, "parquet")).write.format("noop").mode("overwrite").save()
    shutil.rmtree(warm, ignore_errors=True)
    print(f"Spark {spark.version} local[{args.parallelism}] started and warmed up in "
          f"{time.perf_counter() - t:.1f} s", flush=True)

    results = []
    for keys in args.sizes:
        folder = os.path.join(workdir, f"keys-{keys}")
        try:
            results.append(bench_size(spark, args, keys, folder))
        except Exception as e:
            traceback.print_exc()
            results.append({"keys": keys, "error": f"{type(e).__name__}: {e}", "checks": [(False, str(e))]})
        if not (args.keep or args.workdir):
            shutil.rmtree(folder, ignore_errors=True)

    print(f"\n== results (Markdown; parallelism {args.parallelism}, {args.epochs} epochs per run, "
          f"{time.strftime('%Y-%m-%d')})\n")
    print(report(results, args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    failed = [msg for r in results for ok, msg in r["checks"] if not ok]
    if not (args.keep or args.workdir):
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"\nwork folder kept: {workdir}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
