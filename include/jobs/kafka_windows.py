"""Word events from a Kafka topic counted per word in event-time tumbling windows (the time is each
record's Kafka timestamp), written exactly once to a Delta table and to a Kafka topic.

Each scheduled run reads what has arrived since the last checkpoint, in one epoch (the offsets
latest when it is planned), and ends with a checkpoint: windows the watermark has not passed yet
stay open in the checkpoint and fire in a later run, so a window's count is written once, whole.
The output topic gets each window as JSON ({"word", "window_start", "window_end", "count"}) in a
Kafka transaction committed with the checkpoint (read it with isolation.level=read_committed).

    bin/dev kafka --topic events:4 --topic window-counts:1     # a broker with the two topics
    bin/dev sluice run include/jobs/kafka_windows.py --max-epochs 1 -- --bootstrap-servers 127.0.0.1:9092
"""
import argparse

from runtime.common import Duration, Row, Time, Types, WatermarkStrategy
from runtime.common.serialization import SimpleStringSchema
from runtime.datastream import ProcessWindowFunction, StreamExecutionEnvironment, TumblingEventTimeWindows
from runtime.datastream.connectors import DeliveryGuarantee
from runtime.datastream.connectors.delta import DeltaSink
from runtime.datastream.connectors.kafka import (KafkaOffsetsInitializer, KafkaRecordSerializationSchema, KafkaSink,
                                                 KafkaSource)
from runtime.datastream.formats.json import JsonRowSerializationSchema
from runtime.jobmaster import JobDeployment

# Its Airflow DAG ("kafka_windows"): hourly, one epoch a run (the trigger form's Epochs: empty runs
# it until stopped). The broker is the Airflow connection kafka_default's (Admin > Connections, type
# Apache Kafka, Config Dict {"bootstrap.servers": ...}; airflow_settings.yaml sets bin/dev kafka's):
# the DAG's tasks render the argument as an Airflow template before the job script runs.
BOOTSTRAP_SERVERS = "{{ conn.kafka_default.extra_dejson['bootstrap.servers'] }}"
# Its table is not {warehouse}/kafka-window-counts: that is the job's own folder (checkpoints, state,
# epoch log), whose files a VACUUM of a table there would delete; a run refuses it.
DEPLOYMENT = JobDeployment(schedule="@hourly", max_epochs=1, parallelism=2,
                           args=("--bootstrap-servers", BOOTSTRAP_SERVERS, "--input-topic", "events",
                                 "--output-topic", "window-counts", "--table", "{warehouse}/tables/kafka-window-counts"),
                           description="Kafka word events -> event-time window counts -> Delta and Kafka")

WINDOW_COUNT = Types.ROW_NAMED(["word", "window_start", "window_end", "count"],
                               [Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()])
COUNT = Types.TUPLE([Types.STRING(), Types.LONG()])


class WindowCount(ProcessWindowFunction):
    """A word's count with its window's bounds (ms)."""

    def process(self, key, context, elements):
        for word, count in elements:
            yield Row(word=word, window_start=context.window().start, window_end=context.window().end, count=count)


def build(env: StreamExecutionEnvironment, bootstrap_servers: str, input_topic: str, output_topic: str, table: str,
          window_ms: int = 10_000, out_of_orderness_ms: int = 2_000, idleness_ms: int = 60_000,
          group_id: str = "kafka-windows", transactional_id_prefix: str = "kafka-windows"):
    source = (KafkaSource.builder().set_bootstrap_servers(bootstrap_servers).set_topics(input_topic)
              .set_group_id(group_id).set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_value_only_deserializer(SimpleStringSchema()).build())
    # Kafka's record timestamps are the event time; each partition has its own watermark, and a
    # partition with nothing new for idleness_ms (processing time) does not hold the others back.
    watermarks = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(out_of_orderness_ms))
                  .with_idleness(Duration.of_millis(idleness_ms)))
    counts = (env.from_source(source, watermarks, "events").uid("events")
              .map(lambda word: (word.strip(), 1), output_type=COUNT).uid("pairs")
              .key_by(lambda pair: pair[0], key_type=Types.STRING())
              .window(TumblingEventTimeWindows.of(Time.milliseconds(window_ms)))
              .reduce(lambda a, b: (a[0], a[1] + b[1]), window_function=WindowCount(), output_type=WINDOW_COUNT)
              .uid("window-counts"))
    counts.sink_to(DeltaSink.for_row_data(table)).uid("window-counts-table")
    counts.sink_to(KafkaSink.builder().set_bootstrap_servers(bootstrap_servers)
                   .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(output_topic)
                                          .set_value_serialization_schema(
                                              JsonRowSerializationSchema.builder().with_type_info(WINDOW_COUNT).build())
                                          .build())
                   .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
                   .set_transactional_id_prefix(transactional_id_prefix).build()).uid("window-counts-topic")
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092", help="the Kafka cluster (bootstrap.servers)")
    parser.add_argument("--input-topic", default="events", help="word events: one word a record")
    parser.add_argument("--output-topic", default="window-counts", help="the windows' counts as JSON")
    parser.add_argument("--table", required=True, help="the Delta table of the windows' counts")
    parser.add_argument("--window-ms", type=int, default=10_000)
    parser.add_argument("--out-of-orderness-ms", type=int, default=2_000)
    parser.add_argument("--idleness-ms", type=int, default=60_000)
    parser.add_argument("--group-id", default="kafka-windows", help="the consumer group its offsets are committed to")
    parser.add_argument("--transactional-id-prefix", default="kafka-windows",
                        help="unique per job on the cluster (the sink's Kafka transactions)")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=10_000,
                        help="0: every epoch; a run's last epoch always ends in a checkpoint")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    if args.checkpoint_interval_ms:
        env.enable_checkpointing(args.checkpoint_interval_ms)
    else:
        env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    build(env, args.bootstrap_servers, args.input_topic, args.output_topic, args.table, args.window_ms,
          args.out_of_orderness_ms, args.idleness_ms, args.group_id, args.transactional_id_prefix)
    env.execute("Kafka Window Counts")


if __name__ == "__main__":
    main()
