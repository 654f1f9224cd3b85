"""Connectors: sources and sinks, as ``pyflink.datastream.connectors``."""
from runtime.datastream.connectors.base import Boundedness, DeliveryGuarantee, Sink, Source
from runtime.datastream.connectors.collection import CollectionSource
from runtime.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from runtime.datastream.connectors.delta import DeltaSink, DeltaSource, TableMaintenance
from runtime.datastream.connectors.file_system import (
    BucketAssigner, FileSink, FileSource, OutputFileConfig, RollingPolicy, StreamFormat)
from runtime.datastream.connectors.kafka import (
    KafkaOffsetResetStrategy, KafkaOffsetsInitializer, KafkaRecordSerializationSchema, KafkaSink, KafkaSource,
    KafkaTopicPartition, KafkaTopicSelector)
from runtime.datastream.connectors.number_seq import NumberSequenceSource
from runtime.datastream.connectors.socket import SocketTextSource

__all__ = [
    "Boundedness", "DeliveryGuarantee", "Sink", "Source", "CollectionSource", "DataGeneratorSource",
    "RateLimiterStrategy", "DeltaSink", "DeltaSource", "TableMaintenance", "FileSource", "StreamFormat",
    "BucketAssigner", "FileSink", "OutputFileConfig", "RollingPolicy",
    "NumberSequenceSource", "SocketTextSource", "KafkaSource", "KafkaSink", "KafkaOffsetsInitializer",
    "KafkaOffsetResetStrategy", "KafkaRecordSerializationSchema", "KafkaTopicPartition", "KafkaTopicSelector",
]
