"""Soak benchmark: a job that runs for thousands of epochs, each with a checkpoint; does what an
epoch costs, the files Sluice keeps and the memory it holds stay flat?

    .venv/bin/python bench/soak.py                              # 2,000 epochs, hashmap and rocksdb
    .venv/bin/python bench/soak.py --epochs 600 --backends rocksdb --every 100

The job: bench/keyed_count.py's keyed count (DataGeneratorSource of words ``w{i % 1000}`` ->
key_by -> a count per key in ValueState), parallelism 2, 1,000 records an epoch, a checkpoint
every epoch. Per backend, on one SparkSession in this process:

  run 1   ``--every`` epochs (200), then a restored run of one epoch (the restore timed: the
          driver's Recovery.restore, and the restored run's first epoch) and a listing of the
          checkpoints from a fresh reader (what ``sluice checkpoints`` and the web view do);
  run 2   restored from run 1, the remaining epochs in one run; every ``--every`` epochs it
          samples the files and Delta log entries of each of the job's tables, the driver's
          RSS (this Python process and its JVM) and the Python workers' RSS;
  end     the restore and the listing again, at the last epoch.

Printed per window of ``--every`` epochs: median epoch time (start to the next epoch's start,
as bench/keyed_count.py's epoch_costs) and checkpoint commit time, files and log entries per
table, RSS. The targets (issue 32): the last window within 1.2x of the second (epochs
200-400) in epoch and commit time; files per table bounded; driver RSS growth under 10 %; the
restore at the end within 1.2x of the restore at the first window. The ratios are printed, and
the exit code is 1 when a count check fails (the state must hold every record read).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keyed_count  # noqa: E402

KEYS = 1000


def word_of(i):
    return f"w{i % KEYS}"


def rss_mb(pid) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def descendants(pid) -> list[tuple[int, str]]:
    """(pid, command name) of every process below ``pid``."""
    children: dict = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    text = f.read()
                name = text[text.index("(") + 1:text.rindex(")")]
                ppid = int(text[text.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                continue
            children.setdefault(ppid, []).append((int(entry), name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child[0])
    return out


def memory() -> dict:
    below = descendants(os.getpid())
    jvm = sum(rss_mb(p) for p, name in below if name == "java")
    workers = sum(rss_mb(p) for p, name in below if name.startswith("python"))
    return {"driver": rss_mb(os.getpid()), "jvm": jvm, "workers": workers}


def table_files(job_dir) -> dict:
    """table -> (data files, log entries): every Delta table under the job's folder."""
    out = {}
    for root, dirs, files in os.walk(job_dir):
        if os.path.basename(root) == "_delta_log":
            dirs[:] = []
            continue
        if "_delta_log" in dirs:
            data = sum(len([f for f in fs if f.endswith(".parquet")])
                       for r, ds, fs in os.walk(root) if "_delta_log" not in r)
            log = len([f for f in os.listdir(os.path.join(root, "_delta_log")) if f.endswith(".json")])
            out[os.path.relpath(root, job_dir)] = (data, log)
    return out


def all_files(job_dir) -> int:
    return sum(len(fs) for _, _, fs in os.walk(job_dir))


def restore_and_list(spark, args, graph, warehouse, job_dir):
    """The restore's driver part and first epoch, and a fresh listing of the checkpoints, in ms."""
    from runtime.checkpoint.storage import CheckpointStorage
    runner, result, restore_ms = keyed_count.run_job(spark, graph, args.parallelism, warehouse, 1,
                                                     KEYS // args.parallelism, restore=True)
    started = time.perf_counter()
    history = CheckpointStorage(job_dir).checkpoints.history()
    listing_ms = (time.perf_counter() - started) * 1000
    return restore_ms, result.epochs[0].duration_ms, listing_ms, len(history)


def soak(spark, args, backend, workdir) -> bool:
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.storage.layout import job_dir as job_dir_of
    warehouse = os.path.join(workdir, backend)
    configuration = {"state.backend.type": backend} if backend != "default" else {}
    graph = keyed_count.build_graph(word_of, args.parallelism, "soak", configuration=configuration)
    job_dir = job_dir_of(warehouse, "soak")
    per_split = KEYS // args.parallelism
    _, first, _ = keyed_count.run_job(spark, graph, args.parallelism, warehouse, args.every, per_split)
    early = restore_and_list(spark, args, graph, warehouse, job_dir)
    samples = []

    def before_run(runner):
        report = runner._report

        def sampling(summary):
            report(summary)
            if (summary.epoch + 1) % args.every == 0:
                samples.append((summary.epoch + 1, table_files(job_dir), all_files(job_dir), memory()))
        runner._report = sampling
        runner.checkpoints.report = sampling
    remaining = args.epochs - args.every - 1
    _, second, _ = keyed_count.run_job(spark, graph, args.parallelism, warehouse, remaining, per_split,
                                       restore=True, before_run=before_run)
    late = restore_and_list(spark, args, graph, warehouse, job_dir)
    epochs = list(first.epochs) + list(second.epochs)
    costs = dict(zip((e.epoch for e in second.epochs), keyed_count.epoch_costs(second.epochs)))
    costs.update(zip((e.epoch for e in first.epochs), keyed_count.epoch_costs(first.epochs)))
    commits = {e.epoch: e.checkpoint_ms for e in epochs if e.checkpoint_ms}

    print(f"\n## {backend}: {len(epochs) + 2} epochs, {KEYS} keys, {KEYS} records an epoch, a checkpoint each")
    print("| epochs | epoch ms | commit ms | files (all) | data files / log entries per table | driver MB | JVM MB | workers MB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    windows = []
    for upto, tables, files, mem in samples:
        window = range(upto - args.every, upto)
        epoch_ms = statistics.median([costs[e] for e in window if e in costs])
        commit_ms = statistics.median([commits[e] for e in window if e in commits])
        windows.append((epoch_ms, commit_ms, mem))
        per_table = ", ".join(f"{t} {d}/{n}" for t, (d, n) in sorted(tables.items()))
        print(f"| {upto - args.every}-{upto} | {epoch_ms:.0f} | {commit_ms:.0f} | {files} | {per_table} "
              f"| {mem['driver']:.0f} | {mem['jvm']:.0f} | {mem['workers']:.0f} |")
    print(f"\nrestore at epoch {args.every}: driver {early[0]:.0f} ms, first epoch {early[1]:.0f} ms; "
          f"listing {early[3]} checkpoints {early[2]:.0f} ms")
    print(f"restore at epoch {args.epochs}: driver {late[0]:.0f} ms, first epoch {late[1]:.0f} ms; "
          f"listing {late[3]} checkpoints {late[2]:.0f} ms")
    if len(windows) >= 2:
        base, last = windows[0], windows[-1]
        growth = (last[2]["driver"] + last[2]["jvm"]) / (base[2]["driver"] + base[2]["jvm"]) - 1
        print(f"ratios, last window / first sampled window: epoch {last[0] / base[0]:.2f}x, commit "
              f"{last[1] / base[1]:.2f}x, driver RSS (Python + JVM) {growth * 100:+.1f} %; restore "
              f"{(late[0] + late[1]) / (early[0] + early[1]):.2f}x, listing {late[2] / early[2]:.2f}x")
    record = CheckpointStorage(job_dir).checkpoints.completed()[-1]
    ok = record.state_rows >= KEYS
    if not ok:
        print(f"CHECK FAILED: the last checkpoint holds {record.state_rows} rows, expected at least {KEYS}")
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=2000)
    parser.add_argument("--every", type=int, default=200)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--backends", default="default,rocksdb")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    workdir = keyed_count.make_workdir(args.workdir, "sluice-soak-")
    from runtime.execution.spark import get_spark_session
    spark = get_spark_session(f"local[{args.parallelism}]", "soak")
    ok = True
    for backend in args.backends.split(","):
        ok = soak(spark, args, backend.strip(), workdir) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
