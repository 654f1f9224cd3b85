"""The floor of a small epoch: what an epoch over a few hundred records costs end to end, per
phase, against Spark Structured Streaming's micro-batch on the same input and query, in one run.

    .venv/bin/python bench/epoch_floor.py                 # 5 runs of each engine, 40 s each
    .venv/bin/python bench/epoch_floor.py --quick         # 1 run of each, 20 s (a smoke test)
    .venv/bin/python bench/epoch_floor.py --runs 5 --seconds 40 --rate 1200 --epoch-ms 250

The job: Kafka (the broker the tests use, include/kafka_broker.py; 2 partitions) -> parse ->
key_by -> a running count per key (1,000 keys) -> Kafka, on ``local[2]``; Sluice with a Spark job
per epoch (sluice) and with long-running tasks (sluice-lr: sluice.epoch.tasks). Sluice's sink is
EXACTLY_ONCE with a checkpoint every epoch (an epoch starts when records wait and the one before
ran its tasks, --epoch-ms at most: sluice.epoch.interval); with --sink delta a DeltaSink instead.
Structured Streaming runs the same query (groupBy(key).count() in update mode, its Kafka sink, at
least once) with a processing-time trigger of 0 s, its in-memory state store. A producer in the
parent paces --rate records/s into the input topic while each engine runs: an epoch of ~200 ms
holds ~250 records.

Reported per engine, over the epochs after --warm-up seconds of each run (the medians of each
run, then the median over --runs runs; the engines alternate):
  Sluice   epoch (loop)   the driver's loop: planning to the checkpoint handed over (EpochSummary
                          duration_ms, the boundary wait not in it)
           to visible     from the epoch's start to its checkpoint's record committed: the Kafka
                          transaction committed, results visible to read_committed readers
                          (the epoch log's timings, total_ms less the boundary wait)
           per phase      the epoch log's stack (runtime/metrics/epoch_timings.py), median of each
  Spark    micro-batch    durationMs.triggerExecution of the batches that read records: planning,
                          the job, the offset and commit logs (its results are visible then)
The ratios printed are Sluice's over Spark's. The script is its own subprocess entry point
(``--role NAME --spec FILE``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

import competitor
from kafka import SPARK_KAFKA_JARS, create_topics, start_broker
from latency import _choices, _commit, sluice_job

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
KEYS = 1000
PARTITIONS = 2
ENGINES = ("sluice", "sluice-lr", "sss")
JOB = "epoch-floor"


# =========================================================================================
# Engines (each in its own subprocess)
# =========================================================================================

def role_sluice(spec):
    """latency.py's count query, its sink EXACTLY_ONCE (a checkpoint every epoch) or a DeltaSink."""
    sys.path.insert(0, REPO)
    from runtime.checkpoint.epoch_log import EpochLog
    from runtime.storage.layout import job_dir
    tasks = "long-running" if spec["engine"] == "sluice-lr" else "per-epoch"
    env = sluice_job(dict(spec, query="count", engine="sluice-eo", epoch_tasks=tasks), "sluice: bench epoch floor")
    client = env.execute_async(JOB)
    competitor.set_phase(spec["phase"], "job")
    time.sleep(spec["run_s"])
    client.cancel()
    client.get_job_execution_result().result()
    rows = EpochLog(job_dir(spec["warehouse"], JOB)).epoch_metrics()
    return {"epochs": [_epoch_figures(r) for r in rows]}


def _epoch_figures(row):
    """An epoch log metrics row as the figures this bench reports."""
    from runtime.metrics.epoch_timings import BOUNDARY_WAIT, stacked
    timings = row.get("timings") or {}
    parts = dict(stacked(timings)) if timings else {}
    wait = parts.get(BOUNDARY_WAIT, 0.0)
    return {"epoch": row["epoch"], "started_at": row.get("started_at"), "records": row.get("records_in", 0),
            "loop_ms": row.get("duration_ms"), "checkpoint_id": row.get("checkpoint_id"),
            "visible_ms": (timings["total_ms"] - wait) if timings and row.get("checkpoint_id") is not None else None,
            "parts": {k: v for k, v in parts.items() if k != BOUNDARY_WAIT}}


def role_sss(spec):
    """Structured Streaming's best configuration for a small micro-batch: trigger 0 s, shuffle
    partitions = cores, the in-memory (HDFS-backed) state store (1,000 keys)."""
    import glob
    from pyspark.sql import functions as F
    jars = sorted(glob.glob(os.path.join(SPARK_KAFKA_JARS, "*.jar")))
    spark = competitor.structured_streaming_session("structured streaming bench epoch floor", spec["parallelism"],
                                                    jars, {"spark.sql.streaming.numRecentProgressUpdates": "100000"})
    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider")
    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", spec["bootstrap"])
           .option("subscribe", spec["topic"]).option("startingOffsets", "earliest").load())
    parts = F.split(F.col("value").cast("string"), " ")
    records = raw.select(parts[1].alias("k"), parts[2].cast("long").alias("stamp"))
    counts = records.groupBy("k").agg(F.count(F.lit(1)).alias("n"), F.max("stamp").alias("stamp"))
    out = counts.select(F.concat_ws(",", "k", F.col("n").cast("string"), F.col("stamp").cast("string"))
                        .alias("value"))
    query = (out.writeStream.outputMode("update").format("kafka")
             .option("kafka.bootstrap.servers", spec["bootstrap"]).option("topic", spec["out_topic"])
             .option("checkpointLocation", spec["checkpoint"]).trigger(processingTime="0 seconds").start())
    competitor.set_phase(spec["phase"], "job")
    end = time.time() + spec["run_s"]
    while time.time() < end and query.isActive:
        time.sleep(0.1)
    error = query.exception()
    progress = list(query.recentProgress)
    query.stop()
    if error is not None:
        raise RuntimeError(f"the query failed: {error}")
    batches = []
    for p in progress:
        started = time.mktime(time.strptime(p["timestamp"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone \
            + float("0." + p["timestamp"][20:23])
        batches.append({"batch": p["batchId"], "started_at": started, "records": p["numInputRows"],
                        "trigger_ms": p["durationMs"].get("triggerExecution"),
                        "parts": {k: v for k, v in p["durationMs"].items() if k != "triggerExecution"}})
    return {"batches": batches}


ROLES = {"sluice": role_sluice, "sluice-lr": role_sluice, "sss": role_sss}
LABELS = {"sluice": "Sluice, a Spark job per epoch", "sluice-lr": "Sluice, long-running tasks",
          "sss": "Structured Streaming, trigger 0 s"}


# =========================================================================================
# The parent
# =========================================================================================

class Producer(threading.Thread):
    """--rate records/s ('seq key stamp_us', 10 ms ticks) into the input topic until stopped;
    starts once the engine's phase file says "job"."""

    def __init__(self, bootstrap, topic, rate, phase):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.rate, self.phase = bootstrap, topic, rate, phase
        self.stop = threading.Event()
        self.sent = 0

    def run(self):
        from confluent_kafka import Producer as KafkaProducer
        while competitor._phase(self.phase) != "job" and not self.stop.is_set():
            time.sleep(0.02)
        producer = KafkaProducer({"bootstrap.servers": self.bootstrap, "linger.ms": 1})
        tick = 0.01
        per_tick = max(1, round(self.rate * tick))
        next_tick = time.time()
        while not self.stop.is_set():
            for _ in range(per_tick):
                stamp = time.time_ns() // 1000
                producer.produce(self.topic, f"{self.sent} {(self.sent * 7919) % KEYS} {stamp}".encode(),
                                 partition=self.sent % PARTITIONS, timestamp=stamp // 1000)
                self.sent += 1
            producer.poll(0)
            next_tick += tick
            time.sleep(max(0.0, next_tick - time.time()))
        producer.flush(30)


def run_one(args, bootstrap, workdir, engine, run):
    name = f"{engine}-{args.sink}-{run}"
    folder = os.path.join(workdir, name)
    os.makedirs(folder, exist_ok=True)
    topic, out_topic = f"{name}-in", f"{name}-out"
    create_topics(bootstrap, [topic, out_topic], PARTITIONS)
    spec = {"engine": engine, "bootstrap": bootstrap, "topic": topic, "out_topic": out_topic, "group": f"bench-{name}",
            "parallelism": args.parallelism, "epoch_ms": args.epoch_ms, "run_s": args.seconds, "sink": args.sink,
            "phase": os.path.join(folder, "phase"), "warehouse": os.path.join(folder, "warehouse"),
            "table": os.path.join(folder, "table"), "checkpoint": os.path.join(folder, "checkpoint")}
    producer = Producer(bootstrap, topic, args.rate, spec["phase"])
    producer.start()
    me = sys.executable
    env = {"PYSPARK_PYTHON": me, "PYSPARK_DRIVER_PYTHON": me,
           "PYTHONPATH": os.pathsep.join([HERE, REPO, os.environ.get("PYTHONPATH", "")])}
    try:
        metrics = competitor.run(me, os.path.abspath(__file__), engine,
                                 dict(spec, metrics=os.path.join(folder, "engine.json")),
                                 os.path.join(folder, "engine.spec.json"), os.path.join(folder, "engine.log"),
                                 args.seconds + 300, env=env, cwd=REPO, phase_path=spec["phase"],
                                 measured_phases=("job",))
    finally:
        producer.stop.set()
        producer.join(60)
    if not metrics.get("ok"):
        print(f"== {name}: FAILED: {metrics.get('error')}\n{competitor.tail(metrics.get('log', ''), 25)}", flush=True)
        return {"engine": engine, "error": metrics.get("error")}
    return dict(figures(engine, metrics, args.warm_up), engine=engine, load=metrics.get("load_before"),
                cpu_s=metrics.get("cpu_s"))


def figures(engine, metrics, warm_up):
    """The run's medians over its epochs (micro-batches) after the warm-up that read records."""
    sluice = engine != "sss"
    rows = metrics["epochs"] if sluice else metrics["batches"]
    rows = [r for r in rows if r["records"] and r.get("started_at")]
    if not rows:
        return {"epochs": 0}
    first = min(r["started_at"] for r in rows)
    rows = [r for r in rows if r["started_at"] >= first + warm_up]
    med = lambda xs: statistics.median(xs) if xs else None     # noqa: E731
    out = {"epochs": len(rows), "records": med([r["records"] for r in rows])}
    if sluice:
        out["loop_ms"] = med([r["loop_ms"] for r in rows if r["loop_ms"] is not None])
        out["visible_ms"] = med([r["visible_ms"] for r in rows if r["visible_ms"] is not None])
    else:
        out["visible_ms"] = out["loop_ms"] = med([r["trigger_ms"] for r in rows if r["trigger_ms"] is not None])
    names = dict.fromkeys(k for r in rows for k in r["parts"])
    out["parts"] = {k: med([r["parts"].get(k, 0.0) for r in rows]) for k in names}
    return out


def summarize(runs, engine):
    mine = [r for r in runs if r["engine"] == engine and r.get("epochs")]
    if not mine:
        return None
    med = lambda xs: statistics.median([x for x in xs if x is not None]) if any(x is not None for x in xs) else None  # noqa: E731
    names = dict.fromkeys(k for r in mine for k in r["parts"])
    return {"runs": len(mine), "epochs": sum(r["epochs"] for r in mine), "records": med([r["records"] for r in mine]),
            "loop_ms": med([r["loop_ms"] for r in mine]), "visible_ms": med([r["visible_ms"] for r in mine]),
            "per_run_visible": [r["visible_ms"] for r in mine], "cpu_s": med([r.get("cpu_s") for r in mine]),
            "parts": {k: med([r["parts"].get(k) for r in mine]) for k in names}}


def report(runs, args):
    k = summarize(runs, "sss")
    lines = [f"\nKafka -> running count (1,000 keys) -> {'Kafka EXACTLY_ONCE' if args.sink == 'kafka' else 'Delta'}, "
             f"{args.rate:,} records/s, local[{args.parallelism}], Sluice epochs of at most {args.epoch_ms} ms with a "
             f"checkpoint each; medians over runs of the per-run medians ({args.seconds} s a run, "
             f"{args.warm_up:g} s warm-up)\n",
             "| engine | runs | epochs | records / epoch | epoch (loop) ms | to visible ms | per run (visible) |",
             "|---|---|---|---|---|---|---|"]
    for engine in ENGINES:
        x, label = summarize(runs, engine), LABELS[engine]
        if x is None:
            if any(r["engine"] == engine for r in runs):
                lines.append(f"| {label} | FAILED | | | | | |")
            continue
        lines.append(f"| {label} | {x['runs']} | {x['epochs']} | {x['records']:.0f} | {x['loop_ms']:.0f} | "
                     f"{x['visible_ms']:.0f} | {', '.join(f'{v:.0f}' for v in x['per_run_visible'] if v)} |")
    summaries = [(LABELS[e], summarize(runs, e)) for e in ENGINES]
    for label, s in summaries[:-1]:
        if s and k and k["visible_ms"]:
            lines.append(f"\n{label} / Structured Streaming: epoch (loop) **{s['loop_ms'] / k['visible_ms']:.2f}x**, "
                         f"to visible **{s['visible_ms'] / k['visible_ms']:.2f}x** (Spark's micro-batch: "
                         f"{k['visible_ms']:.0f} ms)")
    cpu = [f"{label} {x['cpu_s']:.0f}" for label, x in summaries if x and x["cpu_s"] is not None]
    if cpu:
        lines.append(f"\nCPU-seconds a run (each engine's processes, start to end; medians): {', '.join(cpu)}")
    for label, x in summaries:
        if x:
            lines.append(f"\n{label} per phase (ms, medians): " + ", ".join(
                f"{name} {v:.1f}" for name, v in x["parts"].items() if v))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of each engine, alternating (5)")
    parser.add_argument("--seconds", type=float, default=40, help="seconds each run produces (40)")
    parser.add_argument("--warm-up", type=float, default=10, help="seconds of each run's epochs not counted (10)")
    parser.add_argument("--rate", type=int, default=1200, help="records/s produced (1,200)")
    parser.add_argument("--epoch-ms", type=int, default=250, help="Sluice's sluice.epoch.interval (250)")
    parser.add_argument("--sink", choices=("kafka", "delta"), default="kafka",
                        help="Sluice's sink: Kafka EXACTLY_ONCE, or a Delta table (Spark's stays Kafka)")
    parser.add_argument("--engines", default=",".join(ENGINES), help="sluice,sluice-lr,sss")
    parser.add_argument("--quick", action="store_true", help="1 run of each engine, 20 s, 8 s warm-up")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--workdir", help="where the runs' tables, checkpoints and broker go, kept afterwards "
                                          "(default: a temporary folder, removed unless a run failed)")
    parser.add_argument("--json", help="where the raw figures go (default: <workdir>.json)")
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        return competitor.run_role(ROLES, args.role, args.spec)
    if args.quick:
        args.runs, args.seconds, args.warm_up = 1, 20, 8
    engines = _choices(args.engines, ENGINES, "--engines")
    workdir = args.workdir or tempfile.mkdtemp(prefix="sluice-bench-epoch-floor-")
    os.makedirs(workdir, exist_ok=True)
    json_path = args.json or workdir.rstrip(os.sep) + ".json"     # beside the work folder: it outlives it
    broker = start_broker(workdir)
    print(f"Epoch floor: {args.runs} run(s) of {', '.join(engines)}, {args.seconds:g} s each, {args.rate:,} records/s, "
          f"broker {broker.bootstrap}, work folder {workdir}", flush=True)
    runs = []
    try:
        for run in range(args.runs):
            for engine in engines:
                print(f"== run {run + 1}/{args.runs}: {engine} (load average {os.getloadavg()[0]:.2f})", flush=True)
                runs.append(run_one(args, broker.bootstrap, workdir, engine, run))
                print(f"   {json.dumps({k: runs[-1].get(k) for k in ('epochs', 'records', 'loop_ms', 'visible_ms', 'cpu_s')})}",
                      flush=True)
                with open(json_path, "w") as f:
                    json.dump({"args": vars(args), "commit": _commit(), "runs": runs}, f, indent=1, default=str)
    finally:
        broker.stop()
    print(f"\n== results ({time.strftime('%Y-%m-%d')}, code at {_commit()}, {args.parallelism} cores); "
          f"raw figures in {json_path}")
    print(report(runs, args))
    ok = all(r.get("epochs") for r in runs)
    competitor.finish_workdir(workdir, bool(args.workdir) or not ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
