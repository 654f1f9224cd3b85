"""End-to-end latency, per result, as a user sees it: Sluice against Spark Structured Streaming
(processing-time trigger, and real-time mode where Spark accepts the query), in one invocation.

    .venv/bin/python bench/latency.py                        # the whole matrix, 5 min a run
    .venv/bin/python bench/latency.py --quick                # the same, 30 s a run (a smoke test)
    .venv/bin/python bench/latency.py --queries count --sinks kafka --rates 10000 \
        --engines sluice-eo,sss                               # the headline pair
    .venv/bin/python bench/latency.py ... --runs 5           # medians of 5 alternated runs

Every input record is stamped with the wall time it is produced at; a result carries the stamp of
the newest record it depends on; its latency is the time it becomes visible minus that stamp.
Processes (one machine, one wall clock), so that none starves another's measurement:

  producer   paced at --rates records/s (10 ms ticks), value ``seq key stamp_us``, its Kafka
             timestamp the stamp's millisecond (the event time), 2 partitions (= cores: real-time
             mode needs a core per partition); it writes what the results must be (per key counts,
             per (1 s window, key) counts) for the exactly-once check
  observer   Kafka: a read_committed consumer (confluent-kafka) noting when it first receives each
             result; Delta: a poller of the table's log every 20 ms, each new version's added rows
             seen at the version's first sighting
  engine     the job, in its own process tree (bench/competitor.py: its peak RSS and CPU)

The queries (results ``k,n,stamp_us``; the same columns in Delta):
  map        stateless: one result per record (its key, its seq, its stamp)
  count      a keyed running count (1,000 keys): Sluice one result per record (key_by().reduce());
             Structured Streaming groupBy(key).agg(count, max(stamp)) in update mode: a result per
             key per micro-batch, stamped with its newest record (its best equivalent)
  window     1 s tumbling event-time windows per key: the count and the window's newest stamp

The sinks: Kafka (Sluice EXACTLY_ONCE (sluice-eo: a checkpoint every epoch, results visible when
it commits the transaction) and AT_LEAST_ONCE (sluice-alo: visible at the epoch's flush, a
checkpoint every second); Structured Streaming's Kafka sink, at least once) and
Delta (Sluice's DeltaSink; Structured Streaming's Delta sink, foreachBatch appends for update mode).
Only results whose stamp falls after --warm-up seconds of producing count (start-up is not latency).

Checked: Sluice's exactly-once results (sluice-eo, Delta) against what the producer sent: no
duplicate and none missing (results of records produced before the job stopped), so a fast but
wrong run shows. It prints a table per (query, sink, rate) (with --runs N, each engine's medians
over N runs, the engines alternated, and each run's p99) and writes the raw figures as JSON.
The script is also its own subprocess entry point (``--role NAME --spec FILE``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import competitor
from kafka import SPARK_KAFKA_JARS, create_topics, start_broker

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
KEYS = 1000
PARTITIONS = 2
QUERIES = ("map", "count", "window")
SINKS = ("kafka", "delta")
ENGINES = ("sluice-eo", "sluice-alo", "sss", "sss-rt")
EXACTLY_ONCE = {("sluice-eo", "kafka"), ("sluice-eo", "delta")}     # (engine, sink) checked exactly once
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999))
RT_BATCH = "5 minutes"     # real-time mode's batch duration: its default, a checkpoint interval, not a latency
STOP = "stop"
TRICKLE = 200           # records/s until the engine's first result is visible (its warm-up)
WARM_LIMIT_S = 300      # ... for at most this long


def parse(line):
    """'seq key stamp_us' -> (key, seq, stamp_us)."""
    seq, key, stamp = line.split(" ")
    return key, int(seq), int(stamp)


def as_one(r):
    return r[0], 1, r[2]


def running(a, b):
    """A key's running count, stamped with its newest record."""
    return a[0], a[1] + b[1], b[2]


def window_count(a, b):
    return a[0], a[1] + b[1], max(a[2], b[2])


def as_text(r):
    return f"{r[0]},{r[1]},{r[2]}"


def as_row(r):
    from runtime.common import Row
    return Row(k=r[0], n=r[1], stamp=r[2])


# =========================================================================================
# Engines (each in its own subprocess)
# =========================================================================================

def role_sluice(spec):
    env = sluice_job(spec, "sluice: bench latency")
    client = env.execute_async("bench latency")
    competitor.set_phase(spec["phase"], "job")
    _run_until_stopped(spec)
    client.cancel()
    result = client.get_job_execution_result().result()
    durations = sorted(e.duration_ms for e in result.epochs)
    return {"epochs": result.epoch_count, "records_in": result.records_in_total,
            "epoch_ms_median": durations[len(durations) // 2] if durations else None}


def sluice_job(spec, app_name):
    """Sluice's job of ``spec`` (its query, sink and engine) on a new environment, not started
    (bench/epoch_floor.py runs the count query too)."""
    sys.path.insert(0, REPO)
    from runtime.common import Configuration, Time, Types, WatermarkStrategy
    from runtime.common.serialization import SimpleStringSchema
    from runtime.datastream import StreamExecutionEnvironment, TumblingEventTimeWindows
    from runtime.datastream.connectors import DeliveryGuarantee
    from runtime.datastream.connectors.delta import DeltaSink
    from runtime.datastream.connectors.kafka import (KafkaOffsetsInitializer, KafkaRecordSerializationSchema,
                                                     KafkaSink, KafkaSource)
    from runtime.execution.spark import get_spark_session

    master = f"local[{spec['parallelism']}]"
    conf = Configuration()
    conf.set_string("sluice.spark.master", master)
    conf.set_string("sluice.warehouse", spec["warehouse"])
    conf.set_string("sluice.epoch.interval", str(spec["epoch_ms"]))
    conf.set_string("sluice.epoch.tasks", spec.get("epoch_tasks", "per-epoch"))
    get_spark_session(master, app_name)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(spec["parallelism"])
    # As a user runs them: checkpoints, so a failure restores. Results of an exactly-once sink are
    # visible when a checkpoint commits them: one every epoch; at least once they are visible at
    # the epoch's flush, and a checkpoint every second bounds what a failure replays.
    if spec["engine"] == "sluice-eo":
        env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    else:
        env.enable_checkpointing(1000)
    source = (KafkaSource.builder().set_bootstrap_servers(spec["bootstrap"]).set_topics(spec["topic"])
              .set_group_id(spec["group"]).set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_value_only_deserializer(SimpleStringSchema()).build())
    triple = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])
    records = env.from_source(source, WatermarkStrategy.for_monotonous_timestamps(), "stamped") \
        .map(parse, output_type=triple)
    if spec["query"] == "map":
        results = records
    elif spec["query"] == "count":
        results = records.map(as_one, output_type=triple).key_by(lambda r: r[0]).reduce(running)
    else:
        results = (records.map(as_one, output_type=triple).key_by(lambda r: r[0])
                   .window(TumblingEventTimeWindows.of(Time.seconds(1))).reduce(window_count))
    if spec["sink"] == "delta":
        row = Types.ROW_NAMED(["k", "n", "stamp"], [Types.STRING(), Types.LONG(), Types.LONG()])
        results.map(as_row, output_type=row).sink_to(DeltaSink.for_row_data(spec["table"]))
    else:
        guarantee = DeliveryGuarantee.EXACTLY_ONCE if spec["engine"] == "sluice-eo" else \
            DeliveryGuarantee.AT_LEAST_ONCE
        sink = (KafkaSink.builder().set_bootstrap_servers(spec["bootstrap"])
                .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(spec["out_topic"])
                                       .set_value_serialization_schema(SimpleStringSchema()).build())
                .set_delivery_guarantee(guarantee).set_transactional_id_prefix(spec["group"]).build())
        results.map(as_text, output_type=Types.STRING()).sink_to(sink)
    return env


def _run_until_stopped(spec):
    """Until the parent's stop file (the producer is done and the results drained), or run_s."""
    end = time.time() + spec["run_s"]
    while time.time() < end and not os.path.exists(spec["stop"]):
        time.sleep(0.1)


def role_sss(spec):
    """Structured Streaming's best configuration for latency: a trigger of 0 s (the next micro-batch
    as soon as one ends) or real-time mode, shuffle partitions = cores, the in-memory (HDFS-backed)
    state store (1,000 keys: RocksDB's per-batch snapshot would only add time)."""
    import glob
    from pyspark.sql import functions as F
    sys.path.insert(0, REPO)
    from runtime.execution.spark import DELTA_CATALOG, DELTA_EXTENSION, delta_jars
    jars = sorted(glob.glob(os.path.join(SPARK_KAFKA_JARS, "*.jar")))
    settings = {}
    if spec["sink"] == "delta":
        jars += delta_jars()
        settings = {"spark.sql.extensions": DELTA_EXTENSION, "spark.sql.catalog.spark_catalog": DELTA_CATALOG}
    spark = competitor.structured_streaming_session("structured streaming bench latency", spec["parallelism"], jars,
                                                    settings)
    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider")
    real_time = spec["engine"] == "sss-rt"
    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", spec["bootstrap"])
           .option("subscribe", spec["topic"]).option("startingOffsets", "earliest").load())
    parts = F.split(F.col("value").cast("string"), " ")
    records = raw.select(parts[1].alias("k"), parts[0].cast("long").alias("seq"), parts[2].cast("long").alias("stamp"),
                         F.col("timestamp").alias("ts"))
    mode = "append"
    if spec["query"] == "map":
        results = records.select("k", F.col("seq").alias("n"), "stamp")
        mode = "update" if real_time else "append"      # real-time mode refuses append
    elif spec["query"] == "count":
        results = records.groupBy("k").agg(F.count(F.lit(1)).alias("n"), F.max("stamp").alias("stamp"))
        mode = "update"
    else:
        results = (records.withWatermark("ts", "0 seconds").groupBy(F.window("ts", "1 second"), "k")
                   .agg(F.count(F.lit(1)).alias("n"), F.max("stamp").alias("stamp")).select("k", "n", "stamp"))
        mode = "update" if real_time else "append"
    if spec["sink"] == "kafka":
        out = results.select(F.concat_ws(",", "k", F.col("n").cast("string"), F.col("stamp").cast("string"))
                             .alias("value"))
        writer = (out.writeStream.outputMode(mode).format("kafka")
                  .option("kafka.bootstrap.servers", spec["bootstrap"]).option("topic", spec["out_topic"]))
    elif mode == "update":      # Delta's streaming sink takes append and complete only
        table = spec["table"]
        writer = results.writeStream.outputMode(mode).foreachBatch(
            lambda df, _: df.write.format("delta").mode("append").save(table))
    else:
        writer = results.writeStream.outputMode(mode).format("delta").option("path", spec["table"])
    writer = writer.option("checkpointLocation", spec["checkpoint"])
    writer = writer.trigger(realTime=RT_BATCH) if real_time else writer.trigger(processingTime="0 seconds")
    try:
        query = writer.start()
        time.sleep(1)
        if query.exception() is not None:
            raise query.exception()
    except Exception as e:      # real-time mode refuses what it cannot run: the message is the result
        if not real_time:
            raise
        return {"refused": str(e).strip().splitlines()[0][:600]}
    competitor.set_phase(spec["phase"], "job")
    end = time.time() + spec["run_s"]
    while time.time() < end and not os.path.exists(spec["stop"]) and query.isActive:
        time.sleep(0.1)
    error = query.exception()
    query.stop()
    if error is not None and real_time and "STREAMING_REAL_TIME_MODE" in str(error):
        return {"refused": str(error).strip().splitlines()[0][:600]}      # found once it planned a batch
    if error is not None:
        raise RuntimeError(f"the query failed: {error}")
    return {"micro_batches": len(query.recentProgress)}


# =========================================================================================
# The producer and the observer (each in its own subprocess)
# =========================================================================================

def role_produce(spec):
    """``rate`` records/s for ``seconds`` once the engine is warm, each stamped (microseconds) as
    it is produced; what the results must be goes to spec["truth"]. Warm: once the job runs (its
    phase file says "job") a trickle of TRICKLE records/s until the observer sees a first result,
    so that neither engine's start-up (its first micro-batch or epoch) becomes a backlog."""
    from collections import Counter
    from confluent_kafka import Producer
    while competitor._phase(spec["phase"]) != "job":
        if os.path.exists(spec["stop"]):
            return {"sent": 0, "started_at": None, "ended_at": None}
        time.sleep(0.02)
    producer = Producer({"bootstrap.servers": spec["bootstrap"], "linger.ms": 1,
                         "queue.buffering.max.messages": 2_000_000})
    per_key = [0] * KEYS
    windows = Counter()
    topic, parts = spec["topic"], PARTITIONS
    want_windows = spec["query"] == "window"
    produce = producer.produce
    seq = 0
    tick = 0.01
    trickle_end = time.time() + WARM_LIMIT_S
    while not (os.path.exists(spec["progress"]) or os.path.exists(spec["stop"])) and time.time() < trickle_end:
        seq = _send(produce, producer, topic, parts, seq, round(TRICKLE * tick), per_key, windows, want_windows)
        time.sleep(tick)
    warm_s = time.time() - (trickle_end - WARM_LIMIT_S)
    rate, seconds = spec["rate"], spec["seconds"]
    per_tick = max(1, round(rate * tick))
    first = seq
    started = time.time()
    next_tick, end = started, started + seconds
    late_ticks = 0
    while next_tick < end:
        seq = _send(produce, producer, topic, parts, seq, per_tick, per_key, windows, want_windows)
        next_tick += tick
        wait = next_tick - time.time()
        if wait > 0:
            time.sleep(wait)
        else:
            late_ticks += 1
    ended = time.time()
    producer.flush(60)
    with open(spec["truth"], "w") as f:
        json.dump({"per_key": per_key, "windows": [[w, k, n] for (w, k), n in windows.items()]}, f)
    return {"sent": seq, "started_at": started, "ended_at": ended, "rate": (seq - first) / (ended - started),
            "late_ticks": late_ticks, "warm_s": warm_s}


def _send(produce, producer, topic, parts, seq, n, per_key, windows, want_windows):
    """n records from ``seq`` on, each stamped as it is produced; returns the next seq."""
    now_ns = time.time_ns
    for _ in range(n):
        key = (seq * 7919) % KEYS
        stamp = now_ns() // 1000
        while True:
            try:
                produce(topic, f"{seq} {key} {stamp}".encode(), partition=seq % parts, timestamp=stamp // 1000)
                break
            except BufferError:
                producer.poll(0.01)
        per_key[key] += 1
        if want_windows:
            windows[(stamp // 1_000_000, key)] += 1
        seq += 1
    producer.poll(0)
    return seq


def _decode(query, k, n, stamp):
    """A result's identity for the exactly-once check: map its seq, count (key, running count),
    window (second, key)."""
    if query == "map":
        return n
    if query == "count":
        return (int(k) << 32) | n
    return ((stamp // 1_000_000) << 20) | int(k)


def role_observe(spec):
    """Note when each result first becomes visible, until the stop file; arrays to spec["out"]."""
    from array import array
    ids, ns, stamps, seen = array("q"), array("q"), array("q"), array("d")
    query = spec["query"]

    progress = {"newest": 0, "written": 0.0}

    def note(k, n, stamp, at):
        if stamp > progress["newest"]:
            progress["newest"] = stamp
        if at - progress["written"] > 0.5:       # for the parent: how far the visible results reach
            progress["written"] = at
            with open(spec["progress"] + ".tmp", "w") as f:
                f.write(str(progress["newest"]))
            os.replace(spec["progress"] + ".tmp", spec["progress"])
        ids.append(_decode(query, k, n, stamp))
        ns.append(n)
        stamps.append(stamp)
        seen.append(at)
    versions = _observe_delta(spec, note) if spec["sink"] == "delta" else _observe_kafka(spec, note)
    import numpy as np
    np.savez(spec["out"], ids=np.frombuffer(ids, np.int64), n=np.frombuffer(ns, np.int64),
             stamp=np.frombuffer(stamps, np.int64), seen=np.frombuffer(seen, np.float64))
    return {"results": len(ids), "versions": versions}


def _observe_kafka(spec, note):
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": f"observer-{spec['out_topic']}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "fetch.wait.max.ms": 10})
    consumer.subscribe([spec["out_topic"]])
    stop, quiet_since = spec["stop"], None
    while True:
        batch = consumer.consume(10_000, 0.005)
        at = time.time()
        for m in batch:
            if m.error() is None:
                k, n, stamp = m.value().split(b",")
                note(k.decode(), int(n), int(stamp), at)
        if batch:
            quiet_since = None
        elif os.path.exists(stop):
            quiet_since = quiet_since or at
            if at - quiet_since > 1.0:
                break
    consumer.close()
    return None


def _observe_delta(spec, note):
    """The table's log polled every 20 ms: version v is visible when _delta_log/<v>.json exists
    (a Delta commit is that file's atomic creation); its added files' rows are seen then."""
    import pyarrow.parquet as pq
    table, log = spec["table"], os.path.join(spec["table"], "_delta_log")
    version, stop, versions = 0, spec["stop"], 0
    quiet_since = None
    while True:
        path = os.path.join(log, f"{version:020d}.json")
        at = time.time()
        if os.path.exists(path):
            quiet_since = None
            with open(path) as f:
                adds = [json.loads(line)["add"]["path"] for line in f if line.startswith('{"add"')]
            for name in adds:
                t = pq.read_table(os.path.join(table, name), columns=["k", "n", "stamp"])
                for k, n, stamp in zip(*(t.column(c).to_pylist() for c in ("k", "n", "stamp"))):
                    note(k, n, stamp, at)
            version += 1
            versions += 1
            continue
        if os.path.exists(stop):
            quiet_since = quiet_since or at
            if at - quiet_since > 2.0:
                break
        time.sleep(0.02)
    return versions


ROLES = {"sluice": role_sluice, "sss": role_sss, "produce": role_produce, "observe": role_observe}


# =========================================================================================
# The parent: one configuration at a time
# =========================================================================================

def run_one(args, bootstrap, workdir, query, sink, rate, engine, rep=0):
    """One engine on one (query, sink, rate), its ``rep``-th run: its producer, its observer, its
    job; the figures."""
    name = f"{engine}-{query}-{sink}-{rate}" + (f"-run{rep + 1}" if args.runs > 1 else "")
    folder = os.path.join(workdir, name)
    os.makedirs(folder, exist_ok=True)
    topic, out_topic = f"{name}-in", f"{name}-out"
    create_topics(bootstrap, [topic, out_topic], PARTITIONS)
    spec = {"bootstrap": bootstrap, "topic": topic, "out_topic": out_topic, "query": query, "sink": sink,
            "rate": rate, "engine": engine, "parallelism": args.parallelism, "seconds": args.duration,
            "run_s": args.duration + 120, "phase": os.path.join(folder, "phase"), "stop": os.path.join(folder, STOP),
            "table": os.path.join(folder, "table"), "truth": os.path.join(folder, "truth.json"),
            "out": os.path.join(folder, "seen.npz"), "progress": os.path.join(folder, "progress"),
            "group": f"bench-{name}", "epoch_ms": args.epoch_ms, "epoch_tasks": args.epoch_tasks,
            "warehouse": os.path.join(folder, "warehouse"), "checkpoint": os.path.join(folder, "checkpoint")}
    helpers = {role: _start_helper(role, spec, folder) for role in ("produce", "observe")}
    me = sys.executable
    env = {"PYSPARK_PYTHON": me, "PYSPARK_DRIVER_PYTHON": me,
           "PYTHONPATH": os.pathsep.join([HERE, REPO, os.environ.get("PYTHONPATH", "")])}
    role = "sluice" if engine.startswith("sluice") else "sss"
    stopper = _Stopper(dict(spec, metrics_of_producer=os.path.join(folder, "produce.json")), helpers["produce"],
                       args.drain)
    stopper.start()
    metrics = competitor.run(me, os.path.abspath(__file__), role,
                             dict(spec, metrics=os.path.join(folder, "engine.json")),
                             os.path.join(folder, "engine.spec.json"), os.path.join(folder, "engine.log"),
                             args.duration + 600, env=env, cwd=REPO, phase_path=spec["phase"],
                             measured_phases=("job",),
                             announce=lambda load: print(f"\n== {name}: running (load average {load:.2f}; "
                                                         f"log {folder}/engine.log)", flush=True))
    open(spec["stop"], "a").close()             # the engine is gone: the helpers end
    produced, observed = (_finish_helper(helpers[r], folder, r) for r in ("produce", "observe"))
    figures = {"name": name, "query": query, "sink": sink, "rate": rate, "engine": engine, "run": rep + 1,
               "drain": args.drain,
               "load_before": metrics.get("load_before"), "load_after": os.getloadavg()[0],
               "engine_metrics": {k: v for k, v in metrics.items() if k not in ("peak_processes", "traceback")},
               "producer": produced, "observer": observed}
    if metrics.get("refused"):
        figures["refused"] = metrics["refused"]
        print(f"== {name}: refused: {metrics['refused']}", flush=True)
        return figures
    if not metrics.get("ok"):
        figures["error"] = metrics.get("error")
        print(f"== {name}: FAILED: {metrics.get('error')}\n{competitor.tail(metrics.get('log', ''), 25)}", flush=True)
        return figures
    if not produced.get("ok") or not observed.get("ok") or not produced.get("sent"):
        figures["error"] = f"producer: {produced.get('error')}; observer: {observed.get('error')}"
        print(f"== {name}: FAILED: {figures['error']}", flush=True)
        return figures
    figures.update(latency_figures(spec, produced, args.warm_up))
    if (engine, sink) in EXACTLY_ONCE:
        figures["check"] = exactly_once_check(spec, produced)
    print(f"== {name}: " + json.dumps({k: figures.get(k) for k in ("results", "p50", "p99", "max", "check")}),
          flush=True)
    return figures


def _start_helper(role, spec, folder):
    spec = dict(spec, metrics=os.path.join(folder, f"{role}.json"))
    path = os.path.join(folder, f"{role}.spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    log = open(os.path.join(folder, f"{role}.log"), "w")
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--role", role, "--spec", path],
                            stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([HERE, REPO])})


def _finish_helper(proc, folder, role):
    try:
        proc.wait(180)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return {"ok": False, "error": f"{role} did not end within 180 s of the stop (killed)"}
    path = os.path.join(folder, f"{role}.json")
    if not os.path.exists(path):
        return {"ok": False, "error": f"{role} exited with {proc.returncode} and wrote nothing"}
    with open(path) as f:
        return json.load(f)


class _Stopper:
    """Writes the stop file once the results of the last records are visible (the observer's
    newest stamp within 1.5 s of the producer's last; 2.5 s for windows: the last second's never
    closes), 2 s later, or ``drain`` seconds after the producer ends: the engine stops then."""

    def __init__(self, spec, producer, drain):
        import threading
        self.thread = threading.Thread(target=self._run, args=(spec, producer, drain), daemon=True)

    def start(self):
        self.thread.start()

    @staticmethod
    def _run(spec, producer, drain):
        producer.wait()
        path = spec["metrics_of_producer"]
        try:
            with open(path) as f:
                ended = json.load(f).get("ended_at") or 0
        except (OSError, ValueError):
            ended = 0
        reach = ended - (2.5 if spec["query"] == "window" else 1.5)
        deadline = time.time() + drain
        while time.time() < deadline:
            try:
                with open(spec["progress"]) as f:
                    if int(f.read() or 0) / 1e6 >= reach:
                        time.sleep(2)
                        break
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        open(spec["stop"], "a").close()


def latency_figures(spec, produced, warm_up):
    """The quantiles of (first seen - stamp) over the results stamped after the warm-up."""
    import numpy as np
    seen = np.load(spec["out"])
    lo = (produced["started_at"] + warm_up) * 1e6
    mask = seen["stamp"] >= lo
    lat = np.sort(seen["seen"][mask] - seen["stamp"][mask] / 1e6)
    out = {"results": int(lat.size), "results_all": int(seen["stamp"].size)}
    if lat.size:
        for label, q in QUANTILES:
            out[label] = float(np.quantile(lat, q, method="higher"))
        out["max"] = float(lat[-1])
        out["mean"] = float(lat.mean())
    return out


def exactly_once_check(spec, produced):
    """Sluice's exactly-once results against the producer's truth: duplicates and missing ones."""
    import numpy as np
    seen = np.load(spec["out"])
    raw = seen["ids"]                   # read from the file once (each access reads it again)
    ids = np.sort(raw)
    first = np.ones(ids.size, dtype=bool)
    first[1:] = ids[1:] != ids[:-1]
    unique = ids[first]
    duplicates = int(ids.size - unique.size)
    with open(spec["truth"]) as f:
        truth = json.load(f)
    if spec["query"] == "map":
        expected = np.arange(produced["sent"], dtype=np.int64)
    elif spec["query"] == "count":
        expected = np.concatenate([(np.int64(k) << 32) | np.arange(1, n + 1, dtype=np.int64)
                                   for k, n in enumerate(truth["per_key"])])
    else:   # every window but the last second's (its watermark never passes: nothing follows it)
        last = max(w for w, _, _ in truth["windows"])
        want = {(w << 20) | k: n for w, k, n in truth["windows"] if w < last}
        expected = np.fromiter(want, np.int64, len(want))
        got = dict(zip(raw.tolist(), seen["n"].tolist()))
        wrong = sum(1 for i, n in want.items() if i in got and got[i] != n)
    # Both sides sorted and unique: a binary search per expected result (setdiff1d sorts both again).
    expected = np.sort(expected)
    at = np.minimum(np.searchsorted(unique, expected), max(unique.size - 1, 0))
    found = int((unique[at] == expected).sum()) if unique.size else 0
    missing = int(expected.size - found)
    extra = int(unique.size - found) if spec["query"] != "window" else 0
    out = {"expected": int(expected.size), "seen": int(ids.size), "duplicates": duplicates, "missing": missing,
           "unexpected": extra}
    if spec["query"] == "window":
        out["wrong_counts"] = wrong
    out["ok"] = duplicates == 0 and missing == 0 and extra == 0 and not out.get("wrong_counts")
    return out


# =========================================================================================
# main
# =========================================================================================

LABELS = {"sluice-eo": "Sluice, EXACTLY_ONCE", "sluice-alo": "Sluice, AT_LEAST_ONCE",
          "sss": "Structured Streaming, trigger 0 s",
          "sss-rt": f"Structured Streaming, real-time mode ({RT_BATCH})"}


def report(runs, args):
    """A Markdown table per (query, sink, rate); Sluice's rows with their ratio to Spark's best."""
    out = []
    for query in args.queries:
        for sink in args.sinks:
            for rate in args.rates:
                rows = [r for r in runs if (r["query"], r["sink"], r["rate"]) == (query, sink, rate)]
                if rows:
                    out.append(f"\n{query}, Kafka -> {sink.capitalize()}, {rate:,} records/s, {args.duration} s a "
                               f"run (latency in s; load average before/after)\n")
                    out.extend(_table(_medians(rows) if args.runs > 1 else rows))
    return "\n".join(out)


def _medians(rows):
    """One row per engine over its runs: the median of each figure, each run's p99 beside it, the
    loads' range, and exactly once only if every run was; a failed run is reported as it is."""
    out = []
    for engine in dict.fromkeys(r["engine"] for r in rows):
        runs = [r for r in rows if r["engine"] == engine]
        good = [r for r in runs if r.get("p50") is not None]
        out.extend(r for r in runs if r.get("p50") is None)
        if not good:
            continue
        row = dict(good[0], results=min(r["results"] for r in good),
                   load_before=min(r["load_before"] for r in good), load_after=max(r["load_after"] for r in good),
                   per_run_p99=[r["p99"] for r in good])
        row.update({q: statistics.median(r[q] for r in good) for q in (*(name for name, _ in QUANTILES), "max")})
        checks = [r["check"] for r in good if r.get("check")]
        if checks:
            row["check"] = next((c for c in checks if not c["ok"]), checks[0])
        out.append(row)
    return out


def _table(rows):
    spark = [r for r in rows if r["engine"].startswith("sss") and r.get("p99") is not None]
    best = min(spark, key=lambda r: r["p99"]) if spark else None
    lines = ["| engine | p50 | p90 | p99 | p99.9 | max | results | p50 / Spark | p99 / Spark | load "
             "| exactly once | p99 per run |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        label = "Sluice, DeltaSink (exactly once)" if r["engine"] == "sluice-eo" and r["sink"] == "delta" else \
            LABELS[r["engine"]]
        if r.get("refused"):
            lines.append(f"| {label} | refused: {r['refused'][:160]} | | | | | | | | | | |")
            continue
        if r.get("p50") is None:
            why = r.get("error") or f"none of the measured records' results visible by {r.get('drain', '--drain')} s " \
                "after producing"
            lines.append(f"| {label} | FAILED: {why[:120]} | | | | | "
                         f"{r.get('results', 0)} | | | | | |")
            continue
        mine = best and r["engine"].startswith("sluice")
        ratios = [f"{r[q] / best[q]:.2f}x" if mine else "-" for q in ("p50", "p99")]
        c = r.get("check")
        check = "-" if c is None else "OK" if c["ok"] else \
            f"**NO**: {c['duplicates']} duplicates, {c['missing']} missing of {c['expected']:,}"
        few = " (under 10,000)" if r["results"] < 10_000 else ""
        figures = " | ".join(f"{r[q]:.3f}" for q in ("p50", "p90", "p99", "p99.9", "max"))
        lines.append(f"| {label} | {figures} | {r['results']:,}{few} | {ratios[0]} | {ratios[1]} "
                     f"| {r['load_before']:.1f}/{r['load_after']:.1f} | {check} "
                     f"| {', '.join(f'{p:.3f}' for p in r.get('per_run_p99', [r['p99']]))} |")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", default=",".join(QUERIES), help="map,count,window")
    parser.add_argument("--sinks", default=",".join(SINKS), help="kafka,delta")
    parser.add_argument("--engines", default=",".join(ENGINES), help="sluice-eo,sluice-alo,sss,sss-rt")
    parser.add_argument("--rates", default="10000,50000", help="records/s, comma-separated")
    parser.add_argument("--duration", type=int, default=300, help="seconds each run produces (300)")
    parser.add_argument("--warm-up", type=float, default=10, help="seconds of producing not measured (10)")
    parser.add_argument("--drain", type=float, default=60,
                        help="at most this many seconds the job runs after producing, until the last results "
                             "are visible (60)")
    parser.add_argument("--runs", type=int, default=1,
                        help="runs of each configuration, the engines alternated; the table gives the medians (1)")
    parser.add_argument("--quick", action="store_true", help="a 30 s smoke run of each configuration")
    parser.add_argument("--epoch-ms", type=int, default=250, help="Sluice's sluice.epoch.interval (250): the longest an epoch waits for input")
    parser.add_argument("--epoch-tasks", choices=("per-epoch", "long-running"), default="per-epoch",
                        help="Sluice's sluice.epoch.tasks: a Spark job per epoch (per-epoch), or tasks deployed "
                             "once per run (long-running)")
    parser.add_argument("--parallelism", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--json", help="where the raw figures go (default: <workdir>.json)")
    parser.add_argument("--workdir", help="where the runs' tables, checkpoints and broker go, kept afterwards "
                                          "(default: a temporary folder, removed unless a run failed)")
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        return competitor.run_role(ROLES, args.role, args.spec)
    if args.quick:
        args.duration = min(args.duration, 30)
    args.queries = _choices(args.queries, QUERIES, "--queries")
    args.sinks = _choices(args.sinks, SINKS, "--sinks")
    engines = _choices(args.engines, ENGINES, "--engines")
    args.rates = [int(r) for r in args.rates.split(",") if r.strip()]
    workdir = args.workdir or tempfile.mkdtemp(prefix="sluice-bench-latency-")
    os.makedirs(workdir, exist_ok=True)
    broker = start_broker(workdir)
    runs = []
    json_path = args.json or workdir.rstrip(os.sep) + ".json"     # beside the work folder: it outlives it
    print(f"Latency benchmark: {args.duration} s a run, warm-up {args.warm_up} s, Sluice epochs of {args.epoch_ms} ms "
          f"({args.epoch_tasks} tasks), "
          f"{args.parallelism} cores, broker {broker.bootstrap}, work folder {workdir}", flush=True)
    try:
        for query in args.queries:
            for sink in args.sinks:
                for rate in args.rates:
                    for rep in range(args.runs):
                        for engine in engines if rep % 2 == 0 else engines[::-1]:       # alternated
                            if engine == "sluice-alo" and sink == "delta":
                                continue        # the Delta sink is exactly once only
                            runs.append(run_one(args, broker.bootstrap, workdir, query, sink, rate, engine, rep))
                            with open(json_path, "w") as f:
                                json.dump({"args": vars(args), "commit": _commit(),
                                           "date": time.strftime("%Y-%m-%d"), "runs": runs}, f, indent=1, default=str)
    finally:
        broker.stop()
    print(f"\n== results ({time.strftime('%Y-%m-%d')}, code at {_commit()}, {args.parallelism} cores); "
          f"raw figures in {json_path}")
    print(report(runs, args))
    bad = [r["name"] for r in runs if r.get("check") and not r["check"]["ok"]]
    if bad:
        print(f"\nexactly-once check FAILED: {bad}")
    competitor.finish_workdir(workdir, bool(bad or args.workdir or any(r.get("error") for r in runs)))
    return 1 if bad else 0


def _choices(text, allowed, flag):
    picked = [x.strip() for x in text.split(",") if x.strip()]
    wrong = [x for x in picked if x not in allowed]
    if wrong or not picked:
        raise SystemExit(f"{flag}: {wrong or 'nothing'} is not one of {','.join(allowed)}")
    return picked


def _commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True).stdout.strip() or "unknown (not a git checkout)"
    except OSError:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
