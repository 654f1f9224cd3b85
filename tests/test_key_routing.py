"""Keys reach the subtask PyFlink 2.3 routes them to (issue 30).

PyFlink (pyflink/datastream/data_stream.py key_by) keys a stream by ``Row.of(key)`` through
org.apache.flink.streaming.api.functions.python.KeyByKeySelector: the key as the Java value of
``key_type``, or without one its pickled bytes (Types.PICKLED_BYTE_ARRAY: cloudpickle.dumps,
protocol 5). Row.hashCode (RowUtils.deepHashCodeRow) is ``31 + 31 + hashCode(x)`` for a scalar x
(Arrays.hashCode for the bytes), then murmur-hashed into one of 128 key groups as usual. A field
key (a Sluice extension) hashes the field's own Java value, as Java Flink's keyBy on a field.

The expected subtasks were printed by a real PyFlink 2.3.0 job (a KeyedProcessFunction yielding
``get_index_of_this_subtask()`` per record, parallelism 2 and 4).
"""
import pickle

import pytest

from runtime.common.typeinfo import Types
from runtime.common.types import Row, RowKind
from runtime.datastream.functions import KeyedProcessFunction, KeySelector, as_function
from runtime.datastream.key_selector import KeyByKeySelector, ListKey, freeze, select_keys
from runtime.state.java_hash import pickled_key
from runtime.state.key_groups import assign_key_to_parallel_operator, assign_operator_indexes
from tests.runtime_env import job_env

P = Types.PICKLED_BYTE_ARRAY()
# key -> subtask at parallelism 2 and at 4, key_by without key_type (PyFlink 2.3.0's output)
PICKLED = [("a", 0, 1), ("b", 0, 0), ("hello", 1, 2), ("word", 1, 2), ("é", 1, 3), (0, 0, 0), (1, 0, 1),
           (-1, 0, 1), (7, 0, 0), (42, 1, 2), (2**40, 0, 0), (-2**40, 1, 2), ((1, "a"), 0, 0),
           (("x", 2), 1, 2), ([1, 2], 1, 2), (["a", "b"], 1, 2), (3.5, 0, 1), (True, 1, 3), (b"xy", 0, 0)]


def _kind(row, kind):
    row.set_row_kind(kind)
    return row


# Keys holding Rows: PyFlink pickles its own Row (pyflink/common/types.py Row.__reduce__:
# pyflink.common.types._create_row(fields, values, RowKind)), so these are hashed as PyFlink's
# bytes, not Sluice's (runtime.state.pyflink_pickle). Subtasks at 2 and 4 printed by a real PyFlink
# 2.3.0 job: key_by(lambda i: KEYS[i]) then a KeyedProcessFunction yielding get_index_of_this_subtask().
ROWS = [(Row(1), 0, 0), (Row(1, "a"), 0, 1), (Row("a"), 1, 2), (Row("hello"), 0, 0), (Row(a=1, b="x"), 0, 1),
        (Row(a=1), 1, 3), (Row(name="k"), 1, 3), ((Row(1), "k"), 1, 3), ((Row(2), "k"), 0, 1),
        (("x", Row(b=2)), 1, 2), (_kind(Row(1), RowKind.UPDATE_AFTER), 1, 2), (_kind(Row(x=2), RowKind.DELETE), 0, 0),
        (Row(Row(1, "a"), Row(b=2)), 0, 0), ([Row("a")], 1, 3), (Row(None, 3.5), 1, 2), (Row(7), 1, 3),
        (Row(42), 0, 0)]
# (key_type, key, subtask at 2, subtask at 4), key_by(selector, key_type)
TYPED = [(Types.STRING(), "a", 1, 2), (Types.STRING(), "hello", 0, 1), (Types.STRING(), "é", 1, 3),
         (Types.INT(), -1, 0, 1), (Types.INT(), 42, 0, 0), (Types.LONG(), -1, 0, 1), (Types.LONG(), 2**40, 1, 2),
         (Types.LONG(), -2**40, 0, 0), (Types.TUPLE([Types.INT(), Types.STRING()]), (1, "a"), 1, 3),
         (Types.ROW([Types.INT(), Types.STRING()]), (2, "x"), 1, 3), (Types.DOUBLE(), 3.5, 0, 0),
         (Types.BOOLEAN(), True, 1, 2), (Types.BOOLEAN(), False, 0, 1)]


@pytest.mark.parametrize("key,at2,at4", PICKLED)
def test_pickled_keys_route_as_pyflink(key, at2, at4):
    assert assign_key_to_parallel_operator(key, 128, 2, P) == at2
    assert assign_key_to_parallel_operator(key, 128, 4, P) == at4


@pytest.mark.parametrize("key,at2,at4", ROWS)
def test_row_keys_route_as_pyflink(key, at2, at4):
    key = freeze(key)
    assert assign_key_to_parallel_operator(key, 128, 2, P) == at2
    assert assign_key_to_parallel_operator(key, 128, 4, P) == at4


def test_row_keys_are_hashed_as_pyflinks_pickle_and_pickle_as_sluices_elsewhere():
    # PyFlink 2.3.0: cloudpickle.dumps(Row(1, 'a')).hex() and of (Row(1) of kind UPDATE_AFTER, 'k').
    assert pickled_key(Row(1, "a")).hex() == (
        "80059549000000000000008c147079666c696e6b2e636f6d6d6f6e2e7479706573948c0b5f6372656174655f726f77"
        "9493944e4b018c016194869468008c07526f774b696e649493944b0085945294879452942e")
    assert pickled_key((_kind(Row(1), RowKind.UPDATE_AFTER), "k")).hex() == (
        "8005954b000000000000008c147079666c696e6b2e636f6d6d6f6e2e7479706573948c0b5f6372656174655f726f77"
        "9493944e4b01859468008c07526f774b696e649493944b0285945294879452948c016b9486942e")
    # Checkpoints and shuffles still pickle a Row as Sluice's, which loads back as a Sluice Row.
    row = _kind(Row(a=1), RowKind.DELETE)
    again = pickle.loads(pickle.dumps(row, 5))
    assert again == row and again.get_row_kind() is RowKind.DELETE and again.as_dict() == {"a": 1}


@pytest.mark.parametrize("key_type,key,at2,at4", TYPED)
def test_typed_keys_route_as_pyflink(key_type, key, at2, at4):
    assert assign_key_to_parallel_operator(key, 128, 2, key_type) == at2
    assert assign_key_to_parallel_operator(key, 128, 4, key_type) == at4


def test_vectorised_routing_agrees_with_scalar():
    keys = [k for k, _, _ in PICKLED]
    assert assign_operator_indexes(keys, 128, 4, P).tolist() == [at4 for _, _, at4 in PICKLED]
    strings = ["a", "hello", "é"]
    assert assign_operator_indexes(strings, 128, 4, Types.STRING()).tolist() == [2, 1, 3]


def test_long_and_int_key_types_differ():
    # Long.hashCode(-1) == 0, Integer.hashCode(-1) == -1: key_type decides, not the value.
    assert assign_key_to_parallel_operator(-1, 128, 4, Types.LONG()) == 1
    assert assign_key_to_parallel_operator(-1, 128, 4, None) == 2     # a field key: Integer


def test_bad_key_type_is_named():
    with pytest.raises(TypeError, match="key_type"):
        assign_key_to_parallel_operator(5, 128, 2, Types.STRING())


class Where(KeyedProcessFunction):
    def open(self, ctx):
        self.index = ctx.get_index_of_this_subtask()

    def process_element(self, value, ctx):
        yield repr(ctx.get_current_key()), self.index


def test_job_routes_keys_as_pyflink(tmp_path):
    env = job_env(tmp_path, 4)
    records = [(i, k) for i, (k, _, _) in enumerate(PICKLED)]
    got = dict(env.from_collection(records).key_by(lambda r: r[1]).process(Where()).execute_and_collect())
    assert got == {repr(k): at4 for k, _, at4 in PICKLED}
    typed = env.from_collection(["a", "hello", "é"]).key_by(lambda s: s, key_type=Types.STRING())
    assert dict(typed.process(Where()).execute_and_collect()) == {"'a'": 2, "'hello'": 1, "'é'": 3}


class Index(KeyedProcessFunction):
    def open(self, ctx):
        self.index = ctx.get_index_of_this_subtask()

    def process_element(self, value, ctx):
        yield value, self.index


def test_job_routes_row_keys_as_pyflink(tmp_path):
    env = job_env(tmp_path, 4)
    got = dict(env.from_collection(list(range(len(ROWS)))).key_by(lambda i: ROWS[i][0]).process(Index())
               .execute_and_collect())
    assert got == {i: at4 for i, (_, _, at4) in enumerate(ROWS)}


class Count(KeyedProcessFunction):
    def open(self, ctx):
        from runtime.datastream.state import ValueStateDescriptor
        self.count = ctx.get_state(ValueStateDescriptor("n", Types.INT()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield ctx.get_current_key(), n


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_list_keys_have_state_per_key(tmp_path, backend):
    from runtime.state.backend import STATE_BACKEND
    env = job_env(tmp_path, 2)
    env.get_configuration().set_string(STATE_BACKEND, backend)
    records = [[1, 2], ["a"], [1, 2], ["a"], [1, 2]]
    got = list(env.from_collection(records).key_by(lambda r: r).process(Count()).execute_and_collect())
    assert sorted(map(repr, got)) == sorted(map(repr, [([1, 2], 1), (["a"], 1), ([1, 2], 2), (["a"], 2),
                                                        ([1, 2], 3)]))


def _restore_point(env, key_hashing):
    """A checkpoint record listing the keyed operator of ``env``'s job with a state file, written
    with ``key_hashing`` (None: before the checkpoint recorded it)."""
    from runtime.checkpoint.restore import RestorePoint
    from runtime.checkpoint.checkpoint_record import CheckpointRecord
    from runtime.graph.job_graph import create_job_graph
    graph = create_job_graph(env.get_stream_graph())
    v, n = next((v, n) for v in graph.vertices for n in v.operators if n.is_keyed)
    op = {"operator_id": n.operator_id, "uid": n.uid, "table": "t", "name": n.operator_name, "vertex": v.name,
          "parallelism": v.parallelism, "max_parallelism": v.max_parallelism, "keyed": True,
          "files": [{"path": "f.parquet"}]}
    if key_hashing is not None:
        op["key_hashing"] = key_hashing
    return RestorePoint(CheckpointRecord(1, 1, "CHECKPOINT", "COMPLETED", "run", operators=[op]), "/x"), graph


def test_checkpoint_before_pyflink_hashing_is_refused_for_selector_keys(tmp_path):
    from runtime.checkpoint.restore import CheckpointException, check_compatibility
    from runtime.state.key_groups import KEY_HASHING
    env = job_env(tmp_path, 2)
    env.from_collection([("a", 1)]).key_by(lambda r: r[0]).process(Where()).print()
    old, graph = _restore_point(env, None)
    with pytest.raises(CheckpointException, match="key_by\\(0\\)"):
        check_compatibility(old, graph, False)
    new, graph = _restore_point(env, KEY_HASHING)
    check_compatibility(new, graph, False)
    # Field keys hash as before: an old checkpoint of such a job restores.
    env = job_env(tmp_path, 2)
    env.from_collection([("a", 1)]).key_by(0).process(Where()).print()
    old, graph = _restore_point(env, None)
    check_compatibility(old, graph, False)


def test_batch_mode_emits_keys_in_the_order_of_their_serialized_form(tmp_path):
    # Flink's BATCH mode sorts a keyed input by the serialized key (SortingDataInput,
    # VariableLengthByteKeyComparator: signed bytes, shorter first). PyFlink's key_by(selector) key
    # is Row.of(pickled key), serialized as an int length and the pickle: shorter pickles first
    # ('é' is two UTF-8 bytes, 0xC3 0xA9, negative as Java bytes), then byte by byte ('B' < 'a').
    from runtime.datastream import RuntimeExecutionMode
    env = job_env(tmp_path, 1)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    words = ["bb", "a", "é", "ab", "B", "a", "ccc", "bb"]
    counts = (env.from_collection([(w, 1) for w in words]).key_by(lambda r: r[0])
              .reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect())
    assert list(counts) == [("B", 1), ("a", 2), ("é", 1), ("ab", 1), ("bb", 2), ("ccc", 1)]


class FirstField(KeySelector):
    def get_key(self, value):
        return value[0]


def test_a_batchs_keys_are_its_selectors_with_list_keys_frozen():
    calls = []
    plain = KeyByKeySelector(as_function(lambda v: calls.append(v) or v[0], KeySelector, "key_by"), None)
    values = [("a", 1), ("b", 2), ("a", 3)]
    assert select_keys(plain, values) == ["a", "b", "a"] == [plain.get_key(v) for v in values]
    assert calls == values * 2      # once a record
    assert select_keys(KeyByKeySelector(FirstField(), None), values) == ["a", "b", "a"]
    lists = KeyByKeySelector(as_function(lambda v: [v, [v]], KeySelector, "key_by"), None)
    keys = select_keys(lists, [1, 2])
    assert keys == [[1, [1]], [2, [2]]] == [lists.get_key(1), lists.get_key(2)]
    assert all(type(k) is ListKey and type(k[1]) is ListKey for k in keys)      # hashable: state per key
    named = []
    with pytest.raises(ZeroDivisionError):
        select_keys(KeyByKeySelector(as_function(lambda v: 1 // v, KeySelector, "key_by"), None), [1, 0],
                    lambda f, vs: named.append(vs) or list(map(f, vs)))
    assert named == [[1, 0]]        # the operator's map, which names the record that failed
