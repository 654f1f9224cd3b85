"""The test run's Kafka broker (include/kafka_broker.py: a real one-node KRaft broker from
.jars/kafka) and small helpers to make topics, produce records and read them back as a
read_committed consumer does."""
from __future__ import annotations

import itertools
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "include"))
from kafka_broker import LocalKafkaBroker  # noqa: E402
from waiting import wait_until  # noqa: E402

_names = itertools.count()


def start(directory) -> LocalKafkaBroker:
    return LocalKafkaBroker(str(directory)).start()


def topic_name(stem: str) -> str:
    return f"{stem}-{os.getpid()}-{next(_names)}"


def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, stem: str, partitions: int = 1) -> str:
    from confluent_kafka.admin import NewTopic
    name = topic_name(stem)
    client = admin(bootstrap)       # kept until the futures resolve: a collected client cancels them
    for future in client.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    return name


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    from confluent_kafka.admin import NewPartitions
    client = admin(bootstrap)
    for future in client.create_partitions([NewPartitions(topic, total)]).values():
        future.result(30)
    # The broker's metadata may show the new partitions a moment later: a producer started before
    # would drop a record for one of them (unknown partition).
    wait_until(lambda: len(client.list_topics(topic, timeout=10).topics[topic].partitions) == total, 30,
               f"{topic}'s {total} partitions in the broker's metadata", interval=0.1)


def produce(bootstrap: str, topic: str, values, partition: int = None, timestamps=None) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    failed = []     # a record that fails leaves the queue too: flush() alone would not say it

    def delivered(error, message):
        if error is not None:
            failed.append(error)
    for i, value in enumerate(values):
        kwargs = {} if partition is None else {"partition": partition}
        if timestamps is not None:
            kwargs["timestamp"] = timestamps[i]
        producer.produce(topic, value.encode() if isinstance(value, str) else value, on_delivery=delivered, **kwargs)
    assert producer.flush(30) == 0
    assert not failed, f"records not delivered to {topic}: {failed[:3]}"


def read_committed(bootstrap: str, topic: str) -> list[str]:
    """Every record a read_committed consumer sees in ``topic``, partition by partition."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient
    partitions = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30).topics[topic].partitions
    out = []
    for p in sorted(partitions):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-env-reader",
                             "enable.auto.commit": False, "enable.partition.eof": True,
                             "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition(topic, p, 0)])
        while True:
            m = consumer.poll(30)
            assert m is not None, f"no end of {topic}-{p} within 30 s"
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                break
            out.append(m.value().decode())
        consumer.close()
    return out


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        done = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in done}
    finally:
        consumer.close()
