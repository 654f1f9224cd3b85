"""execute_and_collect() gives the records as PyFlink does. PyFlink 2.3, env.set_parallelism(2)
(bench/.venv-pyflink, run for this test): from_collection is non-parallel (its source is
forceNonParallel: pyflink/datastream/stream_execution_environment.py _from_collection); its
collect sink has parallelism 1 (Java DataStream.collectAsync, CollectStreamSink), so
``from_collection(range(20)).execute_and_collect()`` returns 0..19 in order; a map at parallelism 2
gets the records round robin (REBALANCE, StreamGraphGenerator: the parallelism changes) and collect
returns one subtask's records, then the other's: [0, 20, ..., 180, 10, 30, ..., 190] (or the two
halves the other way round, as the subtasks finish)."""
import json

import pytest

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
