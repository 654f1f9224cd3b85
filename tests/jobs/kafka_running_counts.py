"""A keyed running count from a Kafka topic, written exactly once to a Delta table and to a Kafka
topic (EXACTLY_ONCE): a result per record, so a record lost or replayed twice shows in either
sink. A checkpoint every epoch; the source is bounded at the offsets latest when a run starts.

    sluice run tests/jobs/kafka_running_counts.py -- --bootstrap-servers B --input-topic I \
        --output-topic O --table T --group-id G --transactional-id-prefix P
"""
import argparse

from runtime.common import Row, Types, WatermarkStrategy
from runtime.common.serialization import SimpleStringSchema
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import DeliveryGuarantee
from runtime.datastream.connectors.delta import DeltaSink
from runtime.datastream.connectors.kafka import (KafkaOffsetsInitializer, KafkaRecordSerializationSchema, KafkaSink,
                                                 KafkaSource)
from runtime.datastream.formats.json import JsonRowSerializationSchema

COUNT = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    for name in ("bootstrap-servers", "input-topic", "output-topic", "table", "group-id", "transactional-id-prefix"):
        parser.add_argument(f"--{name}", required=True)
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    source = (KafkaSource.builder().set_bootstrap_servers(args.bootstrap_servers).set_topics(args.input_topic)
              .set_group_id(args.group_id).set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_bounded(KafkaOffsetsInitializer.latest())
              .set_value_only_deserializer(SimpleStringSchema()).build())
    counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "words").uid("words")
              .map(lambda word: Row(word=word, count=1), output_type=COUNT).uid("ones")
              .key_by(lambda r: r.word, key_type=Types.STRING())
              .sum("count").uid("running-count"))
    # The table first: its commit is the first of a checkpoint's sink commits, the transaction's next.
    counts.sink_to(DeltaSink.for_row_data(args.table)).uid("counts-table")
    counts.sink_to(KafkaSink.builder().set_bootstrap_servers(args.bootstrap_servers)
                   .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(args.output_topic)
                                          .set_value_serialization_schema(
                                              JsonRowSerializationSchema.builder().with_type_info(COUNT).build())
                                          .build())
                   .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
                   .set_transactional_id_prefix(args.transactional_id_prefix).build()).uid("counts-topic")
    env.execute("kafka running counts")


if __name__ == "__main__":
    main()
