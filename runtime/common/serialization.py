"""Record <-> bytes, named as ``pyflink.common.serialization``: the schemas connectors take
(``SimpleStringSchema``, ``ByteArraySchema``, ``RowFieldExtractorSchema``) and the ``Encoder``
of a row-format ``FileSink``.

PyFlink's are wrappers of Java classes; these do the same work in Python: a ``SimpleStringEncoder``
writes each record's string form and a newline in its charset, as Flink's.
"""
from __future__ import annotations

import codecs
from typing import Any


def _check_charset(charset: str) -> str:
    try:
        return codecs.lookup(charset).name
    except LookupError:
        raise ValueError(f"unknown charset {charset!r}; use a Python codec name such as 'UTF-8'") from None


class SerializationSchema:
    """Turns a record into bytes (what a sink writes)."""

    def serialize(self, value: Any) -> bytes:
        raise NotImplementedError


class DeserializationSchema:
    """Turns bytes into a record (what a source reads)."""

    def deserialize(self, message: bytes) -> Any:
        raise NotImplementedError


class SimpleStringSchema(SerializationSchema, DeserializationSchema):
    """Strings as bytes in ``charset`` (UTF-8 by default), both ways."""

    def __init__(self, charset: str = "UTF-8"):
        self.charset = charset
        _check_charset(charset)

    def serialize(self, value: str) -> bytes:
        return value.encode(self.charset)

    def deserialize(self, message: bytes) -> str:
        return bytes(message).decode(self.charset)

    def __eq__(self, other):
        return type(other) is type(self) and other.charset == self.charset

    def __hash__(self):
        return hash((type(self), self.charset))

    def __repr__(self) -> str:
        return f"SimpleStringSchema({self.charset!r})"


class ByteArraySchema(SerializationSchema, DeserializationSchema):
    """Bytes as they are."""

    def serialize(self, value: bytes) -> bytes:
        return bytes(value)

    def deserialize(self, message: bytes) -> bytes:
        return bytes(message)


class RowFieldExtractorSchema(SerializationSchema):
    """One field of a Row, which must already be bytes, as the serialized value (Flink 2.x's
    RowFieldExtractorSchema): a Kafka sink's key from one field and its value from another.

        KafkaRecordSerializationSchema.builder().set_topic("t")
            .set_key_serialization_schema(RowFieldExtractorSchema(0))
            .set_value_serialization_schema(RowFieldExtractorSchema(1)).build()

    A None row or field is empty bytes, as Flink's."""

    def __init__(self, field_index: int):
        if field_index < 0:
            raise ValueError(f"Field index must be non-negative, got: {field_index}")
        self.field_index = field_index

    def serialize(self, value) -> bytes:
        if value is None:
            return b""
        if self.field_index >= len(value):
            raise ValueError(f"RowFieldExtractorSchema: cannot access field {self.field_index} in Row with arity "
                             f"{len(value)}: {value!r}")
        field = value[self.field_index]
        if field is None:
            return b""
        if not isinstance(field, (bytes, bytearray, memoryview)):
            raise ValueError(f"RowFieldExtractorSchema: field at index {self.field_index} must be of type bytes "
                             f"(Types.PRIMITIVE_ARRAY(Types.BYTE())), but was {type(field).__name__}: {field!r}; "
                             f"encode it first, e.g. .map(lambda r: Row(r[0].encode(), ...))")
        return bytes(field)

    def __eq__(self, other):
        return type(other) is type(self) and other.field_index == self.field_index

    def __hash__(self):
        return hash((type(self), self.field_index))

    def __repr__(self) -> str:
        return f"RowFieldExtractorSchema({self.field_index})"


class Encoder:
    """Writes one record of a row-format ``FileSink`` as bytes (Flink's ``Encoder.encode``)."""

    def encode(self, value: Any) -> bytes:
        raise NotImplementedError

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> "SimpleStringEncoder":
        """Each record's string form and a newline, in ``charset_name`` (Flink's SimpleStringEncoder).

            FileSink.for_row_format("out", Encoder.simple_string_encoder())
        """
        return SimpleStringEncoder(charset_name)


class SimpleStringEncoder(Encoder):
    def __init__(self, charset_name: str = "UTF-8"):
        _check_charset(charset_name)
        self.charset_name = charset_name

    def encode(self, value: Any) -> bytes:
        return (str(value) + "\n").encode(self.charset_name)

    def __repr__(self) -> str:
        return f"Encoder.simple_string_encoder({self.charset_name!r})"


class BulkWriterFactory:
    """Writes a part file of a bulk-format ``FileSink`` whole (Parquet:
    ``runtime.datastream.formats.parquet.ParquetBulkWriters``)."""
