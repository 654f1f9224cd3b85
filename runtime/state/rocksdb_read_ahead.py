"""The RocksDB backend's current key and read-ahead: each key's key group and encoding cached, and
a batch's entries of a state read in one multi_get.

Its own module because it is the per-record read path: a Python call into RocksDB or a key-group
hash per record cost more than the lookup itself.
"""
from __future__ import annotations

from typing import Any, Optional

from runtime.state.key_groups import assign_key_groups, assign_to_key_group
from runtime.state.rocksdb_keys import encode_key
from runtime.state.rocksdb_store import RocksDBStore

__all__ = ["RocksDBReadAhead", "ABSENT"]

ABSENT = object()

_KEY_CACHE = 1 << 16            # keys whose key group and encoding are kept (hot keys)
_PREPARED_MIN = 32              # fewer new keys in a batch: hashed one by one (NumPy's fixed cost)
_PREFETCH_MIN = 32              # fewer keys in a batch: read one by one


class RocksDBReadAhead:
    """The keys and reads of a RocksDBKeyedStateBackend: ``current_key`` (its key group ``kg`` and
    encoding ``kenc``), the key cache, and the batch's keys (``prepare_keys``) with what was read
    for them from ``store``."""

    def __init__(self, store: RocksDBStore, max_parallelism: int):
        self.store = store
        self.max_parallelism = max_parallelism
        self.key_type: Any = None       # how keys hash into key groups (runtime.state.key_groups)
        self.key_cache: dict = {}
        self.begin(max_parallelism)

    def begin(self, max_parallelism: int) -> None:
        """Ready for a task (the key cache stays: a key's group and encoding do not change)."""
        if max_parallelism != self.max_parallelism:
            self.key_cache.clear()
        self.max_parallelism = max_parallelism
        self.current_key: Any = None
        self.kg, self.kenc = b"\x00\x00", encode_key(None)
        self.batch: Optional[dict] = None          # the keys of the batch being processed
        self.prefetched: dict = {}                 # entry key -> stored bytes, read for the batch
        self.prefetched_sids: set = set()

    def suspend(self) -> None:
        """The task is done: what it read and the keys it hashed are dropped."""
        self.batch = None
        self.forget()
        self.key_cache.clear()

    def key_prefix(self, key) -> tuple[bytes, bytes]:
        """(key group, encoded key) of ``key``."""
        try:
            cached = self.key_cache.get(key)
        except TypeError:       # unhashable: not cached
            cached = None
        if cached is None:
            kg = assign_to_key_group(key, self.max_parallelism, self.key_type).to_bytes(2, "big")
            cached = (kg, encode_key(key))
            if len(self.key_cache) >= _KEY_CACHE:
                self.key_cache.clear()
            try:
                self.key_cache[key] = cached
            except TypeError:
                pass
        return cached

    def set_current_key(self, key) -> None:
        self.current_key = key
        self.kg, self.kenc = self.key_prefix(key)

    def prepare_keys(self, keys: list) -> None:
        """Key groups of the batch's new keys in one vectorised hash: one at a time, Java's hash
        and murmur in Python cost as much as the store's get. The batch's keys are kept for the
        states' first reads (``get``)."""
        self.forget()
        self.batch = None
        cache = self.key_cache
        try:
            batch = dict.fromkeys(keys)
        except TypeError:       # an unhashable key: hashed and read one by one
            return
        if len(batch) >= _PREFETCH_MIN:
            self.batch = batch
        new = [k for k in batch if k not in cache]
        if len(new) < _PREPARED_MIN:
            return
        if len(cache) + len(new) > _KEY_CACHE:
            cache.clear()
        for key, kg in zip(new, assign_key_groups(new, self.max_parallelism, self.key_type).tolist()):
            cache[key] = (kg.to_bytes(2, "big"), encode_key(key))

    def read(self, k: bytes, batch_sid: Optional[bytes] = None):
        """The stored bytes of entry ``k`` in the store (or read for the batch). With ``batch_sid``
        (a state's id, in the void namespace) the first read of the state in a batch reads the
        entries of every key of the batch in one multi_get: a Python call into RocksDB per record
        cost more than the lookup."""
        raw = self.prefetched.get(k, ABSENT)
        if raw is ABSENT:
            raw = (self._prefetch(k, batch_sid) if batch_sid is not None and self.batch is not None
                   and batch_sid not in self.prefetched_sids else self.store.db.get(k))
        return raw

    def _prefetch(self, k: bytes, sid: bytes):
        self.prefetched_sids.add(sid)
        try:
            in_batch = self.current_key in self.batch
        except TypeError:
            in_batch = False
        if not in_batch:        # a timer's key after the batch
            return self.store.db.get(k)
        db = self.store.db
        keys = [kg + sid + kenc for kg, kenc in map(self.key_prefix, self.batch)]
        self.prefetched.update(zip(keys, db.get(keys)))
        raw = self.prefetched.get(k, ABSENT)     # absent: a key equal to one of the batch's
        return db.get(k) if raw is ABSENT else raw    # but encoded apart (1 and 1.0)

    def forget(self) -> None:
        """The store is written (pending writes flushed, or cleared): what was read for the batch
        may be stale."""
        self.prefetched.clear()
        self.prefetched_sids.clear()
