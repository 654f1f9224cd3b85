"""Records as Arrow: the engine's one conversion between Python values and Arrow.

``encode(values, type_info)`` makes an Arrow array of values of a type information,
``decode(array, type_info)`` gives them back; ``records_to_arrow``/``arrow_to_records`` do the
same for whole batches of records; ``infer_array`` types values as ``infer_type_info`` does and
encodes them; ``records_to_table`` makes a sink's table of records, declared or typed by their values. State snapshots, the Delta sink, ``from_collection``'s declared types and the
columns of records crossing a shuffle (``runtime.task.record_columns``) all convert here.

Batch layout: a Tuple or Row type becomes one column per field (named ``f0``.. or by the row's
field names); any other type becomes a single column ``f0``. So ``batch.column(t.field_index(f))``
is the column of field ``f`` for every type ``t``. ``PICKLED_BYTE_ARRAY`` (the default when
nothing is known) stores each value as its pickle in a ``binary`` column. ``BIG_DEC`` is a
``string`` column of each value's text (``big_decimal``), so a decimal keeps its scale and digits.
"""
from __future__ import annotations

import datetime
import pickle
from array import array
from decimal import Decimal, InvalidOperation
from functools import singledispatch
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, Iterable, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from runtime.common.pickling import dumps_each
from runtime.common.typeinfo import (
    BasicType, BasicTypeInfo, CollectionTypeInfo, CompositeTypeInfo, InstantTypeInfo, MapTypeInfo,
    PickledBytesTypeInfo, PrimitiveArrayTypeInfo, RowTypeInfo, TupleTypeInfo, TypeInformation, arrow_type,
    check_type_info, infer_type_info, is_bytes)
from runtime.common.types import Row, RowKind, make_rows, with_field_names

__all__ = [
    "arrow_schema", "batch_fields", "encode", "decode", "to_pylist", "infer_array",
    "field_columns", "fields_of", "records_to_arrow", "arrow_to_records", "to_declared_type", "first_misfit",
    "FieldTypeError", "CONVERSION_ERRORS", "big_decimal", "as_shipped", "records_to_table", "record_column_names",
]

_MAPS = "strict"  # decode Arrow maps as dicts, not lists of pairs

# What a value that does not fit its Arrow type raises while it is converted.
CONVERSION_ERRORS = (pa.ArrowException, TypeError, ValueError, OverflowError)


class FieldTypeError(TypeError):
    """Values of a record field (``column``, declared ``column_type``) do not fit its type."""

    def __init__(self, message: str, column: str, column_type: TypeInformation):
        super().__init__(message)
        self.column = column
        self.column_type = column_type


def to_pylist(array: pa.Array) -> list:
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


def batch_fields(type_info: TypeInformation) -> list:
    """(column name, column type) of each column of the batches of ``type_info``: a Tuple's or
    Row's fields, else the one column ``f0``."""
    if isinstance(type_info, CompositeTypeInfo):
        return list(zip(type_info.get_field_names(), type_info.get_field_types()))
    return [("f0", type_info)]


def arrow_schema(type_info: TypeInformation) -> pa.Schema:
    """The schema of the batches ``records_to_arrow`` makes for ``type_info``."""
    check_type_info(type_info, "type_info")
    return pa.schema([pa.field(name, arrow_type(t)) for name, t in batch_fields(type_info)])


# --------------------------------------------------------------------------- values <-> arrays
# ``_plain`` means pyarrow converts Python values of the type both ways by itself, so nested
# containers of it need no Python fix-ups.


@singledispatch
def _plain(t: TypeInformation) -> bool:
    return True


_plain.register(BasicTypeInfo, lambda t: t._basic_type not in (BasicType.BIG_INT, BasicType.BIG_DEC))
_plain.register(InstantTypeInfo, lambda t: False)
_plain.register(PickledBytesTypeInfo, lambda t: False)
_plain.register(CollectionTypeInfo, lambda t: _plain(t.get_element_type()))
_plain.register(MapTypeInfo, lambda t: _plain(t.get_key_type()) and _plain(t.get_value_type()))
_plain.register(CompositeTypeInfo, lambda t: False)    # pyarrow reads structs back as dicts


@singledispatch
def _encode(t: TypeInformation, values: list) -> pa.Array:
    return pa.array(values, type=arrow_type(t))


@singledispatch
def _decode(t: TypeInformation, array: pa.Array) -> list:
    return to_pylist(array)


def encode(values: list, type_info: TypeInformation) -> pa.Array:
    """``values`` (None for null) as an Arrow array of ``type_info``'s Arrow type; raises one of
    ``CONVERSION_ERRORS`` for a value that does not fit."""
    return _encode(type_info, values)


def decode(array: pa.Array, type_info: TypeInformation) -> list:
    """The values of an array made by ``encode`` with the same ``type_info``."""
    return _decode(type_info, array)


@_encode.register
def _(t: BasicTypeInfo, values: list) -> pa.Array:
    if t._basic_type is BasicType.BIG_INT:
        values = [v if v is None or isinstance(v, Decimal) else Decimal(v) for v in values]
    elif t._basic_type is BasicType.BIG_DEC:
        values = [None if v is None else str(big_decimal(v)) for v in values]
    return pa.array(values, type=arrow_type(t))


@_decode.register
def _(t: BasicTypeInfo, array: pa.Array) -> list:
    values = to_pylist(array)
    if t._basic_type is BasicType.BIG_INT:
        return [None if v is None else int(v) for v in values]
    if t._basic_type is BasicType.BIG_DEC:
        return [None if v is None else Decimal(v) for v in values]
    return values


def big_decimal(value: Any) -> Decimal:
    """``value`` as the Java BigDecimal a BIG_DEC field holds, as a Decimal: PyFlink hands Java
    ``str(value)`` (so 0.1 is 0.1, not the double's binary expansion), and Java keeps its scale
    and digits; a BigDecimal has no negative zero (-0.00 is 0.00), NaN nor infinity."""
    try:
        d = value if isinstance(value, Decimal) else Decimal(str(value))
    except InvalidOperation:
        d = None
    if d is None or not d.is_finite():
        raise ValueError(f"{value!r} is not a BigDecimal: a BIG_DEC value is a finite Decimal, or "
                         f"a value whose str is one (an int, a float, '1.50'); declare NaN and "
                         f"infinities DOUBLE")
    return d.copy_abs() if d.is_zero() else d


@_encode.register
def _(t: InstantTypeInfo, values: list) -> pa.Array:
    # UTC datetimes; epoch-milli ints and Instant-likes (``to_epoch_milli()``) are accepted.
    if not all(v is None or isinstance(v, datetime.datetime) for v in values):
        values = [_instant_millis(v) for v in values]
    return pa.array(values, type=arrow_type(t))


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


@_encode.register
def _(t: PickledBytesTypeInfo, values: list) -> pa.Array:
    present = dumps_each([v for v in values if v is not None])
    if len(present) < len(values):
        present = iter(present)
        present = [None if v is None else next(present) for v in values]
    return pa.array(present, type=pa.binary())


@_decode.register
def _(t: PickledBytesTypeInfo, array: pa.Array) -> list:
    loads = pickle.loads
    return [None if b is None else loads(b) for b in to_pylist(array)]


def _offsets_and_mask(values: list, parts) -> tuple[pa.Array, Optional[pa.Array]]:
    """The offsets and null mask of a list or map array of ``values``; ``parts(v)`` takes each
    non-null value's entries into the flat child lists and returns how many there are now."""
    offsets = [0]
    mask = []
    count = 0
    for v in values:
        if v is None:
            mask.append(True)
        else:
            mask.append(False)
            count = parts(v)
        offsets.append(count)
    return pa.array(offsets, pa.int32()), (pa.array(mask, pa.bool_()) if any(mask) else None)


def _nulls_back(out: list, array: pa.Array) -> list:
    if array.null_count:
        return [None if n else v for v, n in zip(out, array.is_null().to_pylist())]
    return out


@_encode.register
def _(t: CollectionTypeInfo, values: list) -> pa.Array:
    element = t.get_element_type()
    if _plain(element):
        return pa.array(values, type=arrow_type(t))
    flat: list = []

    def parts(v):
        flat.extend(v)
        return len(flat)

    offsets, mask = _offsets_and_mask(values, parts)
    return pa.ListArray.from_arrays(offsets, _encode(element, flat), type=arrow_type(t), mask=mask)


@_decode.register
def _(t: CollectionTypeInfo, array: pa.Array) -> list:
    # Columnar even for plain elements: decoding the flat child at once beats to_pylist.
    elements = _decode(t.get_element_type(), array.values)
    offsets = array.offsets.to_pylist()
    return _nulls_back([elements[offsets[i]:offsets[i + 1]] for i in range(len(array))], array)


@_encode.register
def _(t: PrimitiveArrayTypeInfo, values: list) -> pa.Array:
    return pa.array(values, type=arrow_type(t))


@_decode.register
def _(t: PrimitiveArrayTypeInfo, array: pa.Array) -> list:
    if is_bytes(t):
        return to_pylist(array)
    return _decode.dispatch(CollectionTypeInfo)(t, array)


@_encode.register
def _(t: MapTypeInfo, values: list) -> pa.Array:
    if _plain(t):
        return pa.array(values, type=arrow_type(t))
    keys: list = []
    items: list = []

    def parts(v):
        keys.extend(v.keys())
        items.extend(v.values())
        return len(keys)

    offsets, mask = _offsets_and_mask(values, parts)
    return pa.MapArray.from_arrays(offsets, _encode(t.get_key_type(), keys), _encode(t.get_value_type(), items),
                                   type=arrow_type(t), mask=mask)


@_decode.register
def _(t: MapTypeInfo, array: pa.Array) -> list:
    keys = _decode(t.get_key_type(), array.keys)
    items = _decode(t.get_value_type(), array.items)
    offsets = array.offsets.to_pylist()
    return _nulls_back([dict(zip(keys[offsets[i]:offsets[i + 1]], items[offsets[i]:offsets[i + 1]]))
                        for i in range(len(array))], array)


# --------------------------------------------------------------------------- records <-> fields


def _struct_columns(t: CompositeTypeInfo, values: list, top_level: bool) -> tuple:
    """(one list per field, null mask or None) of tuple/Row/list/dict values of ``t``."""
    n = t.arity
    kinds = set(map(type, values))
    if (kinds == {tuple} or (kinds == {Row} and _rows_in_order(t, values))) and set(map(len, values)) <= {n}:
        return fields_of(values, n, kinds == {Row}), None
    rows, mask = _normalize(t, values, top_level)
    return fields_of(rows, n), mask


def fields_of(rows: list, n: int, all_rows: bool = False) -> list:
    """One list per field of ``rows`` (tuples, lists or Rows, each with ``n`` fields or more);
    ``all_rows``: they are all Rows. One pass per field: zip(*rows) degrades badly with many
    rows; Rows through tuple's own __getitem__ (Row's, in Python, also takes names), twice as fast
    for them, half as fast as itemgetter for plain tuples."""
    if all_rows:
        get = tuple.__getitem__
        return [list(map(get, rows, repeat(i))) for i in range(n)]
    return [list(map(itemgetter(i), rows)) for i in range(n)]


def _rows_in_order(t: CompositeTypeInfo, rows: list) -> bool:
    # Fast check that Rows can be taken positionally: INSERT kind, names absent or ours.
    if set(map(attrgetter("_row_kind"), rows)) != {RowKind.INSERT}:
        return False
    own = t._explicit_names()
    if own is None:
        return True
    return all(names is None or names == own
               for names in {id(n): n for n in map(attrgetter("_field_names"), rows)}.values())


def _normalize(t: CompositeTypeInfo, values: list, top_level: bool) -> tuple:
    n = t.arity
    own = t._explicit_names()
    rows = []
    mask = []
    nones = (None,) * n
    for v in values:
        if v is None:
            if top_level:
                raise TypeError(f"a record of type {t} must not be None")
            rows.append(nones)
            mask.append(True)
            continue
        if isinstance(v, Row):
            if v._row_kind is not RowKind.INSERT:
                raise ValueError(f"{v!r} has row kind {v._row_kind.name}, which type {t} "
                                 f"cannot carry; use Types.PICKLED_BYTE_ARRAY() to keep it")
            names = v._field_names
            if names is not None and own is not None and names != own:
                # PyFlink matches named Rows to a named row type by name, not position.
                try:
                    v = tuple(v[name] for name in own)
                except KeyError:
                    raise TypeError(f"{v!r} does not have the fields of type {t}") from None
        elif isinstance(v, dict):
            v = tuple(v.get(name) for name in t.get_field_names())
        elif not isinstance(v, (tuple, list)):
            raise TypeError(f"{v!r} is not a record of type {t}: expected a tuple, Row, list or dict")
        if len(v) != n:
            raise TypeError(f"{v!r} has {len(v)} fields but type {t} has {n}")
        rows.append(v)
        mask.append(False)
    return rows, (mask if any(mask) else None)


def _field_arrays(t: CompositeTypeInfo, columns: list) -> list:
    arrays = []
    for (name, field_type), column in zip(batch_fields(t), columns):
        try:
            arrays.append(_encode(field_type, column))
        except CONVERSION_ERRORS as e:
            raise FieldTypeError(f"field {name!r} of {t}: values do not fit {field_type}: {e}",
                                 name, field_type) from e
    return arrays


@_encode.register
def _(t: CompositeTypeInfo, values: list) -> pa.Array:
    columns, mask = _struct_columns(t, values, top_level=False)
    if not t.arity:
        return pa.array([None if m else {} for m in (mask or [False] * len(values))], type=arrow_type(t))
    return pa.StructArray.from_arrays(_field_arrays(t, columns), fields=list(arrow_type(t)),
                                      mask=pa.array(mask, pa.bool_()) if mask else None)


def _from_columns(t: CompositeTypeInfo, columns: list, length: int) -> list:
    tuples = list(zip(*columns)) if columns else [()] * length
    if isinstance(t, RowTypeInfo):
        # Named as PyFlink's RowCoder names the Rows it decodes, f0.. for Types.ROW (inferred
        # unnamed Rows stay unnamed); a copy per batch, so a caller mutating row._fields cannot
        # rename this type's fields.
        names = t._explicit_names() if t.inferred else t.get_field_names()
        return make_rows(tuples, None if names is None else list(names))
    return tuples


@_decode.register
def _(t: CompositeTypeInfo, array: pa.Array) -> list:
    columns = [_decode(f, c) for f, c in zip(t.get_field_types(), array.flatten())]
    return _nulls_back(_from_columns(t, columns, len(array)), array)


def field_columns(records: list, type_info: TypeInformation) -> list:
    """``records`` as one list of values per column of ``type_info`` (``batch_fields``): the
    fields of tuples, Rows (by name when both are named), lists and dicts. Raises TypeError or
    ValueError for a record that is not one of ``type_info`` (None, another length, a Row of
    another kind or other names)."""
    if isinstance(type_info, CompositeTypeInfo):
        return _struct_columns(type_info, records, top_level=True)[0]
    return [records]


# --------------------------------------------------------------------------- inference


# The Python types ``infer_type_info`` types by themselves, with their Arrow types; and bytes,
# which it leaves to pickles (a type information has no plain bytes), as Arrow binary.
_SCALARS = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_(), bytes: pa.binary()}


def infer_array(values: list, nested: bool = True) -> Optional[pa.Array]:
    """``values`` as an Arrow array of the type ``infer_type_info`` gives them (bytes as binary),
    None when that is PICKLED_BYTE_ARRAY (nothing sure to type them by: the caller decides,
    pickles or a list).

    ``nested=False`` types strings, bytes, numbers and booleans only (None mixes in), whose
    arrays give the values back by a plain ``to_pylist``, and gives None for anything else
    without looking further. Values of one such type are encoded at once (an int beyond 64 bits
    fails the encoding instead of costing a pass over the values)."""
    kinds = set(map(type, values))
    kinds.discard(type(None))
    arrow = _SCALARS.get(next(iter(kinds))) if len(kinds) == 1 else None
    if arrow is not None:
        try:
            return pa.array(values, arrow)
        except CONVERSION_ERRORS:        # ints beyond 64 bits
            return None
    if not nested:
        return None
    type_info = infer_type_info(values)
    return None if isinstance(type_info, PickledBytesTypeInfo) else _encode(type_info, values)


# --------------------------------------------------------------------------- batches


def records_to_arrow(records: Iterable[Any], type_info: TypeInformation) -> pa.RecordBatch:
    """A batch holding ``records`` typed as ``type_info`` (see the module doc for the layout)."""
    check_type_info(type_info, "type_info")
    records = records if isinstance(records, list) else list(records)
    if isinstance(type_info, CompositeTypeInfo):
        columns = field_columns(records, type_info)      # validates the records
        if not type_info.arity:
            return pa.RecordBatch.from_struct_array(pa.array([{}] * len(records), arrow_type(type_info)))
        return pa.RecordBatch.from_arrays(_field_arrays(type_info, columns), schema=arrow_schema(type_info))
    try:
        array = _encode(type_info, records)
    except CONVERSION_ERRORS as e:
        raise FieldTypeError(f"records do not fit type {type_info}: {e}", "f0", type_info) from e
    return pa.RecordBatch.from_arrays([array], schema=arrow_schema(type_info))


def arrow_to_records(batch: Union[pa.RecordBatch, pa.Table], type_info: TypeInformation) -> list:
    """The records of a batch made by ``records_to_arrow`` with the same ``type_info``."""
    check_type_info(type_info, "type_info")
    if isinstance(batch, pa.Table):
        out: list = []
        for b in batch.to_batches():
            out.extend(arrow_to_records(b, type_info))
        return out
    expected = arrow_schema(type_info)
    if not batch.schema.equals(expected):
        raise ValueError(f"batch schema does not match type {type_info}: expected\n{expected}\n"
                         f"got\n{batch.schema}")
    if isinstance(type_info, CompositeTypeInfo):
        columns = [_decode(t, c) for t, c in zip(type_info.get_field_types(), batch.columns)]
        return _from_columns(type_info, columns, batch.num_rows)
    return _decode(type_info, batch.column(0))


def first_misfit(records: Sequence[Any], type_info: TypeInformation) -> Optional[tuple]:
    """(index, error) of the first record that does not fit ``type_info``, None if all fit; the
    error is a ``FieldTypeError`` naming the column when the record has the right shape."""
    for i, record in enumerate(records):
        try:
            records_to_arrow([record], type_info)
        except CONVERSION_ERRORS as e:
            return i, e
    return None


def to_declared_type(records: Sequence[Any], type_info: TypeInformation, what: str) -> list:
    """``records`` as values of ``type_info``, as PyFlink's serializers make them: a tuple declared
    as a ROW becomes a Row, an int declared DOUBLE a float, a FLOAT is rounded to 32 bits.
    A record that does not fit fails naming it, its index in ``what`` and the type."""
    records = list(records)
    if isinstance(type_info, PickledBytesTypeInfo):
        return records
    if _fit_as_they_are(records, type_info):
        return records
    try:
        return arrow_to_records(records_to_arrow(records, type_info), type_info)     # checks every record
    except CONVERSION_ERRORS as error:
        found = first_misfit(records, type_info)
        if found is not None:
            i, e = found
            raise TypeError(f"{what}: record {i}, {records[i]!r}, does not fit its declared type "
                            f"{type_info}: {e}. Convert it, or declare the type it has.") from None
        raise TypeError(f"{what}: the records do not fit their declared type {type_info}: {error}") from None


# Declared types whose values come back from Arrow as they went in, by their Python type, and the
# bits of the integer types' magnitudes.
_SAME_AFTER_ARROW = {BasicType.STRING: str, BasicType.LONG: int, BasicType.INT: int, BasicType.SHORT: int,
                     BasicType.BYTE: int, BasicType.BOOLEAN: bool, BasicType.DOUBLE: float}
# The machine types of the integer types: an array of one refuses a value out of its range.
_INTEGER_ARRAYS = {BasicType.LONG: "q", BasicType.INT: "i", BasicType.SHORT: "h", BasicType.BYTE: "b"}


def _fit_as_they_are(records: list, type_info: TypeInformation) -> bool:
    """Whether ``records`` are values of ``type_info`` already, as Arrow's conversion would check
    them and give them back: tuples of a TUPLE type's arity, each field holding exactly the Python
    type its declared type decodes to (not a bool for a LONG), integers in the type's range,
    strings that encode as UTF-8. A column at a time in C (a from_collection of 300,000 records of
    four fields: 0.14-0.15 s instead of 0.18-0.27 s through Arrow); False sends them through the
    conversion, which names a record that does not fit."""
    if type(type_info) is not TupleTypeInfo or set(map(type, records)) != {tuple}:
        return False
    fields = type_info.get_field_types()
    if set(map(len, records)) != {len(fields)}:
        return False
    for i, t in enumerate(fields):
        kind = _SAME_AFTER_ARROW.get(t._basic_type) if type(t) is BasicTypeInfo else None
        if kind is None:
            return False
        column = list(map(itemgetter(i), records))
        if set(map(type, column)) != {kind}:
            return False
        typecode = _INTEGER_ARRAYS.get(t._basic_type)
        if typecode is not None:
            try:
                array(typecode, column)
            except OverflowError:
                return False
        if kind is str:
            try:
                "".join(column).encode()        # a lone surrogate does not
            except UnicodeEncodeError:
                return False
    return True


def as_shipped(records: list, type_info: Optional[TypeInformation]) -> list:
    """``records`` of a stream declared ``type_info`` as PyFlink's coder hands them to the far side
    of a shuffle, or back from a Java sink: Rows of a declared row type named by its fields (f0..
    for ``Types.ROW``); any other records as they are."""
    if isinstance(type_info, RowTypeInfo) and not type_info.inferred:
        return with_field_names(records, type_info.get_field_names())
    return records


# --------------------------------------------------------------------------- tables of records


def records_to_table(records: list, type_info: Optional[TypeInformation] = None, what: str = "the sink") -> pa.Table:
    """``records`` as an Arrow table for a sink that writes columns (a Delta table): typed as
    ``type_info`` declares, in ``batch_fields``'s layout; with no declared type (None or
    PICKLED_BYTE_ARRAY), and for a field declared PICKLED_BYTE_ARRAY, which says nothing of its
    values, typed by the values (``infer_array``, then pyarrow's own inference, else pickles).
    Records of no declared type are named Rows or dicts (by name), tuples (f0, f1..) or single
    values (f0). A record that does not fit fails naming ``what``, the record and the column."""
    if type_info is not None and not isinstance(type_info, PickledBytesTypeInfo):
        names, arrays = _declared_columns(records, type_info, what)
    else:
        names, columns = _record_columns(records, what)
        arrays = [_column_array(c) for c in columns]
    return pa.Table.from_arrays(arrays, names=names)


def record_column_names(records: list, type_info: Optional[TypeInformation] = None) -> list:
    """The column names ``records_to_table`` gives ``records`` (of ``type_info``)."""
    if type_info is not None and not isinstance(type_info, PickledBytesTypeInfo):
        return [name for name, _ in batch_fields(type_info)]
    return _record_columns(records, "records")[0]


def _record_columns(records: list, what: str) -> tuple[list, list]:
    """(column names, one value list per column) of a batch of records of one shape."""
    kinds = {"named" if isinstance(r, Row) and r._field_names is not None else
             "dict" if isinstance(r, dict) else
             "tuple" if isinstance(r, tuple) else "value" for r in records}
    if len(kinds) > 1 and kinds != {"named", "dict"}:
        raise TypeError(f"{what}: the records mix {' and '.join(sorted(kinds))} values; a table "
                        "needs records of one shape (named Rows or dicts, tuples, or single values)")
    named_only = kinds == {"named"}
    kind = kinds.pop() if kinds else "value"
    if kind in ("named", "dict"):
        shapes = ({tuple(n) for n in {id(r._field_names): r._field_names for r in records}.values()}
                  if named_only else ())
        if len(shapes) == 1 and set(map(len, records)) == {len(next(iter(shapes)))}:
            # Rows of one shape (a decoder's, a declared type's): by position.
            (names,) = shapes
            columns = fields_of(records, len(names), all_rows=True)
        else:
            by_name: dict = {}
            dicts = []
            for r in records:
                d = r if isinstance(r, dict) else dict(zip(r._field_names, r))
                by_name.update(dict.fromkeys(d))
                dicts.append(d)
            names = tuple(by_name)
            columns = [[d.get(n) for d in dicts] for n in names]
        bad = [n for n in names if not isinstance(n, str)]
        if bad:
            raise TypeError(f"{what}: column names must be strings, got {bad!r}")
        return list(names), columns
    if kind == "tuple":
        width = max(map(len, records))
        padded = [tuple(r) + (None,) * (width - len(r)) for r in records]
        return [f"f{i}" for i in range(width)], [[r[i] for r in padded] for i in range(width)]
    return ["f0"], [list(records)]


def _column_array(values: list) -> pa.Array:
    """A column of no declared type as Arrow: typed as ``infer_type_info`` types its values, else
    by pyarrow's own inference (mixed ints and floats, dates, decimals...), else pickled."""
    array = infer_array(values)
    if array is not None:
        return array
    if all(v is None for v in values):
        return pa.nulls(len(values), pa.string())   # nothing to infer from: a nullable string column
    try:
        return pa.array(values)
    except CONVERSION_ERRORS:
        return _encode(PickledBytesTypeInfo(), values)  # as the engine moves unknown objects


def _declared_columns(records: list, type_info: TypeInformation, what: str) -> tuple[list, list]:
    """(column names, arrays) of records of a declared type (a field declared PICKLED_BYTE_ARRAY
    typed by its values)."""
    fields = batch_fields(type_info)
    try:
        columns = field_columns(records, type_info)
        arrays = [_column_array(c) if isinstance(t, PickledBytesTypeInfo) else _encode(t, c)
                  for (_, t), c in zip(fields, columns)]
    except CONVERSION_ERRORS as error:
        found = first_misfit(records, type_info)
        if found is None:
            raise TypeError(f"{what}: the records do not fit the stream's declared type {type_info}: "
                            f"{error}") from None
        i, e = found
        why = (f"column {e.column!r} ({e.column_type}): {e.__cause__}" if isinstance(e, FieldTypeError)
               else str(e))
        raise TypeError(f"{what}: record {records[i]!r} does not fit the stream's declared type "
                        f"{type_info}: {why}. Convert it in the job, or declare the type it has.") from None
    return [name for name, _ in fields], arrays
