"""The RocksDB backend's write buffer: state writes wait in a dict and reach the store in one
WriteBatch, each recorded as a change for the next incremental snapshot.

Its own module because every state read and write of an epoch goes through it: what it keeps
(``pending``) is what a read, a scan or a snapshot must see before the store does, and what it
records (``changed``) is what an incremental snapshot writes.
"""
from __future__ import annotations

from typing import Optional

from runtime.state.backend import Untracked
from runtime.state.rocksdb_read_ahead import ABSENT, RocksDBReadAhead
from runtime.state.rocksdb_store import RocksDBStore

__all__ = ["RocksDBWriteBuffer"]

# State writes wait in a dict until this many bytes (or a scan, a snapshot, the version, close):
# a Python call into RocksDB costs more than the write, and a key written again in the epoch is
# written once. Flink's RocksDBWriteBatchWrapper batches the same way (for restores).
_WRITE_BUFFER = 32 << 20


class RocksDBWriteBuffer:
    """The writes of a RocksDBKeyedStateBackend: ``pending`` (key -> bytes, None: a delete) and
    ``changed`` (key -> present at the last checkpoint), flushed into ``store``. Reads that miss
    ``pending`` go to ``read_ahead``."""

    def __init__(self, store: RocksDBStore, read_ahead: RocksDBReadAhead):
        self.store = store
        self.read_ahead = read_ahead
        self.begin()

    def begin(self) -> None:
        """Ready for a task: nothing buffered, changes tracked."""
        self.changed: dict[bytes, bool] = {}
        self.pending: dict[bytes, Optional[bytes]] = {}
        self.pending_bytes = 0
        # The last two reads' keys and whether they were present: a write after a read needs no
        # read of its own to know it (a TTL'd state reads its value and its time, then writes both).
        self._last_read: Optional[bytes] = None
        self._last_present = False
        self._prior_read: Optional[bytes] = None
        self._prior_present = False

    def track_changes(self, enabled: bool) -> None:
        self.changed = {} if enabled else Untracked()

    def get(self, k: bytes, batch_sid: Optional[bytes] = None):
        """The stored bytes of entry ``k`` for a state's current value, None if absent (with
        ``batch_sid``, the first read of a state in a batch reads ahead: RocksDBReadAhead.read)."""
        raw = self.pending.get(k, ABSENT)
        if raw is ABSENT:
            raw = self.read_ahead.read(k, batch_sid)
        self._remember(k, raw is not None)
        return raw

    def read(self, k: bytes):
        """The stored bytes of entry ``k`` (written in this epoch or before), None if absent."""
        raw = self.pending.get(k, ABSENT)
        return self.store.db.get(k) if raw is ABSENT else raw

    def _remember(self, k: bytes, present: bool) -> None:
        if k == self._last_read:
            self._last_present = present
        elif k == self._prior_read:
            self._prior_present = present
        else:
            self._prior_read, self._prior_present = self._last_read, self._last_present
            self._last_read, self._last_present = k, present

    def _present(self, k: bytes) -> Optional[bool]:
        """Whether ``k`` was present at its last read, None when it was not one of the last two."""
        if k == self._last_read:
            return self._last_present
        if k == self._prior_read:
            return self._prior_present
        return None

    def _buffer(self, k: bytes, value: Optional[bytes]) -> None:
        store = self.store
        if store.versioned:
            store.unversion()
        if k not in self.pending:
            self.pending_bytes += len(k) + 16
        self.pending[k] = value
        if value is not None:
            self.pending_bytes += len(value)
        if self.pending_bytes > _WRITE_BUFFER:
            self.flush()

    def flush(self) -> None:
        """Write the buffered state writes into the store (one WriteBatch)."""
        if not self.pending:
            return
        store = self.store
        batch = store.rd.WriteBatch(raw_mode=True)
        for k, value in self.pending.items():
            if value is None:
                batch.delete(k)
            else:
                batch.put(k, value)
        store.db.write(batch)
        self.read_ahead.forget()
        self.pending.clear()
        store.written += self.pending_bytes
        self.pending_bytes = 0

    def discard(self) -> None:
        """Drop the buffered writes (the store is cleared)."""
        self.pending.clear()
        self.pending_bytes = 0

    def put(self, k: bytes, value: bytes) -> None:
        changed = self.changed
        if k not in changed:
            # Unknown without a read: counted as present, so a removal later in the interval
            # leaves a tombstone (for nothing, at worst: applying it is a no-op).
            present = self._present(k)
            changed[k] = True if present is None else present
        self._buffer(k, value)
        self._remember(k, True)

    def delete(self, k: bytes) -> None:
        changed = self.changed
        if k not in changed:
            present = self._present(k)
            if present is None:
                present = self.read(k) is not None
            if not present:
                return      # nothing there: no change
            changed[k] = True
        self._buffer(k, None)
        self._remember(k, False)

    def write_timer(self, k: bytes) -> None:
        store = self.store
        if store.versioned:
            store.unversion()
        store.db.put(k, b"")

    def delete_timer(self, k: bytes) -> None:
        store = self.store
        if store.versioned:
            store.unversion()
        store.db.delete(k)
