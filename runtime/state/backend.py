"""What a keyed state backend is (Flink's KeyedStateBackend and PriorityQueueSetFactory).

Two backends implement it: the heap backend (``runtime.state.heap``, Flink's
HeapKeyedStateBackend, ``state.backend.type: hashmap``) and the embedded RocksDB backend
(``runtime.state.rocksdb``, Flink's EmbeddedRocksDBStateBackend, ``rocksdb``). The task layer
uses only what is here:

* the current key: ``set_current_key`` / ``get_current_key`` (and the ``current_key``
  attribute), set by the operator before each record or timer;
* ``get_partitioned_state(descriptor)``: Value, List, Map, Reducing and Aggregating state,
  scoped to the current key and the state's namespace (``set_current_namespace``, windows),
  ``merge_namespaces(target, sources)`` for merging windows, and state TTL;
* ``keys(state_name, namespace)``: the keys holding a value of a state in a namespace;
* checkpoints: ``snapshot()`` yields the rows ``(key_group, state_name, namespace, key,
  value)`` of the whole state, ``restore(rows)`` takes them (rows of other key groups are
  ignored; a ``KeyedRows`` from ``runtime.state.snapshot`` is loaded column-wise);
* incremental checkpoints: the backend tracks what changed since ``mark_checkpointed()``
  (or since it was built or restored): ``changes()`` yields rows of the changed entries, a
  removed entry as a row whose value is ``TOMBSTONE``; ``apply(rows)`` applies full or
  incremental rows (a tombstone removes the entry). Neither ``restore`` nor ``apply`` counts
  as a change: they rebuild a checkpointed state;
* timers: ``create_timer_queue(name)`` gives the timer service a queue of
  ``(timestamp, key, namespace)`` ordered by timestamp (heap queues for the heap backend,
  queues stored in RocksDB for the RocksDB backend), also tracking its changes;
* ``dispose()``: release what the backend holds (the RocksDB backend closes its store).

A change is tracked per (state, key, namespace): a changed list or map is one row with its
whole value, as in a full snapshot. Changes are tracked at writes through the state objects:
a value mutated in place after a read (heap only: RocksDB hands out copies) is not a change
until it is written back, as in Flink.
"""
from __future__ import annotations

import itertools
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional

VOID_NAMESPACE = None
TTL_PREFIX = "_ttl/"        # the state of a TTL state's entry times (a list's or map's: one per entry)

# Flink's configuration key for the backend (``state.backend.type``), and its values.
STATE_BACKEND = "state.backend.type"
HASHMAP = "hashmap"
ROCKSDB = "rocksdb"
STATE_BACKENDS = (HASHMAP, ROCKSDB)
DEFAULT_STATE_BACKEND = HASHMAP
# Sluice's: a heap state's map holding this many entries as Python objects packs them into columns
# (runtime.state.state_map), about 40 bytes an entry instead of about 90; 0: never.
HEAP_COMPACT_AFTER = "sluice.state.heap.compact-after-entries"
DEFAULT_HEAP_COMPACT_AFTER = 262_144


def state_backend_type(configuration) -> str:
    """The backend ``configuration`` (a dict or a Configuration) names, checked."""
    if configuration is None:
        return DEFAULT_STATE_BACKEND
    raw = configuration.get(STATE_BACKEND) if isinstance(configuration, dict) else \
        configuration.get_string(STATE_BACKEND)
    if raw is None:
        return DEFAULT_STATE_BACKEND
    name = str(raw).strip().lower()
    if name not in STATE_BACKENDS:
        raise ValueError(f"'{STATE_BACKEND}' must be one of {', '.join(STATE_BACKENDS)}, got {raw!r}")
    return name


def heap_compact_after(configuration: dict) -> Optional[int]:
    """The entries after which a heap state's map packs them (``HEAP_COMPACT_AFTER``, by default
    ``DEFAULT_HEAP_COMPACT_AFTER``), checked; None: never (set to 0)."""
    raw = (configuration or {}).get(HEAP_COMPACT_AFTER)
    if raw is None:
        return DEFAULT_HEAP_COMPACT_AFTER
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = -1
    if value < 0:
        raise ValueError(f"'{HEAP_COMPACT_AFTER}' must be a whole number of entries (for example "
                         f"{DEFAULT_HEAP_COMPACT_AFTER}), or 0 to keep every entry a Python object; got {raw!r}")
    return value or None


class _Tombstone:
    """The value of a removed entry in incremental rows: one instance, also after pickling."""

    __slots__ = ()
    _instance: Optional["_Tombstone"] = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __reduce__(self):
        return (_Tombstone, ())

    def __repr__(self) -> str:
        return "TOMBSTONE"

    def __bool__(self) -> bool:
        return False


TOMBSTONE = _Tombstone()


@dataclass(frozen=True)
class KeyedColumns:
    """One state's entries of a snapshot chunk as columns, when they are all in the void
    namespace with string keys: what a backend's scan gives ``column_chunks`` callers instead
    of a Python row per entry. ``values`` as the state's codec stored them (int64, string...)."""

    key_groups: Any        # pyarrow int32 array
    keys: Any              # pyarrow string array
    values: Any            # pyarrow array


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class TimerQueue(ABC):
    """A deduplicating queue of timers ``(timestamp, key, namespace)``, smallest timestamp first
    (Flink's KeyGroupedInternalPriorityQueue of TimerHeapInternalTimer)."""

    @abstractmethod
    def add(self, timestamp: int, key, namespace) -> None:
        """Register a timer; registering it again is a no-op."""

    @abstractmethod
    def delete(self, timestamp: int, key, namespace) -> None: ...

    @abstractmethod
    def pop_until(self, time: int) -> Iterator[tuple]:
        """Remove and yield the timers at or before ``time`` in timestamp order, including those
        added while iterating."""

    @abstractmethod
    def __iter__(self) -> Iterator[tuple]:
        """The live timers ``(timestamp, key, namespace)``."""

    @abstractmethod
    def timers_with_key_groups(self, max_parallelism: int) -> Iterator[tuple]:
        """The live timers as ``(key_group, timestamp, key, namespace)``."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def restore(self, timers: Iterable[tuple]) -> None:
        """Add ``(timestamp, key, namespace)`` timers of a checkpoint (not a change)."""

    @abstractmethod
    def remove_restored(self, timers: Iterable[tuple]) -> None:
        """Remove timers a checkpoint's increment deleted (not a change)."""

    @abstractmethod
    def changes(self, max_parallelism: int) -> Iterator[tuple]:
        """``(key_group, timestamp, key, namespace, live)`` of each timer added (live True) or
        removed (live False) since ``mark_checkpointed``."""

    @abstractmethod
    def mark_checkpointed(self) -> None: ...


class Untracked(dict):
    """Where a backend records an epoch's changes when its snapshot is full: nothing is recorded
    (every entry reads as recorded already), so writes pay no bookkeeping and hold no memory."""

    def __contains__(self, key) -> bool:
        return True


class KeyedStateBackend(ABC):
    """The interface of a keyed state backend (see the module's doc)."""

    tracking = True     # whether changes are recorded (for an incremental snapshot)

    operator_name: str
    max_parallelism: int
    key_type: Any = None       # how keys hash into key groups (runtime.state.key_groups)
    key_group_range: Any
    states: dict               # state name -> its state object (``.descriptor``)
    current_key: Any = None
    now: Callable[[], int]     # processing time, which state TTL is measured in
    # Whether the state outlives the task on the executor (a RocksDB store at a kept path, a heap
    # kept in its worker): such a backend has a ``version`` and ``clear()``.
    local: bool = False

    def set_current_key(self, key) -> None:
        self.current_key = key

    def track_changes(self, enabled: bool) -> None:
        """Whether this epoch records what it changes: only an incremental snapshot reads that.
        Set before the epoch writes (restored rows are not changes)."""
        self.tracking = enabled

    def prepare_keys(self, keys: list) -> None:
        """The keys a batch of records is about to set, in order: a backend that needs each key's
        key group may compute them at once."""

    def get_current_key(self):
        return self.current_key

    @abstractmethod
    def get_partitioned_state(self, descriptor): ...

    @abstractmethod
    def keys(self, state_name: str, namespace=VOID_NAMESPACE) -> list: ...

    @abstractmethod
    def snapshot(self) -> Iterator[tuple]: ...

    @abstractmethod
    def restore(self, rows: Iterable[tuple]) -> None: ...

    @abstractmethod
    def changes(self) -> Iterator[tuple]: ...

    @abstractmethod
    def apply(self, rows: Iterable[tuple]) -> None: ...

    @abstractmethod
    def mark_checkpointed(self) -> None: ...

    @abstractmethod
    def change_count(self) -> int:
        """How many (state, key, namespace) entries changed since the last checkpoint (an
        upper bound of the rows ``changes()`` yields): to choose a full or incremental one."""

    @abstractmethod
    def create_timer_queue(self, name: str) -> TimerQueue: ...

    def dispose(self) -> None:
        """Release the backend's resources; the backend is not used afterwards."""

    def expired(self, stamp: Optional[int], ttl) -> bool:
        """Flink's rule: expired once last write (or access) + ttl <= now. A value restored
        without a time (TTL enabled later) counts from its first access."""
        return stamp is not None and stamp + ttl.get_ttl_millis() <= self.now()

    def _check_registration(self, existing, descriptor) -> None:
        if type(existing.descriptor) is not type(descriptor):
            raise ValueError(
                f"{self.operator_name}: state '{descriptor.name}' was registered as a "
                f"{type(existing.descriptor).__name__}, now requested as a "
                f"{type(descriptor).__name__}; give each state its own name.")


def chunked(items: Iterable, size: int) -> Iterator[list]:
    """``items`` as lists of ``size`` (the last one shorter)."""
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def rows_by_state(rows: Iterable[tuple]) -> dict[str, list]:
    """Rows (key_group, state_name, namespace, key, value) grouped by state, in their order."""
    by_state: dict = {}
    for row in rows:
        by_state.setdefault(row[1], []).append(row)
    return by_state


def iter_rows(rows) -> Iterator[tuple]:
    """Rows of a restore or an apply: plain rows, or a KeyedRows' column-wise chunks."""
    chunks = rows.column_chunks() if hasattr(rows, "column_chunks") else None
    if chunks is None:
        yield from rows
        return
    for name, kgs, nss, keys, values in chunks:
        for kg, ns, key, value in zip(kgs, nss, keys, values):
            yield kg, name, ns, key, value


# ---- state semantics shared by the backends --------------------------------------------------
# Each backend's state classes give the primitives (``_get``: the current value, checked for
# TTL; ``_live``: the value a write builds on; ``_put``; ``_map``: a map state's current dict);
# these give Flink's semantics on top, once. A backend's class lists the mixin first.

class StateBase:
    """What every backend's state objects share."""

    def _merge(self, a, b):
        raise NotImplementedError(f"{type(self).__name__} cannot be merged")


class ValueStateOps:
    def value(self):
        return self._get()

    def update(self, value) -> None:
        if value is None:
            self.clear()
        else:
            self._put(value)


class ReducingStateOps:
    def get(self):
        return self._get()

    def add(self, value) -> None:
        current = self._live()
        self._put(value if current is None else self.descriptor.reduce_function(current, value))

    def _merge(self, a, b):
        return self.descriptor.reduce_function(a, b)


class AggregatingStateOps:
    def get(self):
        acc = self._get()
        return None if acc is None else self.descriptor.agg_function.get_result(acc)

    def add(self, value) -> None:
        fn = self.descriptor.agg_function
        acc = self._live()
        self._put(fn.add(value, fn.create_accumulator() if acc is None else acc))

    def _merge(self, a, b):
        return self.descriptor.agg_function.merge(a, b)


class MapStateReads:
    def get(self, key):
        return self._map().get(key)

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


# ---- per-entry TTL of list and map state (Flink's TtlListState and TtlMapState) --------------
# A TTL'd list keeps the times of its elements as a list beside it (a TTL'd map: a dict of its
# entries' times), in the state's TTL_PREFIX state: checkpointed, restored and rescaled with the
# values, so each element keeps its own time. Expired entries are filtered out and removed by the
# read that finds them (Flink leaves a partly expired list's elements to its background cleanup,
# which shows only under ReturnExpiredIfNotCleanedUp: here they are returned once), and left out
# of every snapshot. Each backend gives the primitives: ``_current_entries()``, the (values,
# times), (None, None) when absent; ``_store_at(where, values, times)``, empty values: removed;
# ``_where()``, the current key and namespace as ``_store_at`` takes them; for lists
# ``_append_entries(values)`` (added now). A list and map without TTL keep their own classes.

class TtlEntriesOps:
    """What a TTL'd list and map share: the checks of Flink's AbstractTtlDecorator per entry."""

    def _store(self, values, times) -> None:
        self._store_at(self._where(), values, times)

    def _clock(self) -> tuple[int, int]:
        """(now, the latest time of an entry that has expired by now)."""
        now = self.backend.now()
        return now, now - self.ttl.get_ttl_millis()

    def _refresh_on_read(self) -> bool:
        return self.ttl.get_update_type() is self.ttl.UpdateType.OnReadAndWrite

    def _return_expired(self) -> bool:
        return self.ttl.get_state_visibility() is self.ttl.StateVisibility.ReturnExpiredIfNotCleanedUp

    def cleanup_at(self, where, values, times) -> None:
        """Flink's cleanup in full snapshot for one key and namespace: its expired entries removed."""
        if values is None:
            self._store_at(where, None, None)      # times left without values
            return
        now, limit = self._clock()
        kept = self._without(values, self._aligned(values, times, now), lambda t: t <= limit)
        if kept is not None:
            self._store_at(where, *kept)

    def merge_namespaces(self, target, sources: Iterable) -> None:
        """Fold the sources' entries into ``target`` (merging windows), each keeping its time."""
        current = self.namespace
        try:
            merged = None
            for ns in [target, *(ns for ns in sources if ns != target)]:
                self.set_current_namespace(ns)
                values, times = self._current_entries()
                if values:
                    times = self._aligned(values, times, self.backend.now())
                    merged = (values, times) if merged is None else self._concat(merged, (values, times))
                    if ns != target:
                        self.clear()
            self.set_current_namespace(target)
            if merged is not None:
                self._store(*merged)
        finally:
            self.set_current_namespace(current)


class TtlListStateOps(TtlEntriesOps):
    """Flink's TtlListState: each element has its own time."""

    @staticmethod
    def _aligned(values: list, times, now) -> list:
        """The elements' times (``times`` itself when it has one for each); elements restored
        without one (TTL enabled later) count from ``now``."""
        if times is not None and len(times) >= len(values):
            return times
        times = list(times or ())
        return times + [now] * (len(values) - len(times))

    @staticmethod
    def _without(values: list, times: list, gone: Callable) -> Optional[tuple]:
        """(values, times) without the elements whose time is ``gone``; None when none is."""
        keep = [i for i, t in enumerate(times) if not gone(t)]
        if len(keep) == len(values):
            return None
        return [values[i] for i in keep], [times[i] for i in keep]

    @staticmethod
    def _concat(a: tuple, b: tuple) -> tuple:
        return a[0] + b[0], a[1] + b[1]

    def get(self):
        values, times = self._current_entries()
        if not values:
            return []
        now, limit = self._clock()
        stamped = self._aligned(values, times, now)
        kept = self._without(values, stamped, lambda t: t <= limit)
        live, live_times = (values, stamped) if kept is None else kept
        if self._refresh_on_read():
            live_times = [now] * len(live)
        if live_times is not times:     # expired elements removed, times added or refreshed
            self._store(live, live_times)
        return list(values if self._return_expired() else live)

    def _checked(self, values) -> list:
        values = list(values)
        if any(v is None for v in values):
            raise ValueError(f"ListState '{self.descriptor.name}': cannot add None")
        return values

    def add(self, value) -> None:
        self._append_entries(self._checked([value]))

    def add_all(self, values) -> None:
        values = self._checked(values)
        if values:
            self._append_entries(values)

    def update(self, values) -> None:
        values = self._checked(values)
        self._store(values, [self.backend.now()] * len(values))


_ABSENT = object()


class TtlMapStateOps(TtlEntriesOps):
    """Flink's TtlMapState: each entry has its own time; a read refreshes (OnReadAndWrite) only
    the entries it reads."""

    @staticmethod
    def _aligned(values: dict, times, now) -> dict:
        """The entries' times (``times`` itself when it has one for each); entries restored
        without one (TTL enabled later) count from ``now``."""
        if times is not None and len(times) >= len(values):
            return times
        times = times or {}
        return {k: times.get(k, now) for k in values}

    @staticmethod
    def _without(values: dict, times: dict, gone: Callable) -> Optional[tuple]:
        """``values`` and ``times`` without the entries whose time is ``gone`` (removed in place);
        None when none is."""
        expired = [k for k, t in times.items() if gone(t)]
        if not expired:
            return None
        for k in expired:
            values.pop(k, None)
            del times[k]
        return values, times

    @staticmethod
    def _concat(a: tuple, b: tuple) -> tuple:
        return {**a[0], **b[0]}, {**a[1], **b[1]}

    def _read(self, key):
        """The value of ``key`` checked (Flink's getWrappedWithTtlCheckAndUpdate); _ABSENT if none."""
        values, times = self._current_entries()
        if not values or key not in values:
            return _ABSENT
        now, limit = self._clock()
        stamped = self._aligned(values, times, now)
        value = values[key]
        if stamped[key] <= limit:
            del values[key], stamped[key]
            self._store(values, stamped)
            return value if self._return_expired() else _ABSENT
        refresh = self._refresh_on_read()
        if refresh:
            stamped[key] = now
        if refresh or stamped is not times:
            self._store(values, stamped)
        return value

    def _checked_all(self, refresh: bool) -> dict:
        """The entries, the expired ones removed (and returned under ReturnExpiredIfNotCleanedUp),
        the live ones refreshed when ``refresh``."""
        values, times = self._current_entries()
        if not values:
            return {}
        now, limit = self._clock()
        stamped = self._aligned(values, times, now)
        out = dict(values) if self._return_expired() else None
        expired = self._without(values, stamped, lambda t: t <= limit)
        if refresh:
            stamped = dict.fromkeys(values, now)
        if expired is not None or stamped is not times:
            self._store(values, stamped)
        return dict(values) if out is None else out

    def get(self, key):
        value = self._read(key)
        return None if value is _ABSENT else value

    def contains(self, key) -> bool:
        return self._read(key) is not _ABSENT

    def items(self):
        return list(self._checked_all(self._refresh_on_read()).items())

    def keys(self):
        return list(self._checked_all(self._refresh_on_read()).keys())

    def values(self):
        return list(self._checked_all(self._refresh_on_read()).values())

    def is_empty(self) -> bool:
        return not self._checked_all(False)

    def put(self, key, value) -> None:
        self.put_all({key: value})

    def put_all(self, dict_value) -> None:
        if not dict_value:
            return
        values, times = self._current_entries()
        now = self.backend.now()
        values = {} if values is None else values
        times = self._aligned(values, times, now)
        values.update(dict_value)
        times.update(dict.fromkeys(dict_value, now))
        self._store(values, times)

    def remove(self, key) -> None:
        values, times = self._current_entries()
        if values is not None and key in values:
            times = self._aligned(values, times, self.backend.now())
            del values[key], times[key]
            self._store(values, times)
