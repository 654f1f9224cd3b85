"""Heap keyed state (Flink's HeapKeyedStateBackend), scoped to a key and a namespace.

A table per state name maps (key, namespace) to the value. The current key is set by the
operator before each record or timer; windows set the namespace. Snapshots are rows
carrying their key group, so a restore at another parallelism takes only its range.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Iterator, Optional

from runtime.datastream import state as api
from runtime.state.key_groups import KeyGroupRange, assign_key_groups

VOID_NAMESPACE = None
TTL_PREFIX = "_ttl/"        # the state of a TTL state's entry times
_RETURN_EXPIRED = api.StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class _HeapState:
    def __init__(self, backend: "HeapKeyedStateBackend", descriptor: api.StateDescriptor):
        self.backend = backend
        self.descriptor = descriptor
        self.table: dict = backend.tables.setdefault(descriptor.name, {})
        self.namespace = VOID_NAMESPACE
        ttl = descriptor.ttl_config
        self.ttl: Optional[api.StateTtlConfig] = ttl if ttl is not None and ttl.is_enabled() else None
        # Last-write (or access) times of a TTL state's entries: a state of their own, so they
        # are checkpointed and restored with the values.
        self.stamps: dict = backend.tables.setdefault(TTL_PREFIX + descriptor.name, {}) if self.ttl else {}

    def set_current_namespace(self, namespace) -> None:
        self.namespace = namespace

    def _slot(self):
        return (self.backend.current_key, self.namespace)

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
            self.stamps[slot] = self.backend.now()
        return value

    def _live(self):
        """The current value for a write that builds on it (reduce, aggregate): expired is absent."""
        slot = self._slot()
        if self.ttl is not None and slot in self.table and self.backend.expired(self.stamps.get(slot), self.ttl):
            self.clear()
        return self.table.get(slot)

    def _put(self, value) -> None:
        slot = self._slot()
        self.table[slot] = value
        if self.ttl is not None:
            self.stamps[slot] = self.backend.now()

    def clear(self) -> None:
        self.table.pop(self._slot(), None)
        self.stamps.pop(self._slot(), None)

    def merge_namespaces(self, target, sources: Iterable) -> None:
        """Fold the sources' values into ``target`` (merging windows), removing the sources."""
        key = self.backend.current_key
        merged = self.table.get((key, target))
        for ns in sources:
            value = self.table.pop((key, ns), None)
            if value is not None:
                merged = value if merged is None else self._merge(merged, value)
        if merged is not None:
            self.table[(key, target)] = merged
            if self.ttl is not None:
                self.stamps[(key, target)] = self.backend.now()

    def _merge(self, a, b):
        raise NotImplementedError(f"{type(self).__name__} cannot be merged")


class HeapValueState(_HeapState, api.ValueState):
    def value(self):
        return self._get()

    def update(self, value) -> None:
        if value is None:
            self.clear()
        else:
            self._put(value)


class HeapListState(_HeapState, api.ListState):
    def get(self):
        return list(self._get() or ())

    def add(self, value) -> None:
        if value is None:
            raise ValueError(f"ListState '{self.descriptor.name}': cannot add None")
        self.table.setdefault(self._slot(), []).append(value)

    def add_all(self, values) -> None:
        for v in values:
            self.add(v)

    def update(self, values) -> None:
        self.clear()
        self.add_all(values)

    def _merge(self, a, b):
        return a + b


class HeapMapState(_HeapState, api.MapState):
    def _map(self, create: bool = False) -> dict:
        slot = self._slot()
        m = self.table.get(slot)
        if m is None and create:
            m = self.table[slot] = {}
        return m if m is not None else {}

    def get(self, key):
        return self._map().get(key)

    def put(self, key, value) -> None:
        self._map(True)[key] = value

    def put_all(self, dict_value) -> None:
        self._map(True).update(dict_value)

    def remove(self, key) -> None:
        m = self._map()
        m.pop(key, None)
        if not m:
            self.clear()

    def contains(self, key) -> bool:
        return key in self._map()

    def items(self):
        return list(self._map().items())

    def keys(self):
        return list(self._map().keys())

    def values(self):
        return list(self._map().values())

    def is_empty(self) -> bool:
        return not self._map()

    def _merge(self, a, b):
        return {**a, **b}


class HeapReducingState(_HeapState, api.ReducingState):
    def get(self):
        return self._get()

    def add(self, value) -> None:
        current = self._live()
        self._put(value if current is None else self.descriptor.reduce_function(current, value))

    def _merge(self, a, b):
        return self.descriptor.reduce_function(a, b)


class HeapAggregatingState(_HeapState, api.AggregatingState):
    def get(self):
        acc = self._get()
        return None if acc is None else self.descriptor.agg_function.get_result(acc)

    def add(self, value) -> None:
        fn = self.descriptor.agg_function
        acc = self._live()
        self._put(fn.add(value, fn.create_accumulator() if acc is None else acc))

    def _merge(self, a, b):
        return self.descriptor.agg_function.merge(a, b)


_STATE_CLASSES = {
    api.ValueStateDescriptor: HeapValueState,
    api.ListStateDescriptor: HeapListState,
    api.MapStateDescriptor: HeapMapState,
    api.ReducingStateDescriptor: HeapReducingState,
    api.AggregatingStateDescriptor: HeapAggregatingState,
}


class HeapKeyedStateBackend:
    def __init__(self, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int,
                 clock: Optional[Callable[[], int]] = None):
        self.operator_name = operator_name
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.tables: dict[str, dict] = {}
        self.states: dict[str, _HeapState] = {}
        self.current_key: Any = None
        self.now = clock or _wall_clock_ms      # processing time, which state TTL is measured in

    def expired(self, stamp: Optional[int], ttl: api.StateTtlConfig) -> bool:
        """Flink's rule: expired once last write (or access) + ttl <= now. A value restored
        without a time (TTL enabled later) counts from its first access."""
        return stamp is not None and stamp + ttl.get_ttl_millis() <= self.now()

    def set_current_key(self, key) -> None:
        self.current_key = key

    def get_current_key(self):
        return self.current_key

    def get_partitioned_state(self, descriptor: api.StateDescriptor) -> _HeapState:
        """The state object for ``descriptor``; one per name, shared by all keys."""
        existing = self.states.get(descriptor.name)
        if existing is not None:
            if type(existing.descriptor) is not type(descriptor):
                raise ValueError(
                    f"{self.operator_name}: state '{descriptor.name}' was registered as a "
                    f"{type(existing.descriptor).__name__}, now requested as a "
                    f"{type(descriptor).__name__}; give each state its own name.")
            return existing
        cls = _STATE_CLASSES.get(type(descriptor))
        if cls is None:
            raise TypeError(f"{self.operator_name}: unsupported state descriptor {descriptor!r}")
        ttl = descriptor.ttl_config
        if ttl is not None and ttl.is_enabled() and cls in (HeapListState, HeapMapState):
            # Flink expires each list element and map entry on its own; a whole-value TTL would
            # silently drop live entries, so refuse rather than answer differently.
            raise NotImplementedError(
                f"{self.operator_name}: state '{descriptor.name}' ({type(descriptor).__name__}) has a TTL; "
                f"per-entry TTL of ListState and MapState is not supported yet. Use a TTL on a ValueState, "
                f"ReducingState or AggregatingState, or expire entries with a timer.")
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
            key_groups = assign_key_groups([key for (key, _), _ in entries], self.max_parallelism).tolist()
            for key_group, ((key, ns), value) in zip(key_groups, entries):
                yield key_group, name, ns, key, value

    def _drop_expired(self) -> None:
        """Flink's cleanup in full snapshot: expired entries are not checkpointed."""
        for state in self.states.values():
            if state.ttl is not None:
                for slot in [slot for slot, stamp in state.stamps.items() if self.expired(stamp, state.ttl)]:
                    state.table.pop(slot, None)
                    state.stamps.pop(slot, None)

    def restore(self, rows: Iterable[tuple]) -> None:
        """Take the rows of this backend's key-group range (others belong to other subtasks)."""
        chunks = getattr(rows, "chunks", None)
        if chunks is not None:
            # Restored from state files, which were read for this range only: load column-wise.
            for name, _, nss, keys, values in chunks:
                self.tables.setdefault(name, {}).update(zip(zip(keys, nss), values))
            return
        kgr = self.key_group_range
        for key_group, name, ns, key, value in rows:
            if kgr.contains(key_group):
                self.tables.setdefault(name, {})[(key, ns)] = value
