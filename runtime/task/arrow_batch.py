"""A batch of records as Arrow columns in an operator chain (``ArrowBatch``), and the name of
the event-time column an Arrow-batch function sees and may return (``TIMESTAMP_COLUMN``).

A chain hands operators records as two lists, values and timestamps. Operators that work on
columns (the Arrow-batch functions of ``runtime.task.batch_operators``, a pass-through
timestamp/watermark operator, the pre-aggregating writer of a vectorised window) take an
``ArrowBatch`` instead: the stream's declared columns (``runtime.common.arrow``'s layout) and an
int64 timestamp column. ``Output`` gives any other operator the records, decoded once.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.common.arrow import arrow_to_records, records_to_arrow

# The record timestamps (epoch milliseconds, null: none) as a column of the batch a function gets.
TIMESTAMP_COLUMN = "__timestamp"


class ArrowBatch:
    """Records of a declared type as an Arrow record batch, with their timestamps."""

    __slots__ = ("columns", "timestamps", "type_info", "_rows")

    def __init__(self, columns: pa.RecordBatch, timestamps: pa.Array, type_info, rows: Optional[tuple] = None):
        self.columns = columns          # the declared type's columns (arrow_schema(type_info))
        self.timestamps = timestamps    # int64, null where a record has no timestamp
        self.type_info = type_info
        self._rows = rows               # (values, timestamps) as lists, when known

    @staticmethod
    def of_records(values: list, timestamps: list, type_info) -> "ArrowBatch":
        """Records as a batch (``records_to_arrow``: raises for a record that does not fit)."""
        return ArrowBatch(records_to_arrow(values, type_info), pa.array(timestamps, pa.int64()), type_info,
                          (values, timestamps))

    @staticmethod
    def concat(batches: list) -> "ArrowBatch":
        """One batch of ``batches`` (all of one type), in order."""
        if len(batches) == 1:
            return batches[0]
        columns = pa.Table.from_batches([b.columns for b in batches]).combine_chunks()
        columns = columns.to_batches()[0] if columns.num_rows else batches[0].columns
        return ArrowBatch(columns, pa.concat_arrays([b.timestamps for b in batches]), batches[0].type_info)

    def __len__(self) -> int:
        return self.columns.num_rows

    def rows(self) -> tuple[list, list]:
        """(values, timestamps) as the lists per-record operators take, decoded once."""
        if self._rows is None:
            ts = self.timestamps
            if not ts.null_count:
                stamps = ts.to_numpy().tolist()
            elif ts.null_count == len(ts):      # a source's records without timestamps
                stamps = [None] * len(ts)
            else:
                stamps = ts.to_pylist()
            self._rows = (arrow_to_records(self.columns, self.type_info), stamps)
        return self._rows

    def with_timestamp_column(self) -> pa.RecordBatch:
        """The columns and, last, the timestamps as ``__timestamp``: what a function gets."""
        return self.columns.append_column(TIMESTAMP_COLUMN, self.timestamps)

    def filter(self, mask: pa.BooleanArray) -> "ArrowBatch":
        rows = None
        if self._rows is not None:      # keep the records already made (a batch read as records)
            idx = np.flatnonzero(mask.to_numpy(zero_copy_only=False)).tolist()
            values, stamps = self._rows
            rows = ([values[i] for i in idx], [stamps[i] for i in idx])
        return ArrowBatch(self.columns.filter(mask), self.timestamps.filter(mask), self.type_info, rows)

    def max_timestamp(self) -> Optional[int]:
        return pc.max(self.timestamps).as_py() if len(self) else None

    def min_timestamp(self) -> Optional[int]:
        return pc.min(self.timestamps).as_py() if len(self) else None

    def timestamp_array(self) -> Optional[np.ndarray]:
        """The timestamps as int64 NumPy, None when a record has none."""
        return None if self.timestamps.null_count else self.timestamps.to_numpy()


def takes_arrow(target) -> bool:
    """Whether ``target`` (an operator or writer) takes ArrowBatches in ``process_batch``."""
    return getattr(target, "takes_arrow", False)
