"""The RocksDB backend's timer queue (Flink's RocksDBCachingPriorityQueueSet): timers as keys of
the store, in firing order.

Its own module because a queue only writes timer keys (``rocksdb_keys``) through the write
buffer's ``write_timer`` and ``delete_timer`` and scans them in key order.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Optional

from runtime.state.backend import TimerQueue
from runtime.state.rocksdb_keys import (
    TIMERS, TIMESTAMP, TIMESTAMP_OFFSET, decode_key, decode_namespace, encode_namespace, timestamp_bytes)
from runtime.state.rocksdb_read_ahead import RocksDBReadAhead
from runtime.state.rocksdb_store import RocksDBStore
from runtime.state.rocksdb_write_buffer import RocksDBWriteBuffer

__all__ = ["RocksDBTimerQueue"]

_POP_BATCH = 256


class RocksDBTimerQueue(TimerQueue):
    """A timer queue stored in the backend's RocksDB, ordered by (timestamp, key group, key,
    namespace); timers with the same timestamp fire in that order (the heap queue fires them
    in registration order: neither is an API promise)."""

    def __init__(self, store: RocksDBStore, read_ahead: RocksDBReadAhead, write_buffer: RocksDBWriteBuffer,
                 domain: bytes):
        self.store = store
        self.read_ahead = read_ahead
        self.write_buffer = write_buffer
        self.prefix = TIMERS + domain
        self.changed: dict = {}         # timer key -> live at the last checkpoint
        self._popping = False
        self._added_low: Optional[bytes] = None
        self._deleted: set = set()

    def _key(self, timestamp: int, key, namespace) -> bytes:
        keys = self.read_ahead
        if key is keys.current_key:
            kg, kenc = keys.kg, keys.kenc
        else:
            kg, kenc = keys.key_prefix(key)
        return self.prefix + timestamp_bytes(timestamp) + kg + kenc + encode_namespace(namespace)

    def _decode(self, k: bytes) -> tuple:
        timestamp = TIMESTAMP.unpack_from(k, 2)[0] - TIMESTAMP_OFFSET
        key, i = decode_key(k, 12)
        return timestamp, key, decode_namespace(k, i)

    def _track(self, k: bytes, was_live: bool) -> None:
        if k not in self.changed:
            self.changed[k] = was_live

    def add(self, timestamp: int, key, namespace) -> None:
        k = self._key(timestamp, key, namespace)
        if self.store.db.get(k) is None:
            self._track(k, False)
            self.write_buffer.write_timer(k)
            if self._popping:
                self._deleted.discard(k)
                if self._added_low is None or k < self._added_low:
                    self._added_low = k

    def delete(self, timestamp: int, key, namespace) -> None:
        k = self._key(timestamp, key, namespace)
        if self.store.db.get(k) is not None:
            self._track(k, True)
            self.write_buffer.delete_timer(k)
            if self._popping:
                self._deleted.add(k)

    def _scan(self, upper: Optional[bytes], limit: Optional[int]) -> list:
        out = []
        upper = upper or (self.prefix + b"\xff")
        it = self.store.db.iter()
        try:
            it.seek(self.prefix)
            while it.valid():
                k = it.key()
                if k >= upper:
                    break
                out.append(k)
                if limit is not None and len(out) >= limit:
                    break
                it.next()
        finally:
            del it
        return out

    def pop_until(self, time: int) -> Iterator[tuple]:
        upper = self.prefix + timestamp_bytes(time) + b"\xff"       # every timer at ``time`` sorts below
        self._popping = True
        try:
            while True:
                batch = self._scan(upper, _POP_BATCH)
                if not batch:
                    return
                self._added_low = None
                self._deleted.clear()
                for k in batch:
                    if self._added_low is not None and self._added_low < k:
                        break       # a timer added while firing comes first: scan again
                    if k in self._deleted:
                        continue
                    self._track(k, True)
                    self.write_buffer.delete_timer(k)
                    yield self._decode(k)
        finally:
            self._popping = False
            self._added_low = None
            self._deleted.clear()

    def __iter__(self) -> Iterator[tuple]:
        for k in self._scan(None, None):
            yield self._decode(k)

    def timers_with_key_groups(self, max_parallelism: int) -> Iterator[tuple]:
        for k in self._scan(None, None):
            timestamp, key, namespace = self._decode(k)
            yield int.from_bytes(k[10:12], "big"), timestamp, key, namespace

    def __len__(self) -> int:
        return len(self._scan(None, None))

    def restore(self, timers: Iterable[tuple]) -> None:
        for timestamp, key, namespace in timers:
            self.write_buffer.write_timer(self._key(timestamp, key, namespace))

    def remove_restored(self, timers: Iterable[tuple]) -> None:
        for timestamp, key, namespace in timers:
            self.write_buffer.delete_timer(self._key(timestamp, key, namespace))

    def changes(self, max_parallelism: int) -> Iterator[tuple]:
        db = self.store.db
        for k, was_live in list(self.changed.items()):
            live = db.get(k) is not None
            if live != was_live:
                timestamp, key, namespace = self._decode(k)
                yield int.from_bytes(k[10:12], "big"), timestamp, key, namespace, live

    def mark_checkpointed(self) -> None:
        self.changed.clear()
