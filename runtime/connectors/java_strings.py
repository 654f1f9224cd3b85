"""The text ``print()`` shows for a record, as PyFlink 2.3 prints it.

PyFlink's ``print()`` (``DataStream._align_output_type``) has three cases, by the stream's type:

- no type (PICKLED_BYTE_ARRAY, or a type Sluice inferred, ``TypeInformation.inferred``): a Python map turns each value into ``str(value)`` (a str as it is);
- a ROW type: a Python map turns the Row into ``'{kind}[{items}]'``, the items by Python's ``str``
  joined with ``,`` and no space: ``+I[x,0,None]``;
- any other type: the record goes to Java as the Java object of its type, and Java's PrintSink
  prints its ``toString()``: ``(hi,1,30,7)`` for a Tuple, ``1.0E7`` for a double, ``true``,
  ``null``, and a Row nested in a Tuple as Flink's Row (``+I[1, true]``, with a space).

Each rule was checked by running PyFlink 2.3.0 (Java 17) on the values of tests/test_print_format.py.
Where Java's text is not reproducible, this prints something readable instead: a top-level array
is Java's ``[I@1b2c3d`` (an identity hash), printed here as ``[1, 2, 3]``; JDK 17's
``Double.toString`` sometimes gives more digits than the shortest (``9.999999999999999E22`` for
1e23), printed here with the shortest digits (what JDK 19+ prints).
"""
from __future__ import annotations

import datetime

from runtime.common.arrow import big_decimal
from runtime.common.java_numbers import double_to_string, float_to_string
from runtime.common.typeinfo import (
    BasicTypeInfo, DateTypeInfo, LocalTimeTypeInfo, MapTypeInfo, PickledBytesTypeInfo, RowTypeInfo, TimestampTypeInfo,
    TimeTypeInfo, TupleTypeInfo, TypeInformation, Types)
from runtime.state.java_hash import java_hash_code


def printed_text(value, type_info) -> str:
    """``value`` as PyFlink's ``print()`` shows a record of a stream declared ``type_info``."""
    if isinstance(type_info, RowTypeInfo) and not type_info.inferred:
        return f"{_row_kind(value)}[{','.join(str(v) for v in value)}]"
    return sink_text(value, type_info)


def sink_text(value, type_info) -> str:
    """``value`` as a Java sink's ``toString`` writes it (a FileSink with Flink's SimpleStringEncoder):
    PyFlink hands Java the record as the Java object of its declared type, Row included
    (``+I[1, true]``). An undeclared record would reach Java as pickled bytes (``[B@1b2c3d``):
    Python's ``str`` instead, as ``print()`` does."""
    if type_info is None or type_info.inferred or isinstance(type_info, PickledBytesTypeInfo):
        return value if isinstance(value, str) else str(value)
    return java_string(value, type_info)


def java_string(value, type_info: TypeInformation) -> str:
    """Java's ``toString`` of the Java object PyFlink makes of ``value`` for ``type_info``."""
    if value is None:
        return "null"
    if isinstance(type_info, TupleTypeInfo):        # Tuple.toString: "(" f0 "," f1 ... ")"
        return "(" + ",".join(java_string(v, t) for v, t in zip(value, type_info.get_field_types())) + ")"
    if isinstance(type_info, RowTypeInfo):          # Row.toString (RowUtils): "+I[" f0 ", " f1 ... "]"
        fields = ", ".join(java_string(v, t) for v, t in zip(value, type_info.get_field_types()))
        return f"{_row_kind(value)}[{fields}]"
    if isinstance(type_info, MapTypeInfo):
        k, v = type_info.get_key_type(), type_info.get_value_type()
        return "{" + ", ".join(f"{java_string(a, k)}={java_string(b, v)}" for a, b in _hash_map_order(value)) + "}"
    if hasattr(type_info, "get_element_type"):      # lists (ArrayList) and arrays (Arrays.toString)
        element = type_info.get_element_type()
        return "[" + ", ".join(java_string(v, element) for v in value) + "]"
    if isinstance(type_info, BasicTypeInfo):
        return _basic(value, type_info)
    if isinstance(type_info, (DateTypeInfo, TimeTypeInfo, TimestampTypeInfo, LocalTimeTypeInfo)):
        return _temporal(value, type_info)
    return value if isinstance(value, str) else str(value)


def _row_kind(value) -> str:
    return str(value.get_row_kind()) if hasattr(value, "get_row_kind") else "+I"


def _hash_map_order(mapping: dict) -> list:
    """The entries in the order Java's HashMap iterates them: Flink's MapSerializer fills
    ``new HashMap<>(size)`` in the order the entries come; a HashMap lists its buckets in
    order (the spread hash modulo the table size), each bucket in insertion order."""
    items = list(mapping.items())
    capacity = 1
    while capacity < len(items):
        capacity *= 2                   # tableSizeFor(size)
    while len(items) > capacity * 0.75:
        capacity *= 2                   # resized while filling past the load factor

    def bucket(item) -> int:
        h = java_hash_code(item[0]) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(items, key=bucket)    # stable: a bucket keeps its insertion order


def _basic(value, basic: BasicTypeInfo) -> str:
    if basic == Types.BOOLEAN():
        return "true" if value else "false"
    if basic == Types.DOUBLE():
        return double_to_string(value)
    if basic == Types.FLOAT():          # Float.toString: the shortest digits of the 32-bit float
        return float_to_string(value)
    if basic == Types.BIG_DEC():
        return str(big_decimal(value))  # BigDecimal.toString and Python's follow one spec
    if basic == Types.INSTANT():
        return _instant(value)
    return value if isinstance(value, str) else str(value)


def _temporal(value, type_info) -> str:
    if isinstance(type_info, DateTypeInfo):
        return value.isoformat()                                    # java.sql.Date
    if isinstance(type_info, TimeTypeInfo):
        return value.strftime("%H:%M:%S")                           # java.sql.Time
    if isinstance(type_info, TimestampTypeInfo):                    # java.sql.Timestamp: nanos, zeros cut
        return value.strftime("%Y-%m-%d %H:%M:%S") + "." + (f"{value.microsecond:06d}".rstrip("0") or "0")
    if type_info == Types.LOCAL_DATE():
        return value.isoformat()
    if type_info == Types.LOCAL_TIME():
        return _local_time(value, seconds=False)
    return f"{value.date().isoformat()}T{_local_time(value.time(), seconds=False)}"


def _local_time(t: datetime.time, seconds: bool) -> str:
    """LocalTime.toString: HH:mm, then :ss unless zero (always with ``seconds``, as
    Instant.toString), then the fraction in groups of three digits."""
    text = f"{t.hour:02d}:{t.minute:02d}"
    if seconds or t.second or t.microsecond:
        text += f":{t.second:02d}"
    if t.microsecond:
        text += f".{t.microsecond // 1000:03d}" if t.microsecond % 1000 == 0 else f".{t.microsecond:06d}"
    return text


def _instant(value) -> str:
    """Instant.toString (ISO-8601 in UTC, seconds always shown); values are UTC datetimes or
    epoch milliseconds."""
    if isinstance(value, int):
        value = datetime.datetime.fromtimestamp(value / 1000, datetime.timezone.utc)
    if value.tzinfo is not None:
        value = value.astimezone(datetime.timezone.utc)
    return f"{value.date().isoformat()}T{_local_time(value.time(), seconds=True)}Z"
