"""Heap keyed state (Flink's HeapKeyedStateBackend), scoped to a key and a namespace.

A table per state name maps (key, namespace) to the value. The current key is set by the
operator before each record or timer; windows set the namespace. Snapshots are rows
carrying their key group, so a restore at another parallelism takes only its range.

Changes since the last checkpoint are tracked per table as {slot: present at the last
checkpoint}: a slot created and removed between two checkpoints is no change at all.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable, Iterable, Iterator, Optional

from runtime.datastream import state as api
from runtime.state.backend import (
    TOMBSTONE, TTL_PREFIX, VOID_NAMESPACE, AggregatingStateOps, KeyedStateBackend, MapStateReads,
    ReducingStateOps, StateBase, TimerQueue, TtlEntriesOps, TtlListStateOps, TtlMapStateOps, Untracked,
    ValueStateOps, iter_rows, wall_clock_ms)
from runtime.state.key_groups import KeyGroupRange, assign_key_groups, assign_to_key_group

__all__ = ["HeapKeyedStateBackend", "HeapTimerQueue", "TTL_PREFIX", "VOID_NAMESPACE"]

_RETURN_EXPIRED = api.StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp


class _HeapState(StateBase):
    def __init__(self, backend: "HeapKeyedStateBackend", descriptor: api.StateDescriptor):
        self.backend = backend
        self.descriptor = descriptor
        self.table: dict = backend.table(descriptor.name)
        self.changed: dict = backend.changed_of(descriptor.name)
        self.namespace = VOID_NAMESPACE
        ttl = descriptor.ttl_config
        self.ttl: Optional[api.StateTtlConfig] = ttl if ttl is not None and ttl.is_enabled() else None
        # Last-write (or access) times of a TTL state's entries: a state of their own, so they
        # are checkpointed and restored with the values.
        self.stamps: dict = backend.table(TTL_PREFIX + descriptor.name) if self.ttl else {}
        self.stamps_changed: dict = backend.changed_of(TTL_PREFIX + descriptor.name) if self.ttl else {}

    def set_current_namespace(self, namespace) -> None:
        self.namespace = namespace

    def _slot(self):
        return (self.backend.current_key, self.namespace)

    def _touch(self, slot) -> None:
        """Record that ``slot`` changes (before the change): its presence at the last checkpoint."""
        if slot not in self.changed:
            self.changed[slot] = slot in self.table

    def _touch_stamps(self, slot) -> None:
        if slot not in self.stamps_changed:
            self.stamps_changed[slot] = slot in self.stamps

    def _stamp(self, slot) -> None:
        self._touch_stamps(slot)
        self.stamps[slot] = self.backend.now()

    def _get(self):
        """The current value; with a TTL, Flink's check on read: an expired value is removed and
        returned only under ReturnExpiredIfNotCleanedUp; a live one is touched on OnReadAndWrite."""
        slot = self._slot()
        value = self.table.get(slot)
        if self.ttl is None or value is None:
            return value
        if self.backend.expired(self.stamps.get(slot), self.ttl):
            self.clear()
            return value if self.ttl.get_state_visibility() is _RETURN_EXPIRED else None
        if slot not in self.stamps or self.ttl.get_update_type() is api.StateTtlConfig.UpdateType.OnReadAndWrite:
            self._stamp(slot)
        return value

    def _live(self):
        """The current value for a write that builds on it (reduce, aggregate): expired is absent."""
        slot = self._slot()
        if self.ttl is not None and slot in self.table and self.backend.expired(self.stamps.get(slot), self.ttl):
            self.clear()
        return self.table.get(slot)

    def _put(self, value) -> None:
        slot = self._slot()
        if slot not in self.changed:
            self.changed[slot] = slot in self.table
        self.table[slot] = value
        if self.ttl is not None:
            self._stamp(slot)

    def clear(self) -> None:
        self._remove_at(self._slot())

    def _remove_at(self, slot) -> None:
        if slot in self.table:
            self._touch(slot)
            del self.table[slot]
        if slot in self.stamps:
            self._touch_stamps(slot)
            del self.stamps[slot]

    def merge_namespaces(self, target, sources: Iterable) -> None:
        """Fold the sources' values into ``target`` (merging windows), removing the sources."""
        key = self.backend.current_key
        merged = self.table.get((key, target))
        for ns in sources:
            slot = (key, ns)
            if slot in self.table:
                self._touch(slot)
                value = self.table.pop(slot)
                if self.ttl is not None and slot in self.stamps:
                    self._touch_stamps(slot)
                    del self.stamps[slot]
                if value is not None:
                    merged = value if merged is None else self._merge(merged, value)
        if merged is not None:
            slot = (key, target)
            self._touch(slot)
            self.table[slot] = merged
            if self.ttl is not None:
                self._stamp(slot)


class HeapValueState(ValueStateOps, _HeapState, api.ValueState):
    """Flink's ValueState: ``update(None)`` clears it."""


class HeapListState(_HeapState, api.ListState):
    def get(self):
        return list(self._get() or ())

    def add(self, value) -> None:
        if value is None:
            raise ValueError(f"ListState '{self.descriptor.name}': cannot add None")
        slot = self._slot()
        if slot not in self.changed:
            self.changed[slot] = slot in self.table
        self.table.setdefault(slot, []).append(value)

    def add_all(self, values) -> None:
        for v in values:
            self.add(v)

    def update(self, values) -> None:
        self.clear()
        self.add_all(values)

    def _merge(self, a, b):
        return a + b


class HeapMapState(MapStateReads, _HeapState, api.MapState):
    def _map(self, create: bool = False) -> dict:
        slot = self._slot()
        m = self.table.get(slot)
        if create:
            self._touch(slot)
            if m is None:
                m = self.table[slot] = {}
        return m if m is not None else {}

    def put(self, key, value) -> None:
        self._map(True)[key] = value

    def put_all(self, dict_value) -> None:
        self._map(True).update(dict_value)

    def remove(self, key) -> None:
        m = self._map()
        if key in m:
            self._touch(self._slot())
            del m[key]
        if not m:
            self.clear()


class _HeapTtlEntries:
    """The primitives of per-entry TTL (runtime.state.backend.TtlEntriesOps) on the heap: the
    times in the TTL table under the same slot as the values, both mutated in place."""

    def _where(self):
        return self._slot()

    def _current_entries(self) -> tuple:
        slot = self._slot()
        return self.table.get(slot), self.stamps.get(slot)

    def _store_at(self, slot, values, times) -> None:
        if not values:
            self._remove_at(slot)
            return
        self._touch(slot)
        self.table[slot] = values
        self._touch_stamps(slot)
        self.stamps[slot] = times

    def _append_entries(self, values: list) -> None:
        slot = self._slot()
        now = self.backend.now()
        current = self.table.get(slot)
        if current is None:
            self._store_at(slot, values, [now] * len(values))
            return
        times = self._aligned(current, self.stamps.get(slot), now)
        self._touch(slot)
        current.extend(values)
        self._touch_stamps(slot)
        times.extend([now] * len(values))
        self.stamps[slot] = times


class HeapTtlListState(TtlListStateOps, _HeapTtlEntries, HeapListState):
    """A ListState with a TTL: each element expires on its own (Flink's TtlListState)."""


class HeapTtlMapState(TtlMapStateOps, _HeapTtlEntries, HeapMapState):
    """A MapState with a TTL: each entry expires on its own (Flink's TtlMapState)."""


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
_TTL_CLASSES = {HeapListState: HeapTtlListState, HeapMapState: HeapTtlMapState}


class HeapTimerQueue(TimerQueue):
    """Flink's HeapPriorityQueueSet: a heap of timers and the set of live ones (a deleted timer
    stays in the heap until popped)."""

    def __init__(self):
        self.heap: list = []
        self.live: set = set()
        self.seq = itertools.count()
        self.changed: dict = {}     # timer -> live at the last checkpoint

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


class HeapKeyedStateBackend(KeyedStateBackend):
    def __init__(self, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int,
                 clock: Optional[Callable[[], int]] = None):
        self.operator_name = operator_name
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.tables: dict[str, dict] = {}
        self.changed: dict[str, dict] = {}      # state name -> {slot: present at the last checkpoint}
        self.states: dict[str, _HeapState] = {}
        self.timer_queues: dict[str, HeapTimerQueue] = {}
        self.current_key: Any = None
        self.now = clock or wall_clock_ms      # processing time, which state TTL is measured in

    def table(self, name: str) -> dict:
        return self.tables.setdefault(name, {})

    def changed_of(self, name: str) -> dict:
        return self.changed.setdefault(name, {} if self.tracking else Untracked())

    def track_changes(self, enabled: bool) -> None:
        super().track_changes(enabled)
        fresh = dict if enabled else Untracked
        for name in self.changed:
            self.changed[name] = fresh()
        for state in self.states.values():
            state.changed = self.changed_of(state.descriptor.name)
            if state.ttl:
                state.stamps_changed = self.changed_of(TTL_PREFIX + state.descriptor.name)
        for queue in self.timer_queues.values():
            queue.changed = fresh()

    def set_current_key(self, key) -> None:
        self.current_key = key

    def get_partitioned_state(self, descriptor: api.StateDescriptor) -> _HeapState:
        """The state object for ``descriptor``; one per name, shared by all keys."""
        existing = self.states.get(descriptor.name)
        if existing is not None:
            self._check_registration(existing, descriptor)
            return existing
        cls = _STATE_CLASSES.get(type(descriptor))
        if cls is None:
            raise TypeError(f"{self.operator_name}: unsupported state descriptor {descriptor!r}")
        ttl = descriptor.ttl_config
        if ttl is not None and ttl.is_enabled():
            cls = _TTL_CLASSES.get(cls, cls)
        state = self.states[descriptor.name] = cls(self, descriptor)
        return state

    def keys(self, state_name: str, namespace=VOID_NAMESPACE) -> list:
        return [k for (k, ns) in self.tables.get(state_name, {}) if ns == namespace]

    def snapshot(self) -> Iterator[tuple]:
        """Rows (key_group, state_name, namespace, key, value) of every entry."""
        self._drop_expired()
        for name, table in self.tables.items():
            if not table:
                continue
            entries = list(table.items())
            # Hashing every key to its group is the bulk of a snapshot: vectorised, once per state.
            key_groups = assign_key_groups([key for (key, _), _ in entries], self.max_parallelism,
                                           self.key_type).tolist()
            for key_group, ((key, ns), value) in zip(key_groups, entries):
                yield key_group, name, ns, key, value

    def changes(self) -> Iterator[tuple]:
        """Rows of the entries changed since the last checkpoint; a removed one with TOMBSTONE."""
        self._drop_expired()
        for name, changed in self.changed.items():
            if not changed:
                continue
            table = self.tables.get(name, {})
            entries = []
            for slot, was_present in changed.items():
                if slot in table:
                    entries.append((slot, table[slot]))
                elif was_present:
                    entries.append((slot, TOMBSTONE))
            if not entries:
                continue
            key_groups = assign_key_groups([key for (key, _), _ in entries], self.max_parallelism,
                                           self.key_type).tolist()
            for key_group, ((key, ns), value) in zip(key_groups, entries):
                yield key_group, name, ns, key, value

    def change_count(self) -> int:
        return sum(len(c) for c in self.changed.values())

    def mark_checkpointed(self) -> None:
        for changed in self.changed.values():
            changed.clear()
        for queue in self.timer_queues.values():
            queue.mark_checkpointed()

    def _drop_expired(self) -> None:
        """Flink's cleanup in full snapshot: expired entries are not checkpointed."""
        for state in self.states.values():
            if isinstance(state, TtlEntriesOps):
                for slot, times in list(state.stamps.items()):
                    state.cleanup_at(slot, state.table.get(slot), times)
            elif state.ttl is not None:
                for slot in [slot for slot, stamp in state.stamps.items() if self.expired(stamp, state.ttl)]:
                    state._remove_at(slot)

    def restore(self, rows: Iterable[tuple]) -> None:
        """Take the rows of this backend's key-group range (others belong to other subtasks)."""
        chunks = rows.column_chunks() if hasattr(rows, "column_chunks") else None
        if chunks is not None:
            # Restored from state files, which were read for this range only: load column-wise.
            for name, _, nss, keys, values in chunks:
                self.table(name).update(zip(zip(keys, nss), values))
            return
        kgr = self.key_group_range
        for key_group, name, ns, key, value in rows:
            if kgr.contains(key_group):
                self.table(name)[(key, ns)] = value

    def apply(self, rows: Iterable[tuple]) -> None:
        """Full or incremental rows, in order: a TOMBSTONE value removes the entry."""
        kgr = self.key_group_range
        for key_group, name, ns, key, value in iter_rows(rows):
            if kgr is not None and not kgr.contains(key_group):
                continue
            if value is TOMBSTONE:
                self.tables.get(name, {}).pop((key, ns), None)
            else:
                self.table(name)[(key, ns)] = value

    def create_timer_queue(self, name: str) -> HeapTimerQueue:
        queue = self.timer_queues[name] = HeapTimerQueue()
        queue.changed = {} if self.tracking else Untracked()
        return queue

    def dispose(self) -> None:
        self.tables, self.changed, self.states, self.timer_queues = {}, {}, {}, {}
