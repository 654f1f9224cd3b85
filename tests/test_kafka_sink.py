"""The Kafka sink against the test run's real broker: exactly once through Kafka transactions
committed by the driver when a checkpoint completes (runtime/connectors/kafka_sink.py), and a
whole Kafka -> Kafka job on the shared Spark session."""
import threading
import time

import pytest

import kafka_env
from runtime.common import Types, WatermarkStrategy
from runtime.common.serialization import SimpleStringSchema
from runtime.connectors.base import CommitterContext
from runtime.connectors.kafka_clients import KafkaConnectorError, StuckCall, bounded
from runtime.connectors.kafka_sink import KafkaCommitter
from runtime.datastream.connectors import DeliveryGuarantee
from runtime.datastream.connectors.kafka import (KafkaOffsetsInitializer, KafkaRecordSerializationSchema, KafkaSink,
                                                 KafkaSource)
from runtime_env import job_env


def kafka_sink(bootstrap, topic, guarantee=DeliveryGuarantee.EXACTLY_ONCE, prefix="sink-test"):
    return (KafkaSink.builder().set_bootstrap_servers(bootstrap)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(topic)
                                   .set_value_serialization_schema(SimpleStringSchema()).build())
            .set_delivery_guarantee(guarantee).set_transactional_id_prefix(prefix).build())


def test_a_replayed_checkpoint_commits_nothing_and_a_lingering_transaction_is_aborted(kafka_broker):
    from confluent_kafka import Producer
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, "eo-commits", 2)
    sink = kafka_sink(bootstrap, topic, prefix=topic)
    context = CommitterContext("job", 7, "op-7", "sluice-job-op-7")
    # A crashed driver's transaction, left open under the sink's transactional id.
    crashed = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-op-7"})
    crashed.init_transactions(30)
    crashed.begin_transaction()
    crashed.produce(topic, b"lost")
    crashed.flush(30)
    committer = KafkaCommitter(sink, context)
    committer.commit([[(topic, None, b"a"), (topic, None, b"b")], [(topic, b"k", b"c")]], 1)
    # The same checkpoint again (a replay after a crash between the Kafka commit and the record).
    again = KafkaCommitter(sink, context)
    again.commit([[(topic, None, b"a"), (topic, None, b"b")], [(topic, b"k", b"c")]], 1)
    again.commit([[(topic, None, b"d")]], 2)
    assert sorted(kafka_env.read_committed(bootstrap, topic)) == ["a", "b", "c", "d"]
    committer.close()
    again.close()


def test_at_least_once_writers_take_on_the_producer_an_earlier_epoch_flushed(kafka_broker):
    """A worker's AT_LEAST_ONCE writers keep their producer between epochs (kafka_producer_pool):
    a new idempotent producer waits for its producer id (~0.5 s) before its first record leaves.
    Every record arrives; a kept producer that reported a failing error meanwhile is not taken
    on, the next epoch makes a new one."""
    from confluent_kafka import KafkaError
    from runtime.connectors.kafka_producer_pool import PRODUCERS
    from runtime.connectors.kafka_sink import KafkaSinkWriter
    from runtime.task.sink_writer import WriterInitContext
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, "alo-kept", 2)
    sink = kafka_sink(bootstrap, topic, DeliveryGuarantee.AT_LEAST_ONCE)
    before = (PRODUCERS.opened, PRODUCERS.reused)
    producers, written = [], []
    for epoch in range(4):
        if epoch == 3:      # every broker reported down while the producer waited in the pool
            writer.errors(KafkaError(KafkaError._ALL_BROKERS_DOWN))     # its error callback
        writer = KafkaSinkWriter(sink, WriterInitContext("Sink: kafka", 0, 1, epoch, 0))
        values = [f"e{epoch}-{i}" for i in range(100)]
        writer.write(values)
        producers.append(writer.producer)
        assert writer.finish() is None
        written += values
    assert producers[0] is producers[1] is producers[2] and producers[3] is not producers[0]
    assert (PRODUCERS.opened, PRODUCERS.reused) == (before[0] + 2, before[1] + 2)
    assert sorted(kafka_env.read_committed(bootstrap, topic)) == sorted(written)


def test_a_bounded_call_returns_raises_or_is_given_up_at_its_deadline():
    assert bounded(lambda: 42, 5) == 42
    with pytest.raises(ZeroDivisionError):
        bounded(lambda: 1 // 0, 5)
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(StuckCall):
        bounded(release.wait, 0.3)
    assert 0.3 <= time.monotonic() - started < 5
    release.set()


def test_a_commit_whose_offsets_call_hangs_tries_again_with_a_new_producer_and_writes_each_record_once(
        kafka_broker, monkeypatch):
    """librdkafka's send_offsets_to_transaction can wait past its timeout after a broker restart
    (confluentinc/librdkafka#5456): the commit drops its producer with the transaction open and
    tries again with a new one, which fences it; the records are written once. Stuck twice, the
    commit fails, and the next commit (the checkpoint's retry) writes them once."""
    import runtime.connectors.kafka_sink as kafka_sink_module
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, "eo-stuck", 1)
    committer = KafkaCommitter(kafka_sink(bootstrap, topic, prefix=topic), CommitterContext("job", 3, "op-3", "app"))
    hangs = []

    def hang(times):
        hangs[:] = [times]

        def bounded_or_stuck(call, timeout_s):
            if hangs[0] == 0:
                return bounded(call, timeout_s)
            hangs[0] -= 1
            return bounded(threading.Event().wait, 0.2)     # still blocked at its deadline
        return bounded_or_stuck
    monkeypatch.setattr(kafka_sink_module, "bounded", hang(1))
    committer.commit([[(topic, None, b"a"), (topic, None, b"b")]], 1)
    assert sorted(kafka_env.read_committed(bootstrap, topic)) == ["a", "b"]
    monkeypatch.setattr(kafka_sink_module, "bounded", hang(2))
    with pytest.raises(KafkaConnectorError, match=rf"checkpoint 2's transaction .* the consumer group "
                                                  rf"'{topic}-app''s coordinator did not answer within 15 s, twice"):
        committer.commit([[(topic, None, b"c")]], 2)
    committer.commit([[(topic, None, b"c")]], 2)
    assert sorted(kafka_env.read_committed(bootstrap, topic)) == ["a", "b", "c"]
    committer.close()


def test_a_sink_to_a_missing_topic_or_an_unreachable_broker_fails_before_the_job(kafka_broker):
    with pytest.raises(KafkaConnectorError, match=rf"Kafka sink 'out': topic 'nowhere' does not exist on "
                                                  rf"{kafka_broker.bootstrap} \(KafkaRecordSerializationSchema set_topic\)"):
        KafkaCommitter.check(kafka_sink(kafka_broker.bootstrap, "nowhere"), "out")
    with pytest.raises(KafkaConnectorError, match=r"Kafka sink: reading the cluster's metadata for the sink 'out' on "
                                                  r"127.0.0.1:1 failed: .*Fix: check bootstrap.servers"):
        KafkaCommitter.check(kafka_sink("127.0.0.1:1", "nowhere"), "out")


def test_kafka_to_kafka_exactly_once_with_checkpoints_and_a_rerun(spark, kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap
    source_topic = kafka_env.create_topic(bootstrap, "eo-in", 3)
    sink_topic = kafka_env.create_topic(bootstrap, "eo-out", 2)
    for p in range(3):
        kafka_env.produce(bootstrap, source_topic, [f"w{p}-{i}" for i in range(20)], partition=p)

    def run(max_epochs):
        env = job_env(tmp_path, 2, epoch__max_records_per_split=8, epoch__max_epochs=max_epochs)
        env.enable_checkpointing(1000)
        source = (KafkaSource.builder().set_bootstrap_servers(bootstrap).set_topics(source_topic)
                  .set_group_id(f"{source_topic}-group").set_starting_offsets(KafkaOffsetsInitializer.earliest())
                  .set_value_only_deserializer(SimpleStringSchema()).build())
        (env.from_source(source, WatermarkStrategy.no_watermarks(), "words")
            .map(lambda w: w.upper(), output_type=Types.STRING())
            .sink_to(kafka_sink(bootstrap, sink_topic, prefix=sink_topic)))
        env.execute("kafka-eo")

    run(2)          # 2 epochs of at most 8 per partition: 48 records, then stopped
    assert len(kafka_env.read_committed(bootstrap, sink_topic)) == 48
    assert kafka_env.committed_offsets(bootstrap, f"{source_topic}-group", source_topic, 3) == {0: 16, 1: 16, 2: 16}
    run(3)          # restored: the rest, each once
    assert sorted(kafka_env.read_committed(bootstrap, sink_topic)) == sorted(
        f"W{p}-{i}" for p in range(3) for i in range(20))
    assert kafka_env.committed_offsets(bootstrap, f"{source_topic}-group", source_topic, 3) == {0: 20, 1: 20, 2: 20}
