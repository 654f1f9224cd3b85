"""Value codecs of the RocksDB backend: how a state's values are stored.

Its own module because the states write values in these encodings and snapshots decode them,
a chunk at a time where a codec allows (Flink's state serializers).

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
"""
from __future__ import annotations

import pickle
import struct
from typing import Callable, Optional

from runtime.common.pickling import dumps
from runtime.common.typeinfo import Types
from runtime.state.rocksdb_keys import UINT32

__all__ = ["Codec", "CODECS", "LONG_CODEC", "codec_of", "encode_value", "encode_list", "appended", "decode_value"]


class Codec:
    """A declared type's encoding: ``encode`` gives None for a value that does not fit it.
    ``column``: how a scan decodes a column of them at once (a NumPy dtype of a fixed-width
    value, "utf8" for text), None: one by one."""

    def __init__(self, encode: Callable, decode: Callable, column: Optional[str] = None):
        self.encode, self.decode = encode, decode     # decode(buf, start, end)
        self.column = column


def _int_codec(fmt: str) -> Codec:
    s = struct.Struct(fmt)
    lo, hi = -(1 << (8 * s.size - 1)), 1 << (8 * s.size - 1)

    def encode(v):
        return s.pack(v) if type(v) is int and lo <= v < hi else None
    return Codec(encode, lambda buf, a, b: s.unpack_from(buf, a)[0], _NUMPY_INTS[fmt])


_NUMPY_INTS = {">q": ">i8", ">i": ">i4", ">h": ">i2", ">b": ">i1"}


_D = struct.Struct(">d")
CODECS = {
    Types.LONG(): _int_codec(">q"),
    Types.INT(): _int_codec(">i"),
    Types.SHORT(): _int_codec(">h"),
    Types.BYTE(): _int_codec(">b"),
    Types.DOUBLE(): Codec(lambda v: _D.pack(v) if type(v) is float else None,
                           lambda buf, a, b: _D.unpack_from(buf, a)[0], ">f8"),
    Types.FLOAT(): Codec(lambda v: _D.pack(v) if type(v) is float else None,
                          lambda buf, a, b: _D.unpack_from(buf, a)[0]),
    Types.STRING(): Codec(lambda v: v.encode("utf-8", "surrogatepass") if type(v) is str else None,
                           lambda buf, a, b: buf[a:b].decode("utf-8", "surrogatepass"), "utf8"),
    Types.BOOLEAN(): Codec(lambda v: (b"\x01" if v else b"\x00") if type(v) is bool else None,
                            lambda buf, a, b: buf[a] == 1),
}


def codec_of(type_info) -> Optional[Codec]:
    """The encoding of values declared as ``type_info``, or None (stored pickled)."""
    if type_info is None:
        return None
    try:
        return CODECS.get(type_info)
    except TypeError:       # an unhashable type information
        return None


def encode_value(value, codec: Optional[Codec]) -> bytes:
    if codec is not None:
        payload = codec.encode(value)
        if payload is not None:
            return b"\x00" + payload
    return b"\x01" + dumps(value)


def encode_list(values, codec: Optional[Codec]) -> bytes:
    parts = [b"\x02"]
    for v in values:
        e = encode_value(v, codec)
        parts.append(UINT32.pack(len(e)))
        parts.append(e)
    return b"".join(parts)


def appended(raw: Optional[bytes], elements: bytes, codec: Optional[Codec]) -> bytes:
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


def decode_value(buf: bytes, codec: Optional[Codec]):
    tag = buf[0]
    if tag == 0:
        return codec.decode(buf, 1, len(buf))
    if tag == 1:
        return pickle.loads(buf[1:])
    if tag == 2:
        out, i, n = [], 1, len(buf)
        unpack = UINT32.unpack_from
        while i < n:
            (size,) = unpack(buf, i)
            i += 4
            out.append(_decode_element(buf, i, i + size, codec))
            i += size
        return out
    raise ValueError(f"unreadable value encoding (tag {tag})")


LONG_CODEC = CODECS[Types.LONG()]
