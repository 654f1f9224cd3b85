"""Records as columns (``RecordColumns``): how batches of plain tuples cross a shuffle and
come back to the driver cheaply."""
from __future__ import annotations

from itertools import repeat
from operator import itemgetter
from typing import Optional

import numpy as np
import pyarrow as pa

from runtime.common import arrow
from runtime.common.typeinfo import BasicTypeInfo, TupleTypeInfo, arrow_type
from runtime.task.record_helpers import with_field

_PLAIN_FIELDS = (pa.types.is_string, pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean)


def plain_tuple(type_info) -> bool:
    """Whether the records of ``type_info`` are tuples whose fields' Arrow values are their own
    (strings, integers, floating point numbers, booleans): their Arrow columns are their fields."""
    return isinstance(type_info, TupleTypeInfo) and all(
        isinstance(f, BasicTypeInfo) and any(test(arrow_type(f)) for test in _PLAIN_FIELDS)
        for f in type_info.get_field_types())


def take(column, idx: np.ndarray):
    """The values at ``idx`` of an Arrow array or a list (through ints: indexing a list with
    NumPy integers costs about a third more)."""
    if isinstance(column, pa.Array):
        return column.take(pa.array(idx))
    return list(map(column.__getitem__, idx.tolist()))


def to_pylist(column) -> list:
    """The values of a column: an Arrow array's through NumPy (ten times faster than
    ``to_pylist`` for strings and numbers), a list as it is."""
    return arrow.to_pylist(column) if isinstance(column, pa.Array) else column


def _column(values: list):
    """A column as an Arrow array when its values are strings, numbers or booleans of one type
    (None mixing in), which pickle as buffers and give the same values back; else the list."""
    array = arrow.infer_array(values, nested=False)
    return values if array is None else array


class RecordColumns:
    """Records as columns: plain tuples of one length travel (pickled) and merge as one column
    per field, Arrow arrays where the round trip is exact, which pickle as buffers instead of one
    object per record and field; any other records stay a list.

    Used for the first record of each window pane (the template of its result: Flink's
    sum/min/max keep the other fields of the first record) and for collected results."""

    def __init__(self, columns: Optional[list] = None, rows: Optional[list] = None):
        self.columns = columns
        self.rows = rows

    @staticmethod
    def of(records: list, given: Optional[dict] = None) -> "RecordColumns":
        """``records`` as columns; ``given`` maps a field index to a column the caller already
        holds with that field's values (a window's grouped keys), so it is not rebuilt."""
        lengths = set(map(len, records)) if records and set(map(type, records)) == {tuple} else ()
        if len(lengths) == 1 and lengths != {0}:
            given = given or {}
            return RecordColumns(columns=[given[i] if i in given else _column(list(map(itemgetter(i), records)))
                                          for i in range(len(records[0]))])
        return RecordColumns(rows=list(records))

    @staticmethod
    def of_batch(batch: pa.RecordBatch, type_info) -> Optional["RecordColumns"]:
        """The records of a batch of ``type_info``'s columns, kept as the columns (None unless they
        are plain tuples, whose fields the columns are)."""
        return RecordColumns(columns=list(batch.columns)) if plain_tuple(type_info) else None

    @staticmethod
    def concat(parts: list) -> "RecordColumns":
        widths = {len(p.columns) if p.columns is not None else -1 for p in parts}
        if len(widths) != 1 or -1 in widths:
            return RecordColumns(rows=[r for p in parts for r in p.records()])
        columns = []
        for i in range(widths.pop()):
            chunks = [p.columns[i] for p in parts]
            if all(isinstance(c, pa.Array) for c in chunks) and len({c.type for c in chunks}) == 1:
                columns.append(pa.concat_arrays(chunks))
            else:
                columns.append([v for c in chunks for v in to_pylist(c)])
        return RecordColumns(columns=columns)

    def __len__(self) -> int:
        return len(self.rows) if self.columns is None else len(self.columns[0])

    def take(self, idx: np.ndarray, taken: Optional[dict] = None) -> "RecordColumns":
        """The records at ``idx``; ``taken`` maps the id of a column the caller took already at
        ``idx`` to what it took (the same object then travels once in a pickle)."""
        if self.columns is None:
            return RecordColumns(rows=take(self.rows, idx))
        taken = taken or {}
        return RecordColumns(columns=[taken[id(c)] if id(c) in taken else take(c, idx) for c in self.columns])

    def records(self) -> list:
        if self.columns is None:
            return self.rows
        return list(zip(*map(to_pylist, self.columns)))

    def with_field(self, position, values: list) -> list:
        """The records with field ``position`` replaced by ``values`` (the aggregates)."""
        if self.columns is None or position is None or position >= len(self.columns):
            return list(map(with_field, self.records(), repeat(position), values))
        return list(zip(*[values if i == position else to_pylist(c) for i, c in enumerate(self.columns)]))
