"""Keyed state in an embedded RocksDB store (Flink's EmbeddedRocksDBStateBackend), on ``rocksdict``.

``RocksDBKeyedStateBackend`` holds its parts, one module each, as Flink's RocksDBKeyedStateBackend
holds its own, and orchestrates them:

* ``store`` (``rocksdb_store``): the store's files, metadata (the states' ids and types, the
  version) and scans in key order;
* ``read_ahead`` (``rocksdb_read_ahead``): the current key, the key cache and the batch's reads;
* ``write_buffer`` (``rocksdb_write_buffer``): the buffered writes and the changes they make;
* ``full_snapshot`` and ``incremental_snapshot`` (``rocksdb_snapshots``, Flink's
  RocksFullSnapshotStrategy and RocksIncrementalSnapshotStrategy): a snapshot's and an increment's rows;
* ``restore_operation`` (``rocksdb_restore``): restored rows written in WriteBatches.

Beside them: ``rocksdb_keys`` (the store's key layout), ``rocksdb_codecs`` (how values are
stored), ``rocksdb_states`` (the state classes), ``rocksdb_timers`` (the timer queue); TTL is
the decorator both backends share (``runtime.state.ttl``).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Optional

from runtime.datastream import state as api
from runtime.state import kept_stores
from runtime.state.backend import VOID_NAMESPACE, KeyedStateBackend, Untracked, wall_clock_ms
from runtime.state.key_groups import KeyGroupRange
from runtime.state.rocksdb_keys import decode_key, decode_namespace
from runtime.state.rocksdb_read_ahead import RocksDBReadAhead
from runtime.state.rocksdb_restore import RocksDBRestoreOperation
from runtime.state.rocksdb_snapshots import RocksFullSnapshotStrategy, RocksIncrementalSnapshotStrategy
from runtime.state.rocksdb_states import STATE_CLASSES, RocksDBState, value_type
from runtime.state.rocksdb_store import (
    CorruptStateStoreException, RocksDBStore, StateStoreException, StateStoreInUseException)
from runtime.state.rocksdb_timers import RocksDBTimerQueue
from runtime.state.rocksdb_write_buffer import RocksDBWriteBuffer

__all__ = ["RocksDBKeyedStateBackend", "RocksDBTimerQueue", "StateStoreException",
           "CorruptStateStoreException", "StateStoreInUseException"]

log = logging.getLogger(__name__)


class RocksDBKeyedStateBackend(KeyedStateBackend):
    """Keyed state in a RocksDB store at ``path`` (created when missing).

    ``temporary``: the directory is removed when the backend is disposed (a store for one
    task, when the caller gives no directory to keep).

    The store is a directory the caller chooses (a subtask's local directory, kept across epochs);
    ``close()`` releases RocksDB's lock so that another process can open it. A reused PySpark
    worker keeps its store open between tasks instead (``suspend``, ``resume``): which stores it
    keeps is the task state manager's decision (runtime.task.task_state_manager), the registry of
    kept stores and their release to another process runtime.state.kept_stores.
    """

    on_disk = True

    def __init__(self, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int,
                 path: str, clock: Optional[Callable[[], int]] = None, temporary: bool = False):
        self.store = RocksDBStore(path, temporary)
        self.local = not temporary
        self.read_ahead = RocksDBReadAhead(self.store, max_parallelism)
        self.write_buffer = RocksDBWriteBuffer(self.store, self.read_ahead)
        self.full_snapshot = RocksFullSnapshotStrategy(self.store, self.write_buffer)
        self.incremental_snapshot = RocksIncrementalSnapshotStrategy(self.store, self.write_buffer)
        self.restore_operation = RocksDBRestoreOperation(self.store, self.write_buffer)
        self._begin(operator_name, key_group_range, max_parallelism, clock)

    def _begin(self, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int,
               clock: Optional[Callable[[], int]]) -> None:
        """Ready the open store for a task."""
        self.operator_name = operator_name
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.now = clock or wall_clock_ms
        self._reset_states()
        self.timer_queues: dict[str, RocksDBTimerQueue] = {}
        self.read_ahead.begin(max_parallelism)
        self.write_buffer.begin()
        self.store.begin(operator_name, key_group_range, max_parallelism)

    # ---- the parts' fields the task layer reads ------------------------------------------

    @property
    def path(self) -> str:
        return self.store.path

    @property
    def temporary(self) -> bool:
        return self.store.temporary

    @property
    def current_key(self) -> Any:
        return self.read_ahead.current_key

    @property
    def key_type(self) -> Any:
        return self.read_ahead.key_type

    @key_type.setter
    def key_type(self, value) -> None:
        self.read_ahead.key_type = value

    # ---- keys and states -----------------------------------------------------------------

    def set_current_key(self, key) -> None:
        self.read_ahead.set_current_key(key)

    def prepare_keys(self, keys: list) -> None:
        self.read_ahead.prepare_keys(keys)

    def track_changes(self, enabled: bool) -> None:
        super().track_changes(enabled)
        self.write_buffer.track_changes(enabled)
        for queue in self.timer_queues.values():
            queue.changed = {} if enabled else Untracked()

    def create_internal_state(self, descriptor: api.StateDescriptor) -> RocksDBState:
        sid, codec = self.store.state_id(descriptor.name, value_type(descriptor))
        return STATE_CLASSES[type(descriptor)](self, descriptor, sid, codec)

    def create_timer_queue(self, name: str) -> RocksDBTimerQueue:
        queue = self.timer_queues[name] = RocksDBTimerQueue(
            self.store, self.read_ahead, self.write_buffer, name[:1].encode())
        queue.changed = {} if self.tracking else Untracked()
        return queue

    def keys(self, state_name: str, namespace=VOID_NAMESPACE) -> list:
        known = self.store.sids.get(state_name)
        if known is None:
            return []
        self.write_buffer.flush()
        out = []
        for k, _ in self.store.state_entries(known[0], self.key_group_range):
            key, i = decode_key(k, 4)
            if decode_namespace(k, i) == namespace:
                out.append(key)
        return out

    # ---- snapshots and restores ----------------------------------------------------------

    def entries(self, key_group_range: Optional[KeyGroupRange] = None):
        """Rows (key_group, state_name, namespace, key, value) of the key groups in
        ``key_group_range`` (all by default)."""
        return self.full_snapshot.entries(key_group_range)

    def snapshot(self):
        """Every entry, read in key order: rows (key_group, state_name, namespace, key, value),
        or column chunks (``column_chunks``)."""
        self._drop_expired()
        return self.full_snapshot.snapshot(self.states)

    def changes(self):
        """The entries changed since the last checkpoint (a deleted one's value a TOMBSTONE), as
        ``snapshot`` gives every entry."""
        self._drop_expired()
        return self.incremental_snapshot.snapshot(self.states)

    def change_count(self) -> int:
        return len(self.write_buffer.changed)

    def mark_checkpointed(self) -> None:
        self.write_buffer.changed.clear()
        for queue in self.timer_queues.values():
            queue.mark_checkpointed()

    def restore(self, rows: Iterable[tuple]) -> None:
        """Take the rows of this backend's key-group range (not a change)."""
        self.restore_operation.restore(rows, self.key_group_range, self.internal_states, self.operator_name)

    def apply(self, rows: Iterable[tuple]) -> None:
        """Full or incremental rows, in order: a TOMBSTONE value removes the entry (not a change)."""
        self.restore_operation.apply(rows, self.key_group_range, self.internal_states, self.operator_name)

    # ---- the store's life: version, kept between tasks, closed ---------------------------

    @property
    def version(self):
        """The version (checkpoint or epoch) the store was at when opened, or the one set since."""
        return self.store.version

    @version.setter
    def version(self, value) -> None:
        self.write_buffer.flush()        # the version says the store holds everything written before it
        self.store.set_version(value)

    @property
    def keepable(self) -> bool:
        """Whether a process may keep the store open for its next task on it: a local store,
        open, at the version its task set."""
        return self.store.keepable

    def resume(self, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int,
               clock: Optional[Callable[[], int]] = None) -> bool:
        """Ready a store this process kept open since its last task on it for the next task
        (runtime.state.kept_stores). False, and the store closed, when its directory was removed
        or replaced since: never trusted, its files are gone (the caller opens it anew)."""
        if self.store.same_directory():
            self._begin(operator_name, key_group_range, max_parallelism, clock)
            return True
        log.warning("%s: RocksDB state store %s was removed while this process kept it open; "
                    "opening it anew (the task rebuilds it from the checkpoint)", operator_name, self.path)
        try:
            self.close()
        except Exception:       # RocksDB cannot finish its files in a folder that is gone
            self.store.db = None
        return False

    def suspend(self) -> None:
        """The task is done with a store its process keeps open: what the task held is dropped,
        the store stays open at its version (``resume`` readies it again)."""
        self.write_buffer.flush()
        self._detach()
        self.read_ahead.suspend()

    def _detach(self) -> None:
        self.timer_queues = {}
        self._reset_states()

    def clear(self) -> None:
        """Remove every entry and timer (a rebuild from a checkpoint follows)."""
        self.write_buffer.discard()
        self.read_ahead.forget()
        self.store.delete_all()
        self.write_buffer.changed.clear()
        for queue in self.timer_queues.values():
            queue.changed.clear()

    def close(self) -> None:
        """Flush and release the store (its lock), so another process can open it."""
        if self.store.db is None:
            return
        kept_stores.discard(self)
        self.write_buffer.flush()
        self._detach()
        self.store.close()

    def dispose(self) -> None:
        """The task is done with the store: closed (and a temporary one removed)."""
        self.close()
        if self.temporary:
            RocksDBStore.destroy(self.path)

    @staticmethod
    def destroy(path: str) -> None:
        """Remove a (closed) store from disk, damaged or not."""
        RocksDBStore.destroy(path)
