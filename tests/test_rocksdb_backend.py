"""The RocksDB keyed state backend's own promises: typed values stored without pickling, key
groups as prefix ranges, version metadata, a store reopened by another process, a damaged
store named with its path; and a job on Spark with state.backend.type: rocksdb."""
import os
import pickle
import struct
import subprocess
import sys

import pytest

from runtime.common import Configuration, Time, Types
from runtime.datastream import KeyedProcessFunction, RuntimeContext
from runtime.datastream.state import ListStateDescriptor, MapStateDescriptor, StateTtlConfig, ValueStateDescriptor
from runtime.datastream.window import TimeWindow
from runtime.state.backend import STATE_BACKEND, TOMBSTONE, state_backend_type
from runtime.state.key_groups import KeyGroupRange, assign_to_key_group
from runtime.state.rocksdb import CorruptStateStoreException, RocksDBKeyedStateBackend, StateStoreInUseException
from runtime.state.rocksdb_keys import encode_key, encode_namespace
from seed import ROOT

ALL = KeyGroupRange(0, 127)


def open_store(path, key_group_range=ALL, max_parallelism=128):
    return RocksDBKeyedStateBackend("op", key_group_range, max_parallelism, str(path))


def raw(backend, state_name, key, namespace=None) -> bytes:
    sid = backend.states[state_name].sid
    kg = assign_to_key_group(key, backend.max_parallelism).to_bytes(2, "big")
    backend.write_buffer.flush()     # state writes wait in a buffer until a flush (a snapshot, the version, close)
    return backend.store.db.get(kg + sid + encode_key(key) + encode_namespace(namespace))


def test_typed_values_are_stored_without_pickling(tmp_path):
    b = open_store(tmp_path / "s")
    states = {t: b.get_partitioned_state(ValueStateDescriptor(t, getattr(Types, t)()))
              for t in ("LONG", "INT", "DOUBLE", "FLOAT", "STRING", "BOOLEAN")}
    untyped = b.get_partitioned_state(ValueStateDescriptor("any"))
    lst = b.get_partitioned_state(ListStateDescriptor("list", Types.LONG()))
    b.set_current_key("k")
    values = {"LONG": -5, "INT": 7, "DOUBLE": 0.1, "FLOAT": 2.5, "STRING": "héllo", "BOOLEAN": True}
    for t, v in values.items():
        states[t].update(v)
    untyped.update({"a": 1})
    lst.add_all([1, 2])
    lst.add(3)
    assert raw(b, "LONG", "k") == b"\x00" + struct.pack(">q", -5)
    assert raw(b, "INT", "k") == b"\x00" + struct.pack(">i", 7)
    assert raw(b, "DOUBLE", "k") == b"\x00" + struct.pack(">d", 0.1)
    assert raw(b, "FLOAT", "k") == b"\x00" + struct.pack(">d", 2.5)
    assert raw(b, "STRING", "k") == b"\x00" + "héllo".encode()
    assert raw(b, "BOOLEAN", "k") == b"\x00\x01"
    assert raw(b, "any", "k") == b"\x01" + pickle.dumps({"a": 1}, protocol=5)
    element = b"\x00" + struct.pack(">q", 1)
    assert raw(b, "list", "k").startswith(b"\x02" + struct.pack(">I", len(element)) + element)
    assert b"pickle" not in raw(b, "list", "k") and raw(b, "list", "k").count(b"\x80\x05") == 0
    assert {t: states[t].value() for t in values} == values and lst.get() == [1, 2, 3]
    # a value that does not fit its declared type is kept as it is (pickled), as the heap keeps it
    states["LONG"].update("not a long")
    assert states["LONG"].value() == "not a long" and raw(b, "LONG", "k")[:1] == b"\x01"
    b.dispose()


def test_key_groups_are_prefix_ranges(tmp_path):
    b = open_store(tmp_path / "s")
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    keys = [f"key{i}" for i in range(200)]
    for i, key in enumerate(keys):
        b.set_current_key(key)
        v.update(i)
    half = KeyGroupRange(10, 40)
    rows = list(b.entries(half))
    assert {r[3] for r in rows} == {k for k in keys if 10 <= assign_to_key_group(k, 128) <= 40}
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    # the raw keys of a group start with the group: one seek reads the range
    lower, upper = (10).to_bytes(2, "big"), (41).to_bytes(2, "big")
    in_range = [k for k in b.store.db.keys(from_key=lower) if k < upper]
    assert len(in_range) == len(rows)
    b.dispose()


def test_keys_prepared_for_a_batch_land_in_their_key_groups(tmp_path):
    """A batch's keys get their key groups in one vectorised hash (prepare_keys): each entry
    must sit in the key group Flink assigns its key, whichever way its group was computed."""
    b = open_store(tmp_path / "s")
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    keys = [f"w{i}" for i in range(300)] + list(range(-50, 50)) + [(f"t{i}", i) for i in range(40)] + ["é∂", 2 ** 40]
    b.prepare_keys(keys + keys[:10])
    b.prepare_keys([[1, 2], "x"])       # an unhashable key: hashed one by one when set
    for i, key in enumerate(keys + [[1, 2]]):
        b.set_current_key(key)
        v.update(i)
    rows = list(b.entries())
    groups = {repr(r[3]): r[0] for r in rows}
    assert len(rows) == len(keys) + 1
    assert all(groups[repr(k)] == assign_to_key_group(k, 128) for k in keys + [[1, 2]])
    b.dispose()


def test_buffered_writes_read_back_across_flushes_and_reopen(tmp_path, monkeypatch):
    """State writes wait in a buffer (flushed by size, scans, the version, close): reads,
    deletions, changes() and a reopened store see each key's last write, whichever side of a
    flush it fell on."""
    from runtime.state import rocksdb_write_buffer
    monkeypatch.setattr(rocksdb_write_buffer, "_WRITE_BUFFER", 200)        # a flush every few writes
    b = open_store(tmp_path / "s")
    count = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    want = {}
    for i in range(300):
        if i == 150:        # a checkpoint: what changes() gives after it is relative to this
            list(b.changes())
            b.mark_checkpointed()
            at_checkpoint = dict(want)
        key = f"k{i % 37}"
        b.set_current_key(key)
        if i % 11 == 0:
            count.clear()
            want.pop(key, None)
        else:
            count.update((count.value() or 0) + i)
            want[key] = want.get(key, 0) + i
    changes = {r[3]: r[4] for r in b.changes()}
    touched = {f"k{i % 37}" for i in range(150, 300)}
    assert {k: v for k, v in changes.items() if v is not TOMBSTONE} == {k: want[k] for k in touched if k in want}
    assert {k for k, v in changes.items() if v is TOMBSTONE} == {k for k in touched if k in at_checkpoint} - set(want)
    assert {r[3]: r[4] for r in b.entries()} == want
    b.version = "v1"
    b.close()
    b = open_store(tmp_path / "s")
    assert b.version == "v1"
    count = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    for key, value in want.items():
        b.set_current_key(key)
        assert count.value() == value
    b.dispose()


def test_version_metadata_and_reopening(tmp_path):
    path = tmp_path / "s"
    b = open_store(path)
    assert b.version is None
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    b.set_current_key("a")
    v.update(1)
    b.version = 7
    assert b.version == 7
    b.close()
    b = open_store(path)
    assert b.version == 7                       # exactly where its writer left it
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    b.set_current_key("a")
    assert v.value() == 1
    v.update(2)                                 # written after it was opened: no version ...
    b.close()
    assert open_store(path).version is None     # ... until set again
    b = open_store(path)
    b.version = 8
    b.close()
    other = open_store(path, KeyGroupRange(0, 63))
    assert other.version is None        # the store of another key-group range is not this one's
    other.close()


def test_a_store_opened_every_epoch_keeps_a_few_info_logs(tmp_path):
    """RocksDB starts a new info LOG at every open; a store opened by every epoch's task keeps
    the last few (Flink's state.backend.rocksdb.log.file-num: 4), not 1,000."""
    path = tmp_path / "s"
    for epoch in range(12):
        b = open_store(path)
        b.version = epoch
        b.close()
    assert len([f for f in os.listdir(path) if f.startswith("LOG")]) <= 5    # LOG and 4 old ones


def test_a_store_is_reopened_by_another_process(tmp_path):
    path = tmp_path / "s"
    b = open_store(path)
    v = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    lst = b.get_partitioned_state(ListStateDescriptor("seen"))
    from runtime.task.timer_service import InternalTimerService
    timers = InternalTimerService(b)
    for i, key in enumerate(["a", "b", "c"]):
        b.set_current_key(key)
        v.update(i)
        lst.set_current_namespace(TimeWindow(0, 10))
        lst.add((key, i))
        timers.register_event_time_timer(TimeWindow(0, 10), 9)
    b.version = 3
    with pytest.raises(StateStoreInUseException, match=str(path)):
        open_store(path)                        # RocksDB's lock: one writer at a time
    expected = sorted(b.snapshot(), key=repr)
    b.close()
    script = f"""
import sys
sys.path.insert(0, {ROOT!r})
from runtime.datastream.state import ValueStateDescriptor
from runtime.common import Types
from runtime.state.key_groups import KeyGroupRange
from runtime.state.rocksdb import RocksDBKeyedStateBackend
from runtime.task.timer_service import InternalTimerService
b = RocksDBKeyedStateBackend("op", KeyGroupRange(0, 127), 128, {str(path)!r})
print(b.version)
print(sorted(b.snapshot(), key=repr))
print(sorted(InternalTimerService(b).snapshot(128), key=repr))
v = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
b.set_current_key("z")
v.update(99)
b.version = 4
b.close()
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    version, rows, timer_rows = out.stdout.splitlines()
    assert version == "3" and rows == repr(expected)
    assert timer_rows == repr(sorted([(assign_to_key_group(k, 128), "event", 9, k, TimeWindow(0, 10))
                                      for k in "abc"], key=repr))
    b = open_store(path)                        # and what that process wrote is here
    assert b.version == 4
    v = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    b.set_current_key("z")
    assert v.value() == 99
    b.dispose()


@pytest.mark.parametrize("damage", ["CURRENT", "MANIFEST", "not-a-store", "metadata"])
def test_a_damaged_store_fails_naming_its_path(tmp_path, damage):
    path = tmp_path / "s"
    b = open_store(path)
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    for i in range(100):
        b.set_current_key(i)
        v.update(i)
    if damage == "metadata":
        b.store.db.put(b"\xffmeta", b"garbage")
    b.close()
    if damage == "CURRENT":
        (path / "CURRENT").write_text("MANIFEST-999999\n")
    elif damage == "MANIFEST":
        for name in os.listdir(path):
            if name.startswith("MANIFEST"):
                (path / name).write_bytes(b"\x00garbage" * 100)
    elif damage == "not-a-store":
        import rocksdict
        options = rocksdict.Options(raw_mode=True)
        db = rocksdict.Rdict(str(tmp_path / "other"), options)
        db.put(b"\x00\x01x", b"y")
        db.close()
        path = tmp_path / "other"
    with pytest.raises(CorruptStateStoreException, match=str(path)) as e:
        open_store(path)
    assert e.value.path == str(path)
    RocksDBKeyedStateBackend.destroy(str(path))     # what a caller does next: rebuild from Delta
    rebuilt = open_store(path)
    assert rebuilt.version is None and list(rebuilt.snapshot()) == []
    rebuilt.dispose()


def test_an_unwritable_directory_names_the_path(tmp_path):
    if os.geteuid() == 0:
        blocker = tmp_path / "file"
        blocker.write_text("x")
        path = blocker / "store"        # a directory under a file: cannot be made, even by root
    else:
        os.chmod(tmp_path, 0o500)
        path = tmp_path / "store"
    with pytest.raises(IOError, match="state.backend.rocksdb.localdir") as e:
        open_store(path)
    assert str(path) in str(e.value)


def test_the_backend_key():
    assert state_backend_type({}) == "hashmap"
    assert state_backend_type({STATE_BACKEND: "RocksDB"}) == "rocksdb"
    assert state_backend_type(Configuration().set_string(STATE_BACKEND, "hashmap")) == "hashmap"
    with pytest.raises(ValueError, match="'state.backend.type' must be one of hashmap, rocksdb, got 'heap'"):
        state_backend_type({STATE_BACKEND: "heap"})


# ---- on Spark --------------------------------------------------------------------------------

class Count(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.words = runtime_context.get_map_state(MapStateDescriptor("lengths", Types.STRING(), Types.LONG()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        self.words.put(value, len(value))
        yield value, n, type(self.count).__name__


def run_twice(tmp_path, backend, build, name) -> list:
    """The job's output over two runs: stopped after two epochs, then resumed from its checkpoint."""
    from runtime_env import job_env
    out = []
    for max_epochs in (2, None):
        env = job_env(tmp_path / name, epoch__max_records_per_split=2,
                      **({"epoch__max_epochs": max_epochs} if max_epochs else {}))
        env.get_configuration().set_string(STATE_BACKEND, backend)
        env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
        out.extend(build(env).execute_and_collect(name))
    return out


@pytest.mark.parametrize("backend", ["rocksdb", "hashmap"])
def test_a_keyed_count_and_an_event_time_window(spark, tmp_path, backend):
    from runtime.common import Time
    from runtime.common.watermark_strategy import WatermarkStrategy
    from runtime.datastream.window import TumblingEventTimeWindows

    words = ["a", "b", "a", "c", "a", "b"]
    counts = run_twice(tmp_path, backend, lambda env: env.from_collection(words, type_info=Types.STRING())
                       .key_by(lambda w: w).process(Count()), "counts")
    assert sorted(c[:2] for c in counts) == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("c", 1)]
    assert {c[2] for c in counts} == {"RocksDBValueState" if backend == "rocksdb" else "HeapValueState"}

    pair = Types.TUPLE([Types.STRING(), Types.LONG()])
    events = [("a", 1000), ("b", 2000), ("a", 4000), ("a", 6000), ("b", 6500), ("a", 11000)]
    windows = run_twice(tmp_path, backend, lambda env: (
        env.from_collection(events, type_info=pair)
        .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps()
                                          .with_timestamp_assigner(lambda e, _: e[1]))
        .map(lambda e: (e[0], 1), output_type=pair)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(5)))
        .reduce(lambda x, y: (x[0], x[1] + y[1]))), "windows")
    # [0, 5000): a twice, b once; [5000, 10000): a, b; [10000, 15000): a (the end of the input)
    assert sorted(windows) == [("a", 1), ("a", 1), ("a", 2), ("b", 1), ("b", 1)]


def test_a_chunk_of_rows_gets_the_keys_a_row_at_a_time_would():
    """A restore encodes a chunk at a time; the store keys are those of the row-wise encoding,
    for plain string keys and for the rest (ints, tuples, namespaces), and None outside the
    backend's key-group range."""
    from runtime.state.key_groups import KeyGroupRange
    from runtime.state.rocksdb_keys import encode_entry_keys
    sid = b"\x00\x07"

    def one_by_one(kgs, nss, keys, kgr):
        return [None if not kgr.contains(kg) else kg.to_bytes(2, "big") + sid + encode_key(k) + encode_namespace(ns)
                for kg, ns, k in zip(kgs, nss, keys)]
    kgr = KeyGroupRange(0, 9)
    plain = ([1, 5, 12, 9], [None] * 4, ["a", "bé", "c", "\ud800"])
    mixed = ([1, 5, 12, 3], [None, TimeWindow(0, 10), None, None], ["a", 7, ("x", 1), "d"])
    for kgs, nss, keys in (plain, mixed):
        assert encode_entry_keys(kgs, sid, nss, keys, kgr) == one_by_one(kgs, nss, keys, kgr)
    assert None not in encode_entry_keys(*plain[:1], sid, *plain[1:])


@pytest.mark.parametrize("bulk", [True, False])
def test_an_epoch_that_wrote_in_bulk_leaves_its_store_merged(tmp_path, monkeypatch, bulk):
    """Runs that overlap over the whole key range (a build's, a rebuild's) are merged when the
    epoch sets its version, not left for RocksDB to start merging at every later open; an epoch
    that wrote little leaves its files as they are."""
    from runtime.state import rocksdb_store
    monkeypatch.setattr(rocksdb_store, "_COMPACT_AFTER", 64 << 10 if bulk else 1 << 40)

    def files(path):
        return len([f for f in os.listdir(path) if f.endswith(".sst")])
    b = open_store(tmp_path / "s")
    count = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    for part in range(3):
        for i in range(2000):
            b.set_current_key(f"k{part}-{i}")
            count.update(i)
        b.write_buffer.flush()
        b.store.db.flush(True)        # a file per part, as the write buffer's flushes in a bulk epoch
    assert files(tmp_path / "s") >= 3
    b.version = "v1"
    assert (files(tmp_path / "s") <= 2) == bulk     # the merged run, and the version's own flush
    b.close()
    b = open_store(tmp_path / "s")
    assert b.version == "v1" and len(set(b.keys("count"))) == 6000
    b.close()


class _CountedGets:
    """A store handle that counts gets (one key, or a list: a multi_get)."""

    def __init__(self, db):
        self.db, self.single, self.multi = db, 0, 0

    def get(self, key, *args):
        if isinstance(key, list):
            self.multi += 1
        else:
            self.single += 1
        return self.db.get(key, *args)

    def __getattr__(self, name):
        return getattr(self.db, name)


def test_a_batch_reads_its_keys_state_at_once_and_never_a_stale_value(tmp_path):
    """The first read of a state in a batch reads the entries of every key of the batch in one
    multi_get; later reads see the batch's own writes, a flush in the middle of the batch, and a
    key seen twice; a key outside the batch (a timer's) is read on its own."""
    b = open_store(tmp_path / "s")
    count = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    keys = [f"k{i}" for i in range(100)]
    for k in keys[:50]:
        b.set_current_key(k)
        count.update(10)
    b.write_buffer.flush()
    b.store.db = db = _CountedGets(b.store.db)
    batch = keys + keys[:10]
    b.prepare_keys(batch)
    seen = []
    for i, k in enumerate(batch):
        if i == 60:
            b.write_buffer.flush()       # the write buffer filled up in the middle of the batch
        b.set_current_key(k)
        seen.append(count.value())
        count.update((seen[-1] or 0) + 1)
    assert seen == [10] * 50 + [None] * 50 + [11] * 10
    assert db.multi == 2 and db.single == 0     # once at the start, once after the flush
    b.set_current_key("outside")
    assert count.value() is None and db.single == 1
    b.set_current_key("k0")
    assert count.value() == 12
    b.store.db = db.db
    b.version = "v1"
    b.close()
    b = open_store(tmp_path / "s")
    count = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    for k, want in [("k0", 12), ("k9", 12), ("k10", 11), ("k49", 11), ("k50", 1), ("k99", 1)]:
        b.set_current_key(k)
        assert count.value() == want, k
    b.close()


def test_a_full_snapshot_decoded_column_wise_is_the_row_wise_one(tmp_path):
    """A store's full snapshot decodes each state's entries of a chunk as columns when they all
    are in the void namespace with text keys and values stored in the state's codec, and row by
    row otherwise; the table is the same either way, and restores the same state."""
    from runtime.state.backend import KeyedColumns
    from runtime.state.snapshot_reader import table_to_snapshot
    from runtime.state.snapshot_writer import snapshot_to_table
    b = open_store(tmp_path / "s")
    descriptors = {"count": Types.LONG(), "ratio": Types.DOUBLE(), "name": Types.STRING(), "small": Types.INT()}
    states = {n: b.get_partitioned_state(ValueStateDescriptor(n, t)) for n, t in descriptors.items()}
    untyped = b.get_partitioned_state(ValueStateDescriptor("any"))
    windowed = b.get_partitioned_state(ValueStateDescriptor("windowed", Types.LONG()))
    listed = b.get_partitioned_state(ListStateDescriptor("seen", Types.LONG()))
    expiring = ValueStateDescriptor("fresh", Types.LONG())      # its entry times: an engine state
    expiring.enable_time_to_live(StateTtlConfig.new_builder(Time.hours(1)).build())
    fresh = b.get_partitioned_state(expiring)
    for i in range(3_000):
        key = f"ключ{i}" if i % 500 else 7 * i       # text, and an int key every 500
        b.set_current_key(key)
        states["count"].update(i)
        states["ratio"].update(i / 7)
        states["name"].update(f"név {i}")
        states["small"].update(-i)
        untyped.update({"i": i})
        windowed.set_current_namespace(TimeWindow(0, 10))
        windowed.update(i)
        listed.add(i)
        fresh.update(i)
    types = {n: s.descriptor.type_info for n, s in b.states.items()}
    blocks = list(b.snapshot().column_chunks(1_000))
    as_columns = {n for n, block in blocks if isinstance(block, KeyedColumns)}
    # The typed states' chunks of text keys only; row by row, their chunks with an int key, the
    # untyped, windowed and list states, and the TTL's entry times (no descriptor: stored pickled).
    assert as_columns == {"count", "ratio", "name", "small", "fresh"}
    assert any(n == "count" and not isinstance(block, KeyedColumns) for n, block in blocks)

    fast = snapshot_to_table({"keyed": b.snapshot(), "types": types}, 0, "op")
    slow = snapshot_to_table({"keyed": iter(b.snapshot()), "types": types}, 0, "op")     # rows only
    order = [(c, "ascending") for c in ("state_name", "key_group", "key", "key_bytes")]
    assert fast.schema == slow.schema
    assert fast.sort_by(order).equals(slow.sort_by(order))
    assert fast.num_rows == 9 * 3_000
    b.close()
    # Restored into another store, the state snapshots to the same table again.
    other = open_store(tmp_path / "t")
    for name, state in states.items():
        other.get_partitioned_state(state.descriptor)
    for state in (untyped, windowed, listed, fresh):
        other.get_partitioned_state(state.descriptor)
    other.restore(table_to_snapshot([fast])["keyed"])
    again = snapshot_to_table({"keyed": other.snapshot(), "types": types}, 0, "op")
    assert again.sort_by(order).equals(fast.sort_by(order))
    other.close()


def test_an_increment_decoded_column_wise_is_the_row_wise_one(tmp_path):
    """An increment's changed entries (in the store or still in its write buffer) are decoded
    as columns where a full snapshot's would be, its deletions come as tombstone rows, and an
    entry added and removed since the checkpoint is left out: the table is the row-wise one, and applied over the checkpoint it gives the state."""
    from runtime.state.backend import KeyedColumns
    from runtime.state.snapshot_reader import table_to_snapshot
    from runtime.state.snapshot_writer import snapshot_to_table
    b = open_store(tmp_path / "s")
    b.track_changes(True)
    count = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    name = b.get_partitioned_state(ValueStateDescriptor("name", Types.STRING()))
    for i in range(2_000):
        b.set_current_key(f"k{i}")
        count.update(i)
        name.update(f"név {i}")
    types = {n: s.descriptor.type_info for n, s in b.states.items()}
    base = snapshot_to_table({"keyed": b.snapshot(), "types": types}, 0, "op")
    b.mark_checkpointed()
    for i in range(0, 2_000, 3):        # updated
        b.set_current_key(f"k{i}")
        count.update(-i)
    b.write_buffer.flush()       # these reach the store; the changes below are still in the write buffer
    for i in range(1, 2_000, 7):        # removed
        b.set_current_key(f"k{i}")
        name.clear()
    for i in range(2_000, 2_100):       # new, and new then removed (read first: known to be new)
        b.set_current_key(f"k{i}")
        assert count.value() is None
        count.update(i)
        if i % 2:
            b.set_current_key(f"k{i}")
            count.clear()
    blocks = list(b.changes().column_chunks(500))
    assert {n for n, block in blocks if isinstance(block, KeyedColumns)} == {"count"}
    deleted = [row for n, block in blocks if not isinstance(block, KeyedColumns) for row in block]
    assert {row[3] for row in deleted} == {f"k{i}" for i in range(1, 2_000, 7)}
    assert all(row[1] == "name" and row[4] is TOMBSTONE for row in deleted)

    fast = snapshot_to_table({"keyed": b.changes(), "types": types}, 0, "op")
    slow = snapshot_to_table({"keyed": iter(b.changes()), "types": types}, 0, "op")
    order = [(c, "ascending") for c in ("state_name", "key_group", "key", "key_bytes")]
    columns = sorted(fast.column_names)     # in the order the chunk's parts came
    assert columns == sorted(slow.column_names)
    assert fast.select(columns).sort_by(order).equals(slow.select(columns).sort_by(order))
    assert fast.num_rows == len(range(0, 2_000, 3)) + len(range(1, 2_000, 7)) + 50
    # The checkpoint and the increment, applied in order, give the store's state.
    other = open_store(tmp_path / "t")
    for state in (count, name):
        other.get_partitioned_state(state.descriptor)
    other.restore(table_to_snapshot([base])["keyed"])
    other.apply(table_to_snapshot([fast])["keyed"])
    order = order[:3]
    assert (snapshot_to_table({"keyed": other.snapshot(), "types": types}, 0, "op").sort_by(order)
            .equals(snapshot_to_table({"keyed": b.snapshot(), "types": types}, 0, "op").sort_by(order)))
    other.close()
    b.close()


def test_each_concept_of_the_backend_is_a_module_of_its_own():
    """Issue 31: the file list says where each part of the RocksDB backend lives (Flink's seams:
    key serialization, the state classes, the timer queue, the write buffer, the store's lifecycle,
    snapshot reading and writing), and what the task layer uses stays in runtime.state.rocksdb."""
    import importlib

    from runtime.state import rocksdb
    homes = {
        "rocksdb_keys": ["encode_key", "decode_key", "encode_namespace", "decode_namespace", "encode_entry_keys"],
        "rocksdb_codecs": ["codec_of", "encode_value", "decode_value", "encode_list"],
        "rocksdb_states": ["RocksDBValueState", "RocksDBListState", "RocksDBMapState", "RocksDBReducingState",
                           "RocksDBAggregatingState"],
        "rocksdb_timers": ["RocksDBTimerQueue"],
        "rocksdb_write_buffer": ["RocksDBWriteBuffer"],
        "rocksdb_read_ahead": ["RocksDBReadAhead"],
        "rocksdb_store": ["RocksDBStore", "StateStoreException", "CorruptStateStoreException",
                          "StateStoreInUseException"],
        "rocksdb_snapshots": ["RocksDBSnapshotStrategyBase", "RocksFullSnapshotStrategy",
                              "RocksIncrementalSnapshotStrategy"],
        "rocksdb_restore": ["RocksDBRestoreOperation", "RocksDBWriteBatchWrapper"],
        "ttl": ["TtlStateFactory", "TtlValueState", "TtlListState", "TtlMapState", "TtlReducingState",
                "TtlAggregatingState"],
    }
    for module, names in homes.items():
        m = importlib.import_module(f"runtime.state.{module}")
        assert m.__doc__, module
        for name in names:
            assert getattr(m, name).__module__ == m.__name__, (module, name)
    assert rocksdb.CorruptStateStoreException.__module__ == "runtime.state.rocksdb_store"
    assert issubclass(rocksdb.StateStoreInUseException, rocksdb.StateStoreException)


def test_the_backend_holds_its_parts_each_owning_its_fields(tmp_path):
    """Issue 55: the backend is composed, as Flink's RocksDBKeyedStateBackend is, not one object
    of mixins: each part is an object of its own with its own fields, and the backend's own
    fields are only the task's (operator, key groups, clock, states, timers) and its parts."""
    from runtime.state.heap import HeapKeyedStateBackend
    from runtime.state.rocksdb_read_ahead import RocksDBReadAhead
    from runtime.state.rocksdb_restore import RocksDBRestoreOperation
    from runtime.state.rocksdb_snapshots import RocksFullSnapshotStrategy, RocksIncrementalSnapshotStrategy
    from runtime.state.rocksdb_store import RocksDBStore
    from runtime.state.rocksdb_write_buffer import RocksDBWriteBuffer
    from runtime.state.ttl import TtlListState, TtlValueState

    backend = RocksDBKeyedStateBackend("op", KeyGroupRange(0, 127), 128, str(tmp_path / "db"))
    parts = {"store": RocksDBStore, "read_ahead": RocksDBReadAhead, "write_buffer": RocksDBWriteBuffer,
             "full_snapshot": RocksFullSnapshotStrategy, "incremental_snapshot": RocksIncrementalSnapshotStrategy,
             "restore_operation": RocksDBRestoreOperation}
    assert [c.__name__ for c in type(backend).__mro__] == ["RocksDBKeyedStateBackend", "KeyedStateBackend",
                                                             "ABC", "object"]
    for name, cls in parts.items():
        assert type(getattr(backend, name)) is cls, name
    assert set(vars(backend)) == set(parts) | {"local", "operator_name", "key_group_range", "max_parallelism",
                                               "now", "states", "internal_states", "timer_queues"}
    # Each field lives in one part: the store's db, the write buffer's pending writes, the read-ahead's key cache.
    assert "db" in vars(backend.store) and "pending" in vars(backend.write_buffer) \
        and "key_cache" in vars(backend.read_ahead)
    fields = [set(vars(getattr(backend, name))) - {"store", "write_buffer", "read_ahead"} for name in parts]
    assert all(not (a & b) for i, a in enumerate(fields) for b in fields[i + 1:])

    # TTL is one decorator for both backends, over the backend's own states without TTL.
    heap = HeapKeyedStateBackend("op", KeyGroupRange(0, 127), 128)
    for b in (backend, heap):
        value, listed = ValueStateDescriptor("v", Types.LONG()), ListStateDescriptor("l", Types.LONG())
        for d in (value, listed):
            d.enable_time_to_live(StateTtlConfig.new_builder(Time.hours(1)).build())
        assert type(b.get_partitioned_state(value)) is TtlValueState
        assert type(b.get_partitioned_state(listed)) is TtlListState
        assert not any(hasattr(s, "ttl") for s in b.internal_states.values())
        assert sorted(b.internal_states) == ["_ttl/l", "_ttl/v", "l", "v"]
    backend.dispose()
