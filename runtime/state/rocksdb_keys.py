"""Key serialization of the RocksDB backend: how entries, timers and the metadata are keyed.

Its own module because the key layout is the store's on-disk format, shared by the states, the
timer queue, snapshots and restores (Flink's RocksDBKeySerializationUtils and
SerializedCompositeKeyBuilder).

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
"""
from __future__ import annotations

import pickle
import struct
from typing import Any

from runtime.datastream.window import GlobalWindow, TimeWindow

__all__ = ["META_KEY", "TIMERS", "STATE_END", "encode_key", "decode_key", "encode_namespace", "decode_namespace",
           "encode_entry_keys", "timestamp_bytes"]

META_KEY = b"\xffmeta"
TIMERS = b"\xfe"
STATE_END = b"\x80\x00"         # key groups are below 32768
PICKLE_PROTOCOL = 5

INT64 = struct.Struct(">q")
INT64_PAIR = struct.Struct(">qq")
UINT32 = struct.Struct(">I")
TIMESTAMP = struct.Struct(">Q")
TIMESTAMP_OFFSET = 1 << 63


def encode_key(key) -> bytes:
    """A stable, self-delimiting encoding of a key: str, 64-bit int, tuples of keys, else pickled."""
    t = type(key)
    if t is str:
        b = key.encode("utf-8", "surrogatepass")
        return b"\x01" + UINT32.pack(len(b)) + b
    if t is int and -TIMESTAMP_OFFSET <= key < TIMESTAMP_OFFSET:
        return b"\x02" + INT64.pack(key)
    if t is tuple and len(key) < 256:
        return b"\x04" + bytes((len(key),)) + b"".join(encode_key(k) for k in key)
    b = pickle.dumps(key, protocol=PICKLE_PROTOCOL)
    return b"\x03" + UINT32.pack(len(b)) + b


def decode_key(buf: bytes, i: int = 0) -> tuple[Any, int]:
    """The key encoded at ``buf[i:]`` and where it ends."""
    tag = buf[i]
    if tag == 1:
        (n,) = UINT32.unpack_from(buf, i + 1)
        return buf[i + 5:i + 5 + n].decode("utf-8", "surrogatepass"), i + 5 + n
    if tag == 2:
        return INT64.unpack_from(buf, i + 1)[0], i + 9
    if tag == 4:
        n, i = buf[i + 1], i + 2
        items = []
        for _ in range(n):
            item, i = decode_key(buf, i)
            items.append(item)
        return tuple(items), i
    if tag == 3:
        (n,) = UINT32.unpack_from(buf, i + 1)
        return pickle.loads(buf[i + 5:i + 5 + n]), i + 5 + n
    raise ValueError(f"unreadable key encoding (tag {tag})")


def encode_namespace(ns) -> bytes:
    if ns is None:
        return b""
    if type(ns) is TimeWindow:
        return b"\x01" + INT64_PAIR.pack(ns.start, ns.end)
    if isinstance(ns, GlobalWindow):
        return b"\x02"
    return b"\x03" + pickle.dumps(ns, protocol=PICKLE_PROTOCOL)


def decode_namespace(buf: bytes, i: int):
    if i >= len(buf):
        return None
    tag = buf[i]
    if tag == 1:
        start, end = INT64_PAIR.unpack_from(buf, i + 1)
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
        pack = UINT32.pack
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


def timestamp_bytes(timestamp: int) -> bytes:
    return TIMESTAMP.pack(timestamp + TIMESTAMP_OFFSET)
