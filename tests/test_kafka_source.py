"""The Kafka source against the test run's real broker (tests/kafka_env.py): the enumerator's
plans and the reader's ranges without Spark, then whole jobs on the shared Spark session."""
import time

import pyarrow as pa
import pytest

import kafka_env
from runtime.common import Row, Types, WatermarkStrategy
from runtime.common.serialization import SimpleStringSchema
from runtime.connectors.base import EnumeratorContext
from runtime.connectors.kafka_clients import KafkaConnectorError, split_owner
from runtime.connectors.kafka_source import KafkaSourceEnumerator, KafkaSourceReader
from runtime.datastream.connectors.kafka import (KafkaOffsetResetStrategy, KafkaOffsetsInitializer, KafkaSource,
                                                 KafkaTopicPartition)
from runtime.task.arrow_batch import ArrowBatch
from runtime.task.task_context import TaskContext
from runtime.task.task_info import TaskInfo
from runtime_env import job_env


def source(bootstrap, topic, **props):
    builder = (KafkaSource.builder().set_bootstrap_servers(bootstrap).set_topics(topic)
               .set_value_only_deserializer(SimpleStringSchema()))
    for key, value in props.items():
        builder.set_property(key.replace("_", "."), value)
    return builder


def run_epoch(enumerator, reader, epoch=0):
    """One epoch's plan read by the reader: (records by subtask, the plan)."""
    plan = enumerator.plan_epoch(epoch)
    got, states = {}, {}
    for subtask, reads in plan.items():
        for split in reads:
            got.setdefault(subtask, []).extend(v for batch in reader.read(split, 7) for v in records(batch))
            states[split.split_id] = reader.end_state(split)
    enumerator.complete_epoch(states)
    return got, plan


def records(batch) -> list:
    """A read batch's records: (values, timestamps), or an ArrowBatch (strings)."""
    return batch.rows()[0] if isinstance(batch, ArrowBatch) else batch[0]


def reader_for(src):
    return KafkaSourceReader(src, TaskContext(TaskInfo("Kafka Source", 0, 1, 128, 0), 1_700_000_000_000, {}))


def test_split_owner_is_flinks_assignment():
    # KafkaSourceEnumerator.getSplitOwner: ((topic.hashCode() * 31) & 0x7FFFFFFF) % n, then + partition.
    # "orders".hashCode() == -1008770331 in Java.
    start = ((-1008770331 * 31) & 0x7FFFFFFF) % 3
    assert [split_owner("orders", p, 3) for p in range(4)] == [(start + p) % 3 for p in range(4)]


def test_epochs_read_planned_ranges_at_most_n_per_partition_and_new_partitions(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, "ranges", 2)
    for p in range(2):
        kafka_env.produce(bootstrap, topic, [f"p{p}-{i}" for i in range(5)], partition=p)
    src = source(bootstrap, topic, partition_discovery_interval_ms=1).build()
    enumerator = KafkaSourceEnumerator(src, EnumeratorContext(parallelism=2, max_records_per_split=3))
    enumerator.check()
    reader = reader_for(src)
    first, plan = run_epoch(enumerator, reader)
    assert sorted(v for vs in first.values() for v in vs) == sorted(f"p{p}-{i}" for p in range(2) for i in range(3))
    assert {s.split_id: (s.start, s.end) for reads in plan.values() for s in reads} == {
        f"{topic}-0": (0, 3), f"{topic}-1": (0, 3)}
    kafka_env.add_partitions(bootstrap, topic, 3)
    kafka_env.produce(bootstrap, topic, ["p2-0"], partition=2)
    # A partition is found by a discovery after it was made (as Flink's periodic discovery: the
    # broker's metadata may lag the producer's, by seconds on a busy machine): a planning soon
    # after, read from its earliest offset; nothing read twice.
    read, epoch, deadline = [], 1, time.monotonic() + 30
    while "p2-0" not in read and time.monotonic() < deadline:
        got, _ = run_epoch(enumerator, reader, epoch)
        read += [v for vs in got.values() for v in vs]
        epoch += 1
        time.sleep(0.1)
    assert sorted(read) == ["p0-3", "p0-4", "p1-3", "p1-4", "p2-0"]
    # The positions restore into another enumerator at another parallelism: nothing more to read,
    # every partition still planned (its watermark counts), owned as Flink assigns it.
    restored = KafkaSourceEnumerator(src, EnumeratorContext(parallelism=3))
    restored.restore(enumerator.snapshot())
    third, plan = run_epoch(restored, reader, epoch)
    assert [v for vs in third.values() for v in vs] == []
    assert {s.split_id: s.start for reads in plan.values() for s in reads} == {
        f"{topic}-0": 5, f"{topic}-1": 5, f"{topic}-2": 1}
    assert {s.split_id: sub for sub, reads in plan.items() for s in reads} == {
        f"{topic}-{p}": split_owner(topic, p, 3) for p in range(3)}
    enumerator.close()
    restored.close()


def test_starting_offsets_committed_timestamp_and_offsets(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, "starts", 1)
    kafka_env.produce(bootstrap, topic, [str(i) for i in range(6)], timestamps=[1000 * (i + 1) for i in range(6)])

    def first_epoch(initializer, group=None):
        b = source(bootstrap, topic).set_starting_offsets(initializer).set_bounded(KafkaOffsetsInitializer.latest())
        if group:
            b.set_group_id(group)
        e = KafkaSourceEnumerator(b.build(), EnumeratorContext(parallelism=1))
        try:
            got, _ = run_epoch(e, reader_for(e.source))
            assert e.finished
            return got.get(0, [])
        finally:
            e.close()

    assert first_epoch(KafkaOffsetsInitializer.timestamp(3500)) == ["3", "4", "5"]
    assert first_epoch(KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 0): 2})) == ["2", "3", "4", "5"]
    assert first_epoch(KafkaOffsetsInitializer.latest()) == []
    with pytest.raises(KafkaConnectorError, match=rf"partition {topic}-0 has no committed offset in consumer group "
                                                  r"'fresh'.*KafkaOffsetResetStrategy.EARLIEST"):
        first_epoch(KafkaOffsetsInitializer.committed_offsets(), "fresh")
    assert first_epoch(KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST), "fresh") == \
        [str(i) for i in range(6)]


def test_a_bounded_stopping_offset_past_the_end_is_taken_as_given_and_waited_for(kafka_broker):
    """Flink's SpecifiedOffsetsInitializer takes a listed offset as given and the reader reads
    until its position reaches it: stopping at 20 on a partition of 10 reads the 10, then waits
    (an epoch interval at a time) for the rest, and ends at 20."""
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, "stop-past-end", 1)
    kafka_env.produce(bootstrap, topic, [str(i) for i in range(10)])
    src = source(bootstrap, topic).set_bounded(KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 0): 20}))
    enumerator = KafkaSourceEnumerator(src.build(), EnumeratorContext(parallelism=1))
    reader = reader_for(enumerator.source)
    try:
        got, plan = run_epoch(enumerator, reader)
        assert got == {0: [str(i) for i in range(10)]}
        assert not enumerator.input_ends_with_plan and not enumerator.finished
        assert enumerator.paced         # caught up short of the stop: the next epoch waits its interval
        got, _ = run_epoch(enumerator, reader, 1)
        assert got == {0: []} and not enumerator.finished
        kafka_env.produce(bootstrap, topic, [str(i) for i in range(10, 25)])
        got, plan = run_epoch(enumerator, reader, 2)
        assert got == {0: [str(i) for i in range(10, 20)]}
        assert [(s.start, s.end) for s in plan[0]] == [(10, 20)]
        assert enumerator.input_ends_with_plan and enumerator.finished and not enumerator.paced
    finally:
        enumerator.close()


def test_a_record_that_does_not_deserialize_names_topic_partition_and_offset(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, "bad-bytes", 1)
    kafka_env.produce(bootstrap, topic, [b"ok", b"\xff\xfe", b"ok"])
    src = source(bootstrap, topic).set_bounded(KafkaOffsetsInitializer.latest()).build()
    enumerator = KafkaSourceEnumerator(src, EnumeratorContext(parallelism=1))
    with pytest.raises(ValueError, match=rf"topic '{topic}', partition 0, offset 1 cannot be deserialized "
                                         r"by SimpleStringSchema"):
        run_epoch(enumerator, reader_for(src))
    enumerator.close()


def test_offsets_retention_deleted_fail_naming_the_range_and_the_option(kafka_broker):
    from confluent_kafka import TopicPartition
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, "retention", 1)
    kafka_env.produce(bootstrap, topic, [str(i) for i in range(10)])
    src = source(bootstrap, topic).build()
    enumerator = KafkaSourceEnumerator(src, EnumeratorContext(parallelism=1, max_records_per_split=2))
    run_epoch(enumerator, reader_for(src))       # read [0, 2)
    client = kafka_env.admin(bootstrap)
    for future in client.delete_records([TopicPartition(topic, 0, 6)]).values():
        future.result(30)
    with pytest.raises(KafkaConnectorError, match=rf"partition {topic}-0: the records at offsets \[2, 6\) are no "
                                                  r"longer in the log.*'auto.offset.reset' to 'earliest' "
                                                  r"\(KafkaOffsetResetStrategy.EARLIEST\)"):
        enumerator.plan_epoch(1)
    chosen = KafkaSourceEnumerator(source(bootstrap, topic, auto_offset_reset="earliest").build(),
                                   EnumeratorContext(parallelism=1))
    chosen.restore(enumerator.snapshot())
    assert run_epoch(chosen, reader_for(chosen.source), 1)[0] == {0: ["6", "7", "8", "9"]}
    enumerator.close()
    chosen.close()


@pytest.mark.parametrize("case", ["unreachable", "missing topic", "refused password", "sasl on plaintext"])
def test_bad_connections_fail_before_the_job_naming_what_to_fix(kafka_broker, case):
    bootstrap = {"unreachable": "127.0.0.1:1", "sasl on plaintext": kafka_broker.bootstrap}.get(
        case, kafka_broker.sasl_bootstrap if case == "refused password" else kafka_broker.bootstrap)
    topic = "no-such-topic" if case == "missing topic" else kafka_env.create_topic(kafka_broker.bootstrap, "bad", 1)
    b = source(bootstrap, topic)
    if case in ("refused password", "sasl on plaintext"):
        b.set_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                          "sasl.username": "sluice", "sasl.password": "wrong"})
    expected = {
        "unreachable": r"Kafka source: reading the cluster's metadata on 127.0.0.1:1 failed: _ALL_BROKERS_DOWN.*Connection refused.*"
                       r"Fix: check bootstrap.servers \(set_bootstrap_servers\)",
        "missing topic": rf"Kafka source: topic 'no-such-topic' does not exist on {kafka_broker.bootstrap} "
                         r"\(KafkaSource set_topics",
        "refused password": r"_AUTHENTICATION: .*Invalid username or password.*Fix: check security.protocol, "
                            r"sasl.mechanisms, sasl.username and sasl.password",
        "sasl on plaintext": r"_AUTHENTICATION: .*SASL.*Fix: check security.protocol",
    }[case]
    enumerator = KafkaSourceEnumerator(b.build(), EnumeratorContext(parallelism=1))
    with pytest.raises(KafkaConnectorError, match=expected):
        enumerator.check()
    enumerator.close()


def test_in_a_chain_strings_reach_map_batches_as_arrow_and_skipped_records_keep_offsets(kafka_broker):
    """Through the task harness (no Spark): the reader's Arrow batch into map_batches and into a
    per-record map; a JSON source whose null and unparsable messages are skipped, and a map that
    fails on the record after them named by its own offset."""
    import pyarrow.compute as pc
    from runtime.datastream import StreamExecutionEnvironment
    from runtime.datastream.formats.json import JsonRowDeserializationSchema
    from task_harness import collect_in_tasks
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, "chain", 1)
    kafka_env.produce(bootstrap, topic, ["a", "bb", "ccc"], timestamps=[1000, 2000, 3000])
    def from_kafka(name, built, strategy):      # a new job each time (collect_in_tasks adds a sink)
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(1)
        return env.from_source(built, strategy, name)

    lines = source(bootstrap, topic).set_bounded(KafkaOffsetsInitializer.latest()).build()
    upper = from_kafka("lines", lines, WatermarkStrategy.for_monotonous_timestamps()).map_batches(
        lambda b: pa.record_batch({"f0": pc.utf8_upper(b["f0"]), "f1": pc.add(b["__timestamp"], 1)}),
        output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
    assert collect_in_tasks(upper) == [("A", 1001), ("BB", 2001), ("CCC", 3001)]
    lengths = from_kafka("lines", lines, WatermarkStrategy.for_monotonous_timestamps()).map(len, Types.INT())
    assert collect_in_tasks(lengths) == [1, 2, 3]

    json_topic = kafka_env.create_topic(bootstrap, "chain-json", 1)
    kafka_env.produce(bootstrap, json_topic, ['{"id": 1}', "null", "{oops", '{"id": 0}', '{"id": 2}'])
    schema = (JsonRowDeserializationSchema.builder().type_info(Types.ROW_NAMED(["id"], [Types.INT()]))
              .ignore_parse_errors().build())
    rows = (KafkaSource.builder().set_bootstrap_servers(bootstrap).set_topics(json_topic)
            .set_value_only_deserializer(schema).set_bounded(KafkaOffsetsInitializer.latest()).build())
    assert collect_in_tasks(from_kafka("rows", rows, WatermarkStrategy.no_watermarks())) == [
        Row(id=1), Row(id=0), Row(id=2)]
    with pytest.raises(AssertionError, match=rf"ZeroDivisionError.*topic '{json_topic}', partition 0, offset 3"):
        collect_in_tasks(from_kafka("rows", rows, WatermarkStrategy.no_watermarks())
                         .map(lambda r: 1 // r.id, output_type=Types.INT()))
    # An assigner without an event time for a record fails in the assigner, naming the record's offset.
    no_time = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda r, _: r.id * 1000 if r.id else None)
    with pytest.raises(AssertionError, match=rf"Source: rows \(1/1\) failed: TypeError: the timestamp assigner "
                                             rf"returned None .*topic '{json_topic}', partition 0, offset 3\)"):
        collect_in_tasks(from_kafka("rows", rows, no_time))


def test_a_kept_consumer_reads_exactly_the_next_epochs_records_across_transactions_and_after_a_replay(kafka_broker):
    """The reader keeps its partition's consumer between epochs (kafka_consumer_pool): each epoch
    goes on where the last ended, also when a range ends amid a transaction's control records
    and aborted records (the consumer returned records past the range's end); a replayed epoch
    (a restore to an earlier checkpoint) reads its ranges again from the right offsets."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from runtime.connectors.kafka_consumer_pool import CONSUMERS
    from waiting import wait_until
    bootstrap = kafka_broker.bootstrap
    topic = kafka_env.create_topic(bootstrap, "kept", 1)
    kafka_env.produce(bootstrap, topic, [f"a{i}" for i in range(5)])                 # offsets 0-4
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-tx"})
    producer.init_transactions(30)
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-probe"})
    for values, commit, log_end in ((["t0", "t1"], True, 8), (["x"], False, 10)):   # 5, 6, marker 7; 8, marker 9
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value.encode())
        producer.flush(30)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
        # The coordinator writes the marker after the commit returns: the next records go after it.
        wait_until(lambda: probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1] == log_end, 30,
                   f"the transaction marker at offset {log_end - 1}")
    probe.close()
    kafka_env.produce(bootstrap, topic, [f"b{i}" for i in range(3)])                 # offsets 10-12
    src = source(bootstrap, topic, isolation_level="read_committed").build()
    enumerator = KafkaSourceEnumerator(src, EnumeratorContext(parallelism=1, max_records_per_split=3))
    before = (CONSUMERS.opened, CONSUMERS.reused)

    def epochs(enum, first, last):
        out = []
        for epoch in range(first, last):
            got, plan = run_epoch(enum, reader_for(src), epoch)    # a new reader each epoch, as each task makes
            out.append(((plan[0][0].start, plan[0][0].end), got.get(0, [])))
        return out

    expected = [((0, 3), ["a0", "a1", "a2"]), ((3, 6), ["a3", "a4", "t0"]),
                ((6, 9), ["t1"]),                 # the consumer returned b0 (10) past 9: kept for the next
                ((9, 12), ["b0", "b1"]), ((12, 13), ["b2"])]
    assert epochs(enumerator, 0, 2) == expected[:2]
    checkpoint = enumerator.snapshot()
    assert epochs(enumerator, 2, 5) == expected[2:]
    assert (CONSUMERS.opened, CONSUMERS.reused) == (before[0] + 1, before[1] + 4)
    # A replay from the checkpoint: the same ranges, the same records (a new consumer from the
    # replay's first range on, kept again for the next).
    replayed = KafkaSourceEnumerator(src, EnumeratorContext(parallelism=1, max_records_per_split=3))
    replayed.restore(checkpoint)
    assert epochs(replayed, 2, 5) == expected[2:]
    assert (CONSUMERS.opened, CONSUMERS.reused) == (before[0] + 2, before[1] + 6)
    enumerator.close()
    replayed.close()
