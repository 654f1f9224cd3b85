"""Kafka benchmark: Sluice Kafka -> windowed word count -> Kafka (exactly once) against Spark
Structured Streaming's Kafka source and sink, on the same topic, in one invocation.

    .venv/bin/python bench/kafka.py [--records N] [--skip sss,latency,...] [--workdir DIR]
    .venv/bin/python bench/kafka.py --skip sss,latency,sss_latency --baseline REV --runs 5   # against REV

It starts a local Kafka broker (include/kafka_broker.py, from .jars/kafka), makes a topic of
4 partitions and produces N records (5,000,000 by default) of bench/wordcount.py's text: each
record a line ``<event millis> word word ...`` of Zipf-distributed words, its Kafka timestamp
the same event time, each partition in event-time order. Then, each in its own subprocess
(bench/competitor.py: its own peak RSS and CPU):

  throughput   the whole topic, bounded, counted in 5 s tumbling event-time windows per word
               and written as ``window_start,word,count`` to an output topic, in epochs /
               micro-batches of --batch-records (500,000) each:
    sluice     KafkaSource (bounded at the latest offsets) -> flat_map -> key_by -> window -> sum
               -> map -> KafkaSink, DeliveryGuarantee.EXACTLY_ONCE (Kafka transactions committed
               with each checkpoint)
    sluice_arrow  the same with the lines split by map_batches (Sluice's Arrow-batch extension,
               pyarrow's kernels) instead of a per-record flat_map
    sss        readStream.format("kafka") -> split/explode -> withWatermark(0 s) -> groupBy(window,
               word).count() -> writeStream.format("kafka"), Trigger.AvailableNow, RocksDB state;
               spark-sql-kafka-0-10_2.13 4.2.0 from .jars/spark-kafka (include/maven/spark-kafka);
               its Kafka sink is at least once (Spark has no transactional Kafka sink)
  latency      small epochs (--epoch-ms, 1 s) on a new topic while the parent produces
               --latency-rate records/s (10,000) stamped with the time they are produced: for each
               window (after the first 10 s, while the job catches up with what was produced as it
               started), the time from its end (when its last record was produced) to its results
               appearing to a read_committed consumer of the output topic; target: within 2 epoch
               intervals. Sluice with EXACTLY_ONCE (results visible when the checkpoint commits
               the transaction), Structured Streaming with a processing-time trigger of the same
               interval.

--baseline REV runs the Sluice throughput jobs of another commit too (a git worktree of REV in the
work folder, its own bench/kafka.py and runtime, this checkout's .jars), on the same topic, and
prints this checkout's throughput over REV's: a regression check that the machine's drift between
days cannot fake. --runs N runs each Sluice throughput job N times (with --baseline alternated with
REV's) and reports the medians.

Every output topic is read back (read_committed) and checked against the counts the generator
knows (Structured Streaming's append mode holds back the windows its final watermark has not
passed). It prints records/s, the ratio and a Markdown table for bench/README.md. The script is
also its own subprocess entry point (``--role NAME --spec FILE``).
"""
from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import competitor
from wordcount import T0_MS, WINDOW_MS, compare, make_vocabulary

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SPARK_KAFKA_JARS = os.path.join(REPO, ".jars", "spark-kafka")
SPARK_KAFKA = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
WARM_UP_S = 10


# =========================================================================================
# The user code (what a Flink user writes); the roles' executors import it from this file
# =========================================================================================

def words_of(line):
    """'<ts> w1 w2 ...' -> (word, 1, ts) per word."""
    ts, _, rest = line.partition(" ")
    t = int(ts)
    return [(word, 1, t) for word in rest.split()]


def words_of_batch(batch):
    """words_of for a whole Arrow batch (DataStream.map_batches, Sluice's extension): the lines
    split, their words flattened, each with its line's timestamp, in pyarrow's kernels."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    parts = pc.split_pattern(batch["f0"], " ")
    ts = pc.cast(pc.list_element(parts, 0), pa.int64())
    words = pc.list_slice(parts, 1)
    line = pc.list_parent_indices(words)
    flat = pc.list_flatten(words)
    return pa.record_batch({"f0": flat, "f1": np.ones(len(flat), dtype=np.int64),
                            "f2": pc.take(ts, line), "__timestamp": pc.take(batch["__timestamp"], line)})


def result_line(count):
    """(word, count, ts of the window's first record) -> 'window_start,word,count'."""
    word, n, ts = count
    return f"{ts - ts % WINDOW_MS},{word},{n}"


# =========================================================================================
# Roles (each runs in its own subprocess)
# =========================================================================================

def role_sluice(spec):
    sys.path.insert(0, REPO)
    from runtime.common import Configuration, Time, Types, WatermarkStrategy
    from runtime.common.serialization import SimpleStringSchema
    from runtime.datastream import StreamExecutionEnvironment, TumblingEventTimeWindows
    from runtime.datastream.connectors import DeliveryGuarantee
    from runtime.datastream.connectors.kafka import (KafkaOffsetsInitializer, KafkaRecordSerializationSchema,
                                                     KafkaSink, KafkaSource)
    from runtime.execution.spark import get_spark_session

    metrics = {}
    master = f"local[{spec['parallelism']}]"
    conf = Configuration()
    conf.set_string("sluice.spark.master", master)
    conf.set_string("sluice.warehouse", spec["warehouse"])
    for key, value in spec.get("conf", {}).items():
        conf.set_string(key, str(value))
    t = time.perf_counter()
    # start-up, reported apart (as wordcount.py); --profile: cProfile in the Python workers
    spark = get_spark_session(master, "sluice: bench kafka",
                              {"spark.python.profile": "true"} if spec.get("profile") else None)
    metrics["startup_s"] = time.perf_counter() - t

    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(spec["parallelism"])
    builder = (KafkaSource.builder().set_bootstrap_servers(spec["bootstrap"]).set_topics(spec["topic"])
               .set_group_id(spec["group"]).set_starting_offsets(KafkaOffsetsInitializer.earliest())
               .set_value_only_deserializer(SimpleStringSchema()))
    if spec["bounded"]:
        builder = builder.set_bounded(KafkaOffsetsInitializer.latest())
    sink = (KafkaSink.builder().set_bootstrap_servers(spec["bootstrap"])
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(spec["out_topic"])
                                   .set_value_serialization_schema(SimpleStringSchema()).build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .set_transactional_id_prefix(spec["group"]).build())
    lines = env.from_source(builder.build(), WatermarkStrategy.for_monotonous_timestamps(), "words")  # Kafka ts
    word_type = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])
    words = lines.map_batches(words_of_batch, output_type=word_type) if spec.get("arrow") else \
        lines.flat_map(words_of, output_type=word_type)
    (words
        .key_by(0)
        .window(TumblingEventTimeWindows.of(Time.seconds(5)))
        .sum(1)                      # keeps the window's first record's ts in field 2
        .map(result_line, output_type=Types.STRING())
        .sink_to(sink))
    if spec.get("phase"):
        competitor.set_phase(spec["phase"], "job")
    t = time.perf_counter()
    if spec.get("run_s"):            # the latency phase: unbounded, cancelled after run_s
        client = env.execute_async("bench kafka")
        time.sleep(spec["run_s"])
        client.cancel()
        result = client.get_job_execution_result().result()
    else:
        result = env.execute("bench kafka")
    metrics["job_s"] = time.perf_counter() - t
    if spec.get("profile"):
        metrics["profile"] = _worker_profile(spark, spec["profile"])
    epochs = result.epochs
    metrics["epochs"] = result.epoch_count
    metrics["records_in"] = result.records_in_total
    starts = [e.started_at for e in epochs]
    gaps = sorted(b - a for a, b in zip(starts, starts[1:]))
    metrics["epoch_gap_median_s"] = gaps[len(gaps) // 2] if gaps else None
    metrics["epoch_duration_median_s"] = sorted(e.duration_ms for e in epochs)[len(epochs) // 2] / 1000 \
        if epochs else None
    return metrics


def _worker_profile(spark, folder, top=30):
    """The Python workers' profiles (spark.python.profile), merged: the functions with the most
    own time, as text, and the raw stats in ``folder``."""
    import io
    import pstats
    spark.sparkContext.dump_profiles(folder)
    files = glob.glob(os.path.join(folder, "*.pstats"))
    if not files:
        return "no worker profiles were written"
    stats = pstats.Stats(files[0], stream=io.StringIO())
    for path in files[1:]:
        stats.add(path)
    out = io.StringIO()
    stats.stream = out
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    print(out.getvalue(), flush=True)
    return out.getvalue()


def role_sss(spec):
    metrics = {}
    jars = sorted(glob.glob(os.path.join(SPARK_KAFKA_JARS, "*.jar")))
    t = time.perf_counter()
    spark = competitor.structured_streaming_session("structured streaming bench kafka", spec["parallelism"], jars)
    if spec.get("warm_topic"):        # the JVM's first-query costs are start-up, as wordcount.py's
        _sss_query(spark, spec, spec["warm_topic"], spec["warm_out"], spec["checkpoint"] + "-warm-up",
                   None).awaitTermination()
    metrics["startup_s"] = time.perf_counter() - t
    if spec.get("phase"):
        competitor.set_phase(spec["phase"], "job")
    t = time.perf_counter()
    query = _sss_query(spark, spec, spec["topic"], spec["out_topic"], spec["checkpoint"], spec.get("trigger_ms"))
    if spec.get("trigger_ms"):
        query.awaitTermination(spec["run_s"])
        query.stop()
    else:
        query.awaitTermination()
    metrics["job_s"] = time.perf_counter() - t
    metrics["micro_batches"] = len(query.recentProgress)
    # the last batch's watermark is the final one (a watermark never goes back)
    wm = ((query.lastProgress or {}).get("eventTime") or {}).get("watermark")
    metrics["final_watermark"] = int(datetime.datetime.fromisoformat(wm.replace("Z", "+00:00")).timestamp() * 1000) \
        if wm else None
    spark.stop()
    return metrics


def _sss_query(spark, spec, topic, out_topic, checkpoint, trigger_ms):
    from pyspark.sql import functions as F
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", spec["bootstrap"])
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    if spec.get("batch_records") and topic == spec["topic"]:
        reader = reader.option("maxOffsetsPerTrigger", str(spec["batch_records"]))
    lines = reader.load()
    text = F.col("value").cast("string")
    events = lines.select(F.col("timestamp").alias("ts"),
                          F.explode(F.slice(F.split(text, " "), 2, 1 << 20)).alias("word"))
    counts = (events.withWatermark("ts", "0 seconds")
              .groupBy(F.window("ts", "5 seconds"), "word").count()
              .select(F.concat_ws(",", F.unix_millis(F.col("window.start")).cast("string"), "word",
                                  F.col("count").cast("string")).alias("value")))
    writer = (counts.writeStream.outputMode("append").format("kafka")
              .option("kafka.bootstrap.servers", spec["bootstrap"]).option("topic", out_topic)
              .option("checkpointLocation", checkpoint))
    writer = writer.trigger(processingTime=f"{trigger_ms} milliseconds") if trigger_ms else \
        writer.trigger(availableNow=True)
    return writer.start()


ROLES = {"sluice": role_sluice, "sss": role_sss}
SLUICE_VARIANTS = (("sluice", False), ("sluice_arrow", True))


# =========================================================================================
# The broker side (parent): topics, the generated records, reading results back
# =========================================================================================

def start_broker(workdir, port=None):
    """include/kafka_broker.py's one-node broker, its log dir in ``workdir``."""
    sys.path.insert(0, os.path.join(REPO, "include"))
    from kafka_broker import LocalKafkaBroker
    return LocalKafkaBroker(os.path.join(workdir, "broker"), port=port).start()


def create_topics(bootstrap, names, partitions):
    """Topics that keep their records: the generated event times are of 2023, older than the
    broker's default retention (7 days by record timestamp), which would delete them at once."""
    from confluent_kafka.admin import AdminClient, NewTopic
    client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    topics = [NewTopic(n, partitions, 1, config={"retention.ms": "-1"}) for n in names]
    for future in client.create_topics(topics).values():
        future.result(60)


def generate(n_records, vocab_size, partitions, event_seconds, zipf_s, seed, min_words, max_words):
    """The records (per partition, in event-time order) and the (window, word) counts they make."""
    import numpy as np
    import pyarrow as pa
    rng = np.random.default_rng(seed)
    vocab = np.array(make_vocabulary(rng, vocab_size), dtype=object)
    p = 1.0 / np.arange(1, vocab_size + 1, dtype=np.float64) ** zipf_s
    p /= p.sum()
    lengths = rng.integers(min_words, max_words + 1, n_records)
    word_idx = rng.choice(vocab_size, size=int(lengths.sum()), p=p)
    partition = np.arange(n_records) % partitions
    ts = np.empty(n_records, dtype=np.int64)
    for s in range(partitions):
        mask = partition == s
        ts[mask] = T0_MS + np.sort(rng.integers(0, event_seconds * 1000, int(mask.sum())))
    words = vocab[word_idx].tolist()
    values, i = [], 0
    for n, t in zip(lengths.tolist(), ts.tolist()):
        values.append(f"{t} {' '.join(words[i:i + n])}".encode())
        i += n
    window = np.repeat((ts - T0_MS) // WINDOW_MS, lengths)
    keys, counts = np.unique(window * vocab_size + word_idx, return_counts=True)
    truth = pa.table({"window_start": pa.array(T0_MS + (keys // vocab_size) * WINDOW_MS, pa.int64()),
                      "word": pa.array(vocab[keys % vocab_size].tolist(), pa.string()),
                      "count": pa.array(counts, pa.int64())}).to_pandas()
    return values, partition.tolist(), ts.tolist(), truth, int(lengths.sum())


def produce(bootstrap, topic, values, partitions, timestamps):
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.messages": 1_000_000, "compression.type": "lz4"})
    send = producer.produce
    for value, p, t in zip(values, partitions, timestamps):
        while True:
            try:
                send(topic, value, partition=p, timestamp=t)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError(f"records to {topic} not delivered within 120 s")


def read_committed(bootstrap, topic, committed=True):
    """Every record of ``topic`` as a ``read_committed`` consumer sees it (``read_uncommitted``
    with committed=False), partition by partition: [(partition, key, value)]."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient
    parts = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4}).list_topics(topic, timeout=30).topics[topic].partitions
    records = []
    for p in sorted(parts):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-reader", "enable.auto.commit": False,
                             "enable.partition.eof": True, "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed" if committed else "read_uncommitted"})
        consumer.assign([TopicPartition(topic, p, 0)])
        done = False
        while not done:
            batch = consumer.consume(10_000, 30)
            if not batch:
                raise RuntimeError(f"no end of {topic}-{p} within 30 s")
            for m in batch:
                if m.error() is None:
                    records.append((p, m.key(), m.value()))
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    done = True
                else:
                    raise RuntimeError(str(m.error()))
        consumer.close()
    return records


def read_results(bootstrap, topic, committed=True):
    """The 'window_start,word,count' records of ``topic`` as a DataFrame."""
    import pandas as pd
    rows = []
    for _, _, value in read_committed(bootstrap, topic, committed):
        ws, word, n = value.decode().split(",")
        rows.append((int(ws), word, int(n)))
    return pd.DataFrame(rows, columns=["window_start", "word", "count"])


# =========================================================================================
# The latency phase: a paced producer and a watcher of the output topic, in the parent
# =========================================================================================

class Paced(threading.Thread):
    """Produces ``rate`` records/s for ``seconds`` once the role's phase file says "job", each
    stamped with the wall-clock millis it is produced at (its event time)."""

    def __init__(self, bootstrap, topic, partitions, rate, seconds, phase_path, vocab):
        super().__init__(daemon=True)
        self.args = bootstrap, topic, partitions, rate, seconds, phase_path, vocab
        self.started_at = self.ended_at = None
        self.sent = 0

    def run(self):
        import random
        from confluent_kafka import Producer
        bootstrap, topic, partitions, rate, seconds, phase_path, vocab = self.args
        while competitor._phase(phase_path) != "job":
            time.sleep(0.05)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        rng = random.Random(7)
        tick = 0.01
        per_tick = max(1, int(rate * tick))
        self.started_at = time.time()
        end = self.started_at + seconds
        next_tick = self.started_at
        while time.time() < end:
            now_ms = int(time.time() * 1000)
            for _ in range(per_tick):
                words = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 9)))
                producer.produce(topic, f"{now_ms} {words}".encode(), partition=self.sent % partitions,
                                 timestamp=now_ms)
                self.sent += 1
            producer.poll(0)
            next_tick += tick
            time.sleep(max(0.0, next_tick - time.time()))
        producer.flush(30)
        self.ended_at = time.time()


class Watcher(threading.Thread):
    """Notes when each window's first result appears to a consumer of the output topic."""

    def __init__(self, bootstrap, topic, committed):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.committed = bootstrap, topic, committed
        self.first_seen: dict = {}
        self.stop = threading.Event()

    def run(self):
        from confluent_kafka import Consumer
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"bench-watch-{self.topic}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "isolation.level": "read_committed" if self.committed else "read_uncommitted"})
        consumer.subscribe([self.topic])
        while not self.stop.is_set():
            for m in consumer.consume(1000, 0.05):
                if m.error() is None:
                    seen = time.time()
                    window_start = int(m.value().decode().split(",", 1)[0])
                    self.first_seen.setdefault(window_start, seen)
        consumer.close()


def latency_figures(watcher, producer, epoch_ms):
    """Per window that began after the first ``WARM_UP_S`` of producing (the job catches up with
    what was produced while it started) and ended before it stopped: seconds from its end to its
    first result seen."""
    lo = (producer.started_at + WARM_UP_S) * 1000
    hi = producer.ended_at * 1000
    lat = sorted(seen - (ws + WINDOW_MS) / 1000 for ws, seen in watcher.first_seen.items()
                 if ws >= lo and ws + WINDOW_MS <= hi)
    if not lat:
        return {"windows": 0}
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]  # noqa: E731
    return {"windows": len(lat), "median_s": pick(0.5), "p90_s": pick(0.9), "max_s": lat[-1],
            "max_epochs": lat[-1] / (epoch_ms / 1000), "within_2_epochs": lat[-1] <= 2 * epoch_ms / 1000,
            "sent": producer.sent, "rate": producer.sent / (producer.ended_at - producer.started_at)}


# =========================================================================================
# main
# =========================================================================================

def baseline_tree(rev, workdir):
    """A git worktree of ``rev`` in the work folder, using this checkout's .jars: (its short commit,
    its path). SystemExit naming the revision when git cannot make it."""
    path = os.path.join(workdir, "baseline")
    made = subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", path, rev], capture_output=True, text=True)
    if made.returncode != 0:
        raise SystemExit(f"--baseline {rev}: git cannot check it out of {REPO}: {made.stderr.strip()}")
    os.symlink(os.path.join(REPO, ".jars"), os.path.join(path, ".jars"))
    short = subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return short.stdout.strip(), path


def remove_baseline_tree(path):
    subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", path], capture_output=True)


def median_run(runs):
    """One figure set for N runs of a job: the run of the median job time (the lower one of an even N),
    with every run's job time and whether every run's counts were right."""
    good = sorted((m for m in runs if m.get("ok")), key=lambda m: m["job_s"])
    if len(good) < len(runs):
        return next(m for m in runs if not m.get("ok"))
    row = dict(good[(len(good) - 1) // 2], runs_job_s=[m["job_s"] for m in runs],
               job_s=statistics.median(m["job_s"] for m in runs))
    checks = [m.get("check") for m in runs]
    row["check"] = "MISMATCH" if "MISMATCH" in checks else checks[0]
    return row


def run_role(name, spec_path):
    return competitor.run_role(ROLES, name, spec_path)


def run_competitor(name, role, spec, workdir, timeout, phase=False, tree=REPO):
    """Run a role in its own subprocess: this file's, or the same file in another checkout ``tree``
    (--baseline), with that checkout's runtime."""
    spec = dict(spec, metrics=os.path.join(workdir, "results", f"{name}.json"))
    if phase:
        spec["phase"] = os.path.join(workdir, "results", f"{name}.phase")
    os.makedirs(os.path.join(workdir, "results"), exist_ok=True)
    log_path = os.path.join(workdir, "logs", f"{name}.log")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    me = sys.executable
    env = {"PYSPARK_PYTHON": me, "PYSPARK_DRIVER_PYTHON": me,
           "PYTHONPATH": os.pathsep.join([os.path.join(tree, "bench"), tree, os.environ.get("PYTHONPATH", "")])}
    metrics = competitor.run(me, os.path.join(tree, "bench", os.path.basename(__file__)), role, spec,
                             os.path.join(workdir, "results", f"{name}.spec.json"), log_path, timeout, env=env,
                             cwd=tree, phase_path=spec.get("phase"), measured_phases=("job",),
                             announce=lambda load: print(f"\n== {name}: running (log: {log_path}; load average "
                                                         f"{load:.2f} on {os.cpu_count()} cores)", flush=True))
    if metrics.get("ok"):
        print(f"== {name}: done in {metrics['wall_s']:.1f} s (job {metrics['job_s']:.2f} s), peak RSS "
              f"{metrics['peak_rss'] / 2**20:,.0f} MiB, CPU {metrics['cpu_s'] or 0:.1f} s", flush=True)
    else:
        print(f"== {name}: FAILED: {metrics.get('error')}\n{competitor.tail(log_path, 25)}", flush=True)
    return metrics


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=5_000_000, help="records in the topic (5,000,000)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--min-words", type=int, default=1, help="words per record, at least")
    parser.add_argument("--max-words", type=int, default=9, help="words per record, at most")
    parser.add_argument("--vocabulary", type=int, default=100_000)
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--event-seconds", type=int, default=60, help="event time the records span")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--parallelism", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--batch-records", type=int, default=500_000,
                        help="records per epoch / micro-batch in the throughput run: Sluice's "
                             "sluice.epoch.max-records-per-split (divided by the partitions), Structured "
                             "Streaming's maxOffsetsPerTrigger (500,000)")
    parser.add_argument("--epoch-ms", type=int, default=1000, help="the latency phase's epoch / trigger interval")
    parser.add_argument("--latency-rate", type=int, default=10_000, help="records/s in the latency phase")
    parser.add_argument("--latency-seconds", type=int, default=40, help="how long the latency phase produces")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile Sluice's Python workers in the throughput run (slower; printed to its log)")
    parser.add_argument("--skip", default="", help="comma-separated: sluice,sluice_arrow,sss,latency,sss_latency")
    parser.add_argument("--baseline", help="a git revision whose Sluice throughput jobs also run, on the same "
                                           "topic, alternated with this checkout's; prints the ratio")
    parser.add_argument("--runs", type=int, default=1,
                        help="runs of each Sluice throughput job (alternated with --baseline's); medians (1)")
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--workdir")
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        return run_role(args.role, args.spec)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if "sss" not in skip and not glob.glob(os.path.join(SPARK_KAFKA_JARS, "*.jar")):
        print(f"Structured Streaming's Kafka connector ({SPARK_KAFKA}) is not in {SPARK_KAFKA_JARS}: run bin/dev "
              f"(it fetches include/maven/spark-kafka/pom.xml with Maven), or --skip sss,sss_latency")
        return 2
    if args.runs < 1:
        raise SystemExit(f"--runs {args.runs}: give 1 or more")
    workdir = args.workdir or tempfile.mkdtemp(prefix="sluice-bench-kafka-")
    os.makedirs(workdir, exist_ok=True)
    par = args.parallelism
    trees = [("", REPO)]
    broker = start_broker(workdir)
    bootstrap = broker.bootstrap
    results, checks = {}, []
    try:
        if args.baseline:           # in the try: the broker stops if git refuses the revision
            rev, path = baseline_tree(args.baseline, workdir)
            trees.append((f"@{rev}", path))
        print(f"Kafka benchmark: {args.records:,} records of {args.min_words}-{args.max_words} words in "
              f"{args.partitions} partitions, 5 s tumbling event-time windows, {par} cores; broker "
              f"{bootstrap}; work folder {workdir}", flush=True)
        t = time.perf_counter()
        values, partitions, timestamps, truth, n_words = generate(
            args.records, args.vocabulary, args.partitions, args.event_seconds, args.zipf, args.seed,
            args.min_words, args.max_words)
        print(f"generated {len(values):,} records ({n_words:,} words) in {time.perf_counter() - t:.1f} s", flush=True)
        create_topics(bootstrap, ["words", "sss-counts", "warm", "warm-counts"], args.partitions)
        t = time.perf_counter()
        produce(bootstrap, "words", values, partitions, timestamps)
        produce_s = time.perf_counter() - t
        print(f"produced in {produce_s:.1f} s ({len(values) / produce_s:,.0f} records/s)", flush=True)
        produce(bootstrap, "warm", [f"{T0_MS} a b".encode(), f"{T0_MS + 2 * WINDOW_MS} a".encode()], [0, 1],
                [T0_MS, T0_MS + 2 * WINDOW_MS])
        del values, partitions, timestamps

        common = {"bootstrap": bootstrap, "parallelism": par, "topic": "words"}
        for name, arrow in SLUICE_VARIANTS:
            if name in skip:
                continue
            runs = {}
            for rep in range(args.runs):
                for at, tree in trees if rep % 2 == 0 else trees[::-1]:      # alternated
                    # a topic, group and warehouse of its own per run: a run restores nothing of another
                    run = f"{name}{'-baseline' if at else ''}" + (f"-run{rep + 1}" if args.runs > 1 else "")
                    create_topics(bootstrap, [f"{run}-counts"], args.partitions)
                    m = run_competitor(run, "sluice", dict(
                        common, out_topic=f"{run}-counts", group=f"bench-{run}", bounded=True, arrow=arrow,
                        warehouse=os.path.join(workdir, f"{run}-warehouse"),
                        conf={"sluice.epoch.max-records-per-split": -(-args.batch_records // args.partitions)},
                        profile=os.path.join(workdir, f"{run}-profile") if args.profile else None),
                        workdir, args.timeout, tree=tree)
                    if m.get("ok"):
                        ok, msg = _check(truth, read_results(bootstrap, f"{run}-counts"), workdir, run,
                                         f"{name}{at} (read_committed) vs generator")
                        m["check"] = "OK" if ok else "MISMATCH"
                        checks.append(msg)
                    runs.setdefault(name + at, []).append(m)
            results.update({key: median_run(ms) for key, ms in runs.items()})
        if "sss" not in skip:
            results["sss"] = run_competitor("sss", "sss", dict(
                common, out_topic="sss-counts", checkpoint=os.path.join(workdir, "sss", "checkpoint"),
                warm_topic="warm", warm_out="warm-counts", batch_records=args.batch_records), workdir, args.timeout)
            m = results["sss"]
            if m.get("ok"):
                wm = m.get("final_watermark")
                expected = truth if wm is None else truth[truth["window_start"] + WINDOW_MS <= wm]
                held = truth[~truth.index.isin(expected.index)]
                note = f"append mode held back {held['window_start'].nunique()} window(s) not passed by the final " \
                       f"watermark ({int(held['count'].sum()):,} words)"
                ok, msg = _check(expected, read_results(bootstrap, "sss-counts", committed=False), workdir, "sss",
                                 f"Structured Streaming vs generator, minus held-back windows ({note})")
                m["check"] = "OK" if ok else "MISMATCH"
                checks.append(msg)

        latency = {}
        for name, role in (("latency", "sluice"), ("sss_latency", "sss")):
            if name in skip:
                continue
            topic, out = f"{name}-words", f"{name}-counts"
            create_topics(bootstrap, [topic, out], args.partitions)
            phase = os.path.join(workdir, "results", f"{name}.phase")
            producer = Paced(bootstrap, topic, args.partitions, args.latency_rate, args.latency_seconds, phase,
                             make_vocabulary(__import__("numpy").random.default_rng(1), 1000))
            watcher = Watcher(bootstrap, out, committed=(role == "sluice"))
            producer.start()
            watcher.start()
            run_s = args.latency_seconds + 15
            spec = dict(common, topic=topic, out_topic=out, group=f"bench-{name}", bounded=False)
            if role == "sluice":
                spec.update(warehouse=os.path.join(workdir, f"{name}-warehouse"), run_s=run_s,
                            conf={"sluice.epoch.interval": args.epoch_ms})
            else:
                spec.update(checkpoint=os.path.join(workdir, name, "checkpoint"), trigger_ms=args.epoch_ms,
                            run_s=run_s, warm_topic="warm", warm_out="warm-counts")
            results[name] = run_competitor(name, role, spec, workdir, args.timeout, phase=True)
            producer.join(args.latency_seconds + 60)
            watcher.stop.set()
            watcher.join(10)
            latency[name] = latency_figures(watcher, producer, args.epoch_ms) if producer.ended_at else {"windows": 0}
            print(f"== {name}: {json.dumps(latency[name], default=str)}", flush=True)

        print("\n== counts")
        for c in checks:
            print("  " + c)
        print(f"\n== results (Markdown; {args.records:,} records, {n_words:,} words, {par} cores, "
              f"{time.strftime('%Y-%m-%d')})\n")
        print(report(results, latency, args, n_words, produce_s))
    finally:
        broker.stop()
        if len(trees) > 1:
            remove_baseline_tree(trees[1][1])
    mismatches = [c for c in checks if "MISMATCH" in c]
    competitor.finish_workdir(workdir, bool(mismatches or args.workdir
                                            or any(not m.get("ok") for m in results.values())))
    return 1 if mismatches else 0


def _check(expected, got, workdir, name, label):
    path = os.path.join(workdir, "results", f"{name}.parquet")
    got.to_parquet(path)
    return compare(expected, path, label)


def report(results, latency, args, n_words, produce_s):
    def rate(name):
        m = results.get(name, {})
        return args.records / m["job_s"] if m.get("ok") and m.get("job_s") else None

    def f(x, fmt):
        return "-" if x is None else format(x, fmt)

    md = ["| competitor | records/s (job) | words/s (job) | job s | wall s (incl. start-up) | CPU s (tree) "
          "| peak RSS MiB (tree) | load before | counts |", "|" + "---|" * 9]
    labels = {"sluice": "Sluice, KafkaSource -> KafkaSink EXACTLY_ONCE, flat_map per record",
              "sluice_arrow": "Sluice, the same with the split in map_batches (Arrow)",
              "sss": f"Structured Streaming, {SPARK_KAFKA} (sink at least once)"}
    baselines = {name: key for name in labels for key in results if key.startswith(name + "@")}
    throughput = [key for key in results if key.split("@")[0] in labels]      # not the latency phase's
    for name in sorted(throughput, key=lambda key: (list(labels).index(key.split("@")[0]), key)):
        m = results[name]
        base, _, rev = name.partition("@")
        label = labels[base] + (f", at {rev} (--baseline)" if rev else "")
        if args.runs > 1 and base != "sss":
            label += f" (median of {args.runs} runs)"
        if not m.get("ok"):
            md.append(f"| {label} | FAILED: {(m.get('error') or '').splitlines()[0][:100]} | | | | | | | |")
            continue
        r = rate(name)
        md.append(f"| {label} | {f(r, ',.0f')} | {f(n_words / m['job_s'], ',.0f')} | {m['job_s']:.1f} "
                  f"| {m['wall_s']:.1f} | {f(m.get('cpu_s'), '.1f')} | {m['peak_rss'] / 2**20:,.0f} "
                  f"| {m['load_before']:.2f} | {m.get('check', '-')} |")
    md.append("")
    for name in ("sluice", "sluice_arrow"):
        a, b = rate(name), rate("sss")
        if name not in results:
            continue
        if "sss" in results:
            md.append(f"{name} / Structured Streaming throughput: **{a / b:.2f}x** (target >= 2x)" if a and b else
                      f"{name} / Structured Streaming throughput: n/a")
        if name in baselines:
            c = rate(baselines[name])
            md.append(f"{name} / {baselines[name]} throughput: **{a / c:.2f}x**" if a and c else
                      f"{name} / {baselines[name]} throughput: n/a")
        for key in (name, baselines.get(name)):
            if key and len(results[key].get("runs_job_s", ())) > 1:
                md.append(f"{key} records/s per run: "
                          + ", ".join(f"{args.records / s:,.0f}" for s in results[key]["runs_job_s"]))
    md.append(f"Producing the topic (confluent-kafka, lz4): {produce_s:.1f} s")
    if latency:
        md.append("")
        md.append(f"| latency, {args.latency_rate:,} records/s, {args.epoch_ms} ms epochs | windows | median s "
                  f"| p90 s | max s | max in epochs | within 2 epochs |")
        md.append("|---|---|---|---|---|---|---|")
        for name, label in (("latency", "Sluice, EXACTLY_ONCE (read_committed)"),
                            ("sss_latency", "Structured Streaming, processing-time trigger")):
            x = latency.get(name)
            if x is None:
                continue
            if not x.get("windows"):
                md.append(f"| {label} | 0 | - | - | - | - | no window measured |")
                continue
            md.append(f"| {label} | {x['windows']} | {x['median_s']:.2f} | {x['p90_s']:.2f} | {x['max_s']:.2f} "
                      f"| {x['max_epochs']:.1f} | {'yes' if x['within_2_epochs'] else '**no**'} |")
    return "\n".join(md)


if __name__ == "__main__":
    sys.exit(main())
