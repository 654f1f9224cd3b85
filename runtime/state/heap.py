"""Heap keyed state (Flink's HeapKeyedStateBackend), scoped to a key and a namespace.

Per state name, a dict per namespace maps a key to its value. The current key is set by the
operator before each record or timer; windows set the namespace. Snapshots are rows
carrying their key group, so a restore at another parallelism takes only its range.

Changes since the last checkpoint are tracked per state as {(key, namespace): present at the
last checkpoint}: an entry created and removed between two checkpoints is no change at all.
"""
from __future__ import annotations

import heapq
import itertools
import sys
from typing import Any, Callable, Iterable, Iterator, Optional

import pyarrow as pa

from runtime.datastream import state as api
from runtime.state.backend import (
    TOMBSTONE, VOID_NAMESPACE, KeyedColumns, KeyedStateBackend, TimerQueue, Untracked, iter_rows, wall_clock_ms)
from runtime.state.internal_state import AggregatingStateOps, MapStateReads, ReducingStateOps, StateBase, ValueStateOps
from runtime.state.key_groups import KeyGroupRange, assign_key_groups, assign_to_key_group
from runtime.state.state_map import CompactStateMap, StateMap

__all__ = ["HeapKeyedStateBackend", "HeapTimerQueue"]

SNAPSHOT_CHUNK = 100_000    # entries a snapshot turns into rows at a time
SETTLE_EVERY = 1 << 16      # keys set between two looks for maps to settle


class _HeapState(StateBase):
    """A state's entries live in one dict per namespace (``tables``: namespace -> {key: value}),
    so an entry costs no (key, namespace) tuple (a third of a large state's memory) and a window's
    entries are one dict. ``table`` is the current namespace's dict, always the one in ``tables``
    (the backend re-points it after removing empty namespaces). Changes are tracked per
    (key, namespace), a state's slot (runtime.state.ttl)."""

    def __init__(self, backend: "HeapKeyedStateBackend", descriptor: api.StateDescriptor):
        self.backend = backend
        self.descriptor = descriptor
        self.tables: dict = backend.table(descriptor.name)
        self.changed: dict = backend.changed_of(descriptor.name)
        self.namespace, self.table = VOID_NAMESPACE, None
        self.set_current_namespace(VOID_NAMESPACE)

    def set_current_namespace(self, namespace) -> None:
        # A window's dict goes as the state leaves it empty (fired, purged, merged away, or only
        # read), not at the next snapshot: a long epoch of many windows would hold one per window.
        ns = self.namespace
        if ns is not VOID_NAMESPACE and not self.table and self.tables.get(ns) is self.table:
            del self.tables[ns]
        self.namespace = namespace
        self.table = self.tables.setdefault(namespace, StateMap())

    def _touch(self, key) -> None:
        """Record that the current namespace's ``key`` changes (before the change): its presence
        at the last checkpoint."""
        slot = (key, self.namespace)
        if slot not in self.changed:
            self.changed[slot] = key in self.table

    def _get(self):
        return self.table.get(self.backend.current_key)

    _live = _get

    def _put(self, value) -> None:
        key = self.backend.current_key
        self._touch(key)
        self.table[key] = value

    def clear(self) -> None:
        self._remove_at((self.backend.current_key, self.namespace))

    def _slots(self) -> list:
        """(key, namespace) of every entry."""
        return [(key, ns) for ns, table in self.tables.items() for key in table]

    def _get_at(self, slot):
        key, ns = slot
        return self.tables.get(ns, {}).get(key)

    def _put_at(self, slot, value) -> None:
        key, ns = slot
        table = self.tables.setdefault(ns, StateMap())
        if slot not in self.changed:
            self.changed[slot] = key in table
        table[key] = value

    def _remove_at(self, slot) -> None:
        """Remove the entry of ``slot``, a (key, namespace)."""
        key, ns = slot
        table = self.tables.get(ns)
        if table is not None and key in table:
            if slot not in self.changed:
                self.changed[slot] = True
            del table[key]

    def merge_namespaces(self, target, sources: Iterable) -> None:
        """Fold the sources' values into ``target`` (merging windows), removing the sources."""
        key, current = self.backend.current_key, self.namespace
        merged = self.tables.get(target, {}).get(key)
        for ns in sources:
            table = self.tables.get(ns)
            if table is not None and key in table:
                value = table[key]
                self._remove_at((key, ns))
                if value is not None:
                    merged = value if merged is None else self._merge(merged, value)
        if merged is not None:
            self.set_current_namespace(target)
            self._touch(key)
            self.table[key] = merged
            self.set_current_namespace(current)


class HeapValueState(ValueStateOps, _HeapState, api.ValueState):
    """Flink's ValueState: ``update(None)`` clears it."""


class HeapListState(_HeapState, api.ListState):
    def get(self):
        return list(self._get() or ())

    def add(self, value) -> None:
        if value is None:
            raise ValueError(f"ListState '{self.descriptor.name}': cannot add None")
        key = self.backend.current_key
        self._touch(key)
        self.table.setdefault(key, []).append(value)

    def add_all(self, values) -> None:
        for v in values:
            self.add(v)

    def _append_all(self, values: list) -> bool:
        """Append ``values`` (checked); whether the list was there."""
        key = self.backend.current_key
        self._touch(key)
        current = self.table.get(key)
        if current is None:
            self.table[key] = list(values)
            return False
        current.extend(values)
        return True

    def update(self, values) -> None:
        self.clear()
        self.add_all(values)

    def _merge(self, a, b):
        return a + b


class HeapMapState(MapStateReads, _HeapState, api.MapState):
    def _map(self, create: bool = False) -> dict:
        key = self.backend.current_key
        m = self.table.get(key)
        if create:
            self._touch(key)
            if m is None:
                m = self.table[key] = {}
        return m if m is not None else {}

    def put(self, key, value) -> None:
        self._map(True)[key] = value

    def put_all(self, dict_value) -> None:
        self._map(True).update(dict_value)

    def remove(self, key) -> None:
        m = self._map()
        if key in m:
            self._touch(self.backend.current_key)
            del m[key]
        if not m:
            self.clear()


class HeapReducingState(ReducingStateOps, _HeapState, api.ReducingState):
    """Flink's ReducingState: ``add`` folds the value in with the reduce function."""


class HeapAggregatingState(AggregatingStateOps, _HeapState, api.AggregatingState):
    """Flink's AggregatingState: ``add`` folds the value into the accumulator."""


_STATE_CLASSES = {
    api.ValueStateDescriptor: HeapValueState,
    api.ListStateDescriptor: HeapListState,
    api.MapStateDescriptor: HeapMapState,
    api.ReducingStateDescriptor: HeapReducingState,
    api.AggregatingStateDescriptor: HeapAggregatingState,
}


class HeapTimerQueue(TimerQueue):
    """Flink's HeapPriorityQueueSet: a heap of timers and the set of live ones (a deleted timer
    stays in the heap until popped)."""

    def __init__(self):
        self.heap: list = []
        self.live: set = set()
        self.seq = itertools.count()
        self.changed: dict = {}     # timer -> live at the last checkpoint

    def clear(self) -> None:
        self.heap.clear()
        self.live.clear()
        self.changed.clear()

    def _push(self, timer) -> None:
        self.live.add(timer)
        heapq.heappush(self.heap, (timer[0], next(self.seq), timer[1], timer[2]))

    def add(self, timestamp: int, key, namespace) -> None:
        timer = (timestamp, key, namespace)
        if timer not in self.live:
            if timer not in self.changed:
                self.changed[timer] = False
            self._push(timer)

    def delete(self, timestamp: int, key, namespace) -> None:
        timer = (timestamp, key, namespace)
        if timer in self.live:
            if timer not in self.changed:
                self.changed[timer] = True
            self.live.discard(timer)

    def pop_until(self, time: int) -> Iterator[tuple]:
        heap, live, changed = self.heap, self.live, self.changed
        while heap and heap[0][0] <= time:
            timestamp, _, key, namespace = heapq.heappop(heap)
            timer = (timestamp, key, namespace)
            if timer in live:      # deleted timers stay in the heap until popped
                live.discard(timer)
                if timer not in changed:
                    changed[timer] = True
                yield timer

    def __iter__(self) -> Iterator[tuple]:
        return iter(list(self.live))

    def timers_with_key_groups(self, max_parallelism: int) -> Iterator[tuple]:
        for timestamp, key, namespace in list(self.live):
            yield assign_to_key_group(key, max_parallelism), timestamp, key, namespace

    def __len__(self) -> int:
        return len(self.live)

    def restore(self, timers: Iterable[tuple]) -> None:
        for timer in timers:
            if timer not in self.live:
                self._push(timer)

    def remove_restored(self, timers: Iterable[tuple]) -> None:
        for timer in timers:
            self.live.discard(timer)

    def changes(self, max_parallelism: int) -> Iterator[tuple]:
        for timer, was_live in self.changed.items():
            live = timer in self.live
            if live != was_live:
                yield assign_to_key_group(timer[1], max_parallelism), timer[0], timer[1], timer[2], live

    def mark_checkpointed(self) -> None:
        self.changed.clear()


class _HeapScan:
    """A full snapshot's entries: iterated, rows; ``column_chunks(size)`` gives (state name,
    rows or KeyedColumns) blocks, a settled map's entries as columns without a Python object
    each (the snapshot's writer casts them to the state's declared type, or takes rows)."""

    def __init__(self, backend: "HeapKeyedStateBackend"):
        self.backend = backend

    def __iter__(self) -> Iterator[tuple]:
        backend = self.backend
        for name, tables in backend.tables.items():
            for ns, table in tables.items():
                for rows in backend._chunks(name, ns, table.items(), SNAPSHOT_CHUNK):
                    yield from rows

    def column_chunks(self, size: int) -> Iterator[tuple]:
        backend = self.backend
        for name, tables in backend.tables.items():
            for ns, table in tables.items():
                settled = bool(table.settled) and ns is VOID_NAMESPACE
                for rows in backend._chunks(name, ns, table.unsettled_items() if settled else table.items(), size):
                    yield name, rows
                for chunk in table.settled_chunks(size) if settled else ():
                    if isinstance(chunk, list):
                        yield name, list(backend._rows(name, [(key, ns, value) for key, value in chunk]))
                    else:
                        keys, values = chunk
                        key_groups = pa.array(assign_key_groups(keys, backend.max_parallelism, backend.key_type))
                        yield name, KeyedColumns(key_groups, keys, values)


class HeapKeyedStateBackend(KeyedStateBackend):
    """With a ``path`` (the subtask's local state path, a name only: nothing is written there),
    a *kept* heap: it stays in its pinned Python worker between epochs (runtime.state.kept_stores),
    as Flink's heap backend lives with its task for the job's life, and the next epoch's task of
    the subtask takes it as it is when its ``version`` is the one the driver expects."""

    on_disk = False

    def __init__(self, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int,
                 clock: Optional[Callable[[], int]] = None, path: Optional[str] = None,
                 settle_after: Optional[int] = None, settle_every: int = SETTLE_EVERY):
        self.path = path
        self.local = path is not None
        self._version = None
        self._versioned = False     # whether this task set the version (only then is it kept)
        self.operator_name = operator_name
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.tables: dict[str, dict] = {}       # state name -> {namespace: {key: value}}
        self.changed: dict[str, dict] = {}      # state name -> {(key, namespace): present at the last checkpoint}
        self._reset_states()
        self.timer_queues: dict[str, HeapTimerQueue] = {}
        self.current_key: Any = None
        self.now = clock or wall_clock_ms      # processing time, which state TTL is measured in
        # A map holding settle_after entries as Python objects packs them into columns; the
        # backend looks for such maps every settle_every keys (runtime.state.state_map). None:
        # never (sluice.state.heap.compact-after-entries unset).
        self.settle_after = settle_after
        self.settle_every = settle_every if settle_after else sys.maxsize
        self._keys_set = 0

    def table(self, name: str) -> dict:
        return self.tables.setdefault(name, {})

    def changed_of(self, name: str) -> dict:
        return self.changed.setdefault(name, {} if self.tracking else Untracked())

    def track_changes(self, enabled: bool) -> None:
        super().track_changes(enabled)
        fresh = dict if enabled else Untracked
        for name in self.changed:
            self.changed[name] = fresh()
        for state in self.internal_states.values():
            state.changed = self.changed_of(state.descriptor.name)
        for queue in self.timer_queues.values():
            queue.changed = fresh()

    def set_current_key(self, key) -> None:
        self.current_key = key
        self._keys_set += 1
        if self._keys_set >= self.settle_every:
            self.settle()

    def settle(self) -> None:
        """Pack each large map's recent entries into its columns (runtime.state.state_map): done
        between records, when no state call is halfway through a value."""
        self._keys_set = 0
        if not self.settle_after:
            return
        for tables in self.tables.values():
            for table in tables.values():
                if table.settle_due(self.settle_after):
                    table.settle()

    def create_internal_state(self, descriptor: api.StateDescriptor) -> _HeapState:
        return _STATE_CLASSES[type(descriptor)](self, descriptor)

    def keys(self, state_name: str, namespace=VOID_NAMESPACE) -> list:
        return list(self.tables.get(state_name, {}).get(namespace, ()))

    def _rows(self, name: str, entries: list) -> Iterator[tuple]:
        """Rows of ``entries`` (key, namespace, value) of state ``name``. Hashing every key to its
        group is the bulk of a snapshot: vectorised, per chunk."""
        key_groups = assign_key_groups([key for key, _, _ in entries], self.max_parallelism, self.key_type).tolist()
        for key_group, (key, ns, value) in zip(key_groups, entries):
            yield key_group, name, ns, key, value

    def snapshot(self) -> "_HeapScan":
        """Every entry: rows (key_group, state_name, namespace, key, value), made a chunk at a
        time (the writer takes them in chunks: a whole state is never copied at once), or, from
        ``column_chunks``, a settled map's text keys and typed values as columns."""
        self._drop_expired()
        self._drop_empty_namespaces()
        return _HeapScan(self)

    def _chunks(self, name: str, ns, entries: Iterable, size: int) -> Iterator[list]:
        entries = iter(entries)
        while chunk := [(key, ns, value) for key, value in itertools.islice(entries, size)]:
            yield list(self._rows(name, chunk))

    def changes(self) -> Iterator[tuple]:
        """Rows of the entries changed since the last checkpoint; a removed one with TOMBSTONE."""
        self._drop_expired()
        self._drop_empty_namespaces()
        for name, changed in self.changed.items():
            if not changed:
                continue
            tables = self.tables.get(name, {})
            entries = []
            for (key, ns), was_present in changed.items():
                table = tables.get(ns)
                if table is not None and key in table:
                    entries.append((key, ns, table[key]))
                elif was_present:
                    entries.append((key, ns, TOMBSTONE))
            if entries:
                yield from self._rows(name, entries)

    def change_count(self) -> int:
        return sum(len(c) for c in self.changed.values())

    def mark_checkpointed(self) -> None:
        for changed in self.changed.values():
            changed.clear()
        for queue in self.timer_queues.values():
            queue.mark_checkpointed()

    def _drop_empty_namespaces(self) -> None:
        """A window's namespace goes when its last entry does; each state's current namespace is
        registered again (its ``table`` stays the one in its tables)."""
        for tables in self.tables.values():
            for ns in [ns for ns, table in tables.items() if not table and ns is not VOID_NAMESPACE]:
                del tables[ns]
        for state in self.internal_states.values():
            state.set_current_namespace(state.namespace)

    def restore(self, rows: Iterable[tuple]) -> None:
        """Take the rows of this backend's key-group range (others belong to other subtasks)."""
        if hasattr(rows, "column_chunks"):
            # Restored from state files, which were read for this range only: load column-wise;
            # a large state of text keys and numbers straight into its map's columns.
            held = {name for name, tables in self.tables.items() if any(tables.values())}
            columnar = set()
            for name in rows.state_names() if self.settle_after and hasattr(rows, "text_key_columns") else ():
                columns = rows.text_key_columns(name) if name not in held else None
                if columns is not None and len(columns[0]) >= self.settle_after:
                    self.table(name).setdefault(VOID_NAMESPACE, StateMap()).absorb_columns(*columns)
                    columnar.add(name)
            for name, _, nss, keys, values in rows.column_chunks(skip=columnar) if columnar else rows.column_chunks():
                tables = self.table(name)
                if isinstance(nss, list) and nss.count(VOID_NAMESPACE) == len(nss):
                    table = tables.setdefault(VOID_NAMESPACE, StateMap())
                    if isinstance(table, CompactStateMap):
                        # Settled a chunk at a time: the chunks never wait packed beside the map.
                        table.absorb(keys, values, unique=name not in held and rows.single_part(name))
                        table.settle()
                    else:
                        dict.update(table, zip(keys, values))
                        if self.settle_after and table.settle_due(self.settle_after):
                            table.settle()
                else:
                    for ns, key, value in zip(nss, keys, values):
                        tables.setdefault(ns, StateMap())[key] = value
            self.settle()
            return
        kgr = self.key_group_range
        for key_group, name, ns, key, value in rows:
            if kgr.contains(key_group):
                self.table(name).setdefault(ns, StateMap())[key] = value

    def apply(self, rows: Iterable[tuple]) -> None:
        """Full or incremental rows, in order: a TOMBSTONE value removes the entry."""
        kgr = self.key_group_range
        for key_group, name, ns, key, value in iter_rows(rows):
            if kgr is not None and not kgr.contains(key_group):
                continue
            if value is TOMBSTONE:
                self.tables.get(name, {}).get(ns, {}).pop(key, None)
            else:
                self.table(name).setdefault(ns, StateMap())[key] = value

    def create_timer_queue(self, name: str) -> HeapTimerQueue:
        queue = self.timer_queues.get(name)     # a kept heap's timers are its queues'
        if queue is None:
            queue = self.timer_queues[name] = HeapTimerQueue()
        queue.changed = {} if self.tracking else Untracked()
        return queue

    # ---- a kept heap's life between tasks (as a RocksDB local store's) -------------------

    @property
    def version(self):
        """The version (run, restore, epoch) of the state held: set by the task that leaves it."""
        return self._version

    @version.setter
    def version(self, value) -> None:
        self._version = value
        self._versioned = True

    @property
    def keepable(self) -> bool:
        """A local heap whose task set its version: a task that failed halfway never set one, and
        what it changed is dropped with it."""
        return self.local and self._versioned

    def resume(self, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int,
               clock: Optional[Callable[[], int]] = None) -> bool:
        """Ready a heap kept since this process's last task on it for the next task; False, and the
        heap dropped, when it holds other key groups (a rescale): the caller makes a new one."""
        if key_group_range != self.key_group_range or max_parallelism != self.max_parallelism:
            self.dispose()
            return False
        self.operator_name = operator_name
        self.now = clock or wall_clock_ms
        self._versioned = False
        return True

    def suspend(self) -> None:
        """The task is done with the heap its process keeps: the task's state objects go (they
        reference its functions), the entries and timers stay."""
        self.settle()
        self._reset_states()
        self.current_key = None

    def clear(self) -> None:
        """Remove every entry and timer, in place (a rebuild from a checkpoint follows; states
        the operator registered already keep their tables)."""
        for tables in self.tables.values():
            for table in tables.values():
                table.clear()
        for changed in self.changed.values():
            changed.clear()
        for queue in self.timer_queues.values():
            queue.clear()
        self._version = None

    def close(self) -> None:
        self.dispose()

    def dispose(self) -> None:
        self.tables, self.changed, self.timer_queues = {}, {}, {}
        self._reset_states()
