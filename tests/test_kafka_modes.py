"""The Kafka source's modes against the test run's real broker (tests/kafka_env.py): BATCH
runtime mode with a bounded source, per-partition watermarks with idleness in a whole job, and
a topic pattern that picks up a topic made while the job runs."""
import kafka_env
from runtime.common import Duration, Time, Types, WatermarkStrategy
from runtime.common.serialization import SimpleStringSchema
from runtime.connectors.base import EnumeratorContext
from runtime.connectors.kafka_source import KafkaSourceEnumerator
from runtime.datastream import RuntimeExecutionMode, TumblingEventTimeWindows
from runtime.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource
from runtime_env import job_env
from test_kafka_source import reader_for, run_epoch

COUNT = Types.TUPLE([Types.STRING(), Types.LONG()])


def words(bootstrap, topic, **props):
    builder = (KafkaSource.builder().set_bootstrap_servers(bootstrap).set_topics(topic)
               .set_starting_offsets(KafkaOffsetsInitializer.earliest())
               .set_value_only_deserializer(SimpleStringSchema()))
    for key, value in props.items():
        builder.set_property(key, value)
    return builder


def test_batch_mode_reads_a_bounded_source_to_its_stopping_offsets_in_one_epoch(spark, kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, "batch", 3)
    for p in range(3):
        kafka_env.produce(bootstrap, topic, [f"w{i % (p + 2)}" for i in range(12)], partition=p)
    env = job_env(tmp_path, 2)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    source = words(bootstrap, topic).set_bounded(KafkaOffsetsInitializer.latest()).build()
    counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "words")
              .map(lambda w: (w, 1), output_type=COUNT).key_by(lambda t: t[0]).sum(1))
    got = list(counts.execute_and_collect("kafka-batch"))
    # BATCH: one final result per key (no rolling updates), every record of the three partitions.
    expected = {}
    for p in range(3):
        for i in range(12):
            expected[f"w{i % (p + 2)}"] = expected.get(f"w{i % (p + 2)}", 0) + 1
    assert sorted(got) == sorted(expected.items())


def test_a_bounded_job_reads_up_to_a_stopping_offset_that_arrives_while_it_runs(spark, kafka_broker, tmp_path):
    """set_bounded(offsets({tp: 20})) on a partition of 10: the job reads the 10, polls an epoch
    interval at a time, and ends once records 10-19 came (Flink's reader waits for its stopping
    offset); record 20 on is not read."""
    import threading
    import time
    from runtime.datastream.connectors.kafka import KafkaTopicPartition
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, "stop-later", 1)
    kafka_env.produce(bootstrap, topic, [f"w{i}" for i in range(10)])
    env = job_env(tmp_path, 1, epoch__interval=200)
    source = words(bootstrap, topic).set_bounded(
        KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 0): 20})).build()
    late = threading.Timer(3.0, kafka_env.produce, (bootstrap, topic, [f"w{i}" for i in range(10, 25)]))
    late.start()
    started = time.monotonic()
    try:
        got = list(env.from_source(source, WatermarkStrategy.no_watermarks(), "words")
                   .execute_and_collect("kafka-stop-later"))
    finally:
        late.join()
    assert got == [f"w{i}" for i in range(20)]
    assert time.monotonic() - started >= 3.0


def test_an_event_time_window_waits_for_every_partition_unless_one_is_idle(spark, kafka_broker, tmp_path):
    """One source subtask reads two partitions, each with its own watermark generator: the
    subtask's watermark is their minimum. Partition 0 runs ahead to 22 s; partition 1 stops at
    3 s. Without idleness window [0, 10 s) never fires (a single generator for the subtask would
    have fired it at 22 s); with idleness partition 1 steps aside once an epoch passes without
    its records, and the window fires with the records of both partitions."""
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, "idle", 2)
    kafka_env.produce(bootstrap, topic, ["a", "a", "b", "b"], partition=0, timestamps=[1000, 2000, 21000, 22000])
    kafka_env.produce(bootstrap, topic, ["a"], partition=1, timestamps=[3000])

    def run(idleness_ms):
        # Epochs of at most 2 records per partition: epoch 0 reads [1 s, 2 s] and [3 s], epoch 1
        # [21 s, 22 s] and nothing of partition 1; the pinned clock moves 1000 ms an epoch.
        env = job_env(tmp_path / str(idleness_ms), 1, epoch__max_records_per_split=2, epoch__max_epochs=3)
        strategy = WatermarkStrategy.for_monotonous_timestamps()
        if idleness_ms:
            strategy = strategy.with_idleness(Duration.of_millis(idleness_ms))
        windows = (env.from_source(words(bootstrap, topic).build(), strategy, "events")
                   .map(lambda w: (w, 1), output_type=COUNT).key_by(lambda t: t[0])
                   .window(TumblingEventTimeWindows.of(Time.seconds(10))).sum(1))
        return sorted(windows.execute_and_collect(f"kafka-idle-{idleness_ms}"))

    assert run(None) == []
    assert run(500) == [("a", 3)]       # [0, 10 s): 2 records of partition 0, 1 of partition 1


def test_a_topic_pattern_picks_up_a_new_topic_at_the_next_planning(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    first = kafka_env.create_topic(bootstrap, "pattern")
    kafka_env.produce(bootstrap, first, ["a0", "a1"])
    stem = first.rsplit("-", 1)[0]      # "pattern-<pid>": the topics this test makes
    src = (KafkaSource.builder().set_bootstrap_servers(bootstrap).set_topic_pattern(f"{stem}-\\d+")
           .set_property("partition.discovery.interval.ms", "1")
           .set_value_only_deserializer(SimpleStringSchema()).build())
    enumerator = KafkaSourceEnumerator(src, EnumeratorContext(parallelism=2))
    reader = reader_for(src)
    got, _ = run_epoch(enumerator, reader)
    assert sorted(v for vs in got.values() for v in vs) == ["a0", "a1"]
    second = kafka_env.create_topic(bootstrap, "pattern", 2)
    kafka_env.produce(bootstrap, second, ["b0"], partition=0)
    kafka_env.produce(bootstrap, second, ["b1"], partition=1)
    kafka_env.produce(bootstrap, first, ["a2"])
    got, plan = run_epoch(enumerator, reader, 1)
    assert sorted(v for vs in got.values() for v in vs) == ["a2", "b0", "b1"]      # the new topic from its earliest
    assert {s.split_id for reads in plan.values() for s in reads} == {f"{first}-0", f"{second}-0", f"{second}-1"}
    enumerator.close()


def test_an_epoch_starts_as_soon_as_records_come_the_interval_only_bounds_the_wait(spark, kafka_broker, tmp_path):
    """sluice.epoch.trigger=input (the default), with a 10-minute sluice.epoch.interval: each
    record produced once the epoch before has written its result starts the next epoch (one
    record each); waiting out the interval instead would not end within the test's 300 s."""
    from runtime.datastream.connectors import DeliveryGuarantee
    from test_kafka_sink import kafka_sink
    from waiting import wait_until
    bootstrap = kafka_broker.bootstrap
    topic_in, topic_out = kafka_env.create_topic(bootstrap, "on-input"), kafka_env.create_topic(bootstrap, "on-input-out")
    kafka_env.produce(bootstrap, topic_in, ["r0"])
    env = job_env(tmp_path, 1, epoch__interval=600_000, epoch__max_epochs=3)
    (env.from_source(words(bootstrap, topic_in).build(), WatermarkStrategy.no_watermarks(), "records")
     .sink_to(kafka_sink(bootstrap, topic_out, DeliveryGuarantee.AT_LEAST_ONCE, "on-input")))
    client = env.execute_async("kafka-on-input")
    try:
        for i in (1, 2):
            wait_until(lambda: len(kafka_env.read_committed(bootstrap, topic_out)) == i, 120, f"epoch {i - 1}'s result")
            kafka_env.produce(bootstrap, topic_in, [f"r{i}"])
        result = client.get_job_execution_result().result(timeout=300)
    finally:
        client.cancel()
    assert [e.records_in for e in result.epochs] == [1, 1, 1]
    assert kafka_env.read_committed(bootstrap, topic_out) == ["r0", "r1", "r2"]


def test_an_epoch_without_input_waits_out_the_interval_and_the_interval_trigger_always_does(spark, kafka_broker,
                                                                                            tmp_path):
    """No records: the next epoch starts at the interval (an empty epoch moves processing time
    on), not in a loop of empty epochs. sluice.epoch.trigger=interval (Structured Streaming's
    ProcessingTime trigger): epochs wait out the interval with records waiting too."""
    bootstrap = kafka_broker.bootstrap
    empty, full = kafka_env.create_topic(bootstrap, "no-input"), kafka_env.create_topic(bootstrap, "interval")
    kafka_env.produce(bootstrap, full, ["a", "b", "c"])
    for topic, trigger in ((empty, "input"), (full, "interval")):
        env = job_env(tmp_path / trigger, 1, epoch__interval=1500, epoch__max_epochs=3, epoch__trigger=trigger,
                      epoch__max_records_per_split=1)
        env.from_source(words(bootstrap, topic).build(), WatermarkStrategy.no_watermarks(), "records").print()
        result = env.execute(f"kafka-{trigger}")
        starts = [e.started_at for e in result.epochs]
        assert [e.records_in for e in result.epochs] == ([0, 0, 0] if topic == empty else [1, 1, 1])
        assert all(b - a >= 1.4 for a, b in zip(starts, starts[1:])), (trigger, starts)


def test_a_misspelt_epoch_trigger_names_the_choices():
    import pytest
    from runtime.execution.options import ExecutionOptions
    with pytest.raises(ValueError, match="sluice.epoch.trigger must be one of input, interval, got 'data'"):
        ExecutionOptions.from_configuration({"sluice.epoch.trigger": "data"})
