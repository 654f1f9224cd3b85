"""The Kafka source reader's decode step without a broker (fast loop): a ``consume()`` batch's
messages (confluent-kafka's own Message objects) made into records: Arrow columns for UTF-8
strings, records the deserializer drops left out, and each record's offset for error messages."""
import pyarrow as pa
import pytest
from confluent_kafka import Message

from runtime.common import Row, Types
from runtime.common.serialization import ByteArraySchema, SimpleStringSchema
from runtime.connectors.kafka_source import KafkaSourceReader
from runtime.datastream.connectors.kafka import KafkaSource
from runtime.datastream.formats.json import JsonRowDeserializationSchema
from runtime.task.arrow_batch import ArrowBatch
from runtime.task.deployment import SplitRead
from runtime.task.task_context import TaskContext
from runtime.task.task_info import TaskInfo

SPLIT = SplitRead("t-0", 10, 20, {"topic": "t", "partition": 0, "offset": 10})


def reader(deserializer):
    source = (KafkaSource.builder().set_bootstrap_servers("127.0.0.1:1").set_topics("t")
              .set_value_only_deserializer(deserializer).build())
    return KafkaSourceReader(source, TaskContext(TaskInfo("Kafka Source", 0, 1, 128, 0), 1_700_000_000_000, {}))


def messages(*items):
    """(offset, value, timestamp or None) -> Messages of partition 0 of topic 't'."""
    return [Message(topic="t", partition=0, offset=o, value=v, timestamp=(1, ts) if ts is not None else (0, -1))
            for o, v, ts in items]


def test_utf8_strings_become_one_arrow_batch_with_their_timestamps():
    r = reader(SimpleStringSchema())
    batch, first, offsets = r.decode(messages((10, b"a b", 5), (11, "\u00e9t\u00e9".encode(), 6), (12, b"", None)))
    assert type(batch) is ArrowBatch and batch.type_info == Types.STRING()
    assert batch.columns.column(0).type == pa.string()
    assert batch.rows() == (["a b", "\u00e9t\u00e9", ""], [5, 6, None])
    assert (first, offsets) == (10, None)               # consecutive: the first offset is enough
    # A gap (a transaction's control record at 14): the offsets are kept, and origin() names them.
    _, first, offsets = r.decode(messages((13, b"x", 1), (15, b"y", 2)))
    assert (first, offsets) == (13, [13, 15])
    r.spans["t-0"] = [(0, 10, None), (3, 13, [13, 15])]
    assert [r.origin(SPLIT, i).rsplit(" ", 1)[1] for i in range(5)] == ["10", "11", "12", "13", "15"]


@pytest.mark.parametrize("value, charset", [(None, "UTF-8"), (b"\xff\xfe", "UTF-8"), (b"\xe9", "latin-1")])
def test_a_tombstone_or_bad_bytes_fail_naming_the_offset_other_charsets_per_record(value, charset):
    r = reader(SimpleStringSchema(charset))
    batch = messages((10, b"ok", 1), (11, value, 2))
    if charset != "UTF-8":
        assert r.decode(batch) == ((["ok", "\u00e9"], [1, 2]), 10, None)
        return
    # Flink's SimpleStringSchema fails on a null value too (new String(null)): nothing is skipped.
    with pytest.raises(ValueError, match=r"the record at topic 't', partition 0, offset 11 cannot be "
                                         r"deserialized by SimpleStringSchema"):
        r.decode(batch)


def test_records_the_deserializer_turns_into_none_are_skipped_as_flinks_kafka_source_does():
    schema = (JsonRowDeserializationSchema.builder()
              .type_info(Types.ROW_NAMED(["id"], [Types.INT()])).ignore_parse_errors().build())
    r = reader(schema)
    (values, stamps), first, offsets = r.decode(messages(
        (10, b'{"id": 1}', 1), (11, b"null", 2), (12, b"not json", 3), (13, b'{"id": 4}', 4)))
    assert values == [Row(id=1), Row(id=4)] and stamps == [1, 4]
    assert (first, offsets) == (10, [10, 13])
    (values, stamps), first, offsets = r.decode(messages((14, b"null", 5), (15, b'{"id": 6}', 6)))
    assert (values, first, offsets) == ([Row(id=6)], 15, None)
    assert r.decode(messages((16, b"null", 7))) == (([], []), 16, None)


def test_bytes_stay_bytes_per_record():
    assert reader(ByteArraySchema()).decode(messages((0, b"\x00\x01", 9))) == (([b"\x00\x01"], [9]), 0, None)
