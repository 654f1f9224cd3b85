"""The RocksDB backend's state classes (Flink's AbstractRocksDBState and its subclasses): value,
list, map, reducing and aggregating states, and the list and map states whose entries each
expire on their own under a TTL.

Its own module because a state only builds its entry's key and reads and writes through the
backend (``get``, ``read``, ``put``, ``delete``): it knows nothing of the store's files.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional

from runtime.common.pickling import dumps
from runtime.common.typeinfo import Types
from runtime.datastream import state as api
from runtime.state.backend import (
    TTL_PREFIX, VOID_NAMESPACE, AggregatingStateOps, MapStateReads, ReducingStateOps, StateBase, TtlListStateOps,
    TtlMapStateOps, ValueStateOps)
from runtime.state.rocksdb_codecs import CODECS, LONG_CODEC, Codec, appended, decode_value, encode_list, encode_value
from runtime.state.rocksdb_keys import INT64, UINT32, encode_namespace

__all__ = ["RocksDBState", "RocksDBValueState", "RocksDBListState", "RocksDBMapState", "RocksDBTtlListState",
           "RocksDBTtlMapState", "RocksDBReducingState", "RocksDBAggregatingState", "STATE_CLASSES", "TTL_CLASSES",
           "value_type"]

if TYPE_CHECKING:   # for annotations: the backend is composed of this module's classes
    from runtime.state.rocksdb import RocksDBKeyedStateBackend

_RETURN_EXPIRED = api.StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
_ON_READ_AND_WRITE = api.StateTtlConfig.UpdateType.OnReadAndWrite


class RocksDBState(StateBase):
    def __init__(self, backend: "RocksDBKeyedStateBackend", descriptor: api.StateDescriptor,
                 sid: bytes, codec: Optional[Codec]):
        self.backend = backend
        self.descriptor = descriptor
        self.sid = sid
        self.codec = codec
        self.namespace = VOID_NAMESPACE
        self._ns = b""
        ttl = descriptor.ttl_config
        self.ttl: Optional[api.StateTtlConfig] = ttl if ttl is not None and ttl.is_enabled() else None
        # Entry times of a TTL state: a LONG state of their own, checkpointed with the values.
        self.ttl_sid = backend.state_id(TTL_PREFIX + descriptor.name, Types.LONG())[0] if self.ttl else None

    def set_current_namespace(self, namespace) -> None:
        self.namespace = namespace
        self._ns = encode_namespace(namespace)

    def _k(self, ns: Optional[bytes] = None) -> bytes:
        b = self.backend
        return b.kg + self.sid + b.kenc + (self._ns if ns is None else ns)

    def _stamp_key(self, k: bytes) -> bytes:
        return k[:2] + self.ttl_sid + k[4:]

    def _decode(self, raw: bytes):
        return decode_value(raw, self.codec)

    def _encode(self, value) -> bytes:
        return encode_value(value, self.codec)

    def _batch_sid(self) -> Optional[bytes]:
        """The state id under which a read may fetch the whole batch's keys at once (outside
        windows: a window's namespace is not every key's)."""
        return None if self._ns else self.sid

    def _get(self):
        """The current value; with a TTL, Flink's check on read (see the heap backend)."""
        b = self.backend
        k = self._k()
        raw = b.get(k, self._batch_sid())
        if raw is None:
            return None
        value = self._decode(raw)
        if self.ttl is None:
            return value
        sk = self._stamp_key(k)
        raw_stamp = b.read(sk)
        stamp = None if raw_stamp is None else decode_value(raw_stamp, CODECS[Types.LONG()])
        if b.expired(stamp, self.ttl):
            self._remove(k)
            return value if self.ttl.get_state_visibility() is _RETURN_EXPIRED else None
        if stamp is None or self.ttl.get_update_type() is _ON_READ_AND_WRITE:
            b.put(sk, b"\x00" + INT64.pack(b.now()), raw_stamp is not None)
        return value

    def _live(self):
        """The current value for a write that builds on it (reduce, aggregate): expired is absent."""
        b = self.backend
        k = self._k()
        raw = b.get(k, self._batch_sid())
        if raw is None:
            return None
        if self.ttl is not None:
            raw_stamp = b.read(self._stamp_key(k))
            stamp = None if raw_stamp is None else INT64.unpack_from(raw_stamp, 1)[0]
            if b.expired(stamp, self.ttl):
                self._remove(k)
                return None
        return self._decode(raw)

    def _put(self, value, k: Optional[bytes] = None) -> None:
        b = self.backend
        k = self._k() if k is None else k
        b.put(k, self._encode(value))
        if self.ttl is not None:
            sk = self._stamp_key(k)
            b.put(sk, b"\x00" + INT64.pack(b.now()))

    def _remove(self, k: bytes) -> None:
        b = self.backend
        b.delete(k)
        if self.ttl is not None:
            b.delete(self._stamp_key(k))

    def clear(self) -> None:
        self._remove(self._k())

    def merge_namespaces(self, target, sources: Iterable) -> None:
        """Fold the sources' values into ``target`` (merging windows), removing the sources."""
        b = self.backend
        tk = self._k(encode_namespace(target))
        raw = b.get(tk)
        merged = None if raw is None else self._decode(raw)
        for ns in sources:
            k = self._k(encode_namespace(ns))
            raw = b.get(k)
            if raw is not None:
                self._remove(k)
                value = self._decode(raw)
                if value is not None:
                    merged = value if merged is None else self._merge(merged, value)
        if merged is not None:
            self._put(merged, tk)


class RocksDBValueState(ValueStateOps, RocksDBState, api.ValueState):
    """Flink's ValueState: ``update(None)`` clears it."""


class RocksDBListState(RocksDBState, api.ListState):
    def get(self):
        return list(self._get() or ())

    def _append(self, encoded: bytes) -> None:
        b = self.backend
        k = self._k()
        b.put(k, appended(b.get(k, self._batch_sid()), encoded, self.codec))

    def add(self, value) -> None:
        if value is None:
            raise ValueError(f"ListState '{self.descriptor.name}': cannot add None")
        e = self._encode(value)
        self._append(UINT32.pack(len(e)) + e)

    def add_all(self, values) -> None:
        values = list(values)
        for v in values:
            if v is None:
                raise ValueError(f"ListState '{self.descriptor.name}': cannot add None")
        if values:
            self._append(encode_list(values, self.codec)[1:])

    def update(self, values) -> None:
        self.clear()
        self.add_all(values)

    def _encode(self, value) -> bytes:
        return encode_value(value, self.codec)

    def _put(self, value, k: Optional[bytes] = None) -> None:
        b = self.backend
        b.put(self._k() if k is None else k, encode_list(value, self.codec))

    def _merge(self, a, b):
        return a + b


class RocksDBMapState(MapStateReads, RocksDBState, api.MapState):
    def _map(self) -> dict:
        return self._get() or {}

    def _encode(self, value) -> bytes:
        return b"\x01" + dumps(value)

    def put(self, key, value) -> None:
        m = self._map()
        m[key] = value
        self._put(m)

    def put_all(self, dict_value) -> None:
        m = self._map()
        m.update(dict_value)
        self._put(m)

    def remove(self, key) -> None:
        m = self._map()
        if key in m:
            del m[key]
            if m:
                self._put(m)
        if not m:
            self.clear()



class RocksDBTtlEntries:
    """The primitives of per-entry TTL (runtime.state.backend.TtlEntriesOps) in RocksDB: the
    times under the TTL state's id, as a list of LONGs beside a list (appended to as it is), a
    pickled dict beside a map."""

    def _where(self) -> bytes:
        return self._k()

    def _current_entries(self) -> tuple:
        b = self.backend
        k = self._k()
        raw = b.get(k, self._batch_sid())
        if raw is None:
            return None, None
        raw_times = b.read(self._stamp_key(k))
        return self._decode(raw), None if raw_times is None else decode_value(raw_times, LONG_CODEC)

    def _store_at(self, k: bytes, values, times) -> None:
        if not values:
            self._remove(k)
            return
        b = self.backend
        if type(values) is list:
            b.put(k, encode_list(values, self.codec))
            b.put(self._stamp_key(k), encode_list(times, LONG_CODEC))
        else:
            b.put(k, self._encode(values))
            b.put(self._stamp_key(k), encode_value(times, None))

    def _append_entries(self, values: list) -> None:
        b = self.backend
        k = self._k()
        sk = self._stamp_key(k)
        now = b.now()
        raw = b.get(k, self._batch_sid())
        raw_times = None if raw is None else b.read(sk)
        present = raw_times is not None
        if raw is not None and raw_times is None:      # restored without times: they count from now
            raw_times = encode_list([now] * len(self._decode(raw)), LONG_CODEC)
        b.put(k, appended(raw, encode_list(values, self.codec)[1:], self.codec))
        b.put(sk, appended(raw_times, encode_list([now] * len(values), LONG_CODEC)[1:], LONG_CODEC), present)


class RocksDBTtlListState(TtlListStateOps, RocksDBTtlEntries, RocksDBListState):
    """A ListState with a TTL: each element expires on its own (Flink's TtlListState)."""


class RocksDBTtlMapState(TtlMapStateOps, RocksDBTtlEntries, RocksDBMapState):
    """A MapState with a TTL: each entry expires on its own (Flink's TtlMapState)."""


class RocksDBReducingState(ReducingStateOps, RocksDBState, api.ReducingState):
    """Flink's ReducingState: ``add`` folds the value in with the reduce function."""


class RocksDBAggregatingState(AggregatingStateOps, RocksDBState, api.AggregatingState):
    """Flink's AggregatingState: ``add`` folds the value into the accumulator."""


STATE_CLASSES = {
    api.ValueStateDescriptor: RocksDBValueState,
    api.ListStateDescriptor: RocksDBListState,
    api.MapStateDescriptor: RocksDBMapState,
    api.ReducingStateDescriptor: RocksDBReducingState,
    api.AggregatingStateDescriptor: RocksDBAggregatingState,
}
TTL_CLASSES = {RocksDBListState: RocksDBTtlListState, RocksDBMapState: RocksDBTtlMapState}


def value_type(descriptor) -> Any:
    """The type of what a state's tag-0 payloads hold: a list state's elements, a value's value."""
    if isinstance(descriptor, api.ListStateDescriptor):
        return descriptor.elem_type_info
    if isinstance(descriptor, api.MapStateDescriptor):
        return None
    return descriptor.type_info
