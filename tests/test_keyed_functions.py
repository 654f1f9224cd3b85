"""Keyed state in the functions of a keyed stream: PyFlink runs ``KeyedStream.map``, ``flat_map``
and ``filter`` (and a CoMap/CoFlatMap of two keyed streams) as keyed process functions, so the
state a function gets from its runtime context is per key, checkpointed in key groups and
rescaled with them (pyflink/datastream/data_stream.py: ``MapKeyedProcessFunctionAdapter`` and
its siblings). Expected answers are counted here from the input."""
import collections
import os

import pytest

from checkpoint_harness import LINES_PER_EPOCH, write_input
from runtime.checkpoint.savepoint import read_state
from runtime.checkpoint.storage import CheckpointStorage
from runtime.client import run_job
from runtime.common import Types
from runtime.datastream import CoMapFunction, FilterFunction, FlatMapFunction, MapFunction
from runtime.datastream.state import ValueStateDescriptor
from runtime_env import job_env

JOB = os.path.join(os.path.dirname(__file__), "jobs", "keyed_functions.py")
PAIR = Types.TUPLE([Types.STRING(), Types.INT()])
RECORDS = [("a", 1), ("b", 1), ("a", 1), ("b", 1), ("c", 1)]


class Count(MapFunction, FlatMapFunction, FilterFunction):
    """The issue's function: a count per key in a ValueState, as a map, flat_map and filter."""

    def open(self, runtime_context):
        self.state = runtime_context.get_state(ValueStateDescriptor("c", Types.INT()))

    def next(self, value):
        c = (self.state.value() or 0) + 1
        self.state.update(c)
        return c

    def map(self, value):
        return value[0], self.next(value)

    def flat_map(self, value):
        yield value[0], self.next(value)     # lazily: the count must still be the record's key's

    def filter(self, value):
        return self.next(value) == 2


@pytest.fixture
def keyed(spark, tmp_path):
    return job_env(tmp_path, 1).from_collection(RECORDS, type_info=PAIR).key_by(lambda x: x[0])


def test_keyed_map_state_is_per_key(keyed):
    # PyFlink 2.3 prints ('a', 1), ('b', 1), ('a', 2), ('b', 2), ('c', 1) for the job.
    assert list(keyed.map(Count(), output_type=PAIR).execute_and_collect()) == \
        [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("c", 1)]


def test_keyed_flat_map_state_is_per_key_also_in_a_generator(keyed):
    assert list(keyed.flat_map(Count(), output_type=PAIR).execute_and_collect()) == \
        [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("c", 1)]


def test_keyed_filter_state_is_per_key(keyed):
    # The second record of each key passes: a's and b's, never c's (it has one).
    assert list(keyed.filter(Count()).execute_and_collect()) == [("a", 1), ("b", 1)]


def test_a_co_map_of_two_keyed_streams_keeps_one_state_per_key(spark, tmp_path):
    class Both(CoMapFunction):
        def open(self, runtime_context):
            self.state = runtime_context.get_state(ValueStateDescriptor("c", Types.INT()))

        def bump(self, key):
            c = (self.state.value() or 0) + 1
            self.state.update(c)
            return key, c

        def map1(self, value):
            return self.bump(value[0])

        def map2(self, value):
            return self.bump(value[0].lower())

    env = job_env(tmp_path, 1)
    first = env.from_collection(RECORDS, type_info=PAIR)
    second = env.from_collection([("A", 1), ("C", 1)], type_info=PAIR)
    got = list(first.connect(second).key_by(lambda x: x[0], lambda x: x[0].lower())
               .map(Both(), output_type=PAIR).execute_and_collect())
    # Each key counts its records of both inputs, whatever their interleaving: a has 3, b 2, c 2.
    per_key = collections.defaultdict(list)
    for key, c in got:
        per_key[key].append(c)
    assert per_key == {"a": [1, 2, 3], "b": [1, 2], "c": [1, 2]}


def _expected(words) -> collections.Counter:
    totals = collections.Counter(words)
    rows = collections.Counter()
    for w, n in totals.items():
        rows.update(("map", w, k) for k in range(1, n + 1))
        rows.update(("flat_map", w, k) for k in range(1, n + 1) if k % 3 == 1)
        rows[("filter", w, 1)] += 1
        # The CoMap's second input is the same words in upper case, counted under the same key.
        rows.update(("co_map", w, k) for k in range(1, 2 * n + 1))
        rows.update(("co_flat_map", w, k) for k in range(1, 2 * n + 1))
    return rows


def _rows(table) -> collections.Counter:
    from deltalake import DeltaTable
    rows = DeltaTable(str(table)).to_pyarrow_table(columns=["fn", "word", "n"]).to_pylist()
    return collections.Counter((r["fn"], r["word"], r["n"]) for r in rows)


def _run(tmp_path, parallelism, backend, **options):
    return run_job(JOB, ["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"),
                         "--parallelism", str(parallelism)],
                   warehouse=str(tmp_path / "warehouse"), master="local[2]", quiet=True,
                   max_records_per_split=LINES_PER_EPOCH, configuration={"state.backend.type": backend},
                   **options)


@pytest.mark.parametrize("backend, before, after", [("hashmap", 2, 3), ("rocksdb", 2, 1)])
def test_keyed_function_state_is_checkpointed_and_rescaled_by_key_group(spark, tmp_path, backend, before, after):
    events = write_input(tmp_path / "in", seed=7, lines=120, words=12)
    first = _run(tmp_path, before, backend, max_epochs=2)
    assert [e.checkpoint_id for e in first.epochs] == [1, 2]
    # The checkpoint holds one count per word for the map: the words of the first two epochs.
    storage = CheckpointStorage(str(tmp_path / "warehouse" / "keyed-functions"))
    read = []
    for name in sorted(os.listdir(tmp_path / "in")):
        with open(tmp_path / "in" / name) as f:
            read += [line.split()[0] for line in list(f)[:2 * LINES_PER_EPOCH]]
    state = {r["key"]: r["value"] for r in read_state(storage, "map") if r["kind"] == "keyed"}
    assert state == dict(collections.Counter(read))
    second = _run(tmp_path, after, backend, restore_from="latest")
    assert second.restored_from == 2
    assert _rows(tmp_path / "out") == _expected([w for w, _ in events])
