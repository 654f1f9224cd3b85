"""Keyed state in an embedded RocksDB store (Flink's EmbeddedRocksDBStateBackend), on ``rocksdict``.

The store is a directory the caller chooses (a subtask's local directory, kept across epochs);
``close()`` releases RocksDB's lock so that another process can open it. A reused PySpark
worker keeps its store open between tasks instead (``dispose``, ``open``:
runtime.state.kept_stores).

Key layout, after Flink's (one key space; Flink uses a column family per state):

* keyed state: key group (2 bytes, big-endian) | state id (2 bytes) | key | namespace. A
  key-group range is a prefix range, so a rescale or a range restore reads only its groups;
* timers: ``0xfe`` | domain (``e`` event, ``p`` processing) | timestamp (8 bytes, order
  preserving) | key group | key | namespace, so a queue's head is its first entry;
* metadata: ``0xff meta``: the format, the states (name -> id and declared type), the
  key-group range and max parallelism, and the ``version`` the store is at.

Keys are encoded without pickling when they are strings, 64-bit ints or tuples of those (a
stable, self-delimiting encoding), pickled otherwise. The namespace ends the key: none (a
plain keyed state), a TimeWindow (two longs), the GlobalWindow, or a pickled window.

A value starts with a tag: ``0x00`` and the value in its declared type's encoding (LONG,
INT, SHORT, BYTE as big-endian integers, DOUBLE and FLOAT as an IEEE double (the heap backend
keeps a Python float too), STRING as UTF-8, BOOLEAN as one byte); ``0x01`` and a pickle (no
declared type, or a value that does not fit it: the engine types its own states from the
stream's declared type, which records need not keep to); ``0x02`` a list state's elements,
each as a 4-byte length and a tagged element, so ``add`` appends bytes without decoding the
list. A map state is one pickled dict per (key, namespace) (Flink stores an entry per map
key: not yet). Restored rows are written before the operator registers its states, so they
are stored pickled unless the store knows the state's type from an earlier registration; a
value is re-encoded typed when it is next written.

The version: ``backend.version`` is what the store was at when it was opened (None when it
was never set, or the store holds another key-group range or max parallelism). Opening a
store removes its version from disk, so a store whose writer died mid-epoch says nothing;
setting ``version`` writes it and flushes the store in the background (the write-ahead log is
off: the epoch's checkpoint in Delta is the durable copy), and any later write removes it again.
A store kept open is checked the same way, against the version in its memory.
"""
from __future__ import annotations

import logging
import os
import pickle
import shutil
import struct
import time
from typing import Any, Callable, Iterable, Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.common.typeinfo import Types
from runtime.datastream import state as api
from runtime.datastream.window import GlobalWindow, TimeWindow
from runtime.state.backend import (
    TOMBSTONE, TTL_PREFIX, VOID_NAMESPACE, AggregatingStateOps, KeyedColumns, KeyedStateBackend, MapStateReads,
    ReducingStateOps, StateBase, TimerQueue, TtlEntriesOps, TtlListStateOps, TtlMapStateOps, Untracked,
    ValueStateOps, chunked, iter_rows, rows_by_state, wall_clock_ms)
from runtime.state import kept_stores
from runtime.state.key_groups import KeyGroupRange, assign_key_groups, assign_to_key_group

__all__ = ["RocksDBKeyedStateBackend", "RocksDBTimerQueue", "StateStoreException",
           "CorruptStateStoreException", "StateStoreInUseException", "encode_key", "decode_key",
           "encode_namespace", "decode_namespace", "FORMAT"]

FORMAT = 1
META_KEY = b"\xffmeta"
TIMERS = b"\xfe"
STATE_END = b"\x80\x00"         # key groups are below 32768
_PICKLE = 5
_KEY_CACHE = 1 << 16            # keys whose key group and encoding are kept (hot keys)
_PREPARED_MIN = 32              # fewer new keys in a batch: hashed one by one (NumPy's fixed cost)
_PREFETCH_MIN = 32              # fewer keys in a batch: read one by one
_BATCH = 10_000                 # writes per WriteBatch in a restore
_ROWS_CHUNK = 10_000            # entries read at a time for rows of a snapshot or an increment
# State writes wait in a dict until this many bytes (or a scan, a snapshot, the version, close):
# a Python call into RocksDB costs more than the write, and a key written again in the epoch is
# written once. Flink's RocksDBWriteBatchWrapper batches the same way (for restores).
_WRITE_BUFFER = 32 << 20
_COMPACT_AFTER = 16 << 20       # bytes an epoch writes before its store is compacted at its end
_ABSENT = object()
log = logging.getLogger(__name__)
RELEASE_WAIT_S = 2.0            # how long an open waits for another process to release the store
_POP_BATCH = 256
# One block cache per process, shared by every store it opens (Flink shares one among a slot's
# RocksDB instances: state.backend.rocksdb.memory.managed). A Python worker outlives its tasks,
# and RocksDB's cache keys stay the same when a store is closed and opened again, so the next
# epoch's task in this worker finds the store's index, filter and hot data blocks in memory.
BLOCK_CACHE_BYTES = 256 << 20
_block_cache = None

_RETURN_EXPIRED = api.StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
_ON_READ_AND_WRITE = api.StateTtlConfig.UpdateType.OnReadAndWrite

_Q = struct.Struct(">q")
_QQ = struct.Struct(">qq")
_I = struct.Struct(">I")
_TS = struct.Struct(">Q")
_TS_OFFSET = 1 << 63


class StateStoreException(IOError):
    """A local state store cannot be used; names its directory."""

    def __init__(self, path: str, what: str):
        super().__init__(f"RocksDB state store {path} {what}")
        self.path = path


class CorruptStateStoreException(StateStoreException):
    """The store on disk is damaged or not a Sluice state store: rebuild it from the checkpoint
    (remove the directory, open it again, restore)."""


class StateStoreInUseException(StateStoreException):
    """Another process (or an unclosed backend) holds the store's lock."""


def _rocksdict():
    try:
        import rocksdict
    except ImportError as e:      # pragma: no cover - pinned in pyproject.toml
        raise ImportError("state.backend.type: rocksdb needs the 'rocksdict' package (pip install "
                          "rocksdict), or use state.backend.type: hashmap") from e
    return rocksdict


def _shared_block_cache(rd):
    global _block_cache
    if _block_cache is None:
        _block_cache = rd.Cache(BLOCK_CACHE_BYTES)
    return _block_cache


# ---- keys and namespaces -------------------------------------------------------------------

def encode_key(key) -> bytes:
    """A stable, self-delimiting encoding of a key: str, 64-bit int, tuples of keys, else pickled."""
    t = type(key)
    if t is str:
        b = key.encode("utf-8", "surrogatepass")
        return b"\x01" + _I.pack(len(b)) + b
    if t is int and -_TS_OFFSET <= key < _TS_OFFSET:
        return b"\x02" + _Q.pack(key)
    if t is tuple and len(key) < 256:
        return b"\x04" + bytes((len(key),)) + b"".join(encode_key(k) for k in key)
    b = pickle.dumps(key, protocol=_PICKLE)
    return b"\x03" + _I.pack(len(b)) + b


def decode_key(buf: bytes, i: int = 0) -> tuple[Any, int]:
    """The key encoded at ``buf[i:]`` and where it ends."""
    tag = buf[i]
    if tag == 1:
        (n,) = _I.unpack_from(buf, i + 1)
        return buf[i + 5:i + 5 + n].decode("utf-8", "surrogatepass"), i + 5 + n
    if tag == 2:
        return _Q.unpack_from(buf, i + 1)[0], i + 9
    if tag == 4:
        n, i = buf[i + 1], i + 2
        items = []
        for _ in range(n):
            item, i = decode_key(buf, i)
            items.append(item)
        return tuple(items), i
    if tag == 3:
        (n,) = _I.unpack_from(buf, i + 1)
        return pickle.loads(buf[i + 5:i + 5 + n]), i + 5 + n
    raise ValueError(f"unreadable key encoding (tag {tag})")


def encode_namespace(ns) -> bytes:
    if ns is None:
        return b""
    if type(ns) is TimeWindow:
        return b"\x01" + _QQ.pack(ns.start, ns.end)
    if isinstance(ns, GlobalWindow):
        return b"\x02"
    return b"\x03" + pickle.dumps(ns, protocol=_PICKLE)


def decode_namespace(buf: bytes, i: int):
    if i >= len(buf):
        return None
    tag = buf[i]
    if tag == 1:
        start, end = _QQ.unpack_from(buf, i + 1)
        return TimeWindow(start, end)
    if tag == 2:
        return GlobalWindow.get()
    if tag == 3:
        return pickle.loads(buf[i + 1:])
    raise ValueError(f"unreadable namespace encoding (tag {tag})")


def encode_entry_keys(key_groups, sid: bytes, namespaces, keys, key_group_range=None) -> list:
    """The store keys (key group, state id, key, namespace) of a chunk of rows, None for a row
    outside ``key_group_range``. The common chunk, string keys without a namespace, is encoded
    without a call per row: a restore encodes millions of them."""
    prefixes: dict = {}
    for kg in set(key_groups):
        prefixes[kg] = None if key_group_range is not None and not key_group_range.contains(kg) \
            else kg.to_bytes(2, "big") + sid
    plain = all(type(k) is str for k in keys) and all(ns is None for ns in namespaces)
    if plain:
        pack = _I.pack
        out = []
        for kg, key in zip(key_groups, keys):
            prefix = prefixes[kg]
            if prefix is None:
                out.append(None)
            else:
                b = key.encode("utf-8", "surrogatepass")
                out.append(prefix + b"\x01" + pack(len(b)) + b)
        return out
    return [None if prefixes[kg] is None else prefixes[kg] + encode_key(key) + encode_namespace(ns)
            for kg, ns, key in zip(key_groups, namespaces, keys)]


def _ts(timestamp: int) -> bytes:
    return _TS.pack(timestamp + _TS_OFFSET)


# ---- values --------------------------------------------------------------------------------

class _Codec:
    """A declared type's encoding: ``encode`` gives None for a value that does not fit it.
    ``column``: how a scan decodes a column of them at once (a NumPy dtype of a fixed-width
    value, "utf8" for text), None: one by one."""

    def __init__(self, encode: Callable, decode: Callable, column: Optional[str] = None):
        self.encode, self.decode = encode, decode     # decode(buf, start, end)
        self.column = column


def _int_codec(fmt: str) -> _Codec:
    s = struct.Struct(fmt)
    lo, hi = -(1 << (8 * s.size - 1)), 1 << (8 * s.size - 1)

    def encode(v):
        return s.pack(v) if type(v) is int and lo <= v < hi else None
    return _Codec(encode, lambda buf, a, b: s.unpack_from(buf, a)[0], _NUMPY_INTS[fmt])


_NUMPY_INTS = {">q": ">i8", ">i": ">i4", ">h": ">i2", ">b": ">i1"}


_D = struct.Struct(">d")
_CODECS = {
    Types.LONG(): _int_codec(">q"),
    Types.INT(): _int_codec(">i"),
    Types.SHORT(): _int_codec(">h"),
    Types.BYTE(): _int_codec(">b"),
    Types.DOUBLE(): _Codec(lambda v: _D.pack(v) if type(v) is float else None,
                           lambda buf, a, b: _D.unpack_from(buf, a)[0], ">f8"),
    Types.FLOAT(): _Codec(lambda v: _D.pack(v) if type(v) is float else None,
                          lambda buf, a, b: _D.unpack_from(buf, a)[0]),
    Types.STRING(): _Codec(lambda v: v.encode("utf-8", "surrogatepass") if type(v) is str else None,
                           lambda buf, a, b: buf[a:b].decode("utf-8", "surrogatepass"), "utf8"),
    Types.BOOLEAN(): _Codec(lambda v: (b"\x01" if v else b"\x00") if type(v) is bool else None,
                            lambda buf, a, b: buf[a] == 1),
}


def codec_of(type_info) -> Optional[_Codec]:
    """The encoding of values declared as ``type_info``, or None (stored pickled)."""
    if type_info is None:
        return None
    try:
        return _CODECS.get(type_info)
    except TypeError:       # an unhashable type information
        return None


def encode_value(value, codec: Optional[_Codec]) -> bytes:
    if codec is not None:
        payload = codec.encode(value)
        if payload is not None:
            return b"\x00" + payload
    return b"\x01" + pickle.dumps(value, protocol=_PICKLE)


def encode_list(values, codec: Optional[_Codec]) -> bytes:
    parts = [b"\x02"]
    for v in values:
        e = encode_value(v, codec)
        parts.append(_I.pack(len(e)))
        parts.append(e)
    return b"".join(parts)


def appended(raw: Optional[bytes], elements: bytes, codec: Optional[_Codec]) -> bytes:
    """A stored list (``raw``, None: absent) with ``elements`` (``encode_list``'s, untagged)
    appended: bytes added, nothing decoded, unless it was restored pickled (re-encoded)."""
    if raw is None:
        return b"\x02" + elements
    if raw[0] == 2:
        return raw + elements
    return encode_list(decode_value(raw, codec), codec) + elements


def _decode_element(buf, a: int, b: int, codec):
    tag = buf[a]
    if tag == 0:
        return codec.decode(buf, a + 1, b)
    return pickle.loads(buf[a + 1:b])


def decode_value(buf: bytes, codec: Optional[_Codec]):
    tag = buf[0]
    if tag == 0:
        return codec.decode(buf, 1, len(buf))
    if tag == 1:
        return pickle.loads(buf[1:])
    if tag == 2:
        out, i, n = [], 1, len(buf)
        unpack = _I.unpack_from
        while i < n:
            (size,) = unpack(buf, i)
            i += 4
            out.append(_decode_element(buf, i, i + size, codec))
            i += size
        return out
    raise ValueError(f"unreadable value encoding (tag {tag})")


# ---- states --------------------------------------------------------------------------------

class _RocksState(StateBase):
    def __init__(self, backend: "RocksDBKeyedStateBackend", descriptor: api.StateDescriptor,
                 sid: bytes, codec: Optional[_Codec]):
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
        stamp = None if raw_stamp is None else decode_value(raw_stamp, _CODECS[Types.LONG()])
        if b.expired(stamp, self.ttl):
            self._remove(k)
            return value if self.ttl.get_state_visibility() is _RETURN_EXPIRED else None
        if stamp is None or self.ttl.get_update_type() is _ON_READ_AND_WRITE:
            b.put(sk, b"\x00" + _Q.pack(b.now()), raw_stamp is not None)
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
            stamp = None if raw_stamp is None else _Q.unpack_from(raw_stamp, 1)[0]
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
            b.put(sk, b"\x00" + _Q.pack(b.now()))

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


class RocksDBValueState(ValueStateOps, _RocksState, api.ValueState):
    """Flink's ValueState: ``update(None)`` clears it."""


class RocksDBListState(_RocksState, api.ListState):
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
        self._append(_I.pack(len(e)) + e)

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


class RocksDBMapState(MapStateReads, _RocksState, api.MapState):
    def _map(self) -> dict:
        return self._get() or {}

    def _encode(self, value) -> bytes:
        return b"\x01" + pickle.dumps(value, protocol=_PICKLE)

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


_LONG = _CODECS[Types.LONG()]


class _RocksTtlEntries:
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
        return self._decode(raw), None if raw_times is None else decode_value(raw_times, _LONG)

    def _store_at(self, k: bytes, values, times) -> None:
        if not values:
            self._remove(k)
            return
        b = self.backend
        if type(values) is list:
            b.put(k, encode_list(values, self.codec))
            b.put(self._stamp_key(k), encode_list(times, _LONG))
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
            raw_times = encode_list([now] * len(self._decode(raw)), _LONG)
        b.put(k, appended(raw, encode_list(values, self.codec)[1:], self.codec))
        b.put(sk, appended(raw_times, encode_list([now] * len(values), _LONG)[1:], _LONG), present)


class RocksDBTtlListState(TtlListStateOps, _RocksTtlEntries, RocksDBListState):
    """A ListState with a TTL: each element expires on its own (Flink's TtlListState)."""


class RocksDBTtlMapState(TtlMapStateOps, _RocksTtlEntries, RocksDBMapState):
    """A MapState with a TTL: each entry expires on its own (Flink's TtlMapState)."""


class RocksDBReducingState(ReducingStateOps, _RocksState, api.ReducingState):
    """Flink's ReducingState: ``add`` folds the value in with the reduce function."""


class RocksDBAggregatingState(AggregatingStateOps, _RocksState, api.AggregatingState):
    """Flink's AggregatingState: ``add`` folds the value into the accumulator."""


_STATE_CLASSES = {
    api.ValueStateDescriptor: RocksDBValueState,
    api.ListStateDescriptor: RocksDBListState,
    api.MapStateDescriptor: RocksDBMapState,
    api.ReducingStateDescriptor: RocksDBReducingState,
    api.AggregatingStateDescriptor: RocksDBAggregatingState,
}
_TTL_CLASSES = {RocksDBListState: RocksDBTtlListState, RocksDBMapState: RocksDBTtlMapState}


def _value_type(descriptor) -> Any:
    """The type of what a state's tag-0 payloads hold: a list state's elements, a value's value."""
    if isinstance(descriptor, api.ListStateDescriptor):
        return descriptor.elem_type_info
    if isinstance(descriptor, api.MapStateDescriptor):
        return None
    return descriptor.type_info


# ---- timers --------------------------------------------------------------------------------

class RocksDBTimerQueue(TimerQueue):
    """A timer queue stored in the backend's RocksDB, ordered by (timestamp, key group, key,
    namespace); timers with the same timestamp fire in that order (the heap queue fires them
    in registration order: neither is an API promise)."""

    def __init__(self, backend: "RocksDBKeyedStateBackend", domain: bytes):
        self.backend = backend
        self.prefix = TIMERS + domain
        self.changed: dict = {}         # timer key -> live at the last checkpoint
        self._popping = False
        self._added_low: Optional[bytes] = None
        self._deleted: set = set()

    def _key(self, timestamp: int, key, namespace) -> bytes:
        b = self.backend
        if key is b.current_key:
            kg, kenc = b.kg, b.kenc
        else:
            kg, kenc = b.key_prefix(key)
        return self.prefix + _ts(timestamp) + kg + kenc + encode_namespace(namespace)

    def _decode(self, k: bytes) -> tuple:
        timestamp = _TS.unpack_from(k, 2)[0] - _TS_OFFSET
        key, i = decode_key(k, 12)
        return timestamp, key, decode_namespace(k, i)

    def _track(self, k: bytes, was_live: bool) -> None:
        if k not in self.changed:
            self.changed[k] = was_live

    def add(self, timestamp: int, key, namespace) -> None:
        k = self._key(timestamp, key, namespace)
        db = self.backend.db
        if db.get(k) is None:
            self._track(k, False)
            self.backend.write_timer(k)
            if self._popping:
                self._deleted.discard(k)
                if self._added_low is None or k < self._added_low:
                    self._added_low = k

    def delete(self, timestamp: int, key, namespace) -> None:
        k = self._key(timestamp, key, namespace)
        if self.backend.db.get(k) is not None:
            self._track(k, True)
            self.backend.delete_timer(k)
            if self._popping:
                self._deleted.add(k)

    def _scan(self, upper: Optional[bytes], limit: Optional[int]) -> list:
        out = []
        upper = upper or (self.prefix + b"\xff")
        it = self.backend.db.iter()
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
        upper = self.prefix + _ts(time) + b"\xff"       # every timer at ``time`` sorts below
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
                    self.backend.delete_timer(k)
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
        b = self.backend
        for timestamp, key, namespace in timers:
            b.write_timer(self._key(timestamp, key, namespace))

    def remove_restored(self, timers: Iterable[tuple]) -> None:
        b = self.backend
        for timestamp, key, namespace in timers:
            b.delete_timer(self._key(timestamp, key, namespace))

    def changes(self, max_parallelism: int) -> Iterator[tuple]:
        db = self.backend.db
        for k, was_live in list(self.changed.items()):
            live = db.get(k) is not None
            if live != was_live:
                timestamp, key, namespace = self._decode(k)
                yield int.from_bytes(k[10:12], "big"), timestamp, key, namespace, live

    def mark_checkpointed(self) -> None:
        self.changed.clear()


class _BatchWriter:
    """Writes into a backend's store in WriteBatches of ``_BATCH`` entries."""

    def __init__(self, backend: "RocksDBKeyedStateBackend"):
        self.backend = backend
        self.batch = backend._rd.WriteBatch(raw_mode=True)
        self.count = 0

    def put(self, k: bytes, value: bytes) -> None:
        self.batch.put(k, value)
        self.backend._written += len(k) + len(value)
        self._wrote()

    def delete(self, k: bytes) -> None:
        self.batch.delete(k)
        self.backend._written += len(k)
        self._wrote()

    def _wrote(self) -> None:
        self.count += 1
        if self.count % _BATCH == 0:
            self.backend.db.write(self.batch)
            self.batch = self.backend._rd.WriteBatch(raw_mode=True)

    def close(self) -> None:
        if self.count % _BATCH:
            self.backend.db.write(self.batch)


# ---- the backend ---------------------------------------------------------------------------

class RocksDBKeyedStateBackend(KeyedStateBackend):
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

    @classmethod
    def open(cls, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int, path: str,
             clock: Optional[Callable[[], int]] = None) -> "RocksDBKeyedStateBackend":
        """The local store at ``path`` for a task: the one this process kept open since its last
        task there (runtime.state.kept_stores), else opened."""
        kept = kept_stores.take(os.path.abspath(path))
        if kept is not None:
            if kept._same_directory():
                kept._begin(operator_name, key_group_range, max_parallelism, clock)
                return kept
            # Its folder was removed or replaced since: never trusted, and its files are gone.
            log.warning("%s: RocksDB state store %s was removed while this process kept it open; "
                        "opening it anew (the task rebuilds it from the checkpoint)", operator_name, kept.path)
            try:
                kept.close()
            except Exception:       # RocksDB cannot finish its files in a folder that is gone
                kept.db = None
        return cls(operator_name, key_group_range, max_parallelism, path, clock=clock)

    def _begin(self, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int,
               clock: Optional[Callable[[], int]]) -> None:
        """Ready the open store for a task."""
        self.operator_name = operator_name
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.now = clock or wall_clock_ms
        self.states: dict[str, _RocksState] = {}
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
        stored_range = self._meta.get("key_group_range")
        self._opened_version = self._meta.get("version") if (
            stored_range == _range_tuple(key_group_range)
            and self._meta.get("max_parallelism") == max_parallelism) else None
        # From now on the store is being written: a writer that dies leaves no version behind.
        # Not flushed: memtables reach disk whole and in order, so any write of this epoch that
        # reaches disk carries the removal with it, and a store where none did is still at its
        # version.
        self._meta.update(version=None, key_group_range=_range_tuple(key_group_range),
                          max_parallelism=max_parallelism, operator=operator_name)
        self._write_meta()
        self._versioned = False

    # ---- the store -------------------------------------------------------------------------

    def _open(self):
        rd = _rocksdict()
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as e:
            raise StateStoreException(self.path, f"cannot be created ({e}): choose a writable local "
                                                 f"directory for the task's state "
                                                 f"(state.backend.rocksdb.localdir)") from e
        options = rd.Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_paranoid_checks(True)
        # RocksDB starts a new info LOG at every open and keeps 1,000 old ones by default: a
        # store opened every epoch piled them up. Flink's defaults (state.backend.rocksdb.log.*).
        options.set_keep_log_file_num(4)
        options.set_max_log_file_size(25 << 20)
        # An open reads its files' footers on 16 new threads by default: for a store of a few
        # files, starting them cost more than the reads (an open of 500,000 keys, alone: 11.4 -> 6.0 ms).
        options.set_max_file_opening_threads(1)
        # Reads map the store's files and read uncompressed blocks in place: a store is cold in
        # its process after a rebuild or a move to another worker, and mapped files are shared
        # through the page cache, where a block cache is per process and a
        # compressed block is decompressed into it at every first read. 5,000 gets from a fresh
        # process, 5,000,000 keys: 57 ms compressed and cached, 28 ms mapped. The price is about
        # three times the disk space of a compressed store. Index and filter blocks stay with
        # their file's reader; a bloom filter per file lets a get skip the files without its key
        # (every epoch adds a level-0 file), as Flink's RocksDB options for point lookups do.
        options.set_allow_mmap_reads(True)
        options.set_compression_type(rd.DBCompressionType.none())
        table = rd.BlockBasedOptions()
        table.set_bloom_filter(10, False)
        table.set_block_cache(_shared_block_cache(rd))
        options.set_block_based_table_factory(table)
        # Universal (tiered) compaction merges the small files of recent epochs among themselves
        # and only rarely rewrites the whole state: leveled compaction rewrote it every few epochs,
        # and a store closed after each task cut those compactions short, so their files piled up.
        options.set_compaction_style(rd.DBCompactionStyle.universal())
        db = self._locked_open(rd, options)
        self._lock_inode = _inode(os.path.join(self.path, "LOCK"))
        # Scans read the whole state (a snapshot, the keys of a state, expired entries): they do
        # not push the blocks the epoch's gets need out of the shared cache.
        self._scan_options = rd.ReadOptions()
        self._scan_options.fill_cache(False)
        write = rd.WriteOptions()
        write.disable_wal = True        # the checkpoint in Delta is the durable copy
        db.set_write_options(write)
        self._rd = rd
        return db

    def _locked_open(self, rd, options):
        """The store opened; when another process keeps it open between its tasks, that one is
        asked to close it (it does at once, unless a task of its own is using it)."""
        deadline = None
        try:
            while True:
                try:
                    return rd.Rdict(self.path, options)
                except Exception as e:
                    text = str(e)
                    low = text.lower()
                    if "lock" not in low:
                        raise self._open_failure(text, low) from e
                    if deadline is None and kept_stores.request_release(self.path):
                        deadline = time.monotonic() + RELEASE_WAIT_S
                    if deadline is None or time.monotonic() > deadline:
                        raise StateStoreInUseException(
                            self.path, f"is in use by another process or backend (close() the one that "
                                       f"has it): {text}") from e
                    time.sleep(0.002)
        finally:
            if deadline is not None:
                kept_stores.withdraw_request(self.path)

    def _open_failure(self, text: str, low: str) -> StateStoreException:
        if "no space" in low or "permission denied" in low or "read-only" in low:
            return StateStoreException(self.path, f"cannot be written ({text}): choose a writable local "
                                                  f"directory with free space for the task's state "
                                                  f"(state.backend.rocksdb.localdir)")
        return CorruptStateStoreException(self.path, f"cannot be opened, it is damaged: {text}. Remove the "
                                                     f"directory and rebuild it from the checkpoint")

    def _same_directory(self) -> bool:
        """Whether the store's directory is still the one it opened (not removed or replaced)."""
        return _inode(os.path.join(self.path, "LOCK")) == self._lock_inode

    def _read_meta(self) -> dict:
        try:
            raw = self.db.get(META_KEY)
            if raw is None:
                it = self.db.iter()
                it.seek_to_first()
                empty = not it.valid()
                del it
                if not empty:
                    raise CorruptStateStoreException(self.path, "holds data but no Sluice metadata: it is not a "
                                                                "state store of this backend")
                return {"format": FORMAT, "states": {}, "version": None}
            meta = pickle.loads(raw)
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise CorruptStateStoreException(self.path, f"has metadata of an unknown format: {meta!r:.200}")
            return meta
        except Exception as e:
            self.db.close()
            self.db = None
            if isinstance(e, StateStoreException):
                raise
            raise CorruptStateStoreException(self.path, f"has unreadable metadata ({type(e).__name__}: {e}). "
                                                        f"Remove the directory and rebuild it from the "
                                                        f"checkpoint") from e

    def _write_meta(self, flush: bool = False) -> None:
        self.db.put(META_KEY, pickle.dumps(self._meta, protocol=_PICKLE))
        if flush:
            # In the background: a store kept open is at its version in memory, and a close waits
            # for the flush. A process that dies before it ends leaves the store at an earlier
            # version on disk (memtables reach disk whole and in order), which is not trusted.
            self.db.flush(False)

    @property
    def version(self):
        """The version (checkpoint or epoch) the store was at when opened, or the one set since."""
        return self._meta["version"] if self._versioned else self._opened_version

    @version.setter
    def version(self, value) -> None:
        self.flush()        # the version says the store holds everything written before it
        if self._written >= _COMPACT_AFTER:
            # A bulk epoch (a build, a rebuild) leaves runs that overlap over the whole key range.
            # Merged in the background, they would cost the next epochs' gets half the CPU (and a
            # store closed after its task cut that merge short at every open). Merged once, here,
            # they stay merged.
            self.db.compact_range(None, None)
            self._written = 0
        self._meta["version"] = value
        self._write_meta(flush=True)
        self._versioned = value is not None
        self._opened_version = None

    def _unversion(self) -> None:
        self._versioned = False
        self._meta["version"] = None
        self._write_meta()

    def close(self) -> None:
        """Flush and release the store (its lock), so another process can open it."""
        db = getattr(self, "db", None)
        if db is None:
            return
        kept_stores.discard(self)
        self.flush()
        self.db = None
        self._detach()
        db.close()
        del db

    def _detach(self) -> None:
        for queue in self.timer_queues.values():
            queue.backend = None
        self.timer_queues = {}
        self.states = {}

    def dispose(self) -> None:
        """The task is done with the store: a reused PySpark worker keeps it open at the version
        the task set, for its next task on it (runtime.state.kept_stores); otherwise it is closed
        (and a temporary one removed)."""
        if self.db is not None and self._versioned and not self.temporary and kept_stores.keeps_stores():
            self.flush()
            self._detach()
            self._batch = None
            self._forget_prefetched()
            self._key_cache.clear()
            kept_stores.keep(self)
            return
        self.close()
        if self.temporary:
            shutil.rmtree(self.path, ignore_errors=True)

    def clear(self) -> None:
        """Remove every entry and timer (a rebuild from a checkpoint follows)."""
        self.pending.clear()
        self._pending_bytes = 0
        self._forget_prefetched()
        self.db.delete_range(b"\x00", b"\xff")
        self.changed.clear()
        for queue in self.timer_queues.values():
            queue.changed.clear()
        if self._versioned:
            self._unversion()

    @staticmethod
    def destroy(path: str) -> None:
        """Remove a (closed) store from disk, damaged or not."""
        shutil.rmtree(path, ignore_errors=True)

    # ---- writes (tracked) ------------------------------------------------------------------

    def read(self, k: bytes):
        """The stored bytes of entry ``k`` (written in this epoch or before), None if absent."""
        raw = self.pending.get(k, _ABSENT)
        return self.db.get(k) if raw is _ABSENT else raw

    def get(self, k: bytes, batch_sid: Optional[bytes] = None):
        """``read``, for the state's current value. With ``batch_sid`` (a state's id, in the void
        namespace) the first read of the state in a batch reads the entries of every key of the
        batch in one multi_get: a Python call into RocksDB per record cost more than the lookup."""
        raw = self.pending.get(k, _ABSENT)
        if raw is _ABSENT:
            raw = self._prefetched.get(k, _ABSENT)
            if raw is _ABSENT:
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
        raw = self._prefetched.get(k, _ABSENT)     # absent: a key equal to one of the batch's
        return self.db.get(k) if raw is _ABSENT else raw    # but encoded apart (1 and 1.0)

    def _forget_prefetched(self) -> None:
        """The store is written (pending writes flushed, or cleared): what was read for the batch
        may be stale."""
        self._prefetched.clear()
        self._prefetched_sids.clear()

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

    # ---- keys and states -------------------------------------------------------------------

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

    def track_changes(self, enabled: bool) -> None:
        super().track_changes(enabled)
        fresh = dict if enabled else Untracked
        self.changed = fresh()
        for queue in self.timer_queues.values():
            queue.changed = fresh()

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

    def _index_state(self, name: str, sid: int, type_info) -> None:
        sid_bytes = sid.to_bytes(2, "big")
        codec = codec_of(type_info)
        self._sids[name] = (sid_bytes, codec)
        self._names[sid_bytes] = (name, codec)

    def state_id(self, name: str, type_info=None) -> tuple[bytes, Optional[_Codec]]:
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

    def get_partitioned_state(self, descriptor: api.StateDescriptor) -> _RocksState:
        existing = self.states.get(descriptor.name)
        if existing is not None:
            self._check_registration(existing, descriptor)
            return existing
        cls = _STATE_CLASSES.get(type(descriptor))
        if cls is None:
            raise TypeError(f"{self.operator_name}: unsupported state descriptor {descriptor!r}")
        ttl = descriptor.ttl_config
        if ttl is not None and ttl.is_enabled():
            cls = _TTL_CLASSES.get(cls, cls)
        sid, codec = self.state_id(descriptor.name, _value_type(descriptor))
        state = self.states[descriptor.name] = cls(self, descriptor, sid, codec)
        return state

    def _entries(self, lower: bytes, upper: bytes) -> Iterator[tuple]:
        self.flush()
        it = self.db.iter(self._scan_options)
        try:
            it.seek(lower)
            while it.valid():
                k = it.key()
                if k >= upper:
                    break
                yield k, it.value()
                it.next()
        finally:
            del it

    def _row(self, k: bytes, raw) -> tuple:
        name, codec = self._names[k[2:4]]
        key, i = decode_key(k, 4)
        ns = decode_namespace(k, i)
        value = TOMBSTONE if raw is None else decode_value(raw, codec)
        return int.from_bytes(k[:2], "big"), name, ns, key, value

    def keys(self, state_name: str, namespace=VOID_NAMESPACE) -> list:
        if state_name not in self._sids:
            return []
        out = []
        for k, _ in self._state_entries(self._sids[state_name][0]):
            key, i = decode_key(k, 4)
            if decode_namespace(k, i) == namespace:
                out.append(key)
        return out

    def entries(self, key_group_range: Optional[KeyGroupRange] = None) -> Iterator[tuple]:
        """Rows (key_group, state_name, namespace, key, value) of the key groups in
        ``key_group_range`` (all by default): a prefix range of the store."""
        if key_group_range is None:
            lower, upper = b"\x00\x00", STATE_END
        else:
            lower = key_group_range.start_key_group.to_bytes(2, "big")
            upper = (key_group_range.end_key_group + 1).to_bytes(2, "big")
        for k, raw in self._entries(lower, upper):
            yield self._row(k, raw)

    def snapshot(self) -> "_Entries":
        """Every entry, read in key order: rows (key_group, state_name, namespace, key, value),
        or column chunks (``_Entries.column_chunks``)."""
        self._drop_expired()
        return _Entries(self, self._raw_chunks)

    def _raw_chunks(self, size: int) -> Iterator[tuple[list, list]]:
        """(keys, values) of every keyed entry in key order, ``size`` at a time, as stored."""
        self.flush()
        options = self._rd.ReadOptions()
        options.fill_cache(False)
        options.set_iterate_upper_bound(STATE_END)
        items = self.db.items(from_key=b"\x00\x00", read_opt=options)
        try:
            for chunk in chunked(items, size):
                yield [k for k, _ in chunk], [v for _, v in chunk]
        finally:
            del items

    def _decode_columns(self, keys: list, values: list) -> Iterator[tuple]:
        """A raw chunk as (state name, KeyedColumns) for each state of a descriptor (the states a
        snapshot types) whose entries are all in the void namespace with text keys and values its
        codec decodes as a column, else (state name, rows). A state's entries keep their key order."""
        n = len(keys)
        ka = pa.array(keys, pa.binary())
        lengths = pc.binary_length(ka).to_numpy()
        if lengths.min() < 9:       # shorter than key group, state id, tag and a text's length
            yield from rows_by_state(map(self._row, keys, values)).items()
            return
        head = np.frombuffer(pc.binary_slice(ka, 0, 9).cast(pa.binary(9)).buffers()[1], np.uint8).reshape(n, 9)
        key_groups = head[:, 0].astype(np.int32) << 8 | head[:, 1]
        sids = head[:, 2].astype(np.int32) << 8 | head[:, 3]
        text_length = head[:, 5:9].copy().view(">u4").ravel()
        plain = (head[:, 4] == 1) & (lengths == 9 + text_length)     # a text key, the void namespace
        for sid in np.unique(sids):
            where = np.nonzero(sids == sid)[0]
            name, codec = self._names[int(sid).to_bytes(2, "big")]
            columns = None
            if name in self.states and codec is not None and codec.column and plain[where].all():
                columns = _columns_of(ka.take(where), pa.array([values[i] for i in where], pa.binary()),
                                      key_groups[where], codec.column)
            yield name, ([self._row(keys[i], values[i]) for i in where] if columns is None else columns)

    def changes(self) -> "_Entries":
        """The entries changed since the last checkpoint (a deleted one's value a TOMBSTONE), as
        ``snapshot`` gives every entry."""
        self._drop_expired()
        return _Entries(self, self._changed_chunks)

    def _changed_chunks(self, size: int) -> Iterator[tuple[list, list]]:
        """(keys, values) of the changed entries in key order, ``size`` at a time, as stored now
        (None: deleted since the last checkpoint; an entry added and deleted in between is left
        out). Entries still in the write buffer are taken from it; the rest (written before a
        flush) are read, in key order."""
        buffered = dict(self.pending)
        self.flush()
        changed = self.changed
        for chunk in chunked(sorted(changed), size):
            values = [buffered.get(k, _ABSENT) for k in chunk]
            unread = [i for i, raw in enumerate(values) if raw is _ABSENT]
            if unread:
                for i, raw in zip(unread, self.db.get([chunk[i] for i in unread])):
                    values[i] = raw
            kept = [i for i, raw in enumerate(values) if raw is not None or changed[chunk[i]]]
            yield [chunk[i] for i in kept], [values[i] for i in kept]

    def change_count(self) -> int:
        return len(self.changed)

    def mark_checkpointed(self) -> None:
        self.changed.clear()
        for queue in self.timer_queues.values():
            queue.mark_checkpointed()

    def _drop_expired(self) -> None:
        """Flink's cleanup in full snapshot: expired entries are not checkpointed."""
        for state in list(self.states.values()):
            if isinstance(state, TtlEntriesOps):
                # A list's or map's times: its expired entries are removed (read first, then written).
                for sk, raw in list(self._state_entries(state.ttl_sid)):
                    k = sk[:2] + state.sid + sk[4:]
                    raw_values = self.read(k)
                    state.cleanup_at(k, None if raw_values is None else state._decode(raw_values),
                                     decode_value(raw, _LONG))
            elif state.ttl is not None:
                expired = [sk for sk, raw in self._state_entries(state.ttl_sid)
                           if self.expired(_Q.unpack_from(raw, 1)[0], state.ttl)]
                for sk in expired:
                    self.delete(sk[:2] + state.sid + sk[4:])
                    self.delete(sk)

    def _state_entries(self, sid: bytes) -> Iterator[tuple]:
        """(store key, stored value) of a state's entries in this backend's key groups."""
        kgr = self.key_group_range
        upper = (int.from_bytes(sid, "big") + 1).to_bytes(2, "big")
        for kg in range(kgr.start_key_group, kgr.end_key_group + 1):
            group = kg.to_bytes(2, "big")
            yield from self._entries(group + sid, group + upper)

    # ---- restore ---------------------------------------------------------------------------

    def _write_rows(self, rows, tombstones: bool) -> None:
        self.flush()        # the rows come after what was written before
        kgr = self.key_group_range
        sids = {}
        writer = _BatchWriter(self)
        # A restore's column-wise chunks (KeyedRows) are encoded a chunk at a time; other rows
        # come as one-row chunks.
        chunks = rows.column_chunks() if hasattr(rows, "column_chunks") else None
        if chunks is None:
            chunks = ((name, (kg,), (ns,), (key,), (value,)) for kg, name, ns, key, value in rows)
        for name, kgs, nss, keys, values in chunks:
            if name not in sids:
                state = self.states.get(name)
                sids[name] = (state.sid, state.codec, isinstance(state, RocksDBListState)) if state is not None \
                    else (*self.state_id(name), False)
            sid, codec, is_list = sids[name]
            encoded = encode_entry_keys(kgs, sid, nss, keys, kgr)
            for k, value, key in zip(encoded, values, keys):
                if k is None:       # outside this backend's key-group range
                    continue
                if value is TOMBSTONE:
                    if not tombstones:
                        raise ValueError(f"{self.operator_name}: a full snapshot holds a tombstone ({name}, {key!r})")
                    writer.delete(k)
                else:
                    writer.put(k, encode_list(value, codec) if is_list else encode_value(value, codec))
        writer.close()
        if self._versioned and writer.count:
            self._unversion()

    def restore(self, rows: Iterable[tuple]) -> None:
        """Take the rows of this backend's key-group range (not a change)."""
        self._write_rows(rows, tombstones=False)

    def apply(self, rows: Iterable[tuple]) -> None:
        """Full or incremental rows, in order: a TOMBSTONE value removes the entry (not a change)."""
        self._write_rows(rows, tombstones=True)

    def create_timer_queue(self, name: str) -> RocksDBTimerQueue:
        queue = self.timer_queues[name] = RocksDBTimerQueue(self, name[:1].encode())
        queue.changed = {} if self.tracking else Untracked()
        return queue


class _Entries:
    """A store's entries read a chunk of raw (key, value) pairs at a time (``raw_chunks(size)``,
    a None value: deleted since the last checkpoint): every entry (a full snapshot) or the changed
    ones (an increment). Iterated, rows; ``column_chunks`` decodes each state's entries of a chunk
    at once where its codec allows, deletions as TOMBSTONE rows (entry by entry in Python, a
    5,000,000-key subtask's full snapshot took about 18 s, an increment of 5,000 keys about 20 ms
    of a small epoch's task)."""

    def __init__(self, backend: RocksDBKeyedStateBackend, raw_chunks: Callable[[int], Iterator[tuple]]):
        self.backend = backend
        self.raw_chunks = raw_chunks

    def __iter__(self) -> Iterator[tuple]:
        for keys, values in self.raw_chunks(_ROWS_CHUNK):
            yield from map(self.backend._row, keys, values)

    def column_chunks(self, size: int) -> Iterator[tuple]:
        backend = self.backend
        for keys, values in self.raw_chunks(size):
            there = [i for i, raw in enumerate(values) if raw is not None]
            if len(there) < len(keys):
                yield from rows_by_state(backend._row(k, None) for k, raw in zip(keys, values) if raw is None).items()
                keys, values = [keys[i] for i in there], [values[i] for i in there]
            if keys:
                yield from backend._decode_columns(keys, values)


def _columns_of(keys: pa.Array, values: pa.Array, key_groups, column: str) -> Optional[KeyedColumns]:
    """Text keys (their encoding: a 9-byte head) and typed values as columns; None when a
    value is not stored in its codec (pickled: it did not fit the declared type) or a key is not
    valid UTF-8."""
    m = len(values)
    tags = pc.binary_slice(values, 0, 1)
    if not pc.all(pc.equal(tags, pa.scalar(b"\x00", pa.binary()))).as_py():
        return None
    try:
        texts = _tail(keys, 9).cast(pa.string())
        if column == "utf8":
            decoded = _tail(values, 1).cast(pa.string())
        else:
            width = np.dtype(column).itemsize
            if not pc.all(pc.equal(pc.binary_length(values), width + 1)).as_py():
                return None
            offsets = np.frombuffer(values.buffers()[1], np.int32, count=m + 1, offset=4 * values.offset)
            data = np.frombuffer(values.buffers()[2], np.uint8, count=m * (width + 1), offset=int(offsets[0]))
            decoded = pa.array(data.reshape(m, width + 1)[:, 1:].copy().view(column).ravel()
                               .astype(np.dtype(column).newbyteorder("=")))
    except pa.ArrowInvalid:     # text that is not UTF-8 (a lone surrogate): decoded one by one
        return None
    return KeyedColumns(pa.array(key_groups, pa.int32()), texts, decoded)


def _tail(array: pa.Array, start: int) -> pa.Array:
    """Each binary value from byte ``start`` on (pyarrow 23's binary_slice fails without a stop)."""
    return pc.binary_slice(array, start, max(start, pc.max(pc.binary_length(array)).as_py() or 0))


def _inode(path: str) -> Optional[int]:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _range_tuple(key_group_range) -> Optional[tuple]:
    if key_group_range is None:
        return None
    return (key_group_range.start_key_group, key_group_range.end_key_group)
