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
  ignored; a ``KeyedRows`` from ``runtime.state.snapshot_reader`` is loaded column-wise);
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

from runtime.datastream import state as api
from runtime.common.typeinfo import BasicTypeInfo
from runtime.state.schema_evolution import StateMigrationException, check_restored_type
from runtime.state.ttl import TtlState, TtlStateFactory, ttl_enabled

VOID_NAMESPACE = None

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


STATE_DESCRIPTORS = (api.ValueStateDescriptor, api.ListStateDescriptor, api.MapStateDescriptor,
                     api.ReducingStateDescriptor, api.AggregatingStateDescriptor)


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
    restored_types: dict = {}  # state name -> the type its checkpoint stored it as, until it registers again
    states: dict               # state name -> its state object (``.descriptor``), as the operator registered it
    internal_states: dict      # state name -> the backend's own state object (a TTL'd state's values and times)
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

    def get_partitioned_state(self, descriptor: api.StateDescriptor):
        """The state object for ``descriptor``, one per name, shared by all keys: the backend's
        own (``create_internal_state``), decorated when the descriptor enables TTL
        (runtime.state.ttl)."""
        existing = self.states.get(descriptor.name)
        if existing is not None:
            self._check_registration(existing, descriptor)
            return existing
        if type(descriptor) not in STATE_DESCRIPTORS:
            raise TypeError(f"{self.operator_name}: unsupported state descriptor {descriptor!r}")
        state = (TtlStateFactory.create_state(self, descriptor, self._internal_state) if ttl_enabled(descriptor)
                 else self._internal_state(descriptor))
        self.states[descriptor.name] = state
        self._migrate_restored(descriptor, state)
        return state

    def _migrate_restored(self, descriptor: api.StateDescriptor, state) -> None:
        """The restored values of a state whose stored type differs from the registered one,
        migrated (or refused) as runtime.state.schema_evolution says, through the state's own
        interface, so both backends migrate alike (Flink migrates at registration too)."""
        stored = self.restored_types.pop(descriptor.name, None)
        migrate = check_restored_type(self.operator_name, descriptor.name, stored, descriptor.type_info)
        if migrate is None:
            return
        kind = type(descriptor).__name__
        if kind not in ("ValueStateDescriptor", "ListStateDescriptor", "MapStateDescriptor"):
            if isinstance(stored, BasicTypeInfo):
                return      # a widened number: the values are those of the new type already
            raise StateMigrationException(
                f"{self.operator_name}: the {kind[:-len('StateDescriptor')].lower()} state '{descriptor.name}' "
                f"was checkpointed as {stored} and is now registered as {descriptor.type_info}: only value, list "
                f"and map states migrate their values on restore. Migrate it offline with SavepointWriter "
                f"(docs/operations/state-processor.md).")
        previous = self.current_key
        for key in self.keys(descriptor.name):
            self.set_current_key(key)
            if kind == "ValueStateDescriptor":
                state.update(migrate(state.value()))
            elif kind == "ListStateDescriptor":
                state.update(migrate(list(state.get() or ())))
            else:
                entries = migrate(dict(state.items()))
                state.clear()
                state.put_all(entries)
        if previous is not None:
            self.set_current_key(previous)

    def _internal_state(self, descriptor: api.StateDescriptor):
        state = self.internal_states[descriptor.name] = self.create_internal_state(descriptor)
        return state

    @abstractmethod
    def create_internal_state(self, descriptor: api.StateDescriptor):
        """A state of the descriptor's kind without TTL (Flink's KeyedStateFactory), also the
        values and the times of a TTL'd state."""

    def _reset_states(self) -> None:
        """Forget the task's state objects (they reference its functions); the entries stay."""
        self.states = {}
        self.internal_states = {}

    def _drop_expired(self) -> None:
        """Flink's cleanup in full snapshot: expired entries are not checkpointed."""
        for state in list(self.states.values()):
            if isinstance(state, TtlState):
                state.cleanup_full_snapshot()

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
