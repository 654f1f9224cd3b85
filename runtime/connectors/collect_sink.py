"""The sink behind ``execute_and_collect()`` (Flink's CollectSinkFunction): each subtask hands its
records to the driver, which gives them back in the run's result. Its descriptor is the id of
the stream it collects (``JobExecutionResult.get_collected(id)``), a KeyedCollect of it for a
KeyedStream."""
from __future__ import annotations

import gc

from runtime.common.arrow import as_shipped
from runtime.common.types import Row
from runtime.connectors.base import Committer
from runtime.datastream.key_selector import plain_key, select_keys
from runtime.task.arrow_batch import ArrowBatch
from runtime.task.record_columns import RecordColumns
from runtime.task.sink_writer import BufferingSinkWriter


class CollectWriter(BufferingSinkWriter):
    takes_arrow = True

    def __init__(self, sink, context):
        super().__init__(sink, context)
        self.parts: list = []       # RecordColumns, in order, before the records written since

    def write(self, values) -> None:
        if type(values) is ArrowBatch:
            columns = RecordColumns.of_batch(values.columns, values.type_info)
            if columns is not None:     # plain tuples: the batch's columns travel as they are
                self._keep_records()
                self.parts.append(columns)
                return
            values = values.rows()[0]
        # As PyFlink's collect gives them back from Java: the Rows of a row type named.
        super().write(as_shipped(values, self.ctx.input_type))

    def _keep_records(self) -> None:
        if self.records:
            self.parts.append(RecordColumns.of(self.take()))

    def finish(self) -> RecordColumns:
        # As columns: the records cross Spark's result path and the driver's unpickling at a
        # fraction of the cost of one pickled object each.
        self._keep_records()
        parts, self.parts = self.parts, []
        return RecordColumns.concat(parts) if len(parts) > 1 else parts[0] if parts else RecordColumns.of([])


class KeyedCollectWriter(CollectWriter):
    """A KeyedStream's records as PyFlink collects its keyed stream: ``Row(f0=key, f1=value)``.
    PyFlink adds the key to every record to key a stream; Sluice routes the records as they are,
    so the key is taken again here, on the collect path only."""

    takes_arrow = False

    def write(self, values: list) -> None:
        keys = map(plain_key, select_keys(self.sink.key_selector, values))
        self.records.extend(map(_key_and_value, keys, as_shipped(values, self.ctx.input_type)))


def _key_and_value(key, value) -> Row:
    return Row(f0=key, f1=value)


class CollectCommitter(Committer):
    """Appends each subtask's records to the run's result (``collected[id]``)."""

    def commit(self, committables: list, version: int) -> dict:
        collected = self.context.result.collected.setdefault(self.sink, [])
        # New tuples without cycles, hundreds of thousands of them: the cyclic collector would
        # only scan them again and again (a third of the time), as it would in a task.
        collecting = gc.isenabled()
        gc.disable()
        try:
            for columns in committables:
                collected.extend(columns.records())
        finally:
            if collecting:
                gc.enable()
        return {}
