"""Whether a stream's declared type fits an existing Delta table's schema, checked when the job
starts (``DeltaCommitter.check``), so that a sink that cannot write its table is refused before
the first epoch instead of failing a task after one ran.

A stream field fits a table column of the same name when its values cast to the column's type
as the writer casts them (``writer.records_to_table``): numbers to numbers (the cast checks each
value's range), strings to strings, binary to binary, booleans, dates and timestamps to dates and
timestamps, structs field by field, lists and maps by their elements. A field the table does not
have, a field of another kind (a STRING into a bigint column), or a NOT NULL column the stream
does not give (its rows would hold null there) does not fit; a BIG_DEC (its text) fits a decimal
column. A field declared
PICKLED_BYTE_ARRAY (or no declared type) says nothing of its values: it is typed by them as
they come, as before.
"""
from __future__ import annotations

from typing import Optional

import pyarrow as pa

from runtime.common.arrow import batch_fields
from runtime.common.typeinfo import PickledBytesTypeInfo, Types, arrow_type

_KINDS = (("number", lambda t: pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)),
          ("string", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
          ("binary", lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)
           or pa.types.is_fixed_size_binary(t)),
          ("boolean", pa.types.is_boolean),
          ("time", lambda t: pa.types.is_date(t) or pa.types.is_timestamp(t)),
          ("struct", pa.types.is_struct),
          ("list", lambda t: pa.types.is_list(t) or pa.types.is_large_list(t)),
          ("map", pa.types.is_map))


def _kind(t: pa.DataType) -> Optional[str]:
    return next((name for name, test in _KINDS if test(t)), None)


def misfit(stream: pa.DataType, table: pa.DataType, where: str) -> Optional[str]:
    """Why values of Arrow type ``stream`` cannot be written into a column of type ``table``
    (``where`` names the column), None when they can."""
    kind = _kind(table)
    if kind is None or kind != _kind(stream):
        return f"column {where!r} is {table} in the table, but the stream's field is {stream}"
    if kind == "struct":
        theirs = {table.field(i).name: table.field(i) for i in range(table.num_fields)}
        ours = {stream.field(i).name: stream.field(i) for i in range(stream.num_fields)}
        for name, field in ours.items():
            if name not in theirs:
                return f"the table's struct column {where!r} has no field {name!r} (its fields are {list(theirs)})"
            why = misfit(field.type, theirs[name].type, f"{where}.{name}")
            if why:
                return why
        required = [n for n, f in theirs.items() if not f.nullable and n not in ours]
        if required:
            return f"the table's struct column {where!r} has NOT NULL field(s) {required} that the stream's lacks"
        return None
    if kind == "list":
        return misfit(stream.value_type, table.value_type, f"{where}[]")
    if kind == "map":
        return (misfit(stream.key_type, table.key_type, f"{where}.key")
                or misfit(stream.item_type, table.item_type, f"{where}.value"))
    return None


def check_stream_fits(table_path: str, table: pa.Schema, input_type, what: str) -> None:
    """Fail naming the table, the column, both types and the fix when records of ``input_type``
    (the stream's declared type; None: none declared) cannot be written into ``table`` (the
    existing table's Arrow schema, logical names). ``what`` names the sink."""
    if input_type is None or isinstance(input_type, PickledBytesTypeInfo):
        return
    fields = [(name, t) for name, t in batch_fields(input_type)]
    columns = {f.name: f for f in table}
    fix = ("declare the stream's type to match the table (output_type=... on the operator before the "
           "sink), or change the table (ALTER TABLE ... ADD COLUMNS / ALTER COLUMN), or write to another table")
    extra = [name for name, _ in fields if name not in columns]
    if extra:
        raise ValueError(f"{what}: the stream's field(s) {extra} are not columns of the Delta table {table_path} "
                         f"(its columns are {list(columns)}): {fix}")
    for name, t in fields:
        if isinstance(t, PickledBytesTypeInfo):
            continue        # typed by its values as they come
        if t == Types.BIG_DEC() and pa.types.is_decimal(columns[name].type):
            continue        # a BIG_DEC travels as its text, which casts to the decimal column
        why = misfit(arrow_type(t), columns[name].type, name)
        if why:
            raise ValueError(f"{what} cannot write into the Delta table {table_path}: {why} (declared {t}); "
                             f"{fix}")
    given = {name for name, _ in fields}
    required = [f.name for f in table if not f.nullable and f.name not in given]
    if required:
        raise ValueError(f"{what} cannot write into the Delta table {table_path}: its column(s) {required} are "
                         f"NOT NULL and the stream's type {input_type} has no such field, so every row would hold "
                         f"null there; add the field(s) to the stream's type, or drop the constraint "
                         f"(ALTER TABLE ... ALTER COLUMN ... DROP NOT NULL)")
