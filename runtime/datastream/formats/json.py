"""JSON rows, as ``pyflink.datastream.formats.json``: ``JsonRowSerializationSchema`` and
``JsonRowDeserializationSchema``, with their builders, for a Kafka sink's and source's values.

The bytes are Flink's (flink-json's Jackson writer, checked against PyFlink 2.3.0 on Java 17 in
tests/test_row_formats.py): one compact object per record, the fields in the ROW type's order,
``null`` for None, doubles as Java writes them (``1.0E20``), BIG_DEC as a plain number, dates
``2024-01-07``, SQL_TIME ``10:30:05Z``, SQL_TIMESTAMP ``2024-01-07T10:30:05.123Z`` (RFC 3339 in
UTC, the fraction's trailing zeros cut), byte arrays Base64, non-ASCII text as UTF-8.
Reading takes Flink's leniency: a field missing from the object is null (unless
``fail_on_missing_field()``), fields not in the type are ignored, an INT field takes ``"5"`` and
``1.7`` (as 1), a STRING field takes any JSON value (an object as its JSON text), a message
``null`` is no record. A record that does not parse raises ``RecordParseError`` naming the field
and its position; with ``ignore_parse_errors()`` such a field is null and a message that is not
a JSON object is skipped, as Flink's.
"""
from __future__ import annotations

import datetime
import json
import math
import re
from decimal import Decimal
from typing import Any, Callable, Optional

from runtime.common.serialization import DeserializationSchema, SerializationSchema
from runtime.common.typeinfo import (
    BasicTypeInfo, CollectionTypeInfo, DateTypeInfo, MapTypeInfo, RowTypeInfo, TimestampTypeInfo, TimeTypeInfo,
    TypeInformation, Types)
from runtime.datastream.formats.row_fields import (
    RecordParseError, base64_text, described, fraction_text, integer_bits, is_byte_array, make_row, number_text,
    parse_base64, parse_big_decimal, parse_java_boolean, parse_java_double, parse_java_int, parse_number,
    row_type_info)

__all__ = ["JsonRowDeserializationSchema", "JsonRowSerializationSchema"]

_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}        # Jackson: upper-case hex
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\", ord("\b"): "\\b", ord("\t"): "\\t", ord("\n"): "\\n",
                 ord("\f"): "\\f", ord("\r"): "\\r"})


def _string(value: str) -> str:
    return '"' + value.translate(_ESCAPES) + '"'


def _rfc3339_time(t) -> str:
    return f"{t.hour:02d}:{t.minute:02d}:{t.second:02d}{fraction_text(t.microsecond)}Z"


# =============================================================================================
# Writing
# =============================================================================================

def _writer(type_info: TypeInformation, where: str) -> Callable[[Any], str]:
    """value -> its JSON text, for one declared type (None is null at every level)."""
    write = _value_writer(type_info, where)
    return lambda v: "null" if v is None else write(v)


def _value_writer(t: TypeInformation, where: str) -> Callable[[Any], str]:
    if t == Types.STRING() or t == Types.CHAR():
        return lambda v: _string(str(v))
    if t == Types.BOOLEAN():
        return lambda v: "true" if v else "false"
    if integer_bits(t) or t == Types.BIG_INT():
        return lambda v: str(int(v))
    if t == Types.DOUBLE() or t == Types.FLOAT():
        # Jackson quotes the non-finite ones (QUOTE_NON_NUMERIC_NUMBERS)
        return lambda v: number_text(v, t) if math.isfinite(v) else f'"{number_text(v, t)}"'
    if t == Types.BIG_DEC():                # Flink's mapper writes BigDecimal plain (1E+3 as 1000)
        return lambda v: format(Decimal(number_text(v, t)), "f")
    if isinstance(t, DateTypeInfo) or t == Types.LOCAL_DATE():
        return lambda v: f'"{v.isoformat()}"'
    if isinstance(t, TimeTypeInfo) or t == Types.LOCAL_TIME():
        return lambda v: f'"{_rfc3339_time(v)}"'
    if isinstance(t, TimestampTypeInfo) or t == Types.LOCAL_DATE_TIME():
        return lambda v: f'"{v.date().isoformat()}T{_rfc3339_time(v.time())}"'
    if t == Types.INSTANT():
        return lambda v: f'"{_instant_text(v)}"'
    if is_byte_array(t):
        return lambda v: f'"{base64_text(v)}"'
    if isinstance(t, CollectionTypeInfo):   # arrays and lists
        element = _writer(t.get_element_type(), where + "[]")
        return lambda v: "[" + ",".join(element(x) for x in v) + "]"
    if isinstance(t, MapTypeInfo):
        # Flink's Jackson writes a Java HashMap in its bucket order; the keys' order in a JSON
        # object carries no meaning, so the dict's order here
        value = _writer(t.get_value_type(), where + "{}")
        return lambda v: "{" + ",".join(f"{_string(str(k))}:{value(x)}" for k, x in v.items()) + "}"
    if isinstance(t, RowTypeInfo):
        return _row_writer(t, where)
    raise TypeError(f"JsonRowSerializationSchema: field {where} is declared {t!r}, which the JSON row "
                    f"format does not write; declare it as a basic type, a SQL/local time type, an array, a "
                    f"list, a map or a ROW")


def _row_writer(t: RowTypeInfo, where: Optional[str]) -> Callable[[Any], str]:
    names = t.get_field_names()
    prefix = "" if where is None else where + "."
    writers = [(_string(n) + ":", _writer(ft, repr(prefix + n))) for n, ft in zip(names, t.get_field_types())]
    arity = len(names)

    def write(row) -> str:
        if len(row) != arity:
            raise ValueError(f"Row length mismatch: {arity} fields expected but was {len(row)}: {row!r}")
        return "{" + ",".join(key + w(v) for (key, w), v in zip(writers, row)) + "}"
    return write


def _instant_text(value) -> str:
    """``Instant.toString`` (ISO-8601 in UTC, the fraction in groups of three digits)."""
    if isinstance(value, int):
        value = datetime.datetime.fromtimestamp(value / 1000, datetime.timezone.utc)
    if value.tzinfo is not None:
        value = value.astimezone(datetime.timezone.utc)
    micros = value.microsecond
    frac = "" if not micros else f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}"
    return f"{value.date().isoformat()}T{value.strftime('%H:%M:%S')}{frac}Z"


class JsonRowSerializationSchema(SerializationSchema):
    """A Row of the declared ROW type as one JSON object, in UTF-8 (Flink's JsonRowSerializationSchema).

        JsonRowSerializationSchema.builder().with_type_info(Types.ROW_NAMED(["id", "name"],
            [Types.INT(), Types.STRING()])).build()      # Row(1, "hi") -> b'{"id":1,"name":"hi"}'
    """

    def __init__(self, type_info: RowTypeInfo):
        self.type_info = row_type_info(type_info, "JsonRowSerializationSchema")
        self._write = _row_writer(self.type_info, None)

    @staticmethod
    def builder() -> "JsonRowSerializationSchema.Builder":
        return JsonRowSerializationSchema.Builder()

    class Builder:
        def __init__(self):
            self._type_info = None

        def with_type_info(self, type_info: TypeInformation) -> "JsonRowSerializationSchema.Builder":
            """The ROW type of the records; its field names are the JSON object's keys."""
            self._type_info = type_info
            return self

        def build(self) -> "JsonRowSerializationSchema":
            if self._type_info is None:
                raise TypeError("Typeinfo should be set: JsonRowSerializationSchema.Builder()"
                                ".with_type_info(Types.ROW_NAMED([...], [...])).build()")
            return JsonRowSerializationSchema(self._type_info)

    def serialize(self, value) -> bytes:
        try:
            return self._write(value).encode("utf-8")
        except (TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"JsonRowSerializationSchema could not serialize row {value!r}: {e}. Make sure "
                             f"that the schema ({self.type_info!r}) matches the input.") from e

    def __eq__(self, other):
        return type(other) is type(self) and other.type_info == self.type_info

    def __hash__(self):
        return hash((type(self), self.type_info))

    def __reduce__(self):
        return JsonRowSerializationSchema, (self.type_info,)


# =============================================================================================
# Reading
# =============================================================================================

class _FieldError(ValueError):
    """A field that does not convert: carries the path of field names down to it."""

    def __init__(self, path: list, position: Optional[int], cause: str):
        super().__init__(cause)
        self.path, self.position, self.cause = path, position, cause


def _node_text(node) -> str:
    """Jackson's ``asText()`` of a node: a string as it is, numbers and booleans as their literal,
    a container as "" (so an INT field holding an object fails on "")."""
    if isinstance(node, str):
        return node
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, (int, Decimal)):
        return str(node)
    return ""


def _compact(node) -> str:
    """Jackson's ``toString()`` of a node (compact JSON)."""
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False, default=str)


_RFC3339_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z")
_RFC3339_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _micros(fraction: Optional[str]) -> int:
    return int((fraction or "0").ljust(6, "0")[:6])


def _parse_date(text: str) -> datetime.date:
    if not _ISO_DATE.fullmatch(text):
        raise ValueError(f"Text {text!r} is not a date (ISO yyyy-MM-dd)")
    return datetime.date.fromisoformat(text)


def _parse_time(text: str, sql: bool) -> datetime.time:
    m = _RFC3339_TIME.fullmatch(text)
    if not m:
        raise ValueError(f"Text {text!r} is not an RFC 3339 time in UTC (HH:mm:ssZ)")
    if sql and m.group(4):
        raise ValueError("Invalid time format. Only a time in UTC timezone without milliseconds is supported yet.")
    return datetime.time(int(m.group(1)), int(m.group(2)), int(m.group(3)), _micros(m.group(4)))


def _parse_timestamp(text: str) -> datetime.datetime:
    m = _RFC3339_TIMESTAMP.fullmatch(text)
    if not m:
        raise ValueError(f"Text {text!r} is not an RFC 3339 timestamp in UTC (yyyy-MM-ddTHH:mm:ss[.S]Z)")
    day = datetime.date.fromisoformat(m.group(1))
    return datetime.datetime(day.year, day.month, day.day, int(m.group(2)), int(m.group(3)), int(m.group(4)),
                             _micros(m.group(5)))


def _parse_instant(text: str) -> datetime.datetime:
    return _parse_timestamp(text).replace(tzinfo=datetime.timezone.utc)


def _integer(bits: int) -> Callable[[Any], int]:
    low, high = -(1 << (bits - 1)), 1 << (bits - 1)

    def read(node):
        # Flink: asInt() when the number fits (a fraction truncated), else Integer.parseInt(asText())
        if isinstance(node, (int, Decimal)) and not isinstance(node, bool) and low <= node < high:
            return int(node)
        return parse_java_int(_node_text(node).strip(), bits)
    return read


def _reader(t: TypeInformation, fail_on_missing: bool, ignore: bool) -> Callable[[Any], Any]:
    """node (json.loads with Decimal floats) -> value of type t; None for null."""
    read = _value_reader(t, fail_on_missing, ignore)
    return lambda node: None if node is None else read(node)


def _value_reader(t, fail_on_missing, ignore) -> Callable[[Any], Any]:
    if t == Types.STRING() or t == Types.CHAR():
        return lambda node: node if isinstance(node, str) else _compact(node)
    if t == Types.BOOLEAN():
        return lambda node: node if isinstance(node, bool) else parse_java_boolean(_node_text(node).strip())
    bits = integer_bits(t)
    if bits:
        return _integer(bits)
    if t == Types.DOUBLE() or t == Types.FLOAT():
        as_float = (lambda x: x) if t == Types.DOUBLE() else (lambda x: float(number_text(x, t)))
        return lambda node: as_float(float(node) if isinstance(node, (int, Decimal)) and not isinstance(node, bool)
                                     else parse_java_double(_node_text(node)))
    if t == Types.BIG_INT():
        return lambda node: int(node) if isinstance(node, (int, Decimal)) and not isinstance(node, bool) \
            else parse_number(_node_text(node), t)
    if t == Types.BIG_DEC():
        # Jackson's node factory strips a float literal's trailing zeros (1.50 -> 1.5, 1000.0 -> 1E+3)
        return lambda node: (Decimal(node) if isinstance(node, int) and not isinstance(node, bool)
                             else node.normalize() if isinstance(node, Decimal)
                             else parse_big_decimal(_node_text(node).strip()))
    if isinstance(t, DateTypeInfo) or t == Types.LOCAL_DATE():
        return lambda node: _parse_date(_node_text(node))
    if isinstance(t, TimeTypeInfo) or t == Types.LOCAL_TIME():
        sql = isinstance(t, TimeTypeInfo)
        return lambda node: _parse_time(_node_text(node), sql)
    if isinstance(t, TimestampTypeInfo) or t == Types.LOCAL_DATE_TIME():
        return lambda node: _parse_timestamp(_node_text(node))
    if t == Types.INSTANT():
        return lambda node: _parse_instant(_node_text(node))
    if is_byte_array(t):
        return lambda node: parse_base64(_node_text(node))
    if isinstance(t, CollectionTypeInfo):
        element = _reader(t.get_element_type(), fail_on_missing, ignore)

        def read_array(node):
            if not isinstance(node, list):
                raise ValueError(f"{_compact(node)} is not a JSON array")
            return [element(x) for x in node]
        return read_array
    if isinstance(t, MapTypeInfo):
        key, value = _reader(t.get_key_type(), fail_on_missing, ignore), _reader(t.get_value_type(), fail_on_missing,
                                                                                  ignore)

        def read_map(node):
            if not isinstance(node, dict):
                raise ValueError(f"{_compact(node)} is not a JSON object")
            return {key(k): value(v) for k, v in node.items()}
        return read_map
    if isinstance(t, RowTypeInfo):
        return _row_reader(t, fail_on_missing, ignore)
    if isinstance(t, BasicTypeInfo):
        raise TypeError(f"JsonRowDeserializationSchema: {described(t)} is not read by the JSON row format")
    raise TypeError(f"JsonRowDeserializationSchema: {t!r} is not read by the JSON row format; declare a basic "
                    f"type, a SQL/local time type, an array, a list, a map or a ROW")


_MISSING = object()
_DECODER = json.JSONDecoder(parse_float=Decimal)


def _row_reader(t: RowTypeInfo, fail_on_missing: bool, ignore: bool) -> Callable[[Any], Any]:
    names = t.get_field_names()
    fields = [(i, name, _reader(ft, fail_on_missing, ignore)) for i, (name, ft) in
              enumerate(zip(names, t.get_field_types()))]

    def read(node):
        if not isinstance(node, dict):
            raise ValueError(f"{_compact(node)} is not a JSON object")
        values = []
        for i, name, convert in fields:
            value = node.get(name, _MISSING)
            if value is _MISSING:
                if fail_on_missing:
                    raise _FieldError([name], i, f"Could not find field with name '{name}'")
                values.append(None)
                continue
            try:
                values.append(convert(value))
            except _FieldError as e:
                if ignore:
                    values.append(None)
                else:
                    raise _FieldError([name] + e.path, i, e.cause) from None
            except (ValueError, TypeError, OverflowError) as e:
                if ignore:
                    values.append(None)
                else:
                    raise _FieldError([name], i, f"{_compact(value)} is not {_a(t.get_field_types()[i])}: {e}") \
                        from None
        return make_row(values, names)
    return read


def _a(t: TypeInformation) -> str:
    name = described(t)
    return ("an " if name[0] in "AEIOU" else "a ") + name


class JsonRowDeserializationSchema(DeserializationSchema):
    """One JSON object per message -> a Row of the declared ROW type (Flink's JsonRowDeserializationSchema).

        JsonRowDeserializationSchema.builder().type_info(Types.ROW([Types.INT(), Types.STRING()])).build()
    """

    def __init__(self, type_info: RowTypeInfo, fail_on_missing_field: bool = False, ignore_parse_errors: bool = False):
        self.type_info = row_type_info(type_info, "JsonRowDeserializationSchema")
        if fail_on_missing_field and ignore_parse_errors:
            raise ValueError("JSON format doesn't support failOnMissingField and ignoreParseErrors are both true: "
                             "choose fail_on_missing_field() or ignore_parse_errors()")
        self.fail_on_missing_field = fail_on_missing_field
        self.ignore_parse_errors = ignore_parse_errors
        self._read = _row_reader(self.type_info, fail_on_missing_field, ignore_parse_errors)

    @staticmethod
    def builder() -> "JsonRowDeserializationSchema.Builder":
        return JsonRowDeserializationSchema.Builder()

    class Builder:
        def __init__(self):
            self._type_info = None
            self._fail_on_missing_field = False
            self._ignore_parse_errors = False

        def type_info(self, type_info: TypeInformation) -> "JsonRowDeserializationSchema.Builder":
            """The ROW type of the records; its field names are the JSON properties read."""
            self._type_info = type_info
            return self

        def json_schema(self, json_schema: str):
            raise NotImplementedError("JsonRowDeserializationSchema.Builder.json_schema: declare the records' "
                                      "ROW type with type_info(Types.ROW_NAMED([...], [...])) instead")

        def fail_on_missing_field(self) -> "JsonRowDeserializationSchema.Builder":
            """A record missing a field fails (by default the field is null)."""
            self._fail_on_missing_field = True
            return self

        def ignore_parse_errors(self) -> "JsonRowDeserializationSchema.Builder":
            """A field that does not parse is null, and a message that is not a JSON object is skipped
            (by default either fails the job)."""
            self._ignore_parse_errors = True
            return self

        def build(self) -> "JsonRowDeserializationSchema":
            if self._type_info is None:
                raise TypeError("JsonRowDeserializationSchema.Builder: set the records' type with "
                                "type_info(Types.ROW_NAMED([...], [...])) before build()")
            return JsonRowDeserializationSchema(self._type_info, self._fail_on_missing_field,
                                                self._ignore_parse_errors)

    def deserialize(self, message: bytes):
        """The message's Row, or None for no record (a ``null`` message; with ignore_parse_errors,
        one that is not a JSON object)."""
        try:    # Jackson reads the first JSON value of the message, blanks around it allowed
            node, _ = _DECODER.raw_decode(bytes(message).decode("utf-8").lstrip())
        except ValueError as e:
            if self.ignore_parse_errors:
                return None
            raise RecordParseError(f"Failed to deserialize JSON {_shown(message)}: not JSON ({e}); "
                                   f"{self._skip_hint()}") from None
        if node is None:
            return None
        try:
            return self._read(node)
        except _FieldError as e:
            path = ".".join(e.path)
            hint = ("a missing field is null without fail_on_missing_field()" if e.cause.startswith("Could not find")
                    else self._skip_hint())
            raise RecordParseError(f"Failed to deserialize JSON {_shown(message)}: field '{path}' (position "
                                   f"{e.position}): {e.cause}; {hint}", e.path[0], e.position) from None
        except ValueError as e:
            if self.ignore_parse_errors:
                return None
            raise RecordParseError(f"Failed to deserialize JSON {_shown(message)}: {e}; {self._skip_hint()}") from None

    @staticmethod
    def _skip_hint() -> str:
        return ("JsonRowDeserializationSchema.builder()...ignore_parse_errors() reads a field that does not "
                "parse as null and skips a message that is not a JSON object")

    def __eq__(self, other):
        return type(other) is type(self) and (other.type_info, other.fail_on_missing_field,
                                               other.ignore_parse_errors) == (self.type_info,
                                                                              self.fail_on_missing_field,
                                                                              self.ignore_parse_errors)

    def __hash__(self):
        return hash((type(self), self.type_info, self.fail_on_missing_field, self.ignore_parse_errors))

    def __reduce__(self):
        return JsonRowDeserializationSchema, (self.type_info, self.fail_on_missing_field, self.ignore_parse_errors)

    def get_produced_type(self) -> RowTypeInfo:
        return self.type_info


def _shown(message: bytes, limit: int = 200) -> str:
    text = bytes(message).decode("utf-8", errors="replace")
    return repr(text if len(text) <= limit else text[:limit] + "...")
