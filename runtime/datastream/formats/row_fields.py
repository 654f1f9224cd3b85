"""What the row formats (JSON, CSV, Avro) share: the ROW type they are built for, Java's text of
a field's value and Java's parsing of a field's text, and the error a record that does not parse
raises.

Flink's row schemas are Java classes; a value's text is the Java object's (``Double.toString``,
``BigDecimal.toString``, ``java.sql.Date.toString``...), and text is parsed as Java's
``Integer.valueOf``, ``Boolean.valueOf``, ``Double.valueOf`` parse it, so that bytes written here
equal what Flink writes and bytes Flink reads read the same here.
"""
from __future__ import annotations

import base64
import binascii
import datetime
import re
from decimal import Decimal
from typing import Any, Optional

import numpy as np

from runtime.common.arrow import big_decimal
from runtime.common.java_numbers import double_to_string, float_to_string
from runtime.common.typeinfo import (
    BasicArrayTypeInfo, DateTypeInfo, LocalTimeTypeInfo, ObjectArrayTypeInfo, PrimitiveArrayTypeInfo,
    RowTypeInfo, TimestampTypeInfo, TimeTypeInfo, TypeInformation, Types)
from runtime.common.types import Row


class RecordParseError(ValueError):
    """A record a deserialization schema could not read. ``field`` is the field's name (or None
    when the record as a whole is bad), ``position`` its index; the message names both and the
    option that skips such records. A source adds where the record came from (a Kafka source:
    topic, partition and offset) by catching it."""

    def __init__(self, message: str, field: Optional[str] = None, position: Optional[int] = None):
        super().__init__(message)
        self.field = field
        self.position = position


def row_type_info(type_info: Any, schema: str) -> RowTypeInfo:
    """The ROW type a row schema is built for (Flink: "Row type information expected")."""
    if type_info is None:
        raise TypeError(f"{schema}: type information must not be None; pass the stream's "
                        f"Types.ROW_NAMED([...], [...]) or Types.ROW([...])")
    if not isinstance(type_info, RowTypeInfo):
        raise TypeError(f"{schema}: Row type information expected, got {type_info!r}; declare the "
                        f"records as Types.ROW_NAMED([...], [...]) or Types.ROW([...])")
    return type_info


def make_row(values: list, names: list) -> Row:
    row = Row(*values)
    row.set_field_names(names)
    return row


def element_type(type_info: TypeInformation) -> Optional[TypeInformation]:
    """The element type of an array Flink's row formats take as an array (basic and object
    arrays), else None."""
    if isinstance(type_info, (BasicArrayTypeInfo, ObjectArrayTypeInfo)):
        return type_info.get_element_type()
    return None


def is_byte_array(type_info: TypeInformation) -> bool:
    return isinstance(type_info, PrimitiveArrayTypeInfo) and type_info.get_element_type() == Types.BYTE()


# ---------------------------------------------------------------------------------------------
# Java's text of a value, and Java's parse of a text
# ---------------------------------------------------------------------------------------------

_INT_BITS = {Types.BYTE(): 8, Types.SHORT(): 16, Types.INT(): 32, Types.LONG(): 64}
_JAVA_INT = re.compile(r"[+-]?\d+")
# Double.valueOf's grammar (FloatingDecimal), less hexadecimal floats: an optional type suffix
_JAVA_FLOAT = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?)")
_BIG_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def integer_bits(type_info: TypeInformation) -> Optional[int]:
    return _INT_BITS.get(type_info)


def number_text(value: Any, type_info: TypeInformation) -> str:
    """A numeric field's text as Java writes the boxed value."""
    if type_info == Types.DOUBLE():
        return double_to_string(value)
    if type_info == Types.FLOAT():
        return float_to_string(value)
    if type_info == Types.BIG_DEC():
        return str(big_decimal(value))          # BigDecimal.toString and Python's follow one spec
    return str(int(value))


def parse_java_int(text: str, bits: int) -> int:
    """``Integer.valueOf`` (``Long``, ``Short``, ``Byte``): decimal digits in range, nothing else."""
    if not _JAVA_INT.fullmatch(text):
        raise ValueError(f'For input string: "{text}"')
    n = int(text)
    if not -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
        raise ValueError(f'Value out of range. Value:"{text}"')
    return n


def parse_java_double(text: str) -> float:
    """``Double.valueOf``: Java's literals (``1e3``, ``NaN``, ``Infinity``, ``1.5d``); Python's
    own spellings (``nan``, ``inf``, ``1_000``) are refused as Java refuses them."""
    stripped = text.strip()
    if not _JAVA_FLOAT.fullmatch(stripped):
        raise ValueError(f'For input string: "{text}"')
    return float(stripped[:-1] if stripped[-1] in "fFdD" else stripped)


def parse_big_decimal(text: str) -> Decimal:
    """``new BigDecimal(text)``: digits, a point, an exponent; no NaN, infinity or suffix."""
    if not _BIG_DECIMAL.fullmatch(text):
        raise ValueError(f"{text!r} is not a BigDecimal")
    return big_decimal(Decimal(text))


def parse_java_boolean(text: str) -> bool:
    """``Boolean.valueOf``: true for "true" in any case, false for anything else."""
    return text.lower() == "true"


def parse_number(text: str, type_info: TypeInformation) -> Any:
    """A numeric field's text as Java's ``valueOf`` of the type reads it (after ``trim()``)."""
    text = text.strip()
    bits = _INT_BITS.get(type_info)
    if bits:
        return parse_java_int(text, bits)
    if type_info == Types.DOUBLE():
        return parse_java_double(text)
    if type_info == Types.FLOAT():
        return float(np.float32(parse_java_double(text)))
    if type_info == Types.BIG_INT():
        if not _JAVA_INT.fullmatch(text):
            raise ValueError(f'For input string: "{text}"')
        return int(text)
    return parse_big_decimal(text)


def is_number(type_info: TypeInformation) -> bool:
    return type_info in _NUMBERS


_NUMBERS = {Types.BYTE(), Types.SHORT(), Types.INT(), Types.LONG(), Types.FLOAT(), Types.DOUBLE(),
            Types.BIG_INT(), Types.BIG_DEC()}


def base64_text(value: bytes) -> str:
    """Jackson's text of a byte[]: Base64 (MIME-no-linefeeds, padded)."""
    return base64.b64encode(bytes(value)).decode("ascii")


def parse_base64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ValueError(f"{text!r} is not Base64 (a byte array's text)") from None


def fraction_text(microsecond: int) -> str:
    """``DateTimeFormatter``'s ``appendFraction(NANO_OF_SECOND, 0, 9, true)``: the fraction's
    digits without trailing zeros, none for zero."""
    return "." + f"{microsecond:06d}".rstrip("0") if microsecond else ""


def local_time_text(t: datetime.time) -> str:
    """``LocalTime.toString``: HH:mm, then :ss unless zero, then the fraction in groups of three."""
    text = f"{t.hour:02d}:{t.minute:02d}"
    if t.second or t.microsecond:
        text += f":{t.second:02d}"
    if t.microsecond:
        text += f".{t.microsecond // 1000:03d}" if t.microsecond % 1000 == 0 else f".{t.microsecond:06d}"
    return text


def timestamp_text(value: datetime.datetime) -> str:
    """``java.sql.Timestamp.toString``: ``yyyy-mm-dd hh:mm:ss.f``, the fraction without trailing
    zeros but at least one digit."""
    return value.strftime("%Y-%m-%d %H:%M:%S") + "." + (f"{value.microsecond:06d}".rstrip("0") or "0")


TEMPORAL = (DateTypeInfo, TimeTypeInfo, TimestampTypeInfo, LocalTimeTypeInfo)


def described(type_info: TypeInformation) -> str:
    """A type as the errors name it: ``INT``, ``ROW<...>``."""
    for name in ("STRING", "BOOLEAN", "BYTE", "SHORT", "INT", "LONG", "FLOAT", "DOUBLE", "CHAR", "BIG_INT", "BIG_DEC",
                 "SQL_DATE", "SQL_TIME", "SQL_TIMESTAMP", "LOCAL_DATE", "LOCAL_TIME", "LOCAL_DATE_TIME", "INSTANT"):
        if type_info == getattr(Types, name)():
            return name
    return repr(type_info)
