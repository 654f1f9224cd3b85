"""The RocksDB backend's current key and read-ahead: each key's key group and encoding cached, and
a batch's entries of a state read in one multi_get.

Its own module because it is the per-record read path: a Python call into RocksDB or a key-group
hash per record cost more than the lookup itself.
"""
from __future__ import annotations

from typing import Optional

from runtime.state.key_groups import assign_key_groups, assign_to_key_group
from runtime.state.rocksdb_keys import encode_key
from runtime.state.rocksdb_write_buffer import ABSENT

__all__ = ["RocksDBReadAhead"]

_KEY_CACHE = 1 << 16            # keys whose key group and encoding are kept (hot keys)
_PREPARED_MIN = 32              # fewer new keys in a batch: hashed one by one (NumPy's fixed cost)
_PREFETCH_MIN = 32              # fewer keys in a batch: read one by one


class RocksDBReadAhead:
    """The keys and reads of RocksDBKeyedStateBackend: ``current_key`` (``kg``, ``kenc``), the key
    cache, and the batch's keys (``prepare_keys``) with what was read for them."""

    def key_prefix(self, key) -> tuple[bytes, bytes]:
        """(key group, encoded key) of ``key``."""
        try:
            cached = self._key_cache.get(key)
        except TypeError:       # unhashable: not cached
            cached = None
        if cached is None:
            kg = assign_to_key_group(key, self.max_parallelism, self.key_type).to_bytes(2, "big")
            cached = (kg, encode_key(key))
            if len(self._key_cache) >= _KEY_CACHE:
                self._key_cache.clear()
            try:
                self._key_cache[key] = cached
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
        self._forget_prefetched()
        self._batch = None
        cache = self._key_cache
        try:
            batch = dict.fromkeys(keys)
        except TypeError:       # an unhashable key: hashed and read one by one
            return
        if len(batch) >= _PREFETCH_MIN:
            self._batch = batch
        new = [k for k in batch if k not in cache]
        if len(new) < _PREPARED_MIN:
            return
        if len(cache) + len(new) > _KEY_CACHE:
            cache.clear()
        for key, kg in zip(new, assign_key_groups(new, self.max_parallelism, self.key_type).tolist()):
            cache[key] = (kg.to_bytes(2, "big"), encode_key(key))

    def get(self, k: bytes, batch_sid: Optional[bytes] = None):
        """``read``, for the state's current value. With ``batch_sid`` (a state's id, in the void
        namespace) the first read of the state in a batch reads the entries of every key of the
        batch in one multi_get: a Python call into RocksDB per record cost more than the lookup."""
        raw = self.pending.get(k, ABSENT)
        if raw is ABSENT:
            raw = self._prefetched.get(k, ABSENT)
            if raw is ABSENT:
                raw = (self._prefetch(k, batch_sid) if batch_sid is not None and self._batch is not None
                       and batch_sid not in self._prefetched_sids else self.db.get(k))
        self._last_read, self._last_present = k, raw is not None
        return raw

    def _prefetch(self, k: bytes, sid: bytes):
        self._prefetched_sids.add(sid)
        try:
            in_batch = self.current_key in self._batch
        except TypeError:
            in_batch = False
        if not in_batch:        # a timer's key after the batch
            return self.db.get(k)
        keys = [kg + sid + kenc for kg, kenc in map(self.key_prefix, self._batch)]
        self._prefetched.update(zip(keys, self.db.get(keys)))
        raw = self._prefetched.get(k, ABSENT)     # absent: a key equal to one of the batch's
        return self.db.get(k) if raw is ABSENT else raw    # but encoded apart (1 and 1.0)

    def _forget_prefetched(self) -> None:
        """The store is written (pending writes flushed, or cleared): what was read for the batch
        may be stale."""
        self._prefetched.clear()
        self._prefetched_sids.clear()
