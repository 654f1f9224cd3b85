"""PyFlink 2.3's shipped Kafka examples with the JSON and CSV formats, on Sluice against the test
run's broker: what each writes to Kafka (read back read_committed) and what its reading job prints.

The programs are those of ``pyflink/examples/datastream/connectors/kafka_json_format.py`` and
``kafka_csv_format.py`` in the apache-flink 2.3.0 wheel (not kept in this repository), with the
broker's address for their hard-coded ``localhost:9092``, a topic of the test's own, and their
endless reading job run for one epoch (the topic is complete by then). bench/pyflink_examples.py
runs all five shipped Kafka examples unchanged but for their imports.
"""
import pytest

import kafka_env
from runtime.common import Types, WatermarkStrategy
from runtime.datastream.connectors.kafka import (KafkaOffsetsInitializer, KafkaRecordSerializationSchema, KafkaSink,
                                                 KafkaSource)
from runtime.datastream.formats.csv import CsvRowDeserializationSchema, CsvRowSerializationSchema
from runtime.datastream.formats.json import JsonRowDeserializationSchema, JsonRowSerializationSchema
from runtime_env import job_env

ROWS = [(1, 'hi'), (2, 'hello'), (3, 'hi'), (4, 'hello'), (5, 'hi'), (6, 'hello'), (6, 'hello')]


def json_schemas(type_info):
    return (JsonRowSerializationSchema.Builder().with_type_info(type_info).build(),
            JsonRowDeserializationSchema.Builder().type_info(Types.ROW([Types.INT(), Types.STRING()])).build())


def csv_schemas(type_info):
    return (CsvRowSerializationSchema.Builder(type_info).build(),
            CsvRowDeserializationSchema.Builder(type_info).build())


# Flink's bytes for the examples' rows (tests/test_row_formats.py holds each format to Flink's)
EXAMPLES = {
    "json": (json_schemas, [f'{{"f0":{i},"f1":"{s}"}}' for i, s in ROWS]),
    "csv": (csv_schemas, [f"{i},{s}\n" for i, s in ROWS]),
}


def write_to_kafka(env, bootstrap, topic, schemas):
    """The example's write_to_kafka."""
    type_info = Types.ROW([Types.INT(), Types.STRING()])
    ds = env.from_collection(ROWS, type_info=type_info)
    serialization_schema, _ = schemas(type_info)
    record_serializer = KafkaRecordSerializationSchema.builder() \
        .set_topic(topic) \
        .set_value_serialization_schema(serialization_schema) \
        .build()
    kafka_sink = (KafkaSink.builder()
                  .set_record_serializer(record_serializer)
                  .set_bootstrap_servers(bootstrap)
                  .set_property("group.id", "test_group")
                  .build())
    ds.sink_to(kafka_sink)      # note that the output type of ds must be RowTypeInfo
    env.execute()


def read_from_kafka(env, bootstrap, topic, schemas):
    """The example's read_from_kafka; returns what its print() printed."""
    type_info = Types.ROW([Types.INT(), Types.STRING()])
    _, deserialization_schema = schemas(type_info)
    kafka_source = (KafkaSource.builder()
                    .set_topics(topic)
                    .set_value_only_deserializer(deserialization_schema)
                    .set_properties({'bootstrap.servers': bootstrap, 'group.id': 'test_group_1'})
                    .set_starting_offsets(KafkaOffsetsInitializer.earliest())
                    .build())
    ds = env.from_source(kafka_source, watermark_strategy=WatermarkStrategy.no_watermarks(),
                         source_name="kafka source")
    ds.print()
    return env.execute().printed


@pytest.mark.parametrize("fmt", sorted(EXAMPLES))
def test_the_shipped_kafka_example_writes_flinks_bytes_and_prints_its_rows(spark, kafka_broker, tmp_path, fmt):
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, f"test_{fmt}_topic")
    schemas, written = EXAMPLES[fmt]
    write_to_kafka(job_env(tmp_path / "write", 2), bootstrap, topic, schemas)
    assert sorted(kafka_env.read_committed(bootstrap, topic)) == sorted(written)
    printed = read_from_kafka(job_env(tmp_path / "read", 2, epoch__max_epochs=1), bootstrap, topic, schemas)
    assert sorted(line.split("> ", 1)[-1] for line in printed) == sorted(f"+I[{i},{s}]" for i, s in ROWS)
