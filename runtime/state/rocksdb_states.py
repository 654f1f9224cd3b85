"""The RocksDB backend's state classes (Flink's AbstractRocksDBState and its subclasses): value,
list, map, reducing and aggregating states (a TTL'd one decorates two of them: runtime.state.ttl).

Its own module because a state only builds its entry's key (from the read-ahead's current key)
and reads and writes through the write buffer: it knows nothing of the store's files.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional

from runtime.common.pickling import dumps
from runtime.datastream import state as api
from runtime.state.backend import VOID_NAMESPACE
from runtime.state.internal_state import AggregatingStateOps, MapStateReads, ReducingStateOps, StateBase, ValueStateOps
from runtime.state.rocksdb_codecs import Codec, appended, decode_value, encode_list, encode_value
from runtime.state.rocksdb_keys import UINT32, encode_namespace

__all__ = ["RocksDBState", "RocksDBValueState", "RocksDBListState", "RocksDBMapState", "RocksDBReducingState",
           "RocksDBAggregatingState", "STATE_CLASSES", "value_type"]

if TYPE_CHECKING:   # for annotations: the backend holds the states
    from runtime.state.rocksdb import RocksDBKeyedStateBackend


class RocksDBState(StateBase):
    """A state's entries: store keys of its id (``sid``) under the current key and namespace,
    values in its ``codec``. A slot (runtime.state.ttl) is an entry's store key without the id."""

    def __init__(self, backend: "RocksDBKeyedStateBackend", descriptor: api.StateDescriptor,
                 sid: bytes, codec: Optional[Codec]):
        self.backend = backend
        self.read_ahead = backend.read_ahead
        self.writes = backend.write_buffer
        self.descriptor = descriptor
        self.sid = sid
        self.codec = codec
        self.namespace = VOID_NAMESPACE
        self._ns = b""

    def set_current_namespace(self, namespace) -> None:
        self.namespace = namespace
        self._ns = encode_namespace(namespace)

    def _k(self, ns: Optional[bytes] = None) -> bytes:
        read_ahead = self.read_ahead
        return read_ahead.kg + self.sid + read_ahead.kenc + (self._ns if ns is None else ns)

    def _decode(self, raw: bytes):
        return decode_value(raw, self.codec)

    def _encode(self, value) -> bytes:
        return encode_value(value, self.codec)

    def _batch_sid(self) -> Optional[bytes]:
        """The state id under which a read may fetch the whole batch's keys at once (outside
        windows: a window's namespace is not every key's)."""
        return None if self._ns else self.sid

    def _get(self):
        """The current value."""
        raw = self.writes.get(self._k(), self._batch_sid())
        return None if raw is None else self._decode(raw)

    _live = _get

    def _put(self, value, k: Optional[bytes] = None) -> None:
        self.writes.put(self._k() if k is None else k, self._encode(value))

    def clear(self) -> None:
        self.writes.delete(self._k())

    def _slots(self) -> list:
        """Where the state's entries are (their store keys without the id), in this backend's
        key groups."""
        self.writes.flush()
        return [k[:2] + k[4:] for k, _ in self.backend.store.state_entries(self.sid, self.backend.key_group_range)]

    def _at(self, slot: bytes) -> bytes:
        return slot[:2] + self.sid + slot[2:]

    def _get_at(self, slot: bytes):
        raw = self.writes.read(self._at(slot))
        return None if raw is None else self._decode(raw)

    def _put_at(self, slot: bytes, value) -> None:
        self._put(value, self._at(slot))

    def _remove_at(self, slot: bytes) -> None:
        self.writes.delete(self._at(slot))

    def merge_namespaces(self, target, sources: Iterable) -> None:
        """Fold the sources' values into ``target`` (merging windows), removing the sources."""
        writes = self.writes
        tk = self._k(encode_namespace(target))
        raw = writes.get(tk)
        merged = None if raw is None else self._decode(raw)
        for ns in sources:
            k = self._k(encode_namespace(ns))
            raw = writes.get(k)
            if raw is not None:
                writes.delete(k)
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

    def _append(self, encoded: bytes) -> bool:
        """Append encoded elements, the list's bytes not decoded; whether the list was there."""
        writes = self.writes
        k = self._k()
        raw = writes.get(k, self._batch_sid())
        writes.put(k, appended(raw, encoded, self.codec))
        return raw is not None

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
            self._append_all(values)

    def _append_all(self, values: list) -> bool:
        """Append ``values`` (checked); whether the list was there."""
        return self._append(encode_list(values, self.codec)[1:])

    def update(self, values) -> None:
        self.clear()
        self.add_all(values)

    def _encode(self, value) -> bytes:
        return encode_value(value, self.codec)

    def _put(self, value, k: Optional[bytes] = None) -> None:
        self.writes.put(self._k() if k is None else k, encode_list(value, self.codec))

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


def value_type(descriptor) -> Any:
    """The type of what a state's tag-0 payloads hold: a list state's elements, a value's value."""
    if isinstance(descriptor, api.ListStateDescriptor):
        return descriptor.elem_type_info
    if isinstance(descriptor, api.MapStateDescriptor):
        return None
    return descriptor.type_info
