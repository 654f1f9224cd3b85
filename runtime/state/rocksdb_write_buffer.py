"""The RocksDB backend's write buffer: state writes wait in a dict and reach the store in one
WriteBatch, each recorded as a change for the next incremental snapshot.

Its own module because every state write of an epoch goes through it: what it keeps (``pending``)
is what a read, a scan or a snapshot must see before the store does.
"""
from __future__ import annotations

from typing import Optional

__all__ = ["RocksDBWriteBuffer", "ABSENT"]

# State writes wait in a dict until this many bytes (or a scan, a snapshot, the version, close):
# a Python call into RocksDB costs more than the write, and a key written again in the epoch is
# written once. Flink's RocksDBWriteBatchWrapper batches the same way (for restores).
_WRITE_BUFFER = 32 << 20
ABSENT = object()


class RocksDBWriteBuffer:
    """The writes of RocksDBKeyedStateBackend: ``pending`` (key -> bytes, None: a delete) and
    ``changed`` (key -> present at the last checkpoint), flushed into ``db``."""

    def read(self, k: bytes):
        """The stored bytes of entry ``k`` (written in this epoch or before), None if absent."""
        raw = self.pending.get(k, ABSENT)
        return self.db.get(k) if raw is ABSENT else raw

    def _buffer(self, k: bytes, value: Optional[bytes]) -> None:
        if self._versioned:
            self._unversion()
        if k not in self.pending:
            self._pending_bytes += len(k) + 16
        self.pending[k] = value
        if value is not None:
            self._pending_bytes += len(value)
        if self._pending_bytes > _WRITE_BUFFER:
            self.flush()

    def flush(self) -> None:
        """Write the buffered state writes into the store (one WriteBatch)."""
        if not self.pending:
            return
        batch = self._rd.WriteBatch(raw_mode=True)
        for k, value in self.pending.items():
            if value is None:
                batch.delete(k)
            else:
                batch.put(k, value)
        self.db.write(batch)
        self._forget_prefetched()
        self.pending.clear()
        self._written += self._pending_bytes
        self._pending_bytes = 0

    def put(self, k: bytes, value: bytes, present: Optional[bool] = None) -> None:
        changed = self.changed
        if k not in changed:
            if present is None:
                # Unknown without a read: counted as present, so a removal later in the interval
                # leaves a tombstone (for nothing, at worst: applying it is a no-op).
                present = self._last_present if k == self._last_read else True
            changed[k] = present
        self._buffer(k, value)
        self._last_read, self._last_present = k, True

    def delete(self, k: bytes) -> None:
        changed = self.changed
        if k not in changed:
            present = self._last_present if k == self._last_read else self.read(k) is not None
            if not present:
                return      # nothing there: no change
            changed[k] = True
        self._buffer(k, None)
        self._last_read, self._last_present = k, False

    def write_timer(self, k: bytes) -> None:
        if self._versioned:
            self._unversion()
        self.db.put(k, b"")

    def delete_timer(self, k: bytes) -> None:
        if self._versioned:
            self._unversion()
        self.db.delete(k)
