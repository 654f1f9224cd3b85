"""``TypeInformation`` and ``Types`` as in ``pyflink.common.typeinfo``.

A type information tells the engine how to move records as Arrow batches: ``to_arrow()`` gives
the Arrow type; ``runtime.common.arrow`` converts whole batches column by column
(``records_to_arrow``, ``arrow_to_records``, ``arrow_schema``).
``PICKLED_BYTE_ARRAY`` (the default when nothing is known) stores each value as its pickle.
"""
from __future__ import annotations

from enum import Enum
from functools import singledispatch
from operator import attrgetter, itemgetter
from typing import Any, Iterable, List, Optional, Sequence, Union

import pyarrow as pa

from runtime.common.types import Row, RowKind

__all__ = [
    "TypeInformation", "Types", "BasicType", "BasicTypeInfo", "InstantTypeInfo",
    "SqlTimeTypeInfo", "DateTypeInfo", "TimeTypeInfo", "TimestampTypeInfo", "LocalTimeTypeInfo",
    "PickledBytesTypeInfo", "PrimitiveArrayTypeInfo", "BasicArrayTypeInfo",
    "ObjectArrayTypeInfo", "ListTypeInfo", "MapTypeInfo", "TupleTypeInfo", "RowTypeInfo",
    "infer_type_info",
]


_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def check_type_info(value: Any, what: str) -> "TypeInformation":
    """``value``, when it is a type information; else a TypeError naming ``what`` and the fix."""
    if isinstance(value, TypeInformation):
        return value
    hint = ""
    if callable(value) and getattr(value, "__qualname__", "").startswith("Types."):
        hint = f" (call it: {value.__qualname__}())"
    raise TypeError(f"{what} must be a TypeInformation such as Types.STRING(), got {value!r}{hint}")


class TypeInformation:
    """Base of all type informations: equality, hashing, field addressing and Arrow mapping."""

    # True on a type Sluice inferred from the values (from_collection without type_info): it types
    # columns and checks, but the job declared nothing, so print() shows the records as PyFlink
    # shows undeclared (pickled) ones. Not part of equality.
    inferred = False

    def _key(self) -> tuple:
        return ()

    def _repr(self) -> str:
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def __repr__(self) -> str:
        return self._repr()

    __str__ = __repr__

    def is_basic_type(self) -> bool:
        return False

    def is_tuple_type(self) -> bool:
        return False

    def is_composite_type(self) -> bool:
        return False

    @property
    def arity(self) -> int:
        """Number of direct fields: 1 for non-composite types."""
        return 1

    def get_arity(self) -> int:
        return self.arity

    def get_total_fields(self) -> int:
        return 1

    def to_arrow(self) -> pa.DataType:
        return arrow_type(self)

    def field_index(self, field: Union[int, str]) -> int:
        """Position of ``field`` (an int position; names only for composite types)."""
        if type(field) is int and field == 0:
            return 0
        raise ValueError(f"field {field!r} is not valid for type {self}: it is not a composite "
                         f"type, so its only field is position 0; use Types.TUPLE([...]) or "
                         f"Types.ROW_NAMED([...], [...]) for records with several fields")


# --------------------------------------------------------------------------- basic types


class BasicType(Enum):
    STRING = "String"
    BYTE = "Byte"
    BOOLEAN = "Boolean"
    SHORT = "Short"
    INT = "Integer"
    LONG = "Long"
    FLOAT = "Float"
    DOUBLE = "Double"
    CHAR = "Char"
    BIG_INT = "BigInteger"
    BIG_DEC = "BigDecimal"
    INSTANT = "Instant"


class BasicTypeInfo(TypeInformation):
    """Strings, numbers, booleans, chars, big numbers and instants."""

    def __init__(self, basic_type: BasicType):
        self._basic_type = basic_type

    def _key(self) -> tuple:
        return (self._basic_type,)

    def _repr(self) -> str:
        return self._basic_type.value

    def is_basic_type(self) -> bool:
        return True

    @staticmethod
    def STRING_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.STRING)

    @staticmethod
    def BOOLEAN_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.BOOLEAN)

    @staticmethod
    def BYTE_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.BYTE)

    @staticmethod
    def SHORT_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.SHORT)

    @staticmethod
    def INT_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.INT)

    @staticmethod
    def LONG_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.LONG)

    @staticmethod
    def FLOAT_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.FLOAT)

    @staticmethod
    def DOUBLE_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.DOUBLE)

    @staticmethod
    def CHAR_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.CHAR)

    @staticmethod
    def BIG_INT_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.BIG_INT)

    @staticmethod
    def BIG_DEC_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.BIG_DEC)

    @staticmethod
    def INSTANT_TYPE_INFO() -> "InstantTypeInfo":
        return InstantTypeInfo(BasicType.INSTANT)


class InstantTypeInfo(BasicTypeInfo):
    """Points in time; values are UTC datetimes (epoch-milli ints and ``Instant``-likes accepted)."""


# --------------------------------------------------------------------------- time types


class SqlTimeTypeInfo(TypeInformation):
    """Factory for SQL date/time type informations."""

    @staticmethod
    def DATE() -> "DateTypeInfo":
        return DateTypeInfo()

    @staticmethod
    def TIME() -> "TimeTypeInfo":
        return TimeTypeInfo()

    @staticmethod
    def TIMESTAMP() -> "TimestampTypeInfo":
        return TimestampTypeInfo()


class DateTypeInfo(TypeInformation):
    """``datetime.date`` values."""

    def _repr(self) -> str:
        return "Date"


class TimeTypeInfo(TypeInformation):
    """``datetime.time`` values, microsecond precision."""

    def _repr(self) -> str:
        return "Time"


class TimestampTypeInfo(TypeInformation):
    """Naive ``datetime.datetime`` values, microsecond precision (Python's and Spark's)."""

    def _repr(self) -> str:
        return "Timestamp"


class LocalTimeTypeInfo(TypeInformation):
    """``java.time`` local types: date, time, date-time."""

    class TimeType(Enum):
        LOCAL_DATE = "LocalDate"
        LOCAL_TIME = "LocalTime"
        LOCAL_DATE_TIME = "LocalDateTime"

    def __init__(self, time_type: "LocalTimeTypeInfo.TimeType"):
        self._time_type = time_type

    def _key(self) -> tuple:
        return (self._time_type,)

    def _repr(self) -> str:
        return self._time_type.value


# --------------------------------------------------------------------------- pickled


class PickledBytesTypeInfo(TypeInformation):
    """Any Python object, stored as its pickle (Arrow ``binary``)."""

    def _repr(self) -> str:
        return "PickledByteArray"


# --------------------------------------------------------------------------- collections


class CollectionTypeInfo(TypeInformation):
    """Lists of one element type, stored as Arrow ``list``."""

    _name = ""
    _ELEMENTS: Optional[tuple] = None     # the basic types an array of primitives may hold
    _what = ""

    def __init__(self, element_type: TypeInformation):
        self._element_type = check_type_info(element_type, f"element type of {type(self).__name__}")
        if self._ELEMENTS is not None and not (type(self._element_type) is BasicTypeInfo
                                               and str(self._element_type) in self._ELEMENTS):
            raise TypeError(f"invalid element type {self._element_type} for {self._what}; "
                            f"expected one of {', '.join(self._ELEMENTS)}")

    def get_element_type(self) -> TypeInformation:
        return self._element_type

    def _key(self) -> tuple:
        return (self._element_type,)

    def _repr(self) -> str:
        return f"{self._name}<{self._element_type}>"


class PrimitiveArrayTypeInfo(CollectionTypeInfo):
    """Arrays of primitives; ``PRIMITIVE_ARRAY(BYTE())`` is Python ``bytes`` (Arrow ``binary``)."""

    _name = "PrimitiveArray"
    _ELEMENTS = ("Boolean", "Byte", "Short", "Integer", "Long", "Float", "Double", "Char")
    _what = "a primitive array"


class BasicArrayTypeInfo(CollectionTypeInfo):
    """Arrays of boxed basic types (``Integer[]``, ``String[]``...), as Python lists."""

    _name = "BasicArray"
    _ELEMENTS = PrimitiveArrayTypeInfo._ELEMENTS + ("String",)
    _what = "a basic array"


class ObjectArrayTypeInfo(CollectionTypeInfo):
    """Arrays of any type, as Python lists."""

    _name = "ObjectArray"


class ListTypeInfo(CollectionTypeInfo):
    """Lists of any type."""

    _name = "List"

    @property
    def elem_type(self) -> TypeInformation:
        # PyFlink's attribute name.
        return self._element_type


class MapTypeInfo(TypeInformation):
    """Dicts, stored as Arrow ``map`` (keys must not be None)."""

    def __init__(self, key_type_info: TypeInformation, value_type_info: TypeInformation):
        self._key_type_info = check_type_info(key_type_info, "key type of MapTypeInfo")
        self._value_type_info = check_type_info(value_type_info, "value type of MapTypeInfo")

    def get_key_type(self) -> TypeInformation:
        return self._key_type_info

    def get_value_type(self) -> TypeInformation:
        return self._value_type_info

    def _key(self) -> tuple:
        return (self._key_type_info, self._value_type_info)

    def _repr(self) -> str:
        return f"Map<{self._key_type_info}, {self._value_type_info}>"


# --------------------------------------------------------------------------- composite


class CompositeTypeInfo(TypeInformation):
    """Fixed fields addressed by position or name, stored as Arrow ``struct``."""

    def __init__(self, field_types: Sequence[TypeInformation], what: str):
        if isinstance(field_types, TypeInformation) or not isinstance(field_types, (list, tuple)):
            raise TypeError(f"{what} takes a list of field types, got {field_types!r}")
        self._field_types = [check_type_info(t, f"field {i} of {what}")
                             for i, t in enumerate(field_types)]

    def get_field_types(self) -> List[TypeInformation]:
        return list(self._field_types)

    def get_field_names(self) -> List[str]:
        return [f"f{i}" for i in range(len(self._field_types))]

    def is_composite_type(self) -> bool:
        return True

    @property
    def arity(self) -> int:
        return len(self._field_types)

    def get_total_fields(self) -> int:
        return sum(t.get_total_fields() for t in self._field_types)

    def get_type_at(self, pos: int) -> TypeInformation:
        return self._field_types[pos]

    def field_index(self, field: Union[int, str]) -> int:
        n = len(self._field_types)
        names = self.get_field_names()
        if type(field) is int and 0 <= field < n:
            return field
        if isinstance(field, str) and field in names:
            return names.index(field)
        valid = (f"positions 0..{n - 1} or names {', '.join(map(repr, names))}" if n
                 else "none (it has no fields)")
        raise ValueError(f"field {field!r} is not valid for type {self}; valid fields are {valid}")

    def _explicit_names(self) -> Optional[List[str]]:
        return None


class TupleTypeInfo(CompositeTypeInfo):
    """Python tuples with typed fields ``f0``, ``f1``..."""

    def __init__(self, field_types: List[TypeInformation]):
        super().__init__(field_types, "TupleTypeInfo")

    def is_tuple_type(self) -> bool:
        return True

    def _key(self) -> tuple:
        return tuple(self._field_types)

    def _repr(self) -> str:
        return f"Tuple{len(self._field_types)}<{', '.join(map(str, self._field_types))}>"


class RowTypeInfo(CompositeTypeInfo):
    """Rows with typed fields, named ``f0``.. unless names are given.

    Records decode as Rows carrying the given names, or ``f0``.. for ``Types.ROW`` (as PyFlink's
    coder names them); encoding takes unnamed Rows and tuples by position.
    """

    def __init__(self, field_types: List[TypeInformation], field_names: Optional[List[str]] = None):
        super().__init__(field_types, "RowTypeInfo")
        if field_names is not None:
            field_names = list(field_names)
            if len(field_names) != len(self._field_types):
                raise ValueError(f"{len(field_names)} field names {field_names} given for "
                                 f"{len(self._field_types)} field types")
            bad = [n for n in field_names if not isinstance(n, str) or not n]
            if bad:
                raise ValueError(f"field names must be non-empty strings, got {bad}")
            if len(set(field_names)) != len(field_names):
                raise ValueError(f"field names must be unique, got {field_names}")
        self._field_names = field_names

    def get_field_names(self) -> List[str]:
        if self._field_names is None:
            return super().get_field_names()
        return list(self._field_names)

    def get_field_index(self, field_name: str) -> int:
        """Position of the named field, -1 if absent (as Flink's)."""
        names = self.get_field_names()
        return names.index(field_name) if field_name in names else -1

    def _explicit_names(self) -> Optional[List[str]]:
        return self._field_names

    def _key(self) -> tuple:
        # Given names are part of identity: they change the Arrow schema and decoded Rows.
        names = None if self._field_names is None else tuple(self._field_names)
        return names, tuple(self._field_types)

    def _repr(self) -> str:
        if self._field_names is None:
            return f"Row({', '.join(map(str, self._field_types))})"
        return "Row(%s)" % ", ".join(f"{n}: {t}" for n, t in zip(self._field_names, self._field_types))


# --------------------------------------------------------------------------- Types


class Types:
    """Static constructors of the common type informations, as PyFlink's ``Types``."""

    @staticmethod
    def STRING() -> TypeInformation:
        return BasicTypeInfo.STRING_TYPE_INFO()

    @staticmethod
    def BYTE() -> TypeInformation:
        return BasicTypeInfo.BYTE_TYPE_INFO()

    @staticmethod
    def BOOLEAN() -> TypeInformation:
        return BasicTypeInfo.BOOLEAN_TYPE_INFO()

    @staticmethod
    def SHORT() -> TypeInformation:
        return BasicTypeInfo.SHORT_TYPE_INFO()

    @staticmethod
    def INT() -> TypeInformation:
        return BasicTypeInfo.INT_TYPE_INFO()

    @staticmethod
    def LONG() -> TypeInformation:
        return BasicTypeInfo.LONG_TYPE_INFO()

    @staticmethod
    def FLOAT() -> TypeInformation:
        return BasicTypeInfo.FLOAT_TYPE_INFO()

    @staticmethod
    def DOUBLE() -> TypeInformation:
        return BasicTypeInfo.DOUBLE_TYPE_INFO()

    @staticmethod
    def CHAR() -> TypeInformation:
        return BasicTypeInfo.CHAR_TYPE_INFO()

    @staticmethod
    def BIG_INT() -> TypeInformation:
        return BasicTypeInfo.BIG_INT_TYPE_INFO()

    @staticmethod
    def BIG_DEC() -> TypeInformation:
        return BasicTypeInfo.BIG_DEC_TYPE_INFO()

    @staticmethod
    def INSTANT() -> TypeInformation:
        return BasicTypeInfo.INSTANT_TYPE_INFO()

    @staticmethod
    def SQL_DATE() -> TypeInformation:
        return SqlTimeTypeInfo.DATE()

    @staticmethod
    def SQL_TIME() -> TypeInformation:
        return SqlTimeTypeInfo.TIME()

    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation:
        return SqlTimeTypeInfo.TIMESTAMP()

    @staticmethod
    def LOCAL_DATE() -> TypeInformation:
        return LocalTimeTypeInfo(LocalTimeTypeInfo.TimeType.LOCAL_DATE)

    @staticmethod
    def LOCAL_TIME() -> TypeInformation:
        return LocalTimeTypeInfo(LocalTimeTypeInfo.TimeType.LOCAL_TIME)

    @staticmethod
    def LOCAL_DATE_TIME() -> TypeInformation:
        return LocalTimeTypeInfo(LocalTimeTypeInfo.TimeType.LOCAL_DATE_TIME)

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation:
        return PickledBytesTypeInfo()

    @staticmethod
    def ROW(field_types: List[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types)

    @staticmethod
    def ROW_NAMED(field_names: List[str], field_types: List[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types, field_names)

    @staticmethod
    def TUPLE(field_types: List[TypeInformation]) -> TupleTypeInfo:
        return TupleTypeInfo(field_types)

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return PrimitiveArrayTypeInfo(element_type)

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return BasicArrayTypeInfo(element_type)

    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return ObjectArrayTypeInfo(element_type)

    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> TypeInformation:
        return MapTypeInfo(key_type_info, value_type_info)

    @staticmethod
    def LIST(element_type_info: TypeInformation) -> TypeInformation:
        return ListTypeInfo(element_type_info)


# --------------------------------------------------------------------------- inference


def infer_type_info(values: Iterable[Any]) -> TypeInformation:
    """The type information for a sample of values; PICKLED_BYTE_ARRAY when unsure.

    str→STRING, bool→BOOLEAN, int→LONG, float→DOUBLE, tuple→TUPLE, named Row→ROW_NAMED,
    unnamed Row→ROW, recursively; None mixes with any type. Subclasses (IntEnum, namedtuple...),
    other types, inconsistent samples and values a typed column would alter (ints beyond 64
    bits, non-INSERT Rows) infer PICKLED_BYTE_ARRAY, so records always round-trip unchanged.
    """
    return _infer([v for v in values if v is not None])


def _infer(values: list) -> TypeInformation:
    kinds = set(map(type, values))
    if len(kinds) != 1:
        return Types.PICKLED_BYTE_ARRAY()
    kind = kinds.pop()
    if kind is str:
        return Types.STRING()
    if kind is bool:
        return Types.BOOLEAN()
    if kind is int:
        if min(values) >= _INT64_MIN and max(values) <= _INT64_MAX:
            return Types.LONG()
        return Types.PICKLED_BYTE_ARRAY()
    if kind is float:
        return Types.DOUBLE()
    if kind is tuple:
        lengths = set(map(len, values))
        if len(lengths) != 1:
            return Types.PICKLED_BYTE_ARRAY()
        return Types.TUPLE(_infer_fields(values, lengths.pop()))
    if kind is Row:
        if set(map(attrgetter("_row_kind"), values)) != {RowKind.INSERT}:
            return Types.PICKLED_BYTE_ARRAY()
        names = {tuple(n) if n is not None else None for n in map(attrgetter("_field_names"), values)}
        lengths = set(map(len, values))
        if len(names) != 1 or len(lengths) != 1:
            return Types.PICKLED_BYTE_ARRAY()
        field_names = names.pop()
        field_types = _infer_fields(values, lengths.pop())
        if field_names is None:
            row = Types.ROW(field_types)
            row.inferred = True     # undeclared, so pickled by PyFlink: they decode unnamed, as they were
            return row
        return Types.ROW_NAMED(list(field_names), field_types)
    return Types.PICKLED_BYTE_ARRAY()


def _infer_fields(records: list, arity: int) -> List[TypeInformation]:
    return [_infer([v for v in map(itemgetter(i), records) if v is not None]) for i in range(arity)]


# --------------------------------------------------------------------------- Arrow types
# Here rather than in runtime.common.arrow (which converts values and imports this module):
# ``TypeInformation.to_arrow()`` answers from them.


_BASIC_ARROW = {
    BasicType.STRING: pa.string(),
    BasicType.BYTE: pa.int8(),
    BasicType.BOOLEAN: pa.bool_(),
    BasicType.SHORT: pa.int16(),
    BasicType.INT: pa.int32(),
    BasicType.LONG: pa.int64(),
    BasicType.FLOAT: pa.float32(),
    BasicType.DOUBLE: pa.float64(),
    BasicType.CHAR: pa.string(),
    # Spark stores BigInteger as DECIMAL(38, 0) too; larger ints need PICKLED_BYTE_ARRAY.
    BasicType.BIG_INT: pa.decimal128(38, 0),
    # A BigDecimal has its own scale and any precision, which no Arrow decimal type keeps (one
    # scale per column, 76 digits at most): its text, as BigDecimal.toString writes it and as
    # PyFlink's coder ships it to Java (BigDecimalCoderImpl: str(value)).
    BasicType.BIG_DEC: pa.string(),
    # Flink's Instant is millisecond-precise (PyFlink's Instant.of_epoch_milli).
    BasicType.INSTANT: pa.timestamp("ms", tz="UTC"),
}

_LOCAL_TIME_ARROW = {
    LocalTimeTypeInfo.TimeType.LOCAL_DATE: pa.date32(),
    LocalTimeTypeInfo.TimeType.LOCAL_TIME: pa.time64("us"),
    LocalTimeTypeInfo.TimeType.LOCAL_DATE_TIME: pa.timestamp("us"),
}


@singledispatch
def arrow_type(type_info: TypeInformation) -> pa.DataType:
    """The Arrow type of the values of ``type_info`` (``TypeInformation.to_arrow()``)."""
    raise NotImplementedError(f"{type_info!r} has no Arrow type")


arrow_type.register(BasicTypeInfo, lambda t: _BASIC_ARROW[t._basic_type])
arrow_type.register(DateTypeInfo, lambda t: pa.date32())
arrow_type.register(TimeTypeInfo, lambda t: pa.time64("us"))          # microseconds, as Python's
arrow_type.register(TimestampTypeInfo, lambda t: pa.timestamp("us"))  # naive, as Python's and Spark's
arrow_type.register(LocalTimeTypeInfo, lambda t: _LOCAL_TIME_ARROW[t._time_type])
arrow_type.register(PickledBytesTypeInfo, lambda t: pa.binary())
arrow_type.register(CollectionTypeInfo, lambda t: pa.list_(arrow_type(t.get_element_type())))
arrow_type.register(MapTypeInfo, lambda t: pa.map_(arrow_type(t.get_key_type()), arrow_type(t.get_value_type())))
arrow_type.register(CompositeTypeInfo, lambda t: pa.struct(
    [pa.field(name, arrow_type(f)) for name, f in zip(t.get_field_names(), t.get_field_types())]))


@arrow_type.register
def _(t: PrimitiveArrayTypeInfo) -> pa.DataType:
    # PRIMITIVE_ARRAY(BYTE()) is Python ``bytes``.
    return pa.binary() if is_bytes(t) else pa.list_(arrow_type(t.get_element_type()))


def is_bytes(t: PrimitiveArrayTypeInfo) -> bool:
    """Whether the array holds Python ``bytes`` (``PRIMITIVE_ARRAY(BYTE())``)."""
    return t.get_element_type()._basic_type is BasicType.BYTE
