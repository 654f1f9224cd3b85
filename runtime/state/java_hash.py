"""Java ``hashCode()`` and Flink ``MathUtils.murmurHash`` for Python keys.

Key groups must match Java Flink bit for bit (state written by one must be
readable by the other), so every Python key is hashed as the Java value Flink
would hold for it:

============================  ===============================================
Python                        Java
============================  ===============================================
``None``                      ``null`` (hash 0; only legal inside tuples)
``bool``                      ``Boolean``
``int`` fitting int32         ``Integer``
``int`` fitting int64         ``Long``
other ``int``                 ``BigInteger``
``float``                     ``Double`` (NaN canonicalised, -0.0 != 0.0)
``str``                       ``String`` (UTF-16 code units)
``bytes``/``bytearray``       ``byte[]`` via ``Arrays.hashCode``
``tuple``/``list``/Row        Flink ``TupleN`` (``31 * result + h(f_i)``)
``datetime.date``             ``LocalDate``
naive ``datetime.datetime``   ``LocalDateTime``
aware ``datetime.datetime``   ``Instant``
naive ``datetime.time``       ``LocalTime``
``decimal.Decimal``           ``BigDecimal``
============================  ===============================================

numpy scalars follow their Python counterparts (``np.int64(5)`` is an
``Integer`` like ``5``; ``np.float32`` widens to ``Double``). The int rule is
by value, not by declared width, so a key hashes the same whether it arrived
as a Python int or from an int64 column.

Dates use the ``java.time`` classes rather than ``java.sql.Date`` or
``java.sql.Timestamp``, whose hashes depend on the JVM's default time zone.
A ``byte[]`` field inside a Java tuple would hash by identity; here it hashes
by content, which is the only deterministic choice.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import pickle
import struct

import numpy as np

from runtime.common import typeinfo as ti
from runtime.common.pickling import NOT_BY_NAME
from runtime.datastream.key_selector import ListKey, plain_key
from runtime.state.pyflink_pickle import SLUICE_TYPES_MODULE, pyflink_dumps

__all__ = ["java_hash_code", "key_by_hash", "murmur_hash", "pickled_key", "to_int32", "typed_hash_code"]

_MASK32 = 0xFFFFFFFF
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_CANONICAL_NAN_BITS = 0x7FF8000000000000
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_DOUBLE = struct.Struct(">d")
_LONG = struct.Struct(">Q")
_FLOAT = struct.Struct(">f")
_INT = struct.Struct(">I")


def to_int32(value: int) -> int:
    """Wrap an int to a signed 32-bit value, like a Java ``(int)`` cast."""
    value &= _MASK32
    return value - ((value & 0x80000000) << 1)


def _long_hash(value: int) -> int:
    bits = value & 0xFFFFFFFFFFFFFFFF
    return to_int32(bits ^ (bits >> 32))


def _big_integer_hash(value: int) -> int:
    magnitude = -value if value < 0 else value
    n_words = (magnitude.bit_length() + 31) // 32
    h = 0
    # BigInteger.mag holds big-endian 32-bit words without leading zero words.
    for word in struct.unpack(f">{n_words}I", magnitude.to_bytes(n_words * 4, "big")):
        h = (31 * h + word) & _MASK32
    return to_int32(-h if value < 0 else h)


def _int_hash(value: int) -> int:
    if _INT32_MIN <= value <= _INT32_MAX:
        return value
    if _INT64_MIN <= value <= _INT64_MAX:
        return _long_hash(value)
    return _big_integer_hash(value)


def _double_hash(value: float) -> int:
    if value != value:
        bits = _CANONICAL_NAN_BITS
    else:
        bits = _LONG.unpack(_DOUBLE.pack(value))[0]
    return to_int32(bits ^ (bits >> 32))


def _string_hash(value: str) -> int:
    if value.isascii():
        units = value.encode("ascii")
    else:
        # surrogatepass keeps lone surrogates, which Java strings may also hold.
        units = memoryview(value.encode("utf-16-le", "surrogatepass")).cast("H")
    h = 0
    for unit in units:
        h = (31 * h + unit) & _MASK32
    return to_int32(h)


def _bytes_hash(value: bytes | bytearray | memoryview) -> int:
    """Arrays.hashCode(byte[]): the bytes as signed Java bytes."""
    return _poly(b - 256 if b > 127 else b for b in bytes(value))


def _tuple_hash(fields) -> int:
    return _poly(map(java_hash_code, fields), 0)


def _poly(hashes, h: int = 1) -> int:
    """Java's ``31 * h + x`` over ``hashes`` from ``h`` (Arrays.hashCode starts from 1, TupleN
    from 0), as a signed 32-bit int."""
    for x in hashes:
        h = (31 * h + x) & _MASK32
    return to_int32(h)


def _local_date_hash(value: _dt.date) -> int:
    year = value.year
    return to_int32((year & 0xFFFFF800) ^ ((year << 11) + (value.month << 6) + value.day))


def _local_time_hash(value: _dt.time | _dt.datetime) -> int:
    nano_of_day = ((value.hour * 3600 + value.minute * 60 + value.second) * 1_000_000_000
                   + value.microsecond * 1000 + getattr(value, "nanosecond", 0))
    return _long_hash(nano_of_day)


def _datetime_hash(value: _dt.datetime) -> int:
    if value.tzinfo is None or value.utcoffset() is None:
        return _local_date_hash(value) ^ _local_time_hash(value)
    # Integer arithmetic: a float timestamp would lose microseconds far from 1970.
    delta = value - _EPOCH_UTC
    seconds = delta.days * 86400 + delta.seconds
    nanos = delta.microseconds * 1000 + getattr(value, "nanosecond", 0)
    return to_int32(_long_hash(seconds) + 51 * nanos)


def _decimal_hash(value: decimal.Decimal) -> int:
    if not value.is_finite():
        raise ValueError(f"cannot hash {value!r} as a key: java.math.BigDecimal has no NaN or Infinity")
    sign, digits, exponent = value.as_tuple()
    unscaled = int("".join(map(str, digits)) or "0")
    if sign:
        unscaled = -unscaled
    # BigDecimal hashes its unscaled value as a BigInteger whatever its size.
    return to_int32(31 * _big_integer_hash(unscaled) - exponent)


def java_hash_code(value) -> int:
    """Return Java's ``hashCode()`` of the Java value Flink would hold for ``value``.

    The result is a signed 32-bit int. See the module docstring for the type
    mapping; unsupported types raise ``TypeError``.
    """
    # Exact-type checks first: they are the hot path for keyed streams.
    cls = type(value)
    if cls is str:
        return _string_hash(value)
    if cls is int:
        return value if _INT32_MIN <= value <= _INT32_MAX else _int_hash(value)
    if value is None:
        return 0
    # bool before int: bool is an int subclass but Boolean hashes to 1231/1237.
    if isinstance(value, (bool, np.bool_)):
        return 1231 if value else 1237
    if isinstance(value, (int, np.integer)):
        return _int_hash(int(value))
    if isinstance(value, (float, np.floating)):
        return _double_hash(float(value))
    if isinstance(value, str):
        return _string_hash(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes_hash(value)
    if isinstance(value, (tuple, list)):
        return _tuple_hash(value)
    row_values = getattr(value, "_values", None)
    if isinstance(row_values, (tuple, list)):
        return _tuple_hash(row_values)
    if isinstance(value, _dt.datetime):
        return _datetime_hash(value)
    if isinstance(value, _dt.date):
        return _local_date_hash(value)
    if isinstance(value, _dt.time):
        if value.utcoffset() is not None:
            raise TypeError("cannot hash a timezone-aware datetime.time as a key: "
                            "use a naive time or a timezone-aware datetime")
        return _local_time_hash(value)
    if isinstance(value, decimal.Decimal):
        return _decimal_hash(value)
    raise TypeError(
        f"cannot hash key of type {cls.__module__}.{cls.__qualname__}: key_by needs "
        "str/int/float/bool/bytes/tuple/Row keys (or date/datetime/Decimal), "
        "or a key selector returning one"
    )


# ---------------------------------------------------------------------------- key_by keys
#
# PyFlink 2.3 (pyflink/datastream/data_stream.py key_by) keys a stream by
# ``Row.of(key)``, the key being the Java value of ``key_type``, or without one
# the key's pickled bytes (``Types.PICKLED_BYTE_ARRAY()``: cloudpickle.dumps,
# protocol 5, which for data is ``pickle.dumps(key, 5)``), through
# org.apache.flink.streaming.api.functions.python.KeyByKeySelector. The key
# group comes from that Row's hashCode: RowUtils.deepHashCodeRow, i.e.
# ``31 * kind + deepHashCodeInternal(fields)``, kind INSERT being 0.


def pickled_key(key) -> bytes:
    """The bytes PyFlink hashes for a key of ``key_by`` without a ``key_type``."""
    if type(key) in _SCALARS:
        return pickle.dumps(key, 5)
    if isinstance(key, ListKey):
        key = plain_key(key)
    try:
        data = pickle.dumps(key, 5)
    except NOT_BY_NAME as e:
        raise TypeError(
            f"key_by: the key {key!r} cannot be pickled by name ({e}). A key of a class the workers "
            f"know only by value (one defined in the job's script) would fall in another key group in "
            f"every run; return a key of plain values instead: a str, a number, or a tuple or Row of "
            f"them (the fields that identify it)") from None
    # A key holding a Row pickles naming Sluice's module (after a global, STACK_GLOBAL: a quick
    # first test); PyFlink's Row pickles otherwise.
    return pyflink_dumps(key) if b"\x93" in data and SLUICE_TYPES_MODULE in data else data


_SCALARS = frozenset((str, int, float, bool, bytes))    # keys that cannot hold a Row


def _float_hash(value: float) -> int:
    # Float.floatToIntBits: NaN canonical.
    return 0x7FC00000 if value != value else to_int32(_INT.unpack(_FLOAT.pack(value))[0])


_BASIC_HASHES = {     # by the type's name (BasicTypeInfo's str)
    "String": lambda v: _string_hash(v) if isinstance(v, str) else _type_error(v, "a str"),
    "Boolean": lambda v: 1231 if v else 1237,
    "Byte": lambda v: to_int32(int(v)),
    "Short": lambda v: to_int32(int(v)),
    "Integer": lambda v: to_int32(int(v)),
    "Long": lambda v: _long_hash(int(v)),
    "Float": lambda v: _float_hash(float(v)),
    "Double": lambda v: _double_hash(float(v)),
    "Char": lambda v: ord(v),
    "BigInteger": lambda v: _big_integer_hash(int(v)),
    "BigDecimal": lambda v: _decimal_hash(decimal.Decimal(v)),
}


def _type_error(value, expected: str):
    raise TypeError(f"key_by: the key {value!r} is not {expected}, as its key_type says: "
                    f"return such keys from the key selector, or change key_type")


def typed_hash_code(value, key_type) -> int:
    """Java ``hashCode()`` of ``value`` held as the Java value of ``key_type``."""
    if value is None:
        return 0
    if isinstance(key_type, ti.BasicTypeInfo) and str(key_type) in _BASIC_HASHES:
        return _BASIC_HASHES[str(key_type)](value)
    if isinstance(key_type, ti.TupleTypeInfo):
        # Flink's TupleN.hashCode: 31 * result + f_i.hashCode(), from 0.
        return _poly(map(typed_hash_code, value, key_type.get_field_types()), 0)
    if isinstance(key_type, ti.RowTypeInfo):
        return _poly(map(_deep_hash_code, value, key_type.get_field_types()))
    if isinstance(key_type, ti.PickledBytesTypeInfo):
        return java_hash_code(value)   # only reached for the bytes a pickled key already is
    if isinstance(key_type, (ti.DateTypeInfo, ti.TimeTypeInfo, ti.TimestampTypeInfo, ti.LocalTimeTypeInfo,
                             ti.InstantTypeInfo)):
        return java_hash_code(value)
    raise TypeError(f"key_by: key_type {key_type} is not supported for keys: use a basic type, "
                    f"Types.TUPLE, Types.ROW or no key_type (the key is then pickled, as in PyFlink)")


def _deep_hash_code(value, key_type) -> int:
    """Flink's RowUtils.deepHashCodeInternal of ``value`` held as the Java value of ``key_type``."""
    if value is None:
        return 0
    if isinstance(key_type, ti.PickledBytesTypeInfo):
        return to_int32(31 + _bytes_hash(pickled_key(value)))
    if isinstance(key_type, ti.PrimitiveArrayTypeInfo):
        # Arrays.hashCode(prim[]) inside Arrays.deepHashCode(new Object[]{value}).
        element = key_type.get_element_type()
        units = value if not isinstance(value, (bytes, bytearray)) else [b - 256 if b > 127 else b for b in value]
        return to_int32(31 + _poly(typed_hash_code(v, element) for v in units))
    if isinstance(key_type, (ti.BasicArrayTypeInfo, ti.ObjectArrayTypeInfo)):
        element = key_type.get_element_type()
        return _poly(_deep_hash_code(v, element) for v in value)
    return to_int32(31 + typed_hash_code(value, key_type))


def key_by_hash(key, key_type) -> int:
    """The hashCode of the key PyFlink's ``key_by(selector, key_type)`` routes ``key`` by:
    ``Row.of(key)``, ``key`` held as ``key_type`` (``PICKLED_BYTE_ARRAY``: its pickled bytes)."""
    return to_int32(31 + _deep_hash_code(key, key_type))


def murmur_hash(code: int) -> int:
    """Flink ``MathUtils.murmurHash(int)``: a non-negative int32 mixing of ``code``.

    ``code`` is first wrapped to 32 bits, as a Java ``(int)`` cast would.
    """
    code &= _MASK32
    code = (code * 0xCC9E2D51) & _MASK32
    code = ((code << 15) | (code >> 17)) & _MASK32
    code = (code * 0x1B873593) & _MASK32
    code = ((code << 13) | (code >> 19)) & _MASK32
    code = (code * 5 + 0xE6546B64) & _MASK32
    code ^= 4
    # bitMix
    code ^= code >> 16
    code = (code * 0x85EBCA6B) & _MASK32
    code ^= code >> 13
    code = (code * 0xC2B2AE35) & _MASK32
    code ^= code >> 16
    if code < 0x80000000:
        return code
    # Java returns -code for negatives, except Integer.MIN_VALUE which maps to 0.
    return 0 if code == 0x80000000 else (1 << 32) - code
