"""A heap state's large maps settle into columns (runtime.state.state_map): the same answers as a
dict, snapshots and restores of the same rows, and a fraction of a dict's memory."""
import numpy as np
import random
import tracemalloc

import pyarrow as pa
import pytest

from runtime.common import Types
from runtime.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from runtime.state.backend import TOMBSTONE
from runtime.state.heap import HeapKeyedStateBackend
from runtime.state.key_groups import KeyGroupRange, assign_to_key_group
from runtime.state.snapshot_reader import table_to_snapshot
from runtime.state.snapshot_writer import snapshot_to_table
from runtime.state.state_map import CompactStateMap, StateMap

ALL = KeyGroupRange(0, 127)
ODD = b"caf\xe9".decode("utf-8", "surrogateescape")     # a str key UTF-8 cannot encode


@pytest.mark.parametrize("typed", [False, True], ids=["mixed", "text-keys-int-values"])
def test_a_settling_map_answers_as_a_dict_does_under_random_operations(typed):
    # Mixed keys and values are pickled; text keys and int values keep typed columns, which grow
    # and drop retired entries in place (PackedColumn.extend, keep).
    rnd = random.Random(7)
    keys = [f"k{i}" for i in range(3000)] + [ODD, "é"]
    values = [lambda s: rnd.randrange(-2**63, 2**63)]
    if not typed:
        keys += list(range(2000)) + [("t", i) for i in range(300)]
        values += [lambda s: [s], lambda s: {"a": s}, lambda s: s / 3, lambda s: "text", lambda s: 2**70,
                   lambda s: None]
    m, model = StateMap(), {}
    for step in range(40_000):
        key, op = rnd.choice(keys), rnd.random()
        if op < 0.45:
            value = rnd.choice(values)(step)
            m[key] = model[key] = value
        elif op < 0.6:
            assert m.get(key, "absent") == model.get(key, "absent")
        elif op < 0.7:
            assert (key in m) == (key in model)
        elif op < 0.8:
            assert m.pop(key, "absent") == model.pop(key, "absent")
        elif op < 0.85 and key in model:
            del m[key]
            del model[key]
        elif op < 0.9:
            default = step if typed else [step]
            assert m.setdefault(key, default) == model.setdefault(key, default)
        elif op < 0.92 and isinstance(m, CompactStateMap):
            # A restore's chunk, keys repeated within it and of settled entries: the last wins.
            chunk = [(rnd.choice(keys), rnd.choice(values)(step)) for _ in range(8)]
            m.settle()
            m.absorb([k for k, _ in chunk], [v for _, v in chunk])
            m.settle()
            model.update(chunk)
        elif key in model and isinstance(model[key], list) and not typed:
            m.get(key).append(step)             # changed in place, as ListState.add does
            model[key].append(step)
        if m.settle_due(500):
            m.settle()
        if step % 4000 == 0:
            assert len(m) == len(model) and bool(m) == bool(model)
            assert dict(m.items()) == model and sorted(map(repr, m)) == sorted(map(repr, model))
    assert isinstance(m, CompactStateMap) and m.settled > 1000
    with pytest.raises(KeyError):
        m["never"]
    with pytest.raises(KeyError):
        del m["never"]


def test_keys_a_restore_gives_twice_keep_their_last_value():
    m = StateMap()
    m.update({f"k{i}": i for i in range(10)})
    m.settle()
    m.absorb([f"k{i}" for i in range(5, 15)], [100 + i for i in range(5, 15)])
    m.absorb(["k7", "k20"], [-7, -20])
    m["k9"] = "in the dict"
    m.settle()
    expected = {**{f"k{i}": i for i in range(5)}, **{f"k{i}": 100 + i for i in range(5, 15)},
                "k7": -7, "k20": -20, "k9": "in the dict"}
    assert dict(m.items()) == expected and len(m) == len(expected) and m.settled == len(expected)


def counts_backend(key_group_range=ALL, n=20_000, settle_after=1000):
    b = HeapKeyedStateBackend("op", key_group_range, 128, settle_after=settle_after, settle_every=1000)
    count = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    for i in range(n):
        key = f"w{i}"
        if key_group_range.contains(assign_to_key_group(key, 128)):
            b.set_current_key(key)
            count.update((count.value() or 0) + i)
    b.settle()
    return b, count


def test_a_settled_state_snapshots_as_columns_to_the_rows_a_dict_gives_and_restores_them():
    b, _ = counts_backend()
    table = snapshot_to_table({"keyed": b.snapshot(), "types": {"count": Types.LONG()}}, 0, "op")
    assert table.column("value_count").type == pa.int64() and table.num_rows == 20_000
    rows = sorted(b.snapshot())
    assert rows == sorted((assign_to_key_group(f"w{i}", 128), "count", None, f"w{i}", i) for i in range(20_000))
    assert sorted(zip(table.column("key_group").to_pylist(), table.column("key").to_pylist(),
                      table.column("value_count").to_pylist())) == sorted((r[0], r[3], r[4]) for r in rows)
    # A restore at another parallelism takes its key groups, settled at once.
    half = KeyGroupRange(0, 63)
    restored = HeapKeyedStateBackend("op", half, 128, settle_after=1000)
    restored.restore(table_to_snapshot([table.filter(pa.compute.less_equal(table.column("key_group"), 63))])["keyed"])
    assert isinstance(restored.tables["count"][None], CompactStateMap)
    assert sorted(restored.snapshot()) == [r for r in rows if r[0] <= 63]
    count = restored.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    restored.set_current_key(next(r[3] for r in rows if r[0] <= 63))
    assert count.value() == next(r[4] for r in rows if r[0] <= 63)


def test_changes_to_settled_entries_are_increments_with_tombstones():
    b, count = counts_backend()
    b.track_changes(True)
    for i in (3, 4, 5):
        b.set_current_key(f"w{i}")
        count.update(-i)
    b.set_current_key("w6")
    count.clear()
    b.set_current_key("new")
    count.update(1)
    b.settle()
    changes = sorted(b.changes(), key=repr)
    assert [(r[3], r[4]) for r in changes] == sorted(
        [("w3", -3), ("w4", -4), ("w5", -5), ("w6", TOMBSTONE), ("new", 1)], key=lambda r: repr(
            (assign_to_key_group(r[0], 128), "count", None, r[0], r[1])))
    # The chain (the full snapshot, then the increment) restores to the state as it is now.
    full = snapshot_to_table({"keyed": counts_backend()[0].snapshot(), "types": {"count": Types.LONG()}}, 0, "op")
    increment = snapshot_to_table({"keyed": iter(changes), "types": {"count": Types.LONG()}}, 0, "op")
    again = HeapKeyedStateBackend("op", ALL, 128, settle_after=1000)
    keyed = table_to_snapshot([full, increment])["keyed"]
    (again.apply if keyed.deletions else again.restore)(keyed)
    assert sorted(again.snapshot()) == sorted(b.snapshot())


def test_lists_and_maps_read_from_columns_change_in_place():
    b = HeapKeyedStateBackend("op", ALL, 128, settle_after=100, settle_every=1)
    events = b.get_partitioned_state(ListStateDescriptor("events", Types.LONG()))
    seen = b.get_partitioned_state(MapStateDescriptor("seen", Types.STRING(), Types.LONG()))
    for round_ in range(3):
        for i in range(500):
            b.set_current_key(i)
            events.add(round_)
            seen.put(f"r{round_}", i)
    assert b.tables["events"][None].settled and b.tables["seen"][None].settled
    b.set_current_key(42)
    assert events.get() == [0, 1, 2] and dict(seen.items()) == {"r0": 42, "r1": 42, "r2": 42}


def test_a_settled_map_of_short_text_keys_costs_a_fraction_of_a_dict():
    n = 300_000
    tracemalloc.start()
    try:
        before, arrow_before = tracemalloc.get_traced_memory()[0], pa.total_allocated_bytes()
        m = StateMap((f"w{i}", i) for i in range(n))       # the keys are the map's alone
        as_dict = tracemalloc.get_traced_memory()[0] - before
        m.settle()
        settled = tracemalloc.get_traced_memory()[0] - before + pa.total_allocated_bytes() - arrow_before
    finally:
        tracemalloc.stop()
    assert settled / n < 48 and settled < as_dict / 2, (settled / n, as_dict / n)
    assert m.get("w123456") == 123456 and "w300000" not in m


def test_a_large_state_of_text_keys_and_numbers_restores_straight_into_columns():
    b, _ = counts_backend(n=5000, settle_after=10**9)        # built as a dict
    table = snapshot_to_table({"keyed": b.snapshot(), "types": {"count": Types.LONG()}}, 0, "op")
    restored = HeapKeyedStateBackend("op", ALL, 128, settle_after=1000)
    keyed = table_to_snapshot([table])["keyed"]
    assert keyed.text_key_columns("count") is not None
    restored.restore(keyed)
    m = restored.tables["count"][None]
    assert isinstance(m, CompactStateMap) and m.settled == 5000 and not dict.__len__(m)
    assert sorted(restored.snapshot()) == sorted(b.snapshot())
    count = restored.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    restored.set_current_key("w4321")
    assert count.value() == 4321 and type(count.value()) is int


@pytest.mark.parametrize("raw", ["lots", "-5", ""])
def test_a_bad_compact_after_setting_fails_when_the_job_starts_naming_the_key(raw):
    from runtime.checkpoint.incremental import IncrementalPolicy
    from runtime.state.backend import HEAP_COMPACT_AFTER, heap_compact_after
    with pytest.raises(ValueError, match=f"'{HEAP_COMPACT_AFTER}' must be a whole number of entries"):
        IncrementalPolicy.from_config({HEAP_COMPACT_AFTER: raw})
    # By default a map packs past 262,144 entries; 0 keeps every entry a Python object.
    assert heap_compact_after({}) == 262144 and heap_compact_after({HEAP_COMPACT_AFTER: "1000"}) == 1000
    assert heap_compact_after({HEAP_COMPACT_AFTER: "0"}) is None


def test_a_snapshot_written_a_chunk_at_a_time_restores_a_row_group_at_a_time(tmp_path, monkeypatch):
    import runtime.state.snapshot_writer as snapshot_writer
    from runtime.state.snapshot_reader import DeferredPart, read_state_parts
    from runtime.state.snapshot_writer import write_snapshot
    monkeypatch.setattr(snapshot_writer, "SNAPSHOT_CHUNK", 1000)
    b, _ = counts_backend(n=20_000)
    written = write_snapshot({"keyed": b.snapshot(), "types": {"count": Types.LONG()}}, str(tmp_path), "op", 0, "op")
    assert written.rows == 20_000 and (written.key_group_min, written.key_group_max) == (0, 127)
    whole = sorted(b.snapshot())
    half = KeyGroupRange(0, 63)
    parts = list(read_state_parts(written.path, half, written.checksum))
    assert len(parts) >= 20 and all(isinstance(p, DeferredPart) for p in parts)     # decoded when loaded
    loaded = [p.load() for p in parts]      # a row group per chunk of 1,000 rows, each filtered to the range
    assert all(pa.compute.max(t.column("key_group")).as_py() <= 63 for t in loaded)
    assert all(t.column("namespace").type == pa.null() for t in loaded)     # no buffers for nulls
    for settle_after in (1000, None):
        restored = HeapKeyedStateBackend("op", half, 128, settle_after=settle_after)
        keyed = table_to_snapshot(iter(parts))["keyed"]
        assert keyed.single_part("count") and keyed.text_key_columns("count") is not None
        restored.restore(keyed)
        assert sorted(restored.snapshot()) == [r for r in whole if r[0] <= 63]
        assert isinstance(restored.tables["count"][None], CompactStateMap) == bool(settle_after)


def test_an_increment_of_struct_values_and_deletions_reads_the_same_by_row_group(tmp_path):
    """A struct value spans several Parquet leaf columns: row-group statistics are found by path."""
    from runtime.state.snapshot_reader import read_state_file, read_state_parts
    from runtime.state.snapshot_writer import write_snapshot
    pair = Types.TUPLE([Types.STRING(), Types.LONG()])
    b = HeapKeyedStateBackend("op", ALL, 128)
    state = b.get_partitioned_state(ValueStateDescriptor("pairs", pair))
    for key in ("a", "b", "c"):
        b.set_current_key(key)
        state.update((key, 1))
    types = {"pairs": pair}
    files = [write_snapshot({"keyed": b.snapshot(), "types": types}, str(tmp_path), "op", 0, "op")]
    b.track_changes(True)
    b.set_current_key("a")
    state.clear()
    b.set_current_key("d")
    state.update(("d", 4))
    files.append(write_snapshot({"keyed": b.changes(), "types": types}, str(tmp_path), "op", 0, "op", increment=True))
    whole = table_to_snapshot(read_state_file(f.path) for f in files)["keyed"]
    by_groups = table_to_snapshot(p for f in files for p in read_state_parts(f.path, ALL, f.checksum))["keyed"]
    assert list(by_groups) == list(whole) and by_groups.deletions
    assert (0, "pairs", None, "a", TOMBSTONE) in [(0,) + r[1:] for r in by_groups]
    again = HeapKeyedStateBackend("op", ALL, 128)
    again.apply(by_groups)
    assert sorted(again.snapshot()) == sorted(b.snapshot())


def test_consecutive_int_keys_spread_over_the_index():
    # Python hashes consecutive ints to consecutive values: taken as slots they made one run of
    # full slots, and every re-written key walked the run (10,000 updates over 2,000,000 packed
    # keys took 52 s). Each entry is now a few slots from its home slot, also after re-writes.
    from runtime.state.state_map import _home_slots
    m = StateMap()
    m.update({i: i for i in range(100_000)})
    m.settle()
    for i in range(0, 100_000, 7):
        m[i] = -i
    m.settle()
    index = m._index
    placed = np.flatnonzero(index >= 0)
    distance = (placed - _home_slots(m._hashes[index[placed]], len(index))) % len(index)
    assert distance.max() < 64 and distance.mean() < 2
    assert all(m[i] == (-i if i % 7 == 0 else i) for i in range(100_000))
