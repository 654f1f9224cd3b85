"""Kafka source and sink descriptors, named as ``pyflink.datastream.connectors.kafka`` (PyFlink
2.3): ``KafkaSource.builder()``, ``KafkaOffsetsInitializer``, ``KafkaSink.builder()``,
``KafkaRecordSerializationSchema.builder()``. They say what to read and write; the runtime
(``runtime.connectors.kafka_source``, ``kafka_sink``) reads and writes with confluent-kafka.

Properties are Kafka client properties (librdkafka's names, which are the Java client's for
everything common) plus Flink's KafkaSourceOptions: ``partition.discovery.interval.ms``,
``commit.offsets.on.checkpoint``, ``client.id.prefix``.
"""
from __future__ import annotations

import enum
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Dict, Optional, Set, Union

from runtime.common.serialization import (ByteArraySchema, DeserializationSchema, SerializationSchema,
                                          SimpleStringSchema)
from runtime.datastream.connectors.base import Boundedness, DeliveryGuarantee, Sink, Source

__all__ = [
    "KafkaSource", "KafkaSourceBuilder", "KafkaSink", "KafkaSinkBuilder", "KafkaTopicPartition",
    "KafkaOffsetsInitializer", "KafkaOffsetResetStrategy", "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder", "KafkaTopicSelector",
]

# Flink's KafkaSourceOptions: new partitions are looked for every 5 minutes by default.
DEFAULT_DISCOVERY_INTERVAL_MS = 300_000


class KafkaTopicPartition:
    """A topic's partition (Java's ``TopicPartition``): ``KafkaTopicPartition('TOPIC1', 0)``."""

    def __init__(self, topic: str, partition: int):
        self._topic = topic
        self._partition = partition

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def partition(self) -> int:
        return self._partition

    def __eq__(self, other):
        if not isinstance(other, KafkaTopicPartition):
            return False
        return self._topic == other._topic and self._partition == other._partition

    def __hash__(self):
        return 31 * (31 + self._partition) + hash(self._topic)

    def __repr__(self) -> str:
        return f"KafkaTopicPartition({self._topic!r}, {self._partition})"

    def __str__(self) -> str:       # Java's TopicPartition.toString
        return f"{self._topic}-{self._partition}"


class KafkaOffsetResetStrategy(enum.Enum):
    """Where to start when there is no offset to start from (Kafka's ``OffsetResetStrategy``)."""

    LATEST = 0
    EARLIEST = 1
    NONE = 2


@dataclass(frozen=True)
class KafkaOffsetsInitializer:
    """The starting (or stopping) offset of each partition. ``kind``: earliest, latest,
    committed, timestamp or offsets."""

    kind: str
    reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.NONE
    timestamp_ms: Optional[int] = None
    offsets_by_partition: tuple = ()        # ((topic, partition, offset), ...)

    @staticmethod
    def committed_offsets(offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.NONE
                          ) -> "KafkaOffsetsInitializer":
        """The consumer group's committed offsets; a partition without one starts where
        ``offset_reset_strategy`` says (NONE: the job fails, naming the partition)."""
        return KafkaOffsetsInitializer("committed", _strategy(offset_reset_strategy))

    @staticmethod
    def timestamp(timestamp: int) -> "KafkaOffsetsInitializer":
        """The first record whose timestamp is at least ``timestamp`` (ms), in each partition."""
        if isinstance(timestamp, bool) or not isinstance(timestamp, int):
            raise TypeError(f"KafkaOffsetsInitializer.timestamp takes milliseconds (an int), got {timestamp!r}")
        return KafkaOffsetsInitializer("timestamp", KafkaOffsetResetStrategy.LATEST, timestamp_ms=timestamp)

    @staticmethod
    def earliest() -> "KafkaOffsetsInitializer":
        return KafkaOffsetsInitializer("earliest", KafkaOffsetResetStrategy.EARLIEST)

    @staticmethod
    def latest() -> "KafkaOffsetsInitializer":
        return KafkaOffsetsInitializer("latest", KafkaOffsetResetStrategy.LATEST)

    @staticmethod
    def offsets(offsets: Dict[KafkaTopicPartition, int],
                offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST
                ) -> "KafkaOffsetsInitializer":
        """The given offset of each listed partition; others (and a starting offset out of range)
        start from the committed offset, else where ``offset_reset_strategy`` says. A stopping
        offset is taken as given, as Flink does: past the partition's end, a bounded source
        reads the records as they come and ends once the partition reaches it."""
        listed = []
        for tp, offset in offsets.items():
            if not isinstance(tp, KafkaTopicPartition):
                raise TypeError(f"KafkaOffsetsInitializer.offsets: keys are KafkaTopicPartition, got {tp!r}")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ValueError(f"KafkaOffsetsInitializer.offsets: the offset of {tp} must be an int >= 0, "
                                 f"got {offset!r}")
            listed.append((tp.topic, tp.partition, offset))
        return KafkaOffsetsInitializer("offsets", _strategy(offset_reset_strategy),
                                       offsets_by_partition=tuple(sorted(listed)))


def _strategy(value) -> KafkaOffsetResetStrategy:
    if not isinstance(value, KafkaOffsetResetStrategy):
        raise TypeError(f"expected a KafkaOffsetResetStrategy (EARLIEST, LATEST or NONE), got {value!r}")
    return value


def produced_type(schema) -> Any:
    """The type a deserialization schema produces: its ``get_produced_type()`` when it has one
    (the row formats), STRING for SimpleStringSchema, bytes for ByteArraySchema."""
    getter = getattr(schema, "get_produced_type", None)
    if callable(getter):
        return getter()
    from runtime.common.typeinfo import Types
    if isinstance(schema, SimpleStringSchema):
        return Types.STRING()
    if isinstance(schema, ByteArraySchema):
        return Types.PRIMITIVE_ARRAY(Types.BYTE())
    return None


@dataclass(frozen=True)
class KafkaSource(Source):
    """Reads Kafka topics; each topic-partition is a split (see ``KafkaSourceBuilder``)."""

    default_name: ClassVar[str] = "Kafka Source"

    properties: tuple = ()                  # ((key, value), ...): bootstrap.servers, group.id, ...
    topics: tuple = ()
    topic_pattern: Optional[str] = None
    partitions: tuple = ()                  # ((topic, partition), ...)
    starting_offsets: KafkaOffsetsInitializer = field(default_factory=KafkaOffsetsInitializer.earliest)
    stopping_offsets: Optional[KafkaOffsetsInitializer] = None
    bounded: bool = False                   # set_bounded: the job ends at the stopping offsets
    deserializer: Any = None

    @staticmethod
    def builder() -> "KafkaSourceBuilder":
        return KafkaSourceBuilder()

    @property
    def boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED if self.bounded else Boundedness.CONTINUOUS_UNBOUNDED

    @property
    def produced_type(self) -> Any:
        return produced_type(self.deserializer)

    def setting(self, key: str, default: Optional[str] = None) -> Optional[str]:
        return dict(self.properties).get(key, default)

    @property
    def bootstrap_servers(self) -> str:
        return self.setting("bootstrap.servers", "")

    @property
    def group_id(self) -> Optional[str]:
        return self.setting("group.id")

    @property
    def discovery_interval_ms(self) -> int:
        """Flink's ``partition.discovery.interval.ms``; -1 (no discovery) for a bounded source."""
        if self.bounded:
            return -1
        return int(self.setting("partition.discovery.interval.ms", str(DEFAULT_DISCOVERY_INTERVAL_MS)))

    @property
    def commit_offsets_on_checkpoint(self) -> bool:
        """Flink's ``commit.offsets.on.checkpoint`` (true), with a group id to commit to."""
        return (self.group_id is not None
                and self.setting("commit.offsets.on.checkpoint", "true").lower() == "true")

    def subscription(self) -> str:
        """What the source reads, for messages."""
        if self.topics:
            return "topic(s) " + ", ".join(self.topics)
        if self.topic_pattern is not None:
            return f"topics matching {self.topic_pattern!r}"
        return "partitions " + ", ".join(f"{t}-{p}" for t, p in self.partitions)


class KafkaSourceBuilder:
    """Builds a ``KafkaSource``: bootstrap servers (or ``bootstrap.servers`` in the properties),
    one of topics / topic pattern / partitions, and a value deserializer are required.

        KafkaSource.builder() \\
            .set_bootstrap_servers("localhost:9092") \\
            .set_topics("input-topic") \\
            .set_group_id("my-group") \\
            .set_starting_offsets(KafkaOffsetsInitializer.earliest()) \\
            .set_value_only_deserializer(SimpleStringSchema()) \\
            .build()
    """

    def __init__(self):
        self._properties: dict = {}
        self._topics: tuple = ()
        self._pattern: Optional[str] = None
        self._partitions: tuple = ()
        self._starting = KafkaOffsetsInitializer.earliest()
        self._stopping: Optional[KafkaOffsetsInitializer] = None
        self._bounded = False
        self._deserializer = None

    def build(self) -> KafkaSource:
        if not self._properties.get("bootstrap.servers"):
            raise ValueError("KafkaSource: no bootstrap servers; call set_bootstrap_servers('host:port') "
                             "or set the 'bootstrap.servers' property")
        subscriptions = sum(1 for s in (self._topics, self._pattern is not None, self._partitions) if s)
        if subscriptions != 1:
            raise ValueError("KafkaSource: say what to read with exactly one of set_topics, set_topic_pattern "
                             "or set_partitions")
        if self._deserializer is None:
            raise ValueError("KafkaSource: no deserializer; call set_value_only_deserializer(SimpleStringSchema()) "
                             "or another DeserializationSchema")
        if self._starting.kind == "committed" and not self._properties.get("group.id"):
            raise ValueError("KafkaSource: KafkaOffsetsInitializer.committed_offsets() needs a consumer group; "
                             "call set_group_id(...)")
        return KafkaSource(properties=tuple(sorted(self._properties.items())), topics=self._topics,
                           topic_pattern=self._pattern, partitions=self._partitions,
                           starting_offsets=self._starting, stopping_offsets=self._stopping,
                           bounded=self._bounded, deserializer=self._deserializer)

    def set_bootstrap_servers(self, bootstrap_servers: str) -> "KafkaSourceBuilder":
        return self.set_property("bootstrap.servers", bootstrap_servers)

    def set_group_id(self, group_id: str) -> "KafkaSourceBuilder":
        return self.set_property("group.id", group_id)

    def set_topics(self, *topics: str) -> "KafkaSourceBuilder":
        if len(topics) == 1 and isinstance(topics[0], (list, tuple)):
            topics = tuple(topics[0])
        if not topics or not all(isinstance(t, str) and t for t in topics):
            raise ValueError(f"KafkaSource.set_topics takes topic names, got {topics!r}")
        self._topics, self._pattern, self._partitions = tuple(topics), None, ()
        return self

    def set_topic_pattern(self, topic_pattern: str) -> "KafkaSourceBuilder":
        try:
            re.compile(topic_pattern)
        except (re.error, TypeError) as e:
            raise ValueError(f"KafkaSource.set_topic_pattern: {topic_pattern!r} is not a regular expression: {e}")
        self._topics, self._pattern, self._partitions = (), topic_pattern, ()
        return self

    def set_partitions(self, partitions: Set[KafkaTopicPartition]) -> "KafkaSourceBuilder":
        if not partitions or not all(isinstance(p, KafkaTopicPartition) for p in partitions):
            raise ValueError(f"KafkaSource.set_partitions takes a set of KafkaTopicPartition, got {partitions!r}")
        self._topics, self._pattern = (), None
        self._partitions = tuple(sorted((p.topic, p.partition) for p in partitions))
        return self

    def set_starting_offsets(self, starting_offsets_initializer: KafkaOffsetsInitializer) -> "KafkaSourceBuilder":
        self._starting = _initializer(starting_offsets_initializer, "set_starting_offsets")
        return self

    def set_unbounded(self, stopping_offsets_initializer: KafkaOffsetsInitializer) -> "KafkaSourceBuilder":
        """Stop each partition at these offsets, but stay a continuous (unbounded) source."""
        self._stopping = _initializer(stopping_offsets_initializer, "set_unbounded")
        self._bounded = False
        return self

    def set_bounded(self, stopping_offsets_initializer: KafkaOffsetsInitializer) -> "KafkaSourceBuilder":
        """A bounded source: the job ends once every partition reached its stopping offset."""
        self._stopping = _initializer(stopping_offsets_initializer, "set_bounded")
        self._bounded = True
        return self

    def set_value_only_deserializer(self, deserialization_schema: DeserializationSchema) -> "KafkaSourceBuilder":
        if not callable(getattr(deserialization_schema, "deserialize", None)):
            raise TypeError(f"KafkaSource.set_value_only_deserializer takes a DeserializationSchema, "
                            f"got {deserialization_schema!r}")
        self._deserializer = deserialization_schema
        return self

    def set_client_id_prefix(self, prefix: str) -> "KafkaSourceBuilder":
        return self.set_property("client.id.prefix", prefix)

    def set_property(self, key: str, value: str) -> "KafkaSourceBuilder":
        self._properties[str(key)] = str(value)
        return self

    def set_properties(self, props: Dict) -> "KafkaSourceBuilder":
        for key, value in props.items():
            self.set_property(key, value)
        return self


def _initializer(value, method: str) -> KafkaOffsetsInitializer:
    if not isinstance(value, KafkaOffsetsInitializer):
        raise TypeError(f"KafkaSource.{method} takes a KafkaOffsetsInitializer (earliest(), latest(), "
                        f"committed_offsets(), timestamp(ms), offsets({{...}})), got {value!r}")
    return value


# ---- sink --------------------------------------------------------------------------------------

class KafkaTopicSelector(ABC):
    """Selects the topic of a record."""

    @abstractmethod
    def apply(self, data) -> str:
        pass


class _FunctionTopicSelector(KafkaTopicSelector):
    def __init__(self, f: Callable[[Any], str]):
        self._f = f

    def apply(self, data) -> str:
        return self._f(data)


@dataclass(frozen=True)
class KafkaRecordSerializationSchema(SerializationSchema):
    """Turns a record into a Kafka record: its topic (fixed or selected), key and value bytes."""

    topic: Optional[str] = None
    topic_selector: Optional[KafkaTopicSelector] = None
    key_serialization_schema: Optional[SerializationSchema] = None
    value_serialization_schema: Optional[SerializationSchema] = None

    @staticmethod
    def builder() -> "KafkaRecordSerializationSchemaBuilder":
        return KafkaRecordSerializationSchemaBuilder()

    def target_topic(self, value) -> str:
        return self.topic if self.topic is not None else self.topic_selector.apply(value)

    def serialize(self, value) -> tuple:
        """(topic, key bytes or None, value bytes)."""
        key = self.key_serialization_schema.serialize(value) if self.key_serialization_schema is not None else None
        return self.target_topic(value), key, self.value_serialization_schema.serialize(value)


class KafkaRecordSerializationSchemaBuilder:
    """A topic (``set_topic`` or ``set_topic_selector``) and a value schema are required; the key
    schema is optional (no key: Kafka spreads the records over the partitions)."""

    def __init__(self):
        self._topic: Optional[str] = None
        self._topic_selector: Optional[KafkaTopicSelector] = None
        self._key: Optional[SerializationSchema] = None
        self._value: Optional[SerializationSchema] = None

    def build(self) -> KafkaRecordSerializationSchema:
        if self._topic is None and self._topic_selector is None:
            raise ValueError("KafkaRecordSerializationSchema: no topic; call set_topic(...) or set_topic_selector(...)")
        if self._value is None:
            raise ValueError("KafkaRecordSerializationSchema: no value schema; call "
                             "set_value_serialization_schema(SimpleStringSchema()) or another SerializationSchema")
        return KafkaRecordSerializationSchema(self._topic, self._topic_selector, self._key, self._value)

    def set_topic(self, topic: str) -> "KafkaRecordSerializationSchemaBuilder":
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"KafkaRecordSerializationSchema.set_topic takes a topic name, got {topic!r}")
        self._topic, self._topic_selector = topic, None
        return self

    def set_topic_selector(self, topic_selector: Union[Callable[[Any], str], KafkaTopicSelector]
                           ) -> "KafkaRecordSerializationSchemaBuilder":
        if not isinstance(topic_selector, KafkaTopicSelector) and not callable(topic_selector):
            raise TypeError("topic_selector must be KafkaTopicSelector or a callable")
        if not isinstance(topic_selector, KafkaTopicSelector):
            topic_selector = _FunctionTopicSelector(topic_selector)
        self._topic, self._topic_selector = None, topic_selector
        return self

    def set_key_serialization_schema(self, key_serialization_schema: SerializationSchema
                                     ) -> "KafkaRecordSerializationSchemaBuilder":
        self._key = _serializer(key_serialization_schema, "set_key_serialization_schema")
        return self

    def set_value_serialization_schema(self, value_serialization_schema: SerializationSchema
                                       ) -> "KafkaRecordSerializationSchemaBuilder":
        self._value = _serializer(value_serialization_schema, "set_value_serialization_schema")
        return self


def _serializer(value, method: str):
    if not callable(getattr(value, "serialize", None)):
        raise TypeError(f"KafkaRecordSerializationSchema.{method} takes a SerializationSchema, got {value!r}")
    return value


@dataclass(frozen=True)
class KafkaSink(Sink):
    """Writes records to Kafka with the delivery guarantee chosen (NONE by default, as Flink's):
    EXACTLY_ONCE commits each checkpoint's records in one Kafka transaction once the checkpoint
    completes (``runtime.connectors.kafka_sink``)."""

    default_name: ClassVar[str] = "Kafka Sink"

    properties: tuple = ()
    record_serializer: Optional[KafkaRecordSerializationSchema] = None
    delivery_guarantee: DeliveryGuarantee = DeliveryGuarantee.NONE
    transactional_id_prefix: str = "kafka-sink"

    @staticmethod
    def builder() -> "KafkaSinkBuilder":
        return KafkaSinkBuilder()

    def setting(self, key: str, default: Optional[str] = None) -> Optional[str]:
        return dict(self.properties).get(key, default)

    @property
    def bootstrap_servers(self) -> str:
        return self.setting("bootstrap.servers", "")


class KafkaSinkBuilder:
    """Builds a ``KafkaSink``: bootstrap servers and a record serializer are required."""

    def __init__(self):
        self._properties: dict = {}
        self._serializer: Optional[KafkaRecordSerializationSchema] = None
        self._guarantee = DeliveryGuarantee.NONE
        self._prefix = "kafka-sink"

    def build(self) -> KafkaSink:
        if not self._properties.get("bootstrap.servers"):
            raise ValueError("KafkaSink: no bootstrap servers; call set_bootstrap_servers('host:port')")
        if self._serializer is None:
            raise ValueError("KafkaSink: no record serializer; call set_record_serializer("
                             "KafkaRecordSerializationSchema.builder()...build())")
        return KafkaSink(tuple(sorted(self._properties.items())), self._serializer, self._guarantee, self._prefix)

    def set_bootstrap_servers(self, bootstrap_servers: str) -> "KafkaSinkBuilder":
        return self.set_property("bootstrap.servers", bootstrap_servers)

    def set_delivery_guarantee(self, delivery_guarantee: DeliveryGuarantee) -> "KafkaSinkBuilder":
        if not isinstance(delivery_guarantee, DeliveryGuarantee):
            raise TypeError(f"KafkaSink.set_delivery_guarantee takes a DeliveryGuarantee, got {delivery_guarantee!r}")
        self._guarantee = delivery_guarantee
        return self

    def set_transactional_id_prefix(self, transactional_id_prefix: str) -> "KafkaSinkBuilder":
        if not isinstance(transactional_id_prefix, str) or not transactional_id_prefix:
            raise ValueError(f"KafkaSink.set_transactional_id_prefix takes a non-empty string, "
                             f"got {transactional_id_prefix!r}")
        if len(transactional_id_prefix.encode()) > 6400:        # Flink's MAXIMUM_PREFIX_BYTES
            raise ValueError("KafkaSink.set_transactional_id_prefix: the prefix is longer than 6400 bytes")
        self._prefix = transactional_id_prefix
        return self

    def set_record_serializer(self, record_serializer: KafkaRecordSerializationSchema) -> "KafkaSinkBuilder":
        if not isinstance(record_serializer, KafkaRecordSerializationSchema):
            raise TypeError("KafkaSink.set_record_serializer takes a KafkaRecordSerializationSchema "
                            f"(KafkaRecordSerializationSchema.builder()...build()), got {record_serializer!r}")
        self._serializer = record_serializer
        return self

    def set_property(self, key: str, value: str) -> "KafkaSinkBuilder":
        self._properties[str(key)] = str(value)
        return self
