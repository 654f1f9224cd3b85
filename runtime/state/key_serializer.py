"""The bytes Flink serializes a key to, as far as BATCH mode's sort order needs them.

In BATCH mode Flink sorts a keyed operator's input by the serialized key (SortingDataInput with
VariableLengthByteKeyComparator: the bytes compared as signed Java bytes, a shorter prefix
first, then the timestamp), so a keyed operator sees, and emits, its keys in that order. PyFlink
2.3 keys by ``Row.of(key)`` (runtime.state.java_hash.key_by_hash) whose RowSerializer writes a
header byte (the same for every key, left out here) and then the field:

* ``PICKLED_BYTE_ARRAY`` (key_by without key_type): BytePrimitiveArraySerializer, a big-endian
  int length then the pickled bytes;
* STRING: StringValue.writeString, ``len + 1`` then each UTF-16 unit, 7 bits a byte, the high
  bit set on all but the last byte of each;
* BOOLEAN, BYTE, SHORT, INT, LONG, FLOAT, DOUBLE: big-endian, as DataOutput writes them.

A field key (``key_type`` None, a Sluice extension) is serialized as the Java value it hashes as
(a str a String, an int fitting int32 an Integer, else a Long). Keys of other types sort by their
pickled bytes: an order that is the same on every run, not necessarily PyFlink's.
"""
from __future__ import annotations

import struct

from runtime.common.typeinfo import BasicTypeInfo, PickledBytesTypeInfo
from runtime.state.java_hash import pickled_key

__all__ = ["sort_key"]

# Python compares bytes unsigned; Flink's comparator compares them as signed Java bytes.
_SIGNED = bytes((b + 128) & 0xFF for b in range(256))


def _varint7(n: int, out: bytearray) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _string_bytes(value: str) -> bytes:
    units = memoryview(value.encode("utf-16-le", "surrogatepass")).cast("H")
    out = bytearray()
    _varint7(len(units) + 1, out)      # 0 stands for null
    for unit in units:
        _varint7(unit, out)
    return bytes(out)


def _int_bytes(value) -> bytes:
    value = int(value)
    return struct.pack(">i", value) if -(1 << 31) <= value < (1 << 31) else struct.pack(">q", value)


_BASIC = {
    "String": _string_bytes,
    "Boolean": lambda v: b"\x01" if v else b"\x00",
    "Byte": lambda v: struct.pack(">b", int(v)),
    "Short": lambda v: struct.pack(">h", int(v)),
    "Integer": lambda v: struct.pack(">i", int(v)),
    "Long": lambda v: struct.pack(">q", int(v)),
    "Float": lambda v: struct.pack(">f", float(v)),
    "Double": lambda v: struct.pack(">d", float(v)),
}


def serialize_key(key, key_type=None) -> bytes:
    """The serialized key (see the module doc), without the Row's header byte."""
    if isinstance(key_type, PickledBytesTypeInfo):
        data = pickled_key(key)
        return struct.pack(">i", len(data)) + data
    if isinstance(key_type, BasicTypeInfo) and str(key_type) in _BASIC:
        return _BASIC[str(key_type)](key)
    if key_type is None and type(key) is str:
        return _string_bytes(key)
    if key_type is None and type(key) is int and -(1 << 63) <= key < (1 << 63):
        return _int_bytes(key)
    return pickled_key(key)


def sort_key(key, key_type=None) -> bytes:
    """Bytes whose Python order is the order Flink's BATCH sort gives ``key``."""
    return serialize_key(key, key_type).translate(_SIGNED)
