"""Keyed state in an embedded RocksDB store (Flink's EmbeddedRocksDBStateBackend), on ``rocksdict``.

The backend is split by concept, one module each:

* ``rocksdb_keys``: key serialization, the store's key layout;
* ``rocksdb_codecs``: how values are stored (typed without pickling where declared);
* ``rocksdb_states``: the state classes (value, list, map, reducing, aggregating, TTL lists and maps);
* ``rocksdb_timers``: the timer queue;
* ``rocksdb_read_ahead``: the current key and the batch's reads;
* ``rocksdb_write_buffer``: the buffered, change-tracked writes;
* ``rocksdb_store``: the store's lifecycle and version (open, resume, suspend, close, dispose, destroy);
* ``rocksdb_snapshots``: reading entries in key order, full snapshots and increments;
* ``rocksdb_restore``: writing restored rows.

``RocksDBKeyedStateBackend`` here puts them together and registers the states of an operator.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional

from runtime.datastream import state as api
from runtime.state.backend import KeyedStateBackend, Untracked, wall_clock_ms
from runtime.state.key_groups import KeyGroupRange
from runtime.state.rocksdb_codecs import Codec, codec_of
from runtime.state.rocksdb_keys import encode_key
from runtime.state.rocksdb_read_ahead import RocksDBReadAhead
from runtime.state.rocksdb_restore import RocksDBRestore
from runtime.state.rocksdb_snapshots import RocksDBSnapshots
from runtime.state.rocksdb_states import STATE_CLASSES, TTL_CLASSES, RocksDBState, value_type
from runtime.state.rocksdb_store import (
    CorruptStateStoreException, RocksDBStore, StateStoreException, StateStoreInUseException)
from runtime.state.rocksdb_timers import RocksDBTimerQueue
from runtime.state.rocksdb_write_buffer import RocksDBWriteBuffer

__all__ = ["RocksDBKeyedStateBackend", "RocksDBTimerQueue", "StateStoreException",
           "CorruptStateStoreException", "StateStoreInUseException"]


class RocksDBKeyedStateBackend(RocksDBStore, RocksDBReadAhead, RocksDBWriteBuffer, RocksDBSnapshots, RocksDBRestore,
                               KeyedStateBackend):
    """Keyed state in a RocksDB store at ``path`` (created when missing).

    ``temporary``: the directory is removed when the backend is disposed (a store for one
    task, when the caller gives no directory to keep).
    """

    def __init__(self, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int,
                 path: str, clock: Optional[Callable[[], int]] = None, temporary: bool = False):
        self.path = os.path.abspath(path)
        self.temporary = temporary
        self.local = not temporary
        self._written = 0               # bytes written into the store since it was opened
        self._key_cache: dict = {}
        self.db = self._open()
        self._meta = self._read_meta()
        self._sids: dict[str, tuple] = {}          # name -> (sid bytes, codec)
        self._names: dict[bytes, tuple] = {}       # sid bytes -> (name, codec)
        for name, (sid, type_info) in self._meta["states"].items():
            self._index_state(name, sid, type_info)
        self._begin(operator_name, key_group_range, max_parallelism, clock)

    def _begin(self, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int,
               clock: Optional[Callable[[], int]]) -> None:
        """Ready the open store for a task."""
        self.operator_name = operator_name
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.now = clock or wall_clock_ms
        self.states: dict[str, RocksDBState] = {}
        self.timer_queues: dict[str, RocksDBTimerQueue] = {}
        self.changed: dict[bytes, bool] = {}       # state entry key -> present at the last checkpoint
        self.pending: dict[bytes, Optional[bytes]] = {}    # writes not yet in the store (None: a delete)
        self._pending_bytes = 0
        self.current_key: Any = None
        self.kg, self.kenc = b"\x00\x00", encode_key(None)
        self._batch: Optional[dict] = None          # the keys of the batch being processed
        self._prefetched: dict = {}                 # entry key -> stored bytes, read for the batch
        self._prefetched_sids: set = set()
        self._last_read: Optional[bytes] = None
        self._last_present = False
        self._begin_version(operator_name, key_group_range, max_parallelism)

    def track_changes(self, enabled: bool) -> None:
        super().track_changes(enabled)
        fresh = dict if enabled else Untracked
        self.changed = fresh()
        for queue in self.timer_queues.values():
            queue.changed = fresh()

    def _index_state(self, name: str, sid: int, type_info) -> None:
        sid_bytes = sid.to_bytes(2, "big")
        codec = codec_of(type_info)
        self._sids[name] = (sid_bytes, codec)
        self._names[sid_bytes] = (name, codec)

    def state_id(self, name: str, type_info=None) -> tuple[bytes, Optional[Codec]]:
        """The id and codec of state ``name``, registered in the store's metadata when new. The
        type of a state is fixed by the first registration that declares one."""
        known = self._meta["states"].get(name)
        if known is not None and (known[1] is not None or type_info is None):
            return self._sids[name]
        sid = known[0] if known is not None else len(self._meta["states"]) + 1
        if sid >= 0xFFFF:
            raise ValueError(f"{self.operator_name}: too many states in one operator")
        self._meta["states"][name] = (sid, type_info)
        self._index_state(name, sid, type_info)
        self._write_meta()
        return self._sids[name]

    def get_partitioned_state(self, descriptor: api.StateDescriptor) -> RocksDBState:
        existing = self.states.get(descriptor.name)
        if existing is not None:
            self._check_registration(existing, descriptor)
            return existing
        cls = STATE_CLASSES.get(type(descriptor))
        if cls is None:
            raise TypeError(f"{self.operator_name}: unsupported state descriptor {descriptor!r}")
        ttl = descriptor.ttl_config
        if ttl is not None and ttl.is_enabled():
            cls = TTL_CLASSES.get(cls, cls)
        sid, codec = self.state_id(descriptor.name, value_type(descriptor))
        state = self.states[descriptor.name] = cls(self, descriptor, sid, codec)
        return state

    def create_timer_queue(self, name: str) -> RocksDBTimerQueue:
        queue = self.timer_queues[name] = RocksDBTimerQueue(self, name[:1].encode())
        queue.changed = {} if self.tracking else Untracked()
        return queue
