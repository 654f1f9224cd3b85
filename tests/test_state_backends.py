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
from runtime.state.backend import TOMBSTONE, TTL_PREFIX
from runtime.state.key_groups import KeyGroupRange, assign_to_key_group
from runtime.state.snapshot import KeyedRows
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
    d3 = ListStateDescriptor("l")
    d3.enable_time_to_live(ttl())
    with pytest.raises(NotImplementedError, match="per-entry TTL"):
        b.get_partitioned_state(d3)


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
    from runtime.state.snapshot import snapshot_to_table, table_to_snapshot
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
