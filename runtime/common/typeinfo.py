"""``TypeInformation`` and ``Types`` as in ``pyflink.common.typeinfo``, backed by Arrow.

A type information here tells the engine how to move records as Arrow batches:
``to_arrow()`` gives the Arrow type, ``records_to_arrow``/``arrow_to_records`` convert whole
batches column by column. ``PICKLED_BYTE_ARRAY`` (the default when nothing is known) stores
each value as its pickle in a ``binary`` column.

Batch layout: a Tuple or Row type becomes one column per field (named ``f0``.. or by the row's
field names); any other type becomes a single column ``f0``. So ``batch.column(t.field_index(f))``
is the column of field ``f`` for every type ``t``.
"""
from __future__ import annotations

import datetime
import pickle
from decimal import Decimal
from enum import Enum
from operator import attrgetter, itemgetter
from typing import Any, Iterable, List, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from runtime.common.types import Row, RowKind, make_rows

__all__ = [
    "TypeInformation", "Types", "BasicType", "BasicTypeInfo", "InstantTypeInfo",
    "SqlTimeTypeInfo", "DateTypeInfo", "TimeTypeInfo", "TimestampTypeInfo", "LocalTimeTypeInfo",
    "PickledBytesTypeInfo", "PrimitiveArrayTypeInfo", "BasicArrayTypeInfo",
    "ObjectArrayTypeInfo", "ListTypeInfo", "MapTypeInfo", "TupleTypeInfo", "RowTypeInfo",
    "infer_type_info", "records_to_arrow", "arrow_to_records", "arrow_schema",
]

_PICKLE_PROTOCOL = pickle.HIGHEST_PROTOCOL
_MAPS = "strict"  # decode Arrow maps as dicts, not lists of pairs
_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def _to_pylist(array: pa.Array) -> list:
    """``array.to_pylist()``, several times faster for numbers, booleans, strings and bytes."""
    t = array.type
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return array.to_numpy(zero_copy_only=False).tolist()
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        if not array.null_count:
            return array.to_numpy(zero_copy_only=False).tolist()
        # numpy would turn nulls into NaN (and ints into floats): fill, then put None back.
        out = array.fill_null(False if pa.types.is_boolean(t) else 0).to_numpy(zero_copy_only=False).tolist()
        for i in np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False)).tolist():
            out[i] = None
        return out
    return array.to_pylist(maps_as_pydicts=_MAPS)


def _check_type_info(value: Any, what: str) -> "TypeInformation":
    if isinstance(value, TypeInformation):
        return value
    hint = ""
    if callable(value) and getattr(value, "__qualname__", "").startswith("Types."):
        hint = f" (call it: {value.__qualname__}())"
    raise TypeError(f"{what} must be a TypeInformation such as Types.STRING(), got {value!r}{hint}")


class TypeInformation:
    """Base of all type informations: equality, hashing, field addressing and Arrow mapping."""

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
        raise NotImplementedError

    def field_index(self, field: Union[int, str]) -> int:
        """Position of ``field`` (an int position; names only for composite types)."""
        if type(field) is int and field == 0:
            return 0
        raise ValueError(f"field {field!r} is not valid for type {self}: it is not a composite "
                         f"type, so its only field is position 0; use Types.TUPLE([...]) or "
                         f"Types.ROW_NAMED([...], [...]) for records with several fields")

    # Column conversion, implemented per type. ``_plain`` means pyarrow converts Python values
    # of this type both ways by itself, so nested containers of it need no Python fix-ups.
    def _plain(self) -> bool:
        return True

    def _encode(self, values: list) -> pa.Array:
        return pa.array(values, type=self.to_arrow())

    def _decode(self, array: pa.Array) -> list:
        return _to_pylist(array)


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
    BasicType.BIG_DEC: pa.decimal128(38, 18),
    # Flink's Instant is millisecond-precise (PyFlink's Instant.of_epoch_milli).
    BasicType.INSTANT: pa.timestamp("ms", tz="UTC"),
}


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

    def to_arrow(self) -> pa.DataType:
        return _BASIC_ARROW[self._basic_type]

    def _plain(self) -> bool:
        return self._basic_type is not BasicType.BIG_INT

    def _encode(self, values: list) -> pa.Array:
        if self._basic_type is BasicType.BIG_INT:
            values = [v if v is None or isinstance(v, Decimal) else Decimal(v) for v in values]
        return pa.array(values, type=self.to_arrow())

    def _decode(self, array: pa.Array) -> list:
        values = _to_pylist(array)
        if self._basic_type is BasicType.BIG_INT:
            return [None if v is None else int(v) for v in values]
        return values

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

    def _plain(self) -> bool:
        return False

    def _encode(self, values: list) -> pa.Array:
        if not all(v is None or isinstance(v, datetime.datetime) for v in values):
            values = [_instant_millis(v) for v in values]
        return pa.array(values, type=self.to_arrow())


def _instant_millis(value: Any) -> Any:
    if value is None or isinstance(value, datetime.datetime):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    to_ms = getattr(value, "to_epoch_milli", None)
    if to_ms is None:
        raise TypeError(f"an Instant must be a datetime, epoch milliseconds or have "
                        f"to_epoch_milli(), got {value!r}")
    return to_ms()


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

    def to_arrow(self) -> pa.DataType:
        return pa.date32()


class TimeTypeInfo(TypeInformation):
    """``datetime.time`` values, microsecond precision."""

    def _repr(self) -> str:
        return "Time"

    def to_arrow(self) -> pa.DataType:
        return pa.time64("us")


class TimestampTypeInfo(TypeInformation):
    """Naive ``datetime.datetime`` values, microsecond precision (Python's and Spark's)."""

    def _repr(self) -> str:
        return "Timestamp"

    def to_arrow(self) -> pa.DataType:
        return pa.timestamp("us")


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

    def to_arrow(self) -> pa.DataType:
        if self._time_type is LocalTimeTypeInfo.TimeType.LOCAL_DATE:
            return pa.date32()
        if self._time_type is LocalTimeTypeInfo.TimeType.LOCAL_TIME:
            return pa.time64("us")
        return pa.timestamp("us")


# --------------------------------------------------------------------------- pickled


class PickledBytesTypeInfo(TypeInformation):
    """Any Python object, stored as its pickle (Arrow ``binary``)."""

    def _repr(self) -> str:
        return "PickledByteArray"

    def to_arrow(self) -> pa.DataType:
        return pa.binary()

    def _plain(self) -> bool:
        return False

    def _encode(self, values: list) -> pa.Array:
        dumps = pickle.dumps
        return pa.array([None if v is None else dumps(v, _PICKLE_PROTOCOL) for v in values],
                        type=pa.binary())

    def _decode(self, array: pa.Array) -> list:
        loads = pickle.loads
        return [None if b is None else loads(b) for b in _to_pylist(array)]


# --------------------------------------------------------------------------- collections


class _CollectionTypeInfo(TypeInformation):
    """Lists of one element type, stored as Arrow ``list``."""

    _name = ""

    def __init__(self, element_type: TypeInformation):
        self._element_type = _check_type_info(element_type, f"element type of {type(self).__name__}")

    def get_element_type(self) -> TypeInformation:
        return self._element_type

    def _key(self) -> tuple:
        return (self._element_type,)

    def _repr(self) -> str:
        return f"{self._name}<{self._element_type}>"

    def to_arrow(self) -> pa.DataType:
        return pa.list_(self._element_type.to_arrow())

    def _plain(self) -> bool:
        return self._element_type._plain()

    def _encode(self, values: list) -> pa.Array:
        if self._element_type._plain():
            return pa.array(values, type=self.to_arrow())
        offsets = [0]
        mask = []
        flat: list = []
        for v in values:
            if v is None:
                mask.append(True)
            else:
                mask.append(False)
                flat.extend(v)
            offsets.append(len(flat))
        child = self._element_type._encode(flat)
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), child, type=self.to_arrow(),
                                        mask=pa.array(mask, pa.bool_()) if any(mask) else None)

    def _decode(self, array: pa.Array) -> list:
        # Columnar even for plain elements: decoding the flat child at once beats to_pylist.
        elements = self._element_type._decode(array.values)
        offsets = array.offsets.to_pylist()
        nulls = array.is_null().to_pylist() if array.null_count else None
        out = [elements[offsets[i]:offsets[i + 1]] for i in range(len(array))]
        if nulls:
            out = [None if n else v for v, n in zip(out, nulls)]
        return out


class PrimitiveArrayTypeInfo(_CollectionTypeInfo):
    """Arrays of primitives; ``PRIMITIVE_ARRAY(BYTE())`` is Python ``bytes`` (Arrow ``binary``)."""

    _name = "PrimitiveArray"
    _ELEMENTS = ("Boolean", "Byte", "Short", "Integer", "Long", "Float", "Double", "Char")

    def __init__(self, element_type: TypeInformation):
        super().__init__(element_type)
        if not (type(self._element_type) is BasicTypeInfo and str(self._element_type) in self._ELEMENTS):
            raise TypeError(f"invalid element type {self._element_type} for a primitive array; "
                            f"expected one of {', '.join(self._ELEMENTS)}")

    def _is_bytes(self) -> bool:
        return self._element_type._basic_type is BasicType.BYTE

    def to_arrow(self) -> pa.DataType:
        return pa.binary() if self._is_bytes() else super().to_arrow()

    def _encode(self, values: list) -> pa.Array:
        return pa.array(values, type=self.to_arrow())

    def _decode(self, array: pa.Array) -> list:
        if self._is_bytes():
            return _to_pylist(array)
        return super()._decode(array)


class BasicArrayTypeInfo(_CollectionTypeInfo):
    """Arrays of boxed basic types (``Integer[]``, ``String[]``...), as Python lists."""

    _name = "BasicArray"
    _ELEMENTS = PrimitiveArrayTypeInfo._ELEMENTS + ("String",)

    def __init__(self, element_type: TypeInformation):
        super().__init__(element_type)
        if not (type(self._element_type) is BasicTypeInfo and str(self._element_type) in self._ELEMENTS):
            raise TypeError(f"invalid element type {self._element_type} for a basic array; "
                            f"expected one of {', '.join(self._ELEMENTS)}")


class ObjectArrayTypeInfo(_CollectionTypeInfo):
    """Arrays of any type, as Python lists."""

    _name = "ObjectArray"


class ListTypeInfo(_CollectionTypeInfo):
    """Lists of any type."""

    _name = "List"

    @property
    def elem_type(self) -> TypeInformation:
        # PyFlink's attribute name.
        return self._element_type


class MapTypeInfo(TypeInformation):
    """Dicts, stored as Arrow ``map`` (keys must not be None)."""

    def __init__(self, key_type_info: TypeInformation, value_type_info: TypeInformation):
        self._key_type_info = _check_type_info(key_type_info, "key type of MapTypeInfo")
        self._value_type_info = _check_type_info(value_type_info, "value type of MapTypeInfo")

    def get_key_type(self) -> TypeInformation:
        return self._key_type_info

    def get_value_type(self) -> TypeInformation:
        return self._value_type_info

    def _key(self) -> tuple:
        return (self._key_type_info, self._value_type_info)

    def _repr(self) -> str:
        return f"Map<{self._key_type_info}, {self._value_type_info}>"

    def to_arrow(self) -> pa.DataType:
        return pa.map_(self._key_type_info.to_arrow(), self._value_type_info.to_arrow())

    def _plain(self) -> bool:
        return self._key_type_info._plain() and self._value_type_info._plain()

    def _encode(self, values: list) -> pa.Array:
        if self._plain():
            return pa.array(values, type=self.to_arrow())
        offsets = [0]
        mask = []
        keys: list = []
        items: list = []
        for v in values:
            if v is None:
                mask.append(True)
            else:
                mask.append(False)
                keys.extend(v.keys())
                items.extend(v.values())
            offsets.append(len(keys))
        return pa.MapArray.from_arrays(
            pa.array(offsets, pa.int32()), self._key_type_info._encode(keys),
            self._value_type_info._encode(items), type=self.to_arrow(),
            mask=pa.array(mask, pa.bool_()) if any(mask) else None)

    def _decode(self, array: pa.Array) -> list:
        keys = self._key_type_info._decode(array.keys)
        items = self._value_type_info._decode(array.items)
        offsets = array.offsets.to_pylist()
        out = [dict(zip(keys[offsets[i]:offsets[i + 1]], items[offsets[i]:offsets[i + 1]]))
               for i in range(len(array))]
        if array.null_count:
            out = [None if n else v for v, n in zip(out, array.is_null().to_pylist())]
        return out


# --------------------------------------------------------------------------- composite


class _CompositeTypeInfo(TypeInformation):
    """Fixed fields addressed by position or name, stored as Arrow ``struct``."""

    def __init__(self, field_types: Sequence[TypeInformation], what: str):
        if isinstance(field_types, TypeInformation) or not isinstance(field_types, (list, tuple)):
            raise TypeError(f"{what} takes a list of field types, got {field_types!r}")
        self._field_types = [_check_type_info(t, f"field {i} of {what}")
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

    def to_arrow(self) -> pa.DataType:
        return pa.struct([pa.field(name, t.to_arrow())
                          for name, t in zip(self.get_field_names(), self._field_types)])

    def _plain(self) -> bool:
        # pyarrow reads structs back as dicts, never as tuples or Rows.
        return False

    # Building field columns from records.
    def _columns(self, values: list, top_level: bool) -> tuple:
        """(one list per field, null mask or None) for tuple/Row/list/dict values."""
        n = len(self._field_types)
        kinds = set(map(type, values))
        rows = None
        if kinds == {tuple} or (kinds == {Row} and self._rows_in_order(values)):
            if set(map(len, values)) <= {n}:
                rows = values
        mask = None
        if rows is None:
            rows, mask = self._normalize(values, top_level)
        # One pass per field: zip(*rows) degrades badly with many rows.
        return [list(map(itemgetter(i), rows)) for i in range(n)], mask

    def _rows_in_order(self, rows: list) -> bool:
        # Fast check that Rows can be taken positionally: INSERT kind, names absent or ours.
        if set(map(attrgetter("_row_kind"), rows)) != {RowKind.INSERT}:
            return False
        own = self._explicit_names()
        if own is None:
            return True
        return all(names is None or names == own
                   for names in {id(n): n for n in map(attrgetter("_field_names"), rows)}.values())

    def _explicit_names(self) -> Optional[List[str]]:
        return None

    def _normalize(self, values: list, top_level: bool) -> tuple:
        n = len(self._field_types)
        own = self._explicit_names()
        rows = []
        mask = []
        nones = (None,) * n
        for v in values:
            if v is None:
                if top_level:
                    raise TypeError(f"a record of type {self} must not be None")
                rows.append(nones)
                mask.append(True)
                continue
            if isinstance(v, Row):
                if v._row_kind is not RowKind.INSERT:
                    raise ValueError(f"{v!r} has row kind {v._row_kind.name}, which type {self} "
                                     f"cannot carry; use Types.PICKLED_BYTE_ARRAY() to keep it")
                names = v._field_names
                if names is not None and own is not None and names != own:
                    # PyFlink matches named Rows to a named row type by name, not position.
                    try:
                        v = tuple(v[name] for name in own)
                    except KeyError:
                        raise TypeError(f"{v!r} does not have the fields of type {self}") from None
            elif isinstance(v, dict):
                v = tuple(v.get(name) for name in self.get_field_names())
            elif not isinstance(v, (tuple, list)):
                raise TypeError(f"{v!r} is not a record of type {self}: expected a tuple, Row, "
                                f"list or dict")
            if len(v) != n:
                raise TypeError(f"{v!r} has {len(v)} fields but type {self} has {n}")
            rows.append(v)
            mask.append(False)
        return rows, (mask if any(mask) else None)

    def _field_arrays(self, columns: list) -> list:
        arrays = []
        for name, t, column in zip(self.get_field_names(), self._field_types, columns):
            try:
                arrays.append(t._encode(column))
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
                raise TypeError(f"field {name!r} of {self}: values do not fit {t}: {e}") from e
        return arrays

    def _encode(self, values: list) -> pa.Array:
        columns, mask = self._columns(values, top_level=False)
        if not self._field_types:
            return pa.array([None if m else {} for m in (mask or [False] * len(values))],
                            type=self.to_arrow())
        return pa.StructArray.from_arrays(self._field_arrays(columns), fields=list(self.to_arrow()),
                                          mask=pa.array(mask, pa.bool_()) if mask else None)

    def _from_columns(self, columns: list, length: int) -> list:
        return list(zip(*columns)) if columns else [()] * length

    def _decode(self, array: pa.Array) -> list:
        columns = [t._decode(c) for t, c in zip(self._field_types, array.flatten())]
        out = self._from_columns(columns, len(array))
        if array.null_count:
            out = [None if n else v for v, n in zip(out, array.is_null().to_pylist())]
        return out


class TupleTypeInfo(_CompositeTypeInfo):
    """Python tuples with typed fields ``f0``, ``f1``..."""

    def __init__(self, field_types: List[TypeInformation]):
        super().__init__(field_types, "TupleTypeInfo")

    def is_tuple_type(self) -> bool:
        return True

    def _key(self) -> tuple:
        return tuple(self._field_types)

    def _repr(self) -> str:
        return f"Tuple{len(self._field_types)}<{', '.join(map(str, self._field_types))}>"


class RowTypeInfo(_CompositeTypeInfo):
    """Rows with typed fields, named ``f0``.. unless names are given.

    Records decode as Rows carrying the given names, or as unnamed Rows for ``Types.ROW``.
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

    def _from_columns(self, columns: list, length: int) -> list:
        # A copy per batch, so a caller mutating row._fields cannot rename this type's fields.
        names = None if self._field_names is None else list(self._field_names)
        return make_rows(super()._from_columns(columns, length), names)


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
            return Types.ROW(field_types)
        return Types.ROW_NAMED(list(field_names), field_types)
    return Types.PICKLED_BYTE_ARRAY()


def _infer_fields(records: list, arity: int) -> List[TypeInformation]:
    return [_infer([v for v in map(itemgetter(i), records) if v is not None]) for i in range(arity)]


# --------------------------------------------------------------------------- batches


def arrow_schema(type_info: TypeInformation) -> pa.Schema:
    """The schema of the batches ``records_to_arrow`` makes for ``type_info``."""
    _check_type_info(type_info, "type_info")
    if isinstance(type_info, _CompositeTypeInfo):
        return pa.schema(list(type_info.to_arrow()))
    return pa.schema([pa.field("f0", type_info.to_arrow())])


def records_to_arrow(records: Iterable[Any], type_info: TypeInformation) -> pa.RecordBatch:
    """A batch holding ``records`` typed as ``type_info`` (see the module doc for the layout)."""
    _check_type_info(type_info, "type_info")
    records = records if isinstance(records, list) else list(records)
    schema = arrow_schema(type_info)
    if isinstance(type_info, _CompositeTypeInfo):
        if not type_info.arity:
            type_info._columns(records, top_level=True)  # validates the records
            return pa.RecordBatch.from_struct_array(pa.array([{}] * len(records), type_info.to_arrow()))
        columns, _ = type_info._columns(records, top_level=True)
        return pa.RecordBatch.from_arrays(type_info._field_arrays(columns), schema=schema)
    try:
        array = type_info._encode(records)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        raise TypeError(f"records do not fit type {type_info}: {e}") from e
    return pa.RecordBatch.from_arrays([array], schema=schema)


def to_declared_type(records: Sequence[Any], type_info: TypeInformation, what: str) -> list:
    """``records`` as values of ``type_info``, as PyFlink's serializers make them: a tuple declared
    as a ROW becomes a Row, an int declared DOUBLE a float, a FLOAT is rounded to 32 bits.
    A record that does not fit fails naming it, its index in ``what`` and the type."""
    if isinstance(type_info, PickledBytesTypeInfo):
        return list(records)
    try:
        return arrow_to_records(records_to_arrow(list(records), type_info), type_info)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as error:
        for i, record in enumerate(records):     # the first record that does not fit, to name it
            try:
                records_to_arrow([record], type_info)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
                raise TypeError(f"{what}: record {i}, {record!r}, does not fit its declared type "
                                f"{type_info}: {e}. Convert it, or declare the type it has.") from None
        raise TypeError(f"{what}: the records do not fit their declared type {type_info}: {error}") from None


def arrow_to_records(batch: Union[pa.RecordBatch, pa.Table], type_info: TypeInformation) -> list:
    """The records of a batch made by ``records_to_arrow`` with the same ``type_info``."""
    _check_type_info(type_info, "type_info")
    if isinstance(batch, pa.Table):
        out: list = []
        for b in batch.to_batches():
            out.extend(arrow_to_records(b, type_info))
        return out
    expected = arrow_schema(type_info)
    if not batch.schema.equals(expected):
        raise ValueError(f"batch schema does not match type {type_info}: expected\n{expected}\n"
                         f"got\n{batch.schema}")
    if isinstance(type_info, _CompositeTypeInfo):
        columns = [t._decode(c) for t, c in zip(type_info._field_types, batch.columns)]
        return type_info._from_columns(columns, batch.num_rows)
    return type_info._decode(batch.column(0))
