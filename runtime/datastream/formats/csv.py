"""CSV rows, as ``pyflink.datastream.formats.csv``: ``CsvRowSerializationSchema`` and
``CsvRowDeserializationSchema``, each built with ``Builder(type_info)``, one record per message
(a Kafka sink's and source's values).

The bytes are Flink's (flink-csv's Jackson CSV writer, checked against PyFlink 2.3.0 on Java 17
in tests/test_row_formats.py): the fields in the ROW type's order joined by ``,`` and ended by
``\\n``, None as the null literal (empty by default), a text field quoted with ``"`` (a quote in
it doubled) when it holds a character below the safe range (the field and quote characters, a
line break, a space, ``#``, ``+``... anything up to the highest of the separator, quote and line
characters), the escape character (``\\`` when none is set) or more than 24 characters, as
Jackson's loose quoting check; numbers and booleans never quoted, doubles as Java writes them
(``1.0E20``), SQL timestamps ``2024-01-07 10:30:05.123``, byte arrays Base64 (a text field), an array's or a
nested row's fields joined by ``;``. Reading takes a record's first line, trims numbers and
booleans (``Boolean.valueOf``: anything but "true" is false), reads a field equal to the null
literal as null when one is set. A record that does not parse raises ``RecordParseError``
naming the field and its position; with ``set_ignore_parse_errors(True)`` such a field is null,
a record with fewer fields gets nulls and one that cannot be read at all is skipped, as Flink's.
"""
from __future__ import annotations

import csv as _pycsv
import datetime
import io
import re
from typing import Any, Callable, Optional

from runtime.common.serialization import DeserializationSchema, SerializationSchema
from runtime.common.typeinfo import (
    DateTypeInfo, RowTypeInfo, TimestampTypeInfo, TimeTypeInfo, TypeInformation, Types)
from runtime.datastream.formats.row_fields import (
    RecordParseError, base64_text, described, element_type, is_byte_array, is_number, local_time_text, make_row,
    number_text, parse_base64, parse_java_boolean, parse_number, row_type_info, timestamp_text)

__all__ = ["CsvRowDeserializationSchema", "CsvRowSerializationSchema"]

_MAX_QUOTE_CHECK = 24       # Jackson quotes a longer text without looking at it
_LINE_DELIMITERS = ("\n", "\r", "\r\n", "")


def _char(c: str, what: str) -> str:
    if not isinstance(c, str) or len(c) != 1:
        raise ValueError(f"the CSV {what} is one character, got {c!r}")
    return c


def _check_type(t: TypeInformation, field: str, nested: bool) -> None:
    """The types flink-csv's CsvRowSchemaConverter accepts (else it refuses the schema)."""
    simple = (t in (Types.STRING(), Types.BOOLEAN(), Types.BIG_INT(), Types.BIG_DEC()) or is_number(t)
              or isinstance(t, (DateTypeInfo, TimeTypeInfo, TimestampTypeInfo))
              or t in (Types.LOCAL_DATE(), Types.LOCAL_TIME(), Types.LOCAL_DATE_TIME()) or is_byte_array(t))
    if simple:
        return
    inner = element_type(t) if not nested else None
    if isinstance(t, RowTypeInfo) and not nested:
        for name, ft in zip(t.get_field_names(), t.get_field_types()):
            _check_type(ft, field, True)
        return
    if inner is not None:
        _check_type(inner, field, True)
        return
    if nested:
        raise TypeError(f"Only simple types are supported in the second level nesting of fields '{field}' but was: "
                        f"{t!r}")
    raise TypeError(f"Unsupported type information '{t!r}' for field '{field}': the CSV row format takes basic "
                    f"types, SQL/local time types, byte arrays, arrays of simple types and ROWs of simple types")


def _row_type(type_info, schema: str) -> RowTypeInfo:
    t = row_type_info(type_info, schema)
    for name, ft in zip(t.get_field_names(), t.get_field_types()):
        _check_type(ft, name, False)
    return t


# =============================================================================================
# Writing
# =============================================================================================

class _CsvBuilder:
    """The options both CSV schemas' builders share (PyFlink's setters); ``_schema`` is the class
    a builder builds."""

    _schema: type

    def __init__(self, type_info: TypeInformation):
        if type_info is None:
            raise TypeError("Type information must not be None")
        row_type_info(type_info, self._schema.__name__)
        self._type_info = type_info
        self._options: dict = {}

    def _set(self, **option):
        self._options.update(option)
        return self

    def set_field_delimiter(self, delimiter: str):
        return self._set(field_delimiter=delimiter)

    def set_array_element_delimiter(self, delimiter: str):
        return self._set(array_element_delimiter=delimiter)

    def set_quote_character(self, c: str):
        return self._set(quote_character=c)

    def set_escape_character(self, c: str):
        return self._set(escape_character=c)

    def build(self):
        return self._schema(self._type_info, **self._options)


class _ValueSchema:
    """Equality, hashing and pickling by the schema's options (``_key``), as Flink's schemas compare."""

    def _key(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other):
        return type(other) is type(self) and other._key() == self._key()

    def __hash__(self):
        return hash((type(self),) + self._key())

    def __reduce__(self):
        return type(self), self._key()


class CsvRowSerializationSchema(_ValueSchema, SerializationSchema):
    """A Row of the declared ROW type as one CSV line (Flink's CsvRowSerializationSchema).

        CsvRowSerializationSchema.Builder(Types.ROW([Types.INT(), Types.STRING()])).build()
        # Row(1, "a,b") -> b'1,"a,b"\\n'
    """

    def __init__(self, type_info: RowTypeInfo, field_delimiter: str = ",", line_delimiter: str = "\n",
                 array_element_delimiter: str = ";", quote_character: Optional[str] = '"',
                 escape_character: Optional[str] = None, null_literal: str = ""):
        self.type_info = _row_type(type_info, "CsvRowSerializationSchema")
        self.field_delimiter = _char(field_delimiter, "field delimiter")
        if line_delimiter not in _LINE_DELIMITERS:
            raise ValueError(f"Unsupported new line delimiter {line_delimiter!r}. Only \\n, \\r, \\r\\n, or empty "
                             f"string are supported.")
        self.line_delimiter = line_delimiter
        self.array_element_delimiter = array_element_delimiter
        self.quote_character = None if quote_character is None else _char(quote_character, "quote character")
        self.escape_character = None if escape_character is None else _char(escape_character, "escape character")
        self.null_literal = null_literal
        # Jackson's CsvEncoder._calcSafeChar: below it a character may need quotes
        self._min_safe = max(ord(c) for c in self.field_delimiter + (self.quote_character or "") + line_delimiter) + 1
        self._fields = [self._cell_writer(ft) for ft in self.type_info.get_field_types()]

    class Builder(_CsvBuilder):
        def set_line_delimiter(self, delimiter: str):
            return self._set(line_delimiter=delimiter)

        def disable_quote_character(self):
            return self._set(quote_character=None)

        def set_null_literal(self, s: str):
            return self._set(null_literal=s)

    # -- cells ----------------------------------------------------------------------------------

    def _needs_quotes(self, text: str) -> bool:
        if len(text) > _MAX_QUOTE_CHECK:
            return True
        special = self.escape_character or "\\"
        min_safe = self._min_safe
        return any(ord(c) < min_safe or c == special for c in text)

    def _text(self, text: str) -> str:
        q = self.quote_character
        if q is None or not self._needs_quotes(text):
            return text
        text = text.replace(q, q + q)
        esc = self.escape_character
        if esc is not None and esc != q:
            text = text.replace(esc, esc + esc)
        return q + text + q

    def _element_text(self, t: TypeInformation) -> Callable[[Any], str]:
        """An element's text inside an array or nested row (its joined text is quoted as a whole)."""
        if t == Types.STRING():
            return str
        if t == Types.BOOLEAN():
            return lambda v: "true" if v else "false"
        if is_number(t):
            return lambda v: number_text(v, t)
        if isinstance(t, DateTypeInfo) or t == Types.LOCAL_DATE():
            return lambda v: v.isoformat()
        if isinstance(t, TimeTypeInfo):
            return lambda v: v.strftime("%H:%M:%S")                 # java.sql.Time.toString
        if t == Types.LOCAL_TIME():
            return local_time_text
        if isinstance(t, TimestampTypeInfo):
            return timestamp_text
        if t == Types.LOCAL_DATE_TIME():                            # ISO_LOCAL_DATE ' ' ISO_LOCAL_TIME
            return lambda v: f"{v.date().isoformat()} {local_time_text(v.time())}"
        return base64_text                                          # byte[]

    def _cell_writer(self, t: TypeInformation) -> Callable[[Any], str]:
        if is_number(t) or t == Types.BOOLEAN():                    # written raw, never quoted
            return self._element_text(t)
        inner = element_type(t)
        if inner is not None or isinstance(t, RowTypeInfo):
            sep = self.array_element_delimiter
            if isinstance(t, RowTypeInfo):
                parts = [self._element_text(ft) for ft in t.get_field_types()]
                return lambda v: self._text(sep.join("" if x is None else p(x) for p, x in zip(parts, v)))
            part = self._element_text(inner)
            return lambda v: self._text(sep.join("" if x is None else part(x) for x in v))
        text = self._element_text(t)
        return lambda v: self._text(text(v))

    def serialize(self, value) -> bytes:
        if len(value) != len(self._fields):
            raise ValueError(f"CsvRowSerializationSchema could not serialize row {value!r}: Row length mismatch. "
                             f"{len(self._fields)} fields expected but was {len(value)}.")
        null = self.null_literal
        try:
            line = self.field_delimiter.join(null if v is None else w(v) for w, v in zip(self._fields, value))
        except (TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"CsvRowSerializationSchema could not serialize row {value!r}: {e}; make sure the "
                             f"schema ({self.type_info!r}) matches the input") from e
        return (line + self.line_delimiter).encode("utf-8")

    def _key(self):
        return (self.type_info, self.field_delimiter, self.line_delimiter, self.array_element_delimiter,
                self.quote_character, self.escape_character, self.null_literal)



# =============================================================================================
# Reading
# =============================================================================================

_SQL_DATE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_SQL_TIME = re.compile(r"(\d{1,2}):(\d{1,2}):(\d{1,2})")
_SQL_TIMESTAMP = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2}) (\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{0,9}))?")


def _parse_sql_date(text: str) -> datetime.date:
    """``java.sql.Date.valueOf``: yyyy-[m]m-[d]d."""
    m = _SQL_DATE.fullmatch(text)
    if not m:
        raise ValueError(f"{text!r} is not a date (yyyy-[m]m-[d]d)")
    return datetime.date(*map(int, m.groups()))


def _parse_sql_time(text: str) -> datetime.time:
    """``java.sql.Time.valueOf``: hh:mm:ss."""
    m = _SQL_TIME.fullmatch(text)
    if not m:
        raise ValueError(f"{text!r} is not a time (hh:mm:ss)")
    return datetime.time(*map(int, m.groups()))


def _parse_sql_timestamp(text: str) -> datetime.datetime:
    """``java.sql.Timestamp.valueOf``: yyyy-[m]m-[d]d hh:mm:ss[.f...] (microseconds kept)."""
    m = _SQL_TIMESTAMP.fullmatch(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a timestamp (yyyy-[m]m-[d]d hh:mm:ss[.fffffffff])")
    *parts, fraction = m.groups()
    return datetime.datetime(*map(int, parts), int((fraction or "").ljust(6, "0")[:6]))


def _value_reader(t: TypeInformation) -> Callable[[str], Any]:
    """A simple field's (or element's) text -> value, as flink-csv's runtime converters."""
    if t == Types.STRING():
        return lambda text: text
    if t == Types.BOOLEAN():
        return lambda text: parse_java_boolean(text.strip())
    if is_number(t):
        return lambda text: parse_number(text, t)
    if isinstance(t, DateTypeInfo) or t == Types.LOCAL_DATE():
        return _parse_sql_date
    if isinstance(t, TimeTypeInfo) or t == Types.LOCAL_TIME():
        return _parse_sql_time
    if isinstance(t, TimestampTypeInfo) or t == Types.LOCAL_DATE_TIME():
        return _parse_sql_timestamp
    return parse_base64


class CsvRowDeserializationSchema(_ValueSchema, DeserializationSchema):
    """One CSV record per message -> a Row of the declared ROW type (Flink's CsvRowDeserializationSchema).

        CsvRowDeserializationSchema.Builder(Types.ROW([Types.INT(), Types.STRING()])).build()
        # b'1,"a,b"' -> Row(f0=1, f1='a,b')
    """

    def __init__(self, type_info: RowTypeInfo, field_delimiter: str = ",", allow_comments: bool = False,
                 array_element_delimiter: str = ";", quote_character: str = '"',
                 escape_character: Optional[str] = None, null_literal: Optional[str] = None,
                 ignore_parse_errors: bool = False):
        self.type_info = _row_type(type_info, "CsvRowDeserializationSchema")
        self.field_delimiter = _char(field_delimiter, "field delimiter")
        self.allow_comments = bool(allow_comments)
        if array_element_delimiter is None:
            raise TypeError("Array element delimiter must not be null.")
        self.array_element_delimiter = array_element_delimiter
        self.quote_character = _char(quote_character, "quote character")
        self.escape_character = None if escape_character is None else _char(escape_character, "escape character")
        if null_literal is not None and not isinstance(null_literal, str):
            raise TypeError("Null literal must not be null.")
        self.null_literal = null_literal
        self.ignore_parse_errors = bool(ignore_parse_errors)
        self._names = self.type_info.get_field_names()
        self._fields = [self._field_reader(ft) for ft in self.type_info.get_field_types()]

    class Builder(_CsvBuilder):
        def set_allow_comments(self, allow_comments: bool):
            return self._set(allow_comments=allow_comments)

        def set_null_literal(self, null_literal: str):
            if null_literal is None:
                raise TypeError("Null literal must not be null.")
            return self._set(null_literal=null_literal)

        def set_ignore_parse_errors(self, ignore_parse_errors: bool):
            return self._set(ignore_parse_errors=ignore_parse_errors)

    def _field_reader(self, t: TypeInformation) -> Callable[[str], Any]:
        null = self.null_literal
        inner = element_type(t)
        if inner is not None or isinstance(t, RowTypeInfo):
            sep = self.array_element_delimiter
            if isinstance(t, RowTypeInfo):
                parts = [_value_reader(ft) for ft in t.get_field_types()]

                def read_row(text):
                    items = text.split(sep) if text else []
                    if not items:
                        return None
                    if len(items) != len(parts) and not self.ignore_parse_errors:
                        raise ValueError(f"Row length mismatch. {len(parts)} fields expected but was {len(items)}.")
                    return make_row([None if x == null else self._lenient(p, x) for p, x in zip(parts, items)]
                                    + [None] * (len(parts) - len(items)), t.get_field_names())
                return read_row
            part = _value_reader(inner)
            return lambda text: [None if x == null else self._lenient(part, x) for x in text.split(sep)] if text else []
        return _value_reader(t)

    def _lenient(self, read: Callable[[str], Any], text: str):
        if not self.ignore_parse_errors:
            return read(text)
        try:
            return read(text)
        except (ValueError, TypeError, OverflowError):
            return None

    def _record(self, text: str) -> list:
        """The first record's fields (Jackson's CSV parser reads one record of the message)."""
        reader = _pycsv.reader(io.StringIO(text), delimiter=self.field_delimiter, quotechar=self.quote_character,
                               escapechar=self.escape_character, doublequote=True, strict=True)
        for fields in reader:
            if self.allow_comments and fields and fields[0].startswith("#"):
                continue
            return fields or [""]
        raise ValueError("No content to map due to end-of-input")

    def deserialize(self, message: bytes):
        """The message's Row, or None for no record (with set_ignore_parse_errors(True), one that
        cannot be read)."""
        text = bytes(message).decode("utf-8", errors="replace")
        try:
            fields = self._record(text)
        except (ValueError, _pycsv.Error) as e:
            if self.ignore_parse_errors:
                return None
            raise RecordParseError(f"Failed to deserialize CSV row {_shown(text)}: {e}; {self._skip_hint()}") from None
        arity = len(self._fields)
        if len(fields) > arity:
            if self.ignore_parse_errors:
                return None
            raise RecordParseError(f"Failed to deserialize CSV row {_shown(text)}: Too many entries: expected at most "
                                   f"{arity}, got {len(fields)}; {self._skip_hint()}")
        if len(fields) < arity and not self.ignore_parse_errors:
            raise RecordParseError(f"Failed to deserialize CSV row {_shown(text)}: Row length mismatch. {arity} fields "
                                   f"expected but was {len(fields)} (field '{self._names[len(fields)]}', position "
                                   f"{len(fields)}, is missing); {self._skip_hint()}", self._names[len(fields)],
                                   len(fields))
        values = []
        null = self.null_literal
        for i, (read, cell) in enumerate(zip(self._fields, fields)):
            if cell == null:
                values.append(None)
                continue
            try:
                values.append(read(cell))
            except (ValueError, TypeError, OverflowError) as e:
                if self.ignore_parse_errors:
                    values.append(None)
                    continue
                t = self.type_info.get_field_types()[i]
                raise RecordParseError(f"Failed to deserialize CSV row {_shown(text)}: field '{self._names[i]}' "
                                       f"(position {i}): {cell!r} is not {described(t)}: {e}; {self._skip_hint()}",
                                       self._names[i], i) from None
        values.extend([None] * (arity - len(values)))
        return make_row(values, self._names)

    @staticmethod
    def _skip_hint() -> str:
        return ("CsvRowDeserializationSchema.Builder(...).set_ignore_parse_errors(True) reads a field that does not "
                "parse as null and skips a record that cannot be read")

    def _key(self):
        return (self.type_info, self.field_delimiter, self.allow_comments, self.array_element_delimiter,
                self.quote_character, self.escape_character, self.null_literal, self.ignore_parse_errors)


    def get_produced_type(self) -> RowTypeInfo:
        return self.type_info


def _shown(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


# What each builder builds (the classes exist only once their builders are defined).
CsvRowSerializationSchema.Builder._schema = CsvRowSerializationSchema
CsvRowDeserializationSchema.Builder._schema = CsvRowDeserializationSchema
