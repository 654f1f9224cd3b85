"""Avro rows, as ``pyflink.datastream.formats.avro``: ``AvroRowSerializationSchema`` and
``AvroRowDeserializationSchema`` from an Avro schema string (a Kafka sink's and source's values).

The bytes are Flink's: one record in plain Avro binary encoding (the spec's "Binary Encoding":
zig-zag varints, length-prefixed strings and bytes, a record's fields in order, a union's branch
index first), with no container-file header, no schema fingerprint and no Confluent
schema-registry prefix, as Flink's ``GenericDatumWriter`` over a ``binaryEncoder`` writes it.
fastavro (pinned) encodes and decodes it. A Row's fields map to the record's fields by position,
nested Rows to nested records; ``["null", T]`` unions take None. The deserialized Rows are typed as
Flink's ``AvroSchemaConverter`` types them (``get_produced_type``): int INT, long LONG, string and
enum STRING, bytes and fixed byte arrays, array OBJECT_ARRAY, map MAP<STRING, ...>, record ROW,
logical date SQL_DATE, time-millis SQL_TIME, timestamp-millis/micros SQL_TIMESTAMP, decimal BIG_DEC.
Java record classes (``record_class=``) have no meaning in Python and are refused.
"""
from __future__ import annotations

import datetime
import io
import json
from typing import Any, Callable

import fastavro
from fastavro.validation import ValidationError, validate

from runtime.common.serialization import DeserializationSchema, SerializationSchema
from runtime.common.typeinfo import RowTypeInfo, TypeInformation, Types
from runtime.common.types import Row
from runtime.datastream.formats.row_fields import RecordParseError, make_row

__all__ = ["AvroRowDeserializationSchema", "AvroRowSerializationSchema"]


def _parse(avro_schema_string: str, record_class: Any, schema: str) -> dict:
    if record_class is not None:
        raise TypeError(f"{schema}: record_class names a Java SpecificRecord class, which Sluice cannot load; "
                        f"pass the record's schema as avro_schema_string=")
    if avro_schema_string is None:
        raise TypeError("record_class or avro_schema_string should be specified.")
    try:
        parsed = fastavro.parse_schema(json.loads(avro_schema_string))
    except (ValueError, fastavro.schema.SchemaParseException) as e:
        raise ValueError(f"{schema}: the Avro schema string does not parse: {e}") from None
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise ValueError(f"{schema}: the Avro schema must be a record (a Row's fields are its fields), got "
                         f"{avro_schema_string.strip()[:200]!r}")
    return parsed


def _resolve(schema, named: dict):
    """A schema node with named types resolved (fastavro's parsed schema refers to them by name)."""
    if isinstance(schema, str) and schema in named:
        return named[schema]
    return schema


def _collect_named(schema, named: dict) -> None:
    if isinstance(schema, dict):
        if schema.get("type") in ("record", "enum", "fixed") and "name" in schema:
            named[schema["name"]] = schema
        for f in schema.get("fields", []):
            _collect_named(f["type"], named)
        for key in ("items", "values"):
            if key in schema:
                _collect_named(schema[key], named)
    elif isinstance(schema, list):
        for branch in schema:
            _collect_named(branch, named)


def _row_to_datum(schema, named: dict) -> Callable[[Any], Any]:
    """value -> what fastavro writes for ``schema``: Rows become dicts of the record's field names."""
    schema = _resolve(schema, named)
    if isinstance(schema, dict):
        kind = schema["type"]
        if kind == "record":
            fields = [(f["name"], _row_to_datum(f["type"], named)) for f in schema["fields"]]
            arity = len(fields)

            def record(value):
                if isinstance(value, dict):
                    return {name: convert(value.get(name)) for name, convert in fields}
                if len(value) != arity:
                    raise ValueError(f"a record {schema['name']!r} of {arity} fields, got {len(value)} values: "
                                     f"{value!r}")
                return {name: convert(v) for (name, convert), v in zip(fields, value)}
            return lambda v: None if v is None else record(v)
        if kind == "array":
            items = _row_to_datum(schema["items"], named)
            return lambda v: None if v is None else [items(x) for x in v]
        if kind == "map":
            values = _row_to_datum(schema["values"], named)
            return lambda v: None if v is None else {k: values(x) for k, x in v.items()}
        return lambda v: v
    if isinstance(schema, list):            # a union: the Row inside, if any branch is a record
        for branch in schema:
            resolved = _resolve(branch, named)
            if isinstance(resolved, dict) and resolved.get("type") in ("record", "array", "map"):
                convert = _row_to_datum(resolved, named)
                return lambda v: v if v is None or not isinstance(v, (tuple, list, dict)) else convert(v)
    return lambda v: v


def _datum_to_row(schema, named: dict) -> Callable[[Any], Any]:
    """What fastavro reads -> Flink's Java values: records as named Rows, timestamps naive UTC."""
    schema = _resolve(schema, named)
    if isinstance(schema, dict):
        kind = schema["type"]
        logical = schema.get("logicalType")
        if kind == "record":
            fields = [(f["name"], _datum_to_row(f["type"], named)) for f in schema["fields"]]
            names = [name for name, _ in fields]
            return lambda d: make_row([convert(d[name]) for name, convert in fields], names)
        if kind == "array":
            items = _datum_to_row(schema["items"], named)
            return lambda v: [items(x) for x in v]
        if kind == "map":
            values = _datum_to_row(schema["values"], named)
            return lambda v: {k: values(x) for k, x in v.items()}
        if logical in ("timestamp-millis", "timestamp-micros"):
            return lambda v: v.astimezone(datetime.timezone.utc).replace(tzinfo=None) \
                if isinstance(v, datetime.datetime) and v.tzinfo else v
    if isinstance(schema, list):
        branches = [_datum_to_row(b, named) for b in schema]
        if len([b for b in schema if b != "null"]) == 1:
            convert = branches[[i for i, b in enumerate(schema) if b != "null"][0]]
            return lambda v: None if v is None else convert(v)
        return lambda v: v if not isinstance(v, dict) else _record_in_union(v, schema, named)
    return lambda v: v


def _record_in_union(value: dict, union: list, named: dict):
    for branch in union:
        resolved = _resolve(branch, named)
        if isinstance(resolved, dict) and resolved.get("type") == "record" and \
                set(value) == {f["name"] for f in resolved["fields"]}:
            return _datum_to_row(resolved, named)(value)
    return value


def avro_type_info(schema, named: dict) -> TypeInformation:
    """Flink's ``AvroSchemaConverter.convertToTypeInfo`` of a schema node."""
    schema = _resolve(schema, named)
    if isinstance(schema, list):
        others = [b for b in schema if b != "null"]
        return avro_type_info(others[0], named) if len(others) == 1 else Types.PICKLED_BYTE_ARRAY()
    if isinstance(schema, str):
        schema = {"type": schema}
    kind, logical = schema["type"], schema.get("logicalType")
    if logical == "decimal":
        return Types.BIG_DEC()
    if logical == "date":
        return Types.SQL_DATE()
    if logical in ("time-millis", "time-micros"):
        return Types.SQL_TIME()
    if logical in ("timestamp-millis", "timestamp-micros"):
        return Types.SQL_TIMESTAMP()
    if kind == "record":
        return Types.ROW_NAMED([f["name"] for f in schema["fields"]],
                               [avro_type_info(f["type"], named) for f in schema["fields"]])
    if kind == "array":
        return Types.OBJECT_ARRAY(avro_type_info(schema["items"], named))
    if kind == "map":
        return Types.MAP(Types.STRING(), avro_type_info(schema["values"], named))
    simple = {"string": Types.STRING(), "enum": Types.STRING(), "int": Types.INT(), "long": Types.LONG(),
              "float": Types.FLOAT(), "double": Types.DOUBLE(), "boolean": Types.BOOLEAN(),
              "bytes": Types.PRIMITIVE_ARRAY(Types.BYTE()), "fixed": Types.PRIMITIVE_ARRAY(Types.BYTE()),
              "null": Types.PICKLED_BYTE_ARRAY()}
    return simple[kind]


class _AvroRowSchema:
    def __init__(self, record_class, avro_schema_string, what):
        self.avro_schema_string = avro_schema_string
        self._schema = _parse(avro_schema_string, record_class, what)
        self._named: dict = {}
        _collect_named(self._schema, self._named)

    def __eq__(self, other):
        return type(other) is type(self) and other.avro_schema_string == self.avro_schema_string

    def __hash__(self):
        return hash((type(self), self.avro_schema_string))

    def __reduce__(self):
        return type(self), (None, self.avro_schema_string)


class AvroRowSerializationSchema(_AvroRowSchema, SerializationSchema):
    """A Row as one Avro record in plain binary encoding (Flink's AvroRowSerializationSchema).

        AvroRowSerializationSchema(avro_schema_string='{"type": "record", "name": "TestRecord", '
            '"fields": [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}')
        # Row(1, "hi") -> b'\\x02\\x04hi'
    """

    def __init__(self, record_class: str = None, avro_schema_string: str = None):
        super().__init__(record_class, avro_schema_string, "AvroRowSerializationSchema")
        self._to_datum = _row_to_datum(self._schema, self._named)

    def serialize(self, value) -> bytes:
        if not isinstance(value, (Row, tuple, list, dict)):
            raise ValueError(f"AvroRowSerializationSchema serializes Rows; got {value!r}")
        try:
            datum = self._to_datum(value)
            out = io.BytesIO()
            fastavro.schemaless_writer(out, self._schema, datum)
            return out.getvalue()
        except (ValueError, TypeError, AttributeError, OverflowError) as e:
            raise ValueError(f"AvroRowSerializationSchema could not serialize row {value!r}: "
                             f"{self._which_field(value, e)}") from e

    def _which_field(self, value, error) -> str:
        """The first field that does not fit its Avro type (fastavro's validation names it)."""
        try:
            validate(self._to_datum(value), self._schema, raise_errors=True)
        except ValidationError as e:
            return f"{'; '.join(map(str, e.errors))}; the Row's fields map to the record's fields by position"
        except Exception:   # noqa: BLE001 - the original error says it better
            pass
        return str(error)


class AvroRowDeserializationSchema(_AvroRowSchema, DeserializationSchema):
    """One Avro record in plain binary encoding -> a Row named as the record's fields (Flink's
    AvroRowDeserializationSchema)."""

    def __init__(self, record_class: str = None, avro_schema_string: str = None):
        super().__init__(record_class, avro_schema_string, "AvroRowDeserializationSchema")
        self._to_row = _datum_to_row(self._schema, self._named)

    def deserialize(self, message: bytes):
        try:
            datum = fastavro.schemaless_reader(io.BytesIO(bytes(message)), self._schema, None)
            return self._to_row(datum)
        except Exception as e:  # noqa: BLE001 - any decoding failure is the record's; located below
            raise self._located(bytes(message), e) from None

    def _located(self, message: bytes, error: Exception) -> RecordParseError:
        """Reads the record again field by field (a record's encoding is its fields' in order) to
        name the first field that does not decode."""
        buf = io.BytesIO(message)
        expanded = fastavro.parse_schema(json.loads(self.avro_schema_string), expand=True)
        for i, field in enumerate(expanded["fields"]):
            start = buf.tell()
            try:
                fastavro.schemaless_reader(buf, fastavro.parse_schema(field["type"]), None)
            except Exception as e:  # noqa: BLE001
                return RecordParseError(
                    f"Failed to deserialize Avro record ({len(message)} bytes): field '{field['name']}' (position "
                    f"{i}) at byte {start}: {type(e).__name__}: {e}; the message must be one record of the schema "
                    f"in plain Avro binary (no container header, no schema-registry prefix)", field["name"], i)
        return RecordParseError(f"Failed to deserialize Avro record ({len(message)} bytes): {type(error).__name__}: "
                                f"{error}; the message must be one record of the schema in plain Avro binary")

    def get_produced_type(self) -> RowTypeInfo:
        return avro_type_info(self._schema, self._named)
