"""The keyed state backends against the same semantics, without Spark: heap (hashmap) and
RocksDB, each test run on both. Values, lists, maps, reducing and aggregating state, window
namespaces and their merging, TTL, snapshots and restores (also across backends and key-group
ranges), tracked changes with tombstones, and timer queues."""
import pytest

from runtime.common import Time, Types
from runtime.datastream.state import (
    AggregatingStateDescriptor, ListStateDescriptor, MapStateDescriptor, ReducingStateDescriptor, StateTtlConfig,
    ValueStateDescriptor)
from runtime.datastream.window import GlobalWindow, TimeWindow
from runtime.state.backend import TOMBSTONE
from runtime.state.key_groups import KeyGroupRange, assign_to_key_group
from runtime.state.snapshot_reader import KeyedRows
from runtime.state.ttl import TTL_PREFIX
from runtime.task.timer_service import InternalTimerService
from state_helpers import ALL, BACKENDS, Average, keyed_backend


class Clock:
    def __init__(self, now=1000):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def make(tmp_path):
    made = []

    def build(kind, key_group_range=ALL, clock=None, name="b"):
        made.append(keyed_backend(kind, tmp_path / name, key_group_range, clock))
        return made[-1]
    yield build
    for b in made:
        b.dispose()


def rows(backend):
    return sorted(backend.snapshot(), key=repr)


@pytest.mark.parametrize("kind", BACKENDS)
def test_value_list_map_reducing_aggregating(make, kind):
    b = make(kind)
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    lst = b.get_partitioned_state(ListStateDescriptor("l", Types.STRING()))
    m = b.get_partitioned_state(MapStateDescriptor("m", Types.LONG(), Types.STRING()))
    r = b.get_partitioned_state(ReducingStateDescriptor("r", lambda x, y: x + y, Types.LONG()))
    a = b.get_partitioned_state(AggregatingStateDescriptor("a", Average()))
    for key in ("x", "y"):
        b.set_current_key(key)
        assert v.value() is None and lst.get() == [] and m.is_empty() and r.get() is None and a.get() is None
        v.update(7 if key == "x" else 8)
        lst.add(key)
        lst.add_all([key + "1", key + "2"])
        m.put(1, "one")
        m.put_all({2: "two", 3: "three"})
        m.remove(3)
        r.add(5)
        r.add(6)
        a.add(1)
        a.add(4)
    b.set_current_key("x")
    assert (v.value(), lst.get(), r.get(), a.get()) == (7, ["x", "x1", "x2"], 11, 2.5)
    assert (m.get(1), m.get(3), m.contains(2), sorted(m.keys()), sorted(m.values())) == \
        ("one", None, True, [1, 2], ["one", "two"])
    assert sorted(m.items()) == [(1, "one"), (2, "two")]
    lst.update(["only"])
    assert lst.get() == ["only"]
    v.update(None)
    assert v.value() is None
    m.remove(1)
    m.remove(2)
    assert m.is_empty()
    b.set_current_key("y")
    assert v.value() == 8 and lst.get() == ["y", "y1", "y2"]
    assert sorted(b.keys("v")) == ["y"] and sorted(b.keys("l")) == ["x", "y"]
    # one state object per name; another kind under the same name is refused
    assert b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG())) is v
    with pytest.raises(ValueError, match="give each state its own name"):
        b.get_partitioned_state(ListStateDescriptor("v"))


@pytest.mark.parametrize("kind", BACKENDS)
def test_values_of_any_type_and_keys_of_any_type(make, kind):
    b = make(kind)
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    typed = b.get_partitioned_state(ValueStateDescriptor("t", Types.LONG()))
    keys = ["s", 3, -2 ** 40, 2 ** 70, ("a", 1), 1.5, b"raw", (1, ("x", None))]
    for i, key in enumerate(keys):
        b.set_current_key(key)
        v.update({"i": i, "key": key})
        typed.update(True if i == 0 else 2 ** 80 if i == 1 else i)   # not LONGs: kept as given
    for i, key in enumerate(keys):
        b.set_current_key(key)
        assert v.value() == {"i": i, "key": key}
        assert typed.value() == (True if i == 0 else 2 ** 80 if i == 1 else i)
        assert type(typed.value()) is (bool if i == 0 else int)
    assert {r[3] for r in b.snapshot()} == set(keys)
    assert all(r[0] == assign_to_key_group(r[3], 128) for r in b.snapshot())


@pytest.mark.parametrize("kind", BACKENDS)
def test_namespaces_and_merging_windows(make, kind):
    b = make(kind)
    r = b.get_partitioned_state(ReducingStateDescriptor("r", lambda x, y: x + y, Types.LONG()))
    lst = b.get_partitioned_state(ListStateDescriptor("l"))
    agg = b.get_partitioned_state(AggregatingStateDescriptor("a", Average()))
    w1, w2, w3, merged = TimeWindow(0, 10), TimeWindow(5, 15), TimeWindow(12, 20), TimeWindow(0, 20)
    b.set_current_key("k")
    for w, n in ((w1, 1), (w2, 2), (w3, 4)):
        for s in (r, lst, agg):
            s.set_current_namespace(w)
            s.add(n)
    for s in (r, lst, agg):
        s.merge_namespaces(w1, [w2, w3])
        s.set_current_namespace(w1)
    assert (r.get(), sorted(lst.get()), agg.get()) == (7, [1, 2, 4], 7 / 3)
    for s in (r, lst, agg):
        s.set_current_namespace(w2)
    assert (r.get(), lst.get(), agg.get()) == (None, [], None)
    r.set_current_namespace(GlobalWindow.get())
    r.add(100)
    assert sorted(b.keys("r", GlobalWindow.get())) == ["k"] and b.keys("r", merged) == []
    assert sorted(((row[1], row[2]) for row in b.snapshot()), key=repr) == sorted([
        ("a", w1), ("l", w1), ("r", GlobalWindow.get()), ("r", w1)], key=repr)
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    for w in (w1, w2):
        v.set_current_namespace(w)
        v.update(1)
    with pytest.raises(NotImplementedError, match="cannot be merged"):
        v.merge_namespaces(w1, [w2])


def ttl(visibility=None, update=None):
    builder = StateTtlConfig.new_builder(Time.milliseconds(100))
    if visibility is not None:
        builder = builder.set_state_visibility(visibility)
    if update is not None:
        builder = builder.set_update_type(update)
    return builder.build()


@pytest.mark.parametrize("kind", BACKENDS)
def test_ttl(make, kind):
    clock = Clock()
    b = make(kind, clock=clock)
    d = ValueStateDescriptor("v", Types.LONG())
    d.enable_time_to_live(ttl())
    v = b.get_partitioned_state(d)
    d2 = ReducingStateDescriptor("r", lambda x, y: x + y, Types.LONG())
    d2.enable_time_to_live(ttl(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp,
                               StateTtlConfig.UpdateType.OnReadAndWrite))
    r = b.get_partitioned_state(d2)
    b.set_current_key("k")
    v.update(1)
    r.add(1)
    clock.now += 60
    assert v.value() == 1 and r.get() == 1      # r's read refreshes it, v's does not
    clock.now += 60
    assert v.value() is None and r.get() == 1
    clock.now += 100
    assert r.get() == 1         # expired: returned once under ReturnExpiredIfNotCleanedUp ...
    assert r.get() is None      # ... then gone
    r.add(5)
    clock.now += 100
    r.add(2)                    # an expired value is absent for a reduce
    assert r.get() == 2
    b.set_current_key("gone")
    v.update(9)
    clock.now += 100
    assert [(row[1], row[3]) for row in b.snapshot() if not row[1].startswith(TTL_PREFIX)] == []


# Per-entry TTL of list and map state, after Flink's TtlListState and TtlMapState (PyFlink 2.3
# runs them in its JVM: flink-runtime org/apache/flink/runtime/state/ttl): each list element and
# map entry has its own last-write (or read, OnReadAndWrite) time and expires once time + ttl <=
# now; an expired entry is never returned (NeverReturnExpired) or returned by the read that finds
# it (ReturnExpiredIfNotCleanedUp), and removed by that read. TTL 100 ms throughout.

def ttl_states(b, visibility=None, update=None):
    lst = ListStateDescriptor("l", Types.STRING())
    lst.enable_time_to_live(ttl(visibility, update))
    m = MapStateDescriptor("m", Types.STRING(), Types.LONG())
    m.enable_time_to_live(ttl(visibility, update))
    return b.get_partitioned_state(lst), b.get_partitioned_state(m)


def ttl_backend(make, kind, visibility=None, update=None):
    """(clock at 1000, a backend of ``kind`` at key "k", its TTL'd list and map)."""
    clock = Clock(1000)
    b = make(kind, clock=clock)
    lst, m = ttl_states(b, visibility, update)
    b.set_current_key("k")
    return clock, b, lst, m


def state_rows(b, name):
    return sorted((r[3], r[4]) for r in b.snapshot() if r[1] == name)


@pytest.mark.parametrize("kind", BACKENDS)
def test_each_list_element_expires_on_its_own(make, kind):
    clock, b, lst, _ = ttl_backend(make, kind)
    lst.add("a")                            # at 1000
    clock.now = 1060
    lst.add_all(["b", "c"])                 # at 1060
    assert lst.get() == ["a", "b", "c"]     # a read does not refresh (OnCreateAndWrite)
    clock.now = 1100                        # a: 1000 + 100 <= 1100
    assert lst.get() == ["b", "c"]
    assert state_rows(b, "l") == [("k", ["b", "c"])] and state_rows(b, TTL_PREFIX + "l") == [("k", [1060, 1060])]
    lst.add("d")                            # at 1100
    clock.now = 1160                        # b, c: 1060 + 100 <= 1160
    assert lst.get() == ["d"]
    lst.update(["x", "y"])                  # every element written now (1160)
    clock.now = 1259
    assert lst.get() == ["x", "y"]
    clock.now = 1260
    assert lst.get() == []                  # all expired: the list is gone
    assert state_rows(b, "l") == [] and state_rows(b, TTL_PREFIX + "l") == []
    lst.add_all([])                         # nothing added: still nothing
    assert lst.get() == [] and state_rows(b, "l") == []
    with pytest.raises(ValueError, match="cannot add None"):
        lst.add_all(["z", None])
    assert lst.get() == []


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("config, reads", [
    # OnReadAndWrite: a read refreshes every live element (to 1090, then to 1189).
    (dict(update=StateTtlConfig.UpdateType.OnReadAndWrite), [(1090, ["a", "b"]), (1189, ["a", "b"]), (1289, [])]),
    # ReturnExpiredIfNotCleanedUp: a (1000 + 100 <= 1100) is returned by the read that removes it.
    (dict(visibility=StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp), [(1100, ["a", "b"]), (1100, ["b"])]),
])
def test_list_reads_by_update_type_and_visibility(make, kind, config, reads):
    clock, b, lst, _ = ttl_backend(make, kind, **config)
    lst.add("a")
    clock.now = 1050
    lst.add("b")
    for now, expected in reads:
        clock.now = now
        assert lst.get() == expected


@pytest.mark.parametrize("kind", BACKENDS)
def test_each_map_entry_expires_on_its_own(make, kind):
    clock, b, _, m = ttl_backend(make, kind)
    assert m.is_empty() and m.get("x") is None and not m.contains("x")
    m.put("x", 1)                           # at 1000
    clock.now = 1050
    m.put_all({"y": 2, "z": 3})             # at 1050
    assert m.get("x") == 1 and m.contains("y") and m.items() == [("x", 1), ("y", 2), ("z", 3)]
    clock.now = 1100                        # x: 1000 + 100 <= 1100
    assert m.get("x") is None and not m.contains("x")
    assert sorted(m.keys()) == ["y", "z"] and sorted(m.values()) == [2, 3] and not m.is_empty()
    m.put("y", 20)                          # rewritten at 1100: lives on
    m.remove("z")
    assert state_rows(b, "m") == [("k", {"y": 20})] and state_rows(b, TTL_PREFIX + "m") == [("k", {"y": 1100})]
    clock.now = 1199
    assert m.items() == [("y", 20)]
    clock.now = 1200
    assert m.is_empty() and m.items() == [] and m.keys() == [] and m.values() == []
    assert state_rows(b, "m") == [] and state_rows(b, TTL_PREFIX + "m") == []


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_map_read_refreshes_only_the_entries_it_reads_with_on_read_and_write(make, kind):
    clock, b, _, m = ttl_backend(make, kind, update=StateTtlConfig.UpdateType.OnReadAndWrite)
    m.put_all({"x": 1, "y": 2, "z": 3})     # at 1000
    clock.now = 1060
    assert m.get("x") == 1 and m.contains("y")     # x and y refreshed to 1060, z not
    clock.now = 1100
    assert m.items() == [("x", 1), ("y", 2)]       # z expired; x and y refreshed to 1100
    assert not m.is_empty()                        # is_empty refreshes nothing
    clock.now = 1199
    assert m.values() == [1, 2]                    # refreshed to 1199
    clock.now = 1298
    assert m.keys() == ["x", "y"]


@pytest.mark.parametrize("kind", BACKENDS)
def test_an_expired_map_entry_is_returned_once_when_the_visibility_allows_it(make, kind):
    clock, b, _, m = ttl_backend(make, kind, visibility=StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
    m.put("x", 1)
    clock.now = 1050
    m.put("y", 2)
    clock.now = 1100
    assert m.get("x") == 1                  # expired: returned once ...
    assert m.get("x") is None               # ... and removed
    clock.now = 1150
    assert m.items() == [("y", 2)] and m.items() == []


@pytest.mark.parametrize("kind", BACKENDS)
def test_list_and_map_ttl_take_flinks_cleanup_options(make, kind):
    """Cleanup in full snapshot, incremental and by RocksDB's compaction filter are accepted;
    expired entries go when read and at every snapshot whichever is set."""
    config = (StateTtlConfig.new_builder(Time.milliseconds(100)).cleanup_full_snapshot()
              .cleanup_incrementally(10, True).cleanup_in_rocksdb_compact_filter(1000).build())
    clock = Clock(1000)
    b = make(kind, clock=clock)
    lst, m = ListStateDescriptor("l"), MapStateDescriptor("m")
    for d in (lst, m):
        d.enable_time_to_live(config)
    lst, m = b.get_partitioned_state(lst), b.get_partitioned_state(m)
    for key in ("read", "unread"):
        b.set_current_key(key)
        lst.add(1)
        m.put(1, 1)
    clock.now = 1100
    assert lst.get() == [] and m.is_empty() and list(b.snapshot()) == []


def ttl_fill(b, clock):
    """Lists and maps of keys a..e, each key's entries written at its own times (100 ms TTL)."""
    lst, m = ttl_states(b)
    for i, key in enumerate("abcde"):
        clock.now = 1000 + 10 * i
        b.set_current_key(key)
        lst.add(key + "0")
        m.put(key + "0", i)
        clock.now = 1050 + 10 * i
        lst.add(key + "1")
        m.put(key + "1", i)
    return lst, m


@pytest.mark.parametrize("source", BACKENDS)
@pytest.mark.parametrize("target", BACKENDS)
def test_a_restore_keeps_each_entrys_time_also_in_another_key_group_range(make, source, target):
    clock = Clock()
    a = make(source, clock=clock, name="a")
    ttl_fill(a, clock)
    snapshot = list(a.snapshot())
    assert ("a", [1000, 1050]) in [(r[3], r[4]) for r in snapshot if r[1] == TTL_PREFIX + "l"]
    half = KeyGroupRange(0, 63)
    for name, key_group_range in (("all", ALL), ("half", half)):
        b = make(target, key_group_range=key_group_range, clock=clock, name=name)
        b.restore(iter(snapshot))           # before the states are registered, as a task does
        lst, m = ttl_states(b)
        mine = [k for k in "abcde" if key_group_range.contains(assign_to_key_group(k, 128))]
        assert mine and (name == "all") == (len(mine) == 5)
        clock.now = 1125                    # x0 written at 1000 + 10 i expires for i <= 2
        got = {}
        for key in mine:
            b.set_current_key(key)
            got[key] = (lst.get(), m.items())
        assert got == {k: ([k + "0", k + "1"] if i > 2 else [k + "1"],
                           [(k + "0", i), (k + "1", i)] if i > 2 else [(k + "1", i)])
                       for i, k in enumerate("abcde") if k in mine}
        b.set_current_key(mine[0])
        lst.add("new")                      # appended to a restored list, with its own time
        clock.now = 1170                    # x1 written at 1050 + 10 i expires for i <= 2
        assert lst.get() == ([] if "abcde".index(mine[0]) <= 2 else [mine[0] + "1"]) + ["new"]


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_full_snapshot_leaves_out_expired_entries(make, kind):
    """Flink's cleanup in full snapshot (cleanup_full_snapshot): expired elements and entries are
    not checkpointed, live ones keep their times."""
    clock = Clock()
    b = make(kind, clock=clock)
    ttl_fill(b, clock)
    clock.now = 1125
    assert state_rows(b, "l") == [("a", ["a1"]), ("b", ["b1"]), ("c", ["c1"]), ("d", ["d0", "d1"]),
                                  ("e", ["e0", "e1"])]
    assert state_rows(b, TTL_PREFIX + "m")[:1] == [("a", {"a1": 1050})]
    clock.now = 1200
    assert state_rows(b, "l") == [] and state_rows(b, "m") == [] and list(b.snapshot()) == []


@pytest.mark.parametrize("kind", BACKENDS)
def test_incremental_changes_carry_entry_times(make, kind):
    clock = Clock()
    b = make(kind, clock=clock, name="b")
    lst, m = ttl_fill(b, clock)
    baseline = list(b.snapshot())
    b.mark_checkpointed()
    clock.now = 1100                        # a0 (written at 1000) expired, not read
    b.set_current_key("a")
    lst.add("a2")
    m.put("a1", 10)
    b.set_current_key("b")
    lst.update([])                          # emptied: removed with its times
    m.remove("b0")
    m.remove("b1")
    changes = list(b.changes())             # the increment leaves out a0 too
    ka = assign_to_key_group("a", 128)
    assert sorted((r for r in changes if r[3] == "a"), key=repr) == sorted([
        (ka, "l", None, "a", ["a1", "a2"]), (ka, TTL_PREFIX + "l", None, "a", [1050, 1100]),
        (ka, "m", None, "a", {"a1": 10}), (ka, TTL_PREFIX + "m", None, "a", {"a1": 1100})], key=repr)
    assert sorted((r[1], r[4]) for r in changes if r[3] == "b") == [
        (TTL_PREFIX + "l", TOMBSTONE), (TTL_PREFIX + "m", TOMBSTONE), ("l", TOMBSTONE), ("m", TOMBSTONE)]
    clock.now = 1140                        # the baseline plus the increment is the state, each entry's time too
    expected = rows_at(b)
    assert expected["a"] == (["a1", "a2"], [("a1", 10)]) and expected["c"] == (["c1"], [("c1", 2)])
    for target in BACKENDS:
        other = make(target, clock=clock, name="apply-" + target)
        other.restore(iter(baseline))
        other.apply(iter(changes))
        assert rows_at(other) == expected


def rows_at(b):
    """Each key's list and map as the states read them now (the clock's time)."""
    lst, m = ttl_states(b)
    out = {}
    for key in "abcde":
        b.set_current_key(key)
        out[key] = (lst.get(), m.items())
    return out


@pytest.mark.parametrize("kind", BACKENDS)
def test_merged_windows_keep_each_elements_time(make, kind):
    clock = Clock(1000)
    b = make(kind, clock=clock)
    lst, m = ttl_states(b)
    w1, w2, w3 = TimeWindow(0, 10), TimeWindow(5, 15), TimeWindow(0, 15)
    b.set_current_key("k")
    for state in (lst, m):
        state.set_current_namespace(w1)
    lst.add("a")
    m.put("a", 1)
    clock.now = 1050
    for state in (lst, m):
        state.set_current_namespace(w2)
    lst.add("b")
    m.put("b", 2)
    for state in (lst, m):
        state.merge_namespaces(w3, [w1, w2])
        state.set_current_namespace(w3)
    assert lst.get() == ["a", "b"] and m.items() == [("a", 1), ("b", 2)]
    clock.now = 1100                        # a, written at 1000, expired; b at 1050 not
    assert lst.get() == ["b"] and m.items() == [("b", 2)]
    for state in (lst, m):
        state.set_current_namespace(w1)
    assert lst.get() == [] and m.is_empty()


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_list_and_map_restored_without_times_count_from_their_first_access(make, kind):
    """TTL enabled on a state checkpointed without it: as a value state's, its entries' time is
    their first access."""
    clock = Clock(1000)
    a = make(kind, clock=clock, name="a")
    plain_list = a.get_partitioned_state(ListStateDescriptor("l", Types.STRING()))
    plain_map = a.get_partitioned_state(MapStateDescriptor("m", Types.STRING(), Types.LONG()))
    a.set_current_key("k")
    plain_list.add_all(["a", "b"])
    plain_map.put_all({"a": 1, "b": 2})
    b = make(kind, clock=clock, name="b")
    b.restore(iter(a.snapshot()))
    lst, m = ttl_states(b)
    b.set_current_key("k")
    clock.now = 5000
    lst.add("c")                            # a, b count from here too
    assert lst.get() == ["a", "b", "c"] and m.get("a") == 1
    clock.now = 5099
    assert lst.get() == ["a", "b", "c"] and m.items() == [("a", 1), ("b", 2)]
    clock.now = 5100
    assert lst.get() == [] and m.items() == []


def fill(b, keys=("a", "b", "c", "d", "e")):
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    lst = b.get_partitioned_state(ListStateDescriptor("l", Types.LONG()))
    m = b.get_partitioned_state(MapStateDescriptor("m"))
    for i, key in enumerate(keys):
        b.set_current_key(key)
        v.update(i)
        lst.add_all([i, i + 1])
        lst.set_current_namespace(TimeWindow(0, 10))
        lst.add(-i)
        lst.set_current_namespace(None)
        m.put(key, {"nested": [i]})
    return v, lst, m


@pytest.mark.parametrize("source", BACKENDS)
@pytest.mark.parametrize("target", BACKENDS)
def test_snapshot_restores_into_either_backend_and_by_key_group_range(make, source, target):
    a = make(source, name="a")
    fill(a)
    expected = rows(a)
    b = make(target, name="b")
    b.restore(iter(a.snapshot()))
    assert rows(b) == expected
    # restored before the states are registered (as a task does), then used
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    lst = b.get_partitioned_state(ListStateDescriptor("l", Types.LONG()))
    b.set_current_key("c")
    assert v.value() == 2 and lst.get() == [2, 3]
    lst.add(4)
    assert lst.get() == [2, 3, 4]
    # a range takes only its key groups; column-wise chunks too
    half = KeyGroupRange(0, 63)
    c = make(target, key_group_range=half, name="c")
    c.restore(iter(expected))
    assert rows(c) == [r for r in expected if r[0] <= 63]
    chunks = KeyedRows()
    for name in ("v", "l", "m"):
        mine = [r for r in expected if r[1] == name]
        chunks.chunks.append((name, [r[0] for r in mine], [r[2] for r in mine], [r[3] for r in mine],
                              [r[4] for r in mine]))
    d = make(target, name="d")
    d.restore(chunks)
    assert rows(d) == expected


@pytest.mark.parametrize("kind", BACKENDS)
def test_changes_since_the_last_checkpoint_with_tombstones(make, kind):
    b = make(kind, name="b")
    v, lst, m = fill(b)
    baseline = rows(b)
    assert b.change_count() > 0
    b.mark_checkpointed()
    assert list(b.changes()) == [] and b.change_count() == 0
    b.set_current_key("a")
    v.update(100)               # changed
    lst.add(7)                  # changed (appended)
    b.set_current_key("b")
    v.clear()                   # removed: a tombstone
    m.remove("b")               # the map's last entry: removed
    b.set_current_key("new")
    v.update(5)                 # added
    v.clear()                   # ... and removed again: no change at all
    lst.add(1)
    lst.clear()
    changes = sorted(b.changes(), key=repr)
    ka, kb = assign_to_key_group("a", 128), assign_to_key_group("b", 128)
    # RocksDB does not read before a blind write, so an entry written blind and removed in the
    # same interval may leave a tombstone for nothing (harmless on apply); the heap knows better.
    in_baseline = {(r[1], r[2], r[3]) for r in baseline}
    exact = [c for c in changes if kind == "hashmap" or c[4] is not TOMBSTONE or c[1:4] in in_baseline]
    assert exact == sorted([(ka, "v", None, "a", 100), (ka, "l", None, "a", [0, 1, 7]),
                              (kb, "v", None, "b", TOMBSTONE), (kb, "m", None, "b", TOMBSTONE)], key=repr)
    # the baseline plus the changes is the state, in either backend
    for target in BACKENDS:
        other = make(target, name="apply-" + target)
        other.restore(iter(baseline))
        other.apply(iter(changes))
        assert rows(other) == rows(b)
        assert list(other.changes()) == []      # restoring and applying are no changes
    b.mark_checkpointed()
    assert list(b.changes()) == []


@pytest.mark.parametrize("kind", BACKENDS)
def test_an_epoch_with_a_full_snapshot_records_no_changes(make, kind):
    """Only an incremental snapshot reads the changes: an epoch whose snapshot is full keeps no
    record of them (a build epoch over millions of keys held them all), and the state is the same."""
    b = make(kind, name="untracked")
    b.track_changes(False)
    timers = b.create_timer_queue("event")
    v, lst, m = fill(b)
    timers.add(10, "a", None)
    assert b.change_count() == 0 and list(b.changes()) == [] and list(timers.changes(128)) == []
    tracked = make(kind, name="tracked")
    fill(tracked)
    assert rows(b) == rows(tracked) and b.change_count() < tracked.change_count()
    # The next epoch's snapshot is incremental: it records from its start.
    b.mark_checkpointed()
    b.track_changes(True)
    b.set_current_key("a")
    v.update(100)
    assert list(b.changes()) == [(assign_to_key_group("a", 128), "v", None, "a", 100)]
    timers.add(20, "a", None)
    assert [t[1:] for t in timers.changes(128)] == [(20, "a", None, True)]


@pytest.mark.parametrize("kind", BACKENDS)
def test_timers_in_the_backends_queues(make, kind):
    b = make(kind)
    t = InternalTimerService(b)
    for key, ts in (("a", 30), ("b", 10), ("a", 10), ("c", 20), ("a", 30)):    # the repeat is a no-op
        b.set_current_key(key)
        t.register_event_time_timer(None, ts)
    b.set_current_key("c")
    t.register_processing_time_timer(TimeWindow(0, 5), 4)
    t.delete_event_time_timer(None, 20)
    t.delete_event_time_timer(None, 99)        # not there: nothing
    assert len(t.event) == 3
    snapshot = sorted(t.snapshot(128), key=repr)
    assert snapshot == sorted([(assign_to_key_group("a", 128), "event", 30, "a", None),
                               (assign_to_key_group("b", 128), "event", 10, "b", None),
                               (assign_to_key_group("a", 128), "event", 10, "a", None),
                               (assign_to_key_group("c", 128), "processing", 4, "c", TimeWindow(0, 5))], key=repr)
    t.mark_checkpointed()
    fired = []

    def on_timer(ts, key, ns):
        fired.append((ts, key))
        assert b.get_current_key() == key
        if (ts, key) == (10, "a"):
            t.register_event_time_timer(None, 12)       # fires in this advance, in order
            t.register_event_time_timer(None, 40)       # does not
        if (ts, key) == (10, "b"):
            b.set_current_key("a")
            t.delete_event_time_timer(None, 30)         # deleted before it is due: never fires

    t.advance_watermark(35, on_timer)
    assert [ts for ts, _ in fired] == [10, 10, 12]
    assert sorted(fired) == [(10, "a"), (10, "b"), (12, "a")]
    assert len(t.event) == 1
    changes = sorted(t.changes(128), key=repr)
    ka, kb = assign_to_key_group("a", 128), assign_to_key_group("b", 128)
    # added and fired between two checkpoints (12): no change
    assert changes == sorted([(ka, "event", 40, "a", None, None), (ka, "event", 30, "a", None, TOMBSTONE),
                              (ka, "event", 10, "a", None, TOMBSTONE), (kb, "event", 10, "b", None, TOMBSTONE)],
                             key=repr)
    other = InternalTimerService(make(kind, name="other"))
    other.restore(snapshot, ALL)
    other.apply(changes, ALL)
    assert sorted(other.snapshot(128), key=repr) == sorted(t.snapshot(128), key=repr)
    part = InternalTimerService(make(kind, key_group_range=KeyGroupRange(0, 63), name="part"))
    part.restore(snapshot, KeyGroupRange(0, 63))
    assert sorted(part.snapshot(128), key=repr) == [r for r in snapshot if r[0] <= 63]


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_key_that_utf8_cannot_encode_is_checkpointed_exactly(make, kind):
    """A str key with a lone surrogate (bytes decoded with surrogateescape, as os.fsdecode does)
    is a valid key: its snapshot keeps it exactly (pickled, with its repr as the readable key)
    and restores it, next to text keys that stay text."""
    from runtime.state.snapshot_reader import table_to_snapshot
    from runtime.state.snapshot_writer import snapshot_to_table
    odd = b"caf\xe9".decode("utf-8", "surrogateescape")
    b = make(kind, name="a")
    count = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    keys = [odd, "café", "plain"] + [f"k{i}" for i in range(100)]
    for i, key in enumerate(keys):
        b.set_current_key(key)
        count.update(i)
    table = snapshot_to_table({"keyed": b.snapshot(), "types": {"count": Types.LONG()}}, 0, "op")
    by_key = dict(zip(table.column("key").to_pylist(), table.column("key_bytes").to_pylist()))
    assert by_key["café"] is None and by_key["plain"] is None
    assert by_key[repr(odd)] is not None
    restored = make(kind, name="b")
    restored.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    restored.restore(table_to_snapshot([table])["keyed"])
    assert rows(restored) == rows(b)
    again = restored.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    restored.set_current_key(odd)
    assert again.value() == 0
