"""execute_and_collect() gives the records as PyFlink does. PyFlink 2.3, env.set_parallelism(2)
(bench/.venv-pyflink, run for this test): from_collection is non-parallel (its source is
forceNonParallel: pyflink/datastream/stream_execution_environment.py _from_collection); its
collect sink has parallelism 1 (Java DataStream.collectAsync, CollectStreamSink), so
``from_collection(range(20)).execute_and_collect()`` returns 0..19 in order; a map at parallelism 2
gets the records round robin (REBALANCE, StreamGraphGenerator: the parallelism changes) and collect
returns one subtask's records, then the other's: [0, 20, ..., 180, 10, 30, ..., 190] (or the two
halves the other way round, as the subtasks finish)."""
import datetime
import decimal
import json

import pytest

from pyflink_case import PyFlinkCommonDataStreamTestCase
from runtime.common import Row, Types
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.functions import MapFunction
from runtime.graph.job_graph import create_job_graph
from runtime.task.deployment import SplitRead
from runtime_env import job_env


def test_a_non_parallel_source_is_collected_in_order(tmp_path):
    env = job_env(tmp_path, 2)
    assert list(env.from_collection(list(range(20))).execute_and_collect()) == list(range(20))


def test_a_parallelism_1_map_is_collected_in_order(tmp_path):
    env = job_env(tmp_path, 2)     # PyFlink: map(...).set_parallelism(1) gives 0..19 in order
    ds = env.from_collection(list(range(20))).map(lambda x: x).set_parallelism(1)
    assert list(ds.execute_and_collect()) == list(range(20))


def test_a_parallel_map_after_it_is_collected_a_subtask_at_a_time(tmp_path):
    env = job_env(tmp_path, 2)
    mapped = env.from_collection(list(range(20))).map(lambda x: x * 10)
    nodes = json.loads(env.get_execution_plan())["nodes"]
    assert [(n["type"], n["parallelism"]) for n in nodes] == [("Source: Collection Source", 1), ("Map", 2)]
    assert nodes[1]["predecessors"][0]["ship_strategy"] == "REBALANCE"
    assert list(mapped.execute_and_collect()) == list(range(0, 200, 20)) + list(range(10, 200, 20))


class TagSubtask(MapFunction):
    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        return self.subtask, value


@pytest.mark.parametrize("read_by_consumers", [True, False])
def test_a_rebalanced_collection_deals_each_epoch_round_robin_and_restores_at_another_parallelism(
        tmp_path, read_by_consumers):
    # Read by the map's subtasks (the map chains to the source) or through Flink's rebalance (the
    # map does not chain): each epoch's records are dealt from channel 0, a stopped run's restore
    # at parallelism 3 reads on from the checkpointed offset, every record once.
    out = []
    for parallelism, settings in ((2, dict(epoch__max_epochs=2)), (3, dict())):
        env = job_env(tmp_path, parallelism, epoch__max_records_per_split=5, **settings)
        env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
        tagged = env.from_collection(list(range(23))).map(TagSubtask())
        if not read_by_consumers:
            tagged = tagged.disable_chaining()
        graph = create_job_graph(env.get_stream_graph())
        assert [v.parallelism for v in graph.vertices][:1] == [parallelism if read_by_consumers else 1]
        out += [(parallelism, *r) for r in tagged.execute_and_collect()]
    assert sorted(x for _, _, x in out) == list(range(23))
    assert sorted(out) == sorted((2 if x < 10 else 3, x % 5 % (2 if x < 10 else 3), x) for x in range(23))


class Reading:
    """A class of the job's own: the workers know it by value (with the job graph), not by name."""

    def __init__(self, sensor, value):
        self.sensor, self.value = sensor, value

    def __eq__(self, other):
        return type(other) is Reading and (other.sensor, other.value) == (self.sensor, self.value)

    def __lt__(self, other):
        return (self.sensor, self.value) < (other.sensor, other.value)


READINGS = [Reading(f"s{i % 3}", i) for i in range(12)]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_records_of_the_jobs_own_class_cross_shuffles_and_state_and_restores(tmp_path, backend):
    # As PyFlink pickles them (cloudpickle): through a shuffle, in keyed state, in the checkpoint
    # a restored run reads, and back to the driver as its own class.
    out = []
    for settings in (dict(epoch__max_epochs=2), dict()):    # stopped after 2 epochs, then restored
        env = job_env(tmp_path, 2, epoch__max_records_per_split=4, **settings)
        env.get_configuration().set_string("state.backend.type", backend)
        env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
        out += env.from_collection(READINGS).key_by(lambda r: r.sensor).reduce(
            lambda a, b: Reading(a.sensor, a.value + b.value)).execute_and_collect()
    assert all(type(r) is Reading for r in out)
    running = {}
    for r in READINGS:
        running[r.sensor] = running.get(r.sensor, 0) + r.value
        assert Reading(r.sensor, running[r.sensor]) in out
    assert len(out) == len(READINGS)


def test_a_collection_of_plain_values_or_rows_reaches_its_source(tmp_path):
    from runtime.common import Row, Types
    env = job_env(tmp_path, 2)
    plain = env.from_collection([(f"k{i}", i) for i in range(5000)],
                                Types.TUPLE([Types.STRING(), Types.LONG()])).map(lambda r: r[1])
    assert sorted(plain.execute_and_collect()) == list(range(5000))
    rows = env.from_collection([Row(name="a", n=1), Row(name="b", n=2)]).map(lambda r: r.name * r.n)
    assert sorted(rows.execute_and_collect()) == ["a", "bb"]


def test_a_collection_of_plain_values_is_unpickled_only_when_read():
    import pickle
    from runtime.common import Row
    from runtime.datastream.connectors.collection import CollectionSource, PackedItems
    items = tuple((f"k{i}", i, Row(a=i)) for i in range(100))
    shipped = pickle.loads(pickle.dumps(CollectionSource(items)))
    assert type(shipped.items) is PackedItems and "_items" not in vars(shipped.items)
    assert len(shipped.items) == 100 and "_items" not in vars(shipped.items)
    assert list(shipped.items[10:12]) == list(items[10:12]) and tuple(shipped.items) == items
    assert type(pickle.loads(pickle.dumps(shipped)).items) is PackedItems      # and again, as it came
    cyclic = [1]
    cyclic.append(cyclic)
    own = (Reading("s1", 1),)
    for kept in ((cyclic,), own):       # what plain pickling cannot take goes as it is
        assert type(pickle.loads(pickle.dumps(CollectionSource(kept))).items) is tuple


@pytest.mark.parametrize("dealt_for", [2, 3])
@pytest.mark.parametrize("items", [tuple(range(23)), tuple(Reading("s", i) for i in range(23))],
                         ids=["plain, packed", "the job's own class, as they are"])
def test_a_subtask_reads_its_share_of_a_collection_however_it_travelled(items, dealt_for):
    # Dealt into 2 shares and read by 2 subtasks (one share each), or read at another
    # parallelism than it was dealt for (a replayed plan), or not packed: every n-th from start.
    import pickle
    from runtime.connectors.collection import CollectionReader
    from runtime.datastream.connectors.collection import CollectionSource
    shipped = pickle.loads(pickle.dumps(CollectionSource(items).dealt(2)))
    for start, end in ((0, 23), (5, 10), (10, 10), (21, 23)):
        for k in range(dealt_for):
            split = SplitRead("collection", start + k, end, step=dealt_for)
            read = [v for values, _ in CollectionReader(shipped, None).read(split, 2) for v in values]
            assert read == list(items[start + k:end:dealt_for])


def test_a_failing_record_of_a_collection_read_by_its_consumers_is_named_by_its_index(env):
    # Record 7 of 10 is the 4th that subtask 2 of 2 reads (items 1, 3, 5, 7, 9): named as item 7.
    from task_harness import collect_in_tasks
    env.set_parallelism(2)
    failing = env.from_collection(list(range(10))).map(lambda x: 1 // (x - 7))
    with pytest.raises(AssertionError, match=r"Map \(2/2\) failed: ZeroDivisionError.*\(on record 7, split "
                                             r"collection, offset 7\)"):
        collect_in_tasks(failing)


def test_a_key_of_the_jobs_own_class_fails_naming_the_key_and_the_fix(tmp_path):
    from runtime.execution.job_execution_result import JobExecutionException
    env = job_env(tmp_path, 2)
    keyed = env.from_collection(READINGS).key_by(lambda r: r).reduce(lambda a, b: b)
    with pytest.raises(JobExecutionException, match=r"key_by: the key .*Reading.* cannot be pickled by name .* "
                                                    r"return a key of plain values"):
        list(keyed.execute_and_collect())


ORDERS = [Row(item="pen", n=2), Row(item="ink", n=1), Row(item="pen", n=5)]


@pytest.mark.parametrize("key_by, expected", [
    (lambda s: s.key_by(lambda o: o.item, Types.STRING()), ["pen", "ink", "pen"]),
    (lambda s: s.key_by(lambda o: o.n), [2, 1, 5]),                      # a pickled key
    (lambda s: s.key_by("n"), [2, 1, 5]),                                # a field
    (lambda s: s.key_by(lambda o: [o.item, [o.n]]), [["pen", [2]], ["ink", [1]], ["pen", [5]]]),
], ids=["typed key", "pickled key", "field key", "list key"])
def test_a_keyed_stream_is_collected_as_rows_of_its_key_and_value(collect, key_by, expected):
    # PyFlink carries a keyed stream's records as Row(key, value) and collects them so: the key
    # as the selector returned it (a list stays a list), the value as collected unkeyed (a
    # declared ROW's Rows named by its fields).
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    orders = env.from_collection(ORDERS, Types.ROW_NAMED(["item", "n"], [Types.STRING(), Types.INT()]))
    collected = collect(key_by(orders))
    assert collected == [Row(f0=key, f1=order) for key, order in zip(expected, ORDERS)]
    assert [type(r.f0) for r in collected] == [type(k) for k in expected]


def test_a_keyed_stream_taken_as_a_plain_one_is_collected_as_its_values(env, collect):
    env.set_parallelism(2)
    numbers = env.from_collection([1, 2]).key_by(lambda x: x)
    assert sorted(collect(numbers.union(env.from_collection([3]).key_by(lambda x: x)))) == [1, 2, 3]

class PyFlinkExecuteAndCollectTests(PyFlinkCommonDataStreamTestCase):
    """PyFlink 2.3's CommonDataStreamTests.test_execute_and_collect, its body unchanged: a
    KeyedStream is collected as PyFlink's keyed stream carries it, ``Row(f0=key, f1=value)``."""

    def test_execute_and_collect(self):
        test_data = ['pyflink', 'datastream', 'execute', 'collect']
        ds = self.env.from_collection(test_data)

        # test collect with limit
        expected = test_data[:3]
        actual = []
        for result in ds.execute_and_collect(limit=3):
            actual.append(result)
        self.assertEqual(expected, actual)

        # test collect KeyedStream
        test_data = [('pyflink', 1), ('datastream', 2), ('pyflink', 1), ('collect', 2)]
        expected = [Row(f0='pyflink', f1=('pyflink', 1)),
                    Row(f0='datastream', f1=('datastream', 2)),
                    Row(f0='pyflink', f1=('pyflink', 1)),
                    Row(f0='collect', f1=('collect', 2))]
        ds = self.env.from_collection(collection=test_data,
                                      type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
        with ds.key_by(lambda i: i[0], Types.STRING()).execute_and_collect() as results:
            actual = []
            for result in results:
                actual.append(result)
            self.assertEqual(expected, actual)

        # test all kinds of data types
        test_data = [(1, None, 1, True, 32767, -2147483648, 1.23, 1.98932,
                      bytearray(b'flink'), 'pyflink',
                      datetime.date(2014, 9, 13),
                      datetime.time(hour=12, minute=0, second=0, microsecond=123000),
                      datetime.datetime(2018, 3, 11, 3, 0, 0, 123000),
                      [1, 2, 3],
                      [['pyflink', 'datastream'], ['execute', 'collect']],
                      decimal.Decimal('1000000000000000000.05'),
                      decimal.Decimal('1000000000000000000.0599999999999'
                                      '9999899999999999')),
                     (2, None, 2, True, 23878, 652516352, 9.87, 2.98936,
                      bytearray(b'flink'), 'pyflink',
                      datetime.date(2015, 10, 14),
                      datetime.time(hour=11, minute=2, second=2, microsecond=234500),
                      datetime.datetime(2020, 4, 15, 8, 2, 6, 235000),
                      [2, 4, 6],
                      [['pyflink', 'datastream'], ['execute', 'collect']],
                      decimal.Decimal('2000000000000000000.74'),
                      decimal.Decimal('2000000000000000000.061111111111111'
                                      '11111111111111'))]
        expected = test_data
        ds = self.env.from_collection(test_data)
        with ds.execute_and_collect() as results:
            actual = [result for result in results]
            self.assert_equals_sorted(expected, actual)

        # test primitive array
        test_data = [[1, 2, 3], [4, 5]]
        expected = test_data
        ds = self.env.from_collection(test_data, type_info=Types.PRIMITIVE_ARRAY(Types.INT()))
        with ds.execute_and_collect() as results:
            actual = [r for r in results]
            self.assert_equals_sorted(expected, actual)

        test_data = [
            (["test", "test"], [0.0, 0.0]),
            ([None, ], [0.0, 0.0])
        ]

        # test object array
        ds = self.env.from_collection(
            test_data,
            type_info=Types.TUPLE(
                [Types.OBJECT_ARRAY(Types.STRING()), Types.OBJECT_ARRAY(Types.DOUBLE())]
            )
        )
        expected = test_data
        with ds.execute_and_collect() as results:
            actual = [result for result in results]
            self.assert_equals_sorted(expected, actual)
