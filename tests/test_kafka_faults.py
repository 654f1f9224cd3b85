"""Faults with Kafka in and Kafka out (EXACTLY_ONCE), against real brokers: a broker killed and
started again mid-run (a broker of the test's own), and kill -9 of the driver at each of Sluice's
fault points in one chain of runs of the shipped job (include/jobs/kafka_windows.py), each run
restoring the latest checkpoint (tests/checkpoint_harness.kill_at). Afterwards a read_committed
consumer reads exactly the expected records, and the source's group holds the final offsets."""
import collections
import json
import os
import random
import threading
import time

import kafka_env
from checkpoint_harness import kill_at
from runtime.client import run_job
from runtime.common import Types, WatermarkStrategy
from runtime.common.restart_strategy import RestartStrategies
from runtime.common.serialization import SimpleStringSchema
from runtime.datastream.connectors import DeliveryGuarantee
from runtime.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource
from runtime.execution.history import FAILED, ExecutionHistory
from runtime.storage.layout import job_dir
from runtime_env import job_env
from test_kafka_sink import kafka_sink
from waiting import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join(ROOT, "include", "jobs", "kafka_windows.py")
DAG_RUN = "manual__broker-restart"


def test_a_broker_killed_and_started_mid_run_fails_the_attempt_and_the_restart_loses_and_doubles_nothing(
        spark, tmp_path):
    broker = kafka_env.start(tmp_path / "broker")       # its own: the session's broker stays up
    try:
        bootstrap = broker.bootstrap
        source_topic = kafka_env.create_topic(bootstrap, "restart-in", 3)
        sink_topic = kafka_env.create_topic(bootstrap, "restart-out", 2)
        for p in range(3):
            kafka_env.produce(bootstrap, source_topic, [f"w{p}-{i}" for i in range(40)], partition=p)
        env = job_env(tmp_path, 2, epoch__max_records_per_split=4, airflow__dag_run_id=DAG_RUN)
        env.enable_checkpointing(10)        # every epoch
        # Room for the broker's own restart, which takes 5 s on a quiet machine and more than 20 s on a
        # loaded one (ten attempts 1 s apart ran out before it listened again).
        env.set_restart_strategy(RestartStrategies.fixed_delay_restart(30, 3_000))
        source = (KafkaSource.builder().set_bootstrap_servers(bootstrap).set_topics(source_topic)
                  .set_group_id(f"{source_topic}-group").set_starting_offsets(KafkaOffsetsInitializer.earliest())
                  .set_bounded(KafkaOffsetsInitializer.latest())
                  .set_value_only_deserializer(SimpleStringSchema()).build())
        (env.from_source(source, WatermarkStrategy.no_watermarks(), "words")
            .map(lambda w: w.upper(), output_type=Types.STRING())
            .sink_to(kafka_sink(bootstrap, sink_topic, DeliveryGuarantee.EXACTLY_ONCE, prefix=sink_topic)))
        history = ExecutionHistory(job_dir(str(tmp_path / "warehouse"), "kafka-broker-restart"))
        checkpoints = job_dir(str(tmp_path / "warehouse"), "kafka-broker-restart")

        recovery = []       # seconds from the broker's return to the next completed checkpoint

        def fault():
            # Once two checkpoints completed, the broker dies; once the epoch then running has
            # failed on it, the broker is started again (some seconds), and the restart attempts'
            # preflights fail until it listens (each a failed attempt, 3 s apart).
            from runtime.checkpoint.storage import CheckpointStorage
            completed = lambda: max((r.checkpoint_id for r in CheckpointStorage(checkpoints).checkpoints.completed()), default=0)
            wait_until(lambda: os.path.isdir(checkpoints) and completed() >= 2, 120, "two checkpoints", interval=0.05)
            broker.kill()
            # The broker stays down until an attempt has failed on it: a restart within the
            # clients' own retries would let the attempt live on (another test covers that).
            try:
                wait_until(lambda: any(r.state == FAILED for r in history.attempts(DAG_RUN)), 120,
                           "an attempt failed on the dead broker", interval=0.1)
            finally:
                broker.restart()
            back, before = time.monotonic(), completed()
            wait_until(lambda: completed() > before, 300, "a checkpoint after the restart", interval=0.05)
            recovery.append(time.monotonic() - back)

        faulting = threading.Thread(target=fault)
        faulting.start()
        try:
            result = env.execute("kafka-broker-restart")
        finally:
            faulting.join()
        attempts = history.attempts(DAG_RUN)
        print(f"a checkpoint completed {recovery[0]:.1f} s after the broker's return")
        assert [r.state for r in attempts][0] == FAILED and attempts[-1].state == "FINISHED", attempts
        assert result.restored_from is not None
        assert sorted(kafka_env.read_committed(bootstrap, sink_topic)) == sorted(
            f"W{p}-{i}" for p in range(3) for i in range(40))
        assert kafka_env.committed_offsets(bootstrap, f"{source_topic}-group", source_topic, 3) == {0: 40, 1: 40, 2: 40}
    finally:
        broker.stop()


def test_a_job_that_outlives_a_broker_restart_commits_within_seconds_of_its_return(spark, tmp_path):
    """The Kafka sink's driver-side clients outlive a broker restart when nothing of the job needs
    the broker meanwhile (no record to commit: the input, a socket, is quiet). The records that
    come once the broker is back are committed within seconds: the clients that saw the broker go
    are made again, instead of waiting a minute for the group coordinator (confluentinc/librdkafka
    #5456) and failing with the outage's errors."""
    import socket
    broker = kafka_env.start(tmp_path / "broker")
    server = socket.create_server(("127.0.0.1", 0))
    more = threading.Event()

    def serve():        # ten lines, then ten more once the broker is back, then the end of input
        conn, _ = server.accept()
        with conn:
            conn.sendall("".join(f"a{i}\n" for i in range(10)).encode())
            more.wait(300)
            conn.sendall("".join(f"b{i}\n" for i in range(10)).encode())
    serving = threading.Thread(target=serve, daemon=True)
    serving.start()
    try:
        bootstrap = broker.bootstrap
        sink_topic = kafka_env.create_topic(bootstrap, "outlive-out", 1)
        env = job_env(tmp_path, 1, epoch__interval=200, airflow__dag_run_id="manual__outlive")
        env.enable_checkpointing(10)        # every epoch
        env.set_restart_strategy(RestartStrategies.fixed_delay_restart(30, 3_000))
        (env.socket_text_stream("127.0.0.1", server.getsockname()[1])
            .sink_to(kafka_sink(bootstrap, sink_topic, DeliveryGuarantee.EXACTLY_ONCE, prefix=sink_topic)))
        recovery = []

        def fault():
            committed = lambda n: lambda: len(kafka_env.read_committed(bootstrap, sink_topic)) >= n
            wait_until(committed(10), 120, "the first ten lines in the sink", interval=0.5)
            broker.kill()
            broker.restart()
            back = time.monotonic()
            more.set()
            wait_until(committed(20), 300, "the next ten lines in the sink", interval=0.2)
            recovery.append(time.monotonic() - back)

        faulting = threading.Thread(target=fault)
        faulting.start()
        try:
            env.execute("kafka-outlive-restart")
        finally:
            faulting.join()
        history = ExecutionHistory(job_dir(str(tmp_path / "warehouse"), "kafka-outlive-restart"))
        attempts = [(r.state, (r.failure or "")[:400]) for r in history.attempts("manual__outlive")]
        print(f"the lines sent at the broker's return were committed {recovery[0]:.1f} s after it; "
              f"attempts: {attempts}")
        assert sorted(kafka_env.read_committed(bootstrap, sink_topic)) == sorted(
            [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
        assert [state for state, _ in attempts] == ["FINISHED"], attempts      # the outage failed nothing
        assert recovery[0] < 20, (recovery, attempts)
    finally:
        more.set()
        server.close()
        broker.stop()


# ---- kill -9 at each fault point: one chain of runs of the shipped job ----------------------------

# Within the broker's retention (7 days): older records would be deleted under the chain's feet.
T0 = int(time.time() * 1000) // 600_000 * 600_000 - 600_000
PER_PARTITION, PER_EPOCH = 60, 20       # 3 epochs of input per partition
WINDOW_MS, OUT_OF_ORDER_MS = 10_000, 2_000
# The later --max-records-per-split wins over kill_at's; epochs one after the other, not paced.
EXTRA = ("--max-epochs", "6", "--max-records-per-split", str(PER_EPOCH), "-D", "sluice.epoch.interval=1")


def events(seed: int) -> dict:
    """Per partition: (word, timestamp) in timestamp order, 500 ms apart."""
    r = random.Random(seed)
    return {p: [(r.choice("abcde"), T0 + i * 500 + p * 100) for i in range(PER_PARTITION)] for p in range(2)}


def closed_windows(by_partition: dict) -> collections.Counter:
    """The windows the final watermark (the lower partition's) has passed, with their counts."""
    watermark = min(max(ts for _, ts in records) for records in by_partition.values()) - OUT_OF_ORDER_MS - 1
    counts = collections.Counter((w, ts - (ts - T0) % WINDOW_MS) for records in by_partition.values()
                                 for w, ts in records)
    return collections.Counter((w, start, n) for (w, start), n in counts.items() if start + WINDOW_MS - 1 <= watermark)


def got_windows(rows) -> collections.Counter:
    return collections.Counter((r["word"], r["window_start"], r["count"]) for r in rows)


def test_kills_at_every_fault_point_then_a_restore_write_each_window_once_to_delta_and_kafka(
        spark, kafka_broker, tmp_path):
    from deltalake import DeltaTable
    from runtime.common.faults import POINTS
    bootstrap = kafka_broker.bootstrap
    source_topic = kafka_env.create_topic(bootstrap, "kills-in", 2)
    sink_topic = kafka_env.create_topic(bootstrap, "kills-out", 1)
    data = events(33)
    for p, records in data.items():
        kafka_env.produce(bootstrap, source_topic, [w for w, _ in records], partition=p,
                          timestamps=[ts for _, ts in records])
    table = tmp_path / "windows"
    args = ["--bootstrap-servers", bootstrap, "--input-topic", source_topic, "--output-topic", sink_topic,
            "--table", str(table), "--group-id", f"{source_topic}-group", "--transactional-id-prefix", source_topic,
            "--checkpoint-interval-ms", "0"]
    # Every point once, in epoch order; each killed run restores the latest checkpoint and
    # replays the epochs logged after it (an epoch killed after its record is done: one such
    # point an epoch, its last). during-retention needs a 4th checkpoint (3 retained).
    chain = [("mid-epoch", 0), ("after-state-files", 1), ("after-sink-commit", 1), ("after-checkpoint-record", 1),
             ("during-checkpoint-record", 2), ("after-state-commit", 2), ("during-retention", 3)]
    assert sorted(p for p, _ in chain) == sorted(POINTS)
    outcomes = [f"{point}@{epoch}: {kill_at(tmp_path, point, epoch, i > 0, *EXTRA, job=JOB, args=args)}"
                for i, (point, epoch) in enumerate(chain)]
    assert all("killed" in o for o in outcomes), outcomes
    run_job(JOB, args, warehouse=str(tmp_path / "warehouse"), master="local[2]", quiet=True,
            max_records_per_split=PER_EPOCH, restore_from="latest", max_epochs=2,
            configuration={"sluice.epoch.interval": "1"})
    expected = closed_windows(data)
    assert len(expected) >= 8          # 2 of the 3 windows closed, of 5 words
    assert got_windows(DeltaTable(str(table)).to_pyarrow_table().to_pylist()) == expected, outcomes
    assert got_windows(json.loads(v) for v in kafka_env.read_committed(bootstrap, sink_topic)) == expected, outcomes
    assert kafka_env.committed_offsets(bootstrap, f"{source_topic}-group", source_topic, 2) == {
        0: PER_PARTITION, 1: PER_PARTITION}
