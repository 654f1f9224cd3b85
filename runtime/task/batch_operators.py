"""Arrow-batch user functions (``map_batches``, ``filter_batches``): the function is called once
per batch with a ``pyarrow.RecordBatch`` of the stream's declared columns plus ``__timestamp``,
and its result stays Arrow down the chain (``runtime.task.arrow_batch``).

Timestamps of the rows a ``map_batches`` function returns: its ``__timestamp`` column when it
returns one; else, when it returns as many rows as it got, each row keeps the timestamp of the
row at its position (a 1:1 function, as Flink's ``map``); else every row takes the batch's
latest timestamp (as a window's result takes its window's end: never earlier than a row it came
from, so it is late only if its input was). A filter keeps the timestamps of the rows it keeps.

A function that raises, or returns what does not fit, fails the task as a per-record function
does, naming the operator, the subtask and the batch by its first record (and, chained to the
source, where that record came from).
"""
from __future__ import annotations

import traceback

import numpy as np
import pyarrow as pa

from runtime.common.arrow import CONVERSION_ERRORS, arrow_schema, first_misfit
from runtime.common.typeinfo import RowTypeInfo
from runtime.task.arrow_batch import TIMESTAMP_COLUMN, ArrowBatch
from runtime.task.operators import TaskOperator, UserCodeException


class _BatchFunctionOperator(TaskOperator):
    """Calls the function on each input batch as Arrow; a failure names the batch."""

    takes_arrow = True

    def arrow_input(self, values, timestamps) -> ArrowBatch:
        if type(values) is ArrowBatch:
            return values
        try:
            return ArrowBatch.of_records(values, timestamps, self.input_type)
        except CONVERSION_ERRORS:
            i, error = first_misfit(values, self.input_type) or (0, TypeError("the batch does not fit"))
            self.fail_batch(TypeError(
                f"record {i} of the batch, {values[i]!r}, does not fit the input's declared type "
                f"{self.input_type}: {error}. Declare the type the records have (output_type of the "
                f"operator before)"), values)

    def call(self, batch: ArrowBatch, values):
        try:
            return self.spec.function(batch.with_timestamp_column())
        except Exception as e:
            self.fail_batch(e, values)

    def fail_batch(self, error: BaseException, values, first=None) -> None:
        """Fail on the batch ``values`` (the list the operator got, or an ArrowBatch), named by its
        first record; a list the source read tells the source where that record came from."""
        # An ArrowBatch's records (decoded once) are the list the source compares with its read.
        batch = values.rows()[0] if type(values) is ArrowBatch else values
        raise UserCodeException(f"{self.name} {self.ctx.subtask_label}", batch[0], error, traceback.format_exc(),
                                batch=batch, index=0,
                                on=f"a batch of {len(values):,} records whose first is") from error


class MapBatchesOperator(_BatchFunctionOperator):
    """``map_batches(fn, output_type)``: fn(RecordBatch) -> RecordBatch or Table of output_type."""

    def __init__(self, node, ctx):
        super().__init__(node, ctx)
        self.output_type = self.spec.output_type
        self.schema = arrow_schema(self.output_type)

    def process_batch(self, values, timestamps, input_index):
        batch = self.arrow_input(values, timestamps)
        result = self.call(batch, values)
        try:
            out = self._conform(result, batch)
        except (TypeError, ValueError) as e:
            self.fail_batch(e, values)
        self.output.collect(out, out.timestamps)

    def _conform(self, result, batch: ArrowBatch) -> ArrowBatch:
        """The function's result as a batch of ``output_type``'s schema, with its timestamps."""
        if isinstance(result, pa.Table):
            result = result.combine_chunks()
            result = pa.RecordBatch.from_arrays([c.chunk(0) if c.num_chunks else pa.array([], c.type)
                                                 for c in result.columns], schema=result.schema)
        elif not isinstance(result, pa.RecordBatch):
            raise TypeError(f"the function returned {type(result).__name__}; a map_batches function returns "
                            f"a pyarrow.RecordBatch or pyarrow.Table with the columns of {self.output_type}")
        names = result.schema.names
        if TIMESTAMP_COLUMN in names:
            stamps = _timestamps(result.column(names.index(TIMESTAMP_COLUMN)))
            result = result.drop_columns([TIMESTAMP_COLUMN])
            names = result.schema.names
        elif result.num_rows == len(batch):
            stamps = batch.timestamps
        else:
            stamps = pa.nulls(result.num_rows, pa.int64()) if not len(batch) else \
                pa.repeat(pa.scalar(batch.max_timestamp(), pa.int64()), result.num_rows)
        expected = self.schema
        if names != expected.names:
            if set(names) == set(expected.names):
                result = result.select(expected.names)
            elif len(names) == len(expected.names) and not isinstance(self.output_type, RowTypeInfo):
                result = result.rename_columns(expected.names)      # a tuple's fields by position
            else:
                raise TypeError(f"the function returned columns {names}; output_type {self.output_type} has "
                                f"columns {expected.names} (a Types.ROW_NAMED's field names, f0.. for a tuple, "
                                f"in any order; {TIMESTAMP_COLUMN} optional)")
        if not result.schema.equals(expected):
            result = pa.RecordBatch.from_arrays(
                [_cast(result.column(i), f) for i, f in enumerate(expected)], schema=expected)
        return ArrowBatch(result, stamps, self.output_type)


class FilterBatchesOperator(_BatchFunctionOperator):
    """``filter_batches(fn)``: fn(RecordBatch) -> a boolean mask; keeps the rows it marks True."""

    def process_batch(self, values, timestamps, input_index):
        batch = self.arrow_input(values, timestamps)
        result = self.call(batch, values)
        try:
            mask = _mask(result, len(batch))
        except (TypeError, ValueError) as e:
            self.fail_batch(e, values)
        self.output.collect(batch.filter(mask), None)


def _cast(column: pa.Array, field: pa.Field) -> pa.Array:
    if column.type == field.type:
        return column
    try:
        return column.cast(field.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise TypeError(f"column {field.name!r} is {column.type}, the output_type's is {field.type}, and "
                        f"does not convert: {e}") from None


def _timestamps(column: pa.Array) -> pa.Array:
    """A returned ``__timestamp`` column as epoch milliseconds (an integer or a timestamp column)."""
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.timestamp("ms", tz=column.type.tz), safe=False).cast(pa.int64())
    if not pa.types.is_integer(column.type):
        raise TypeError(f"column {TIMESTAMP_COLUMN!r} is {column.type}: it holds epoch milliseconds, as an "
                        f"integer or a timestamp column")
    return column.cast(pa.int64())


def _mask(result, n: int) -> pa.BooleanArray:
    """A filter function's result as a mask of ``n`` booleans (a null keeps no row, as SQL's WHERE)."""
    if isinstance(result, pa.ChunkedArray):
        result = result.combine_chunks()
    if isinstance(result, np.ndarray):
        result = pa.array(result)
    if not isinstance(result, pa.Array) or not pa.types.is_boolean(result.type):
        raise TypeError(f"the function returned {getattr(result, 'type', type(result).__name__)}; a "
                        f"filter_batches function returns a boolean pyarrow array (or NumPy array) with a "
                        f"value per row, e.g. pyarrow.compute.greater(batch['amount'], 100)")
    if len(result) != n:
        raise ValueError(f"the function returned {len(result):,} booleans for a batch of {n:,} rows")
    return result.fill_null(False) if result.null_count else result
