"""The sink behind ``execute_and_collect()`` (Flink's CollectSinkFunction): each subtask hands its
records to the driver, which gives them back in the run's result. Its descriptor is the id of
the stream it collects (``JobExecutionResult.get_collected(id)``)."""
from __future__ import annotations

from runtime.common.arrow import as_shipped
from runtime.connectors.base import Committer
from runtime.task.record_columns import RecordColumns
from runtime.task.sink_writer import BufferingSinkWriter


class CollectWriter(BufferingSinkWriter):
    def write(self, values: list) -> None:
        # As PyFlink's collect gives them back from Java: the Rows of a row type named.
        super().write(as_shipped(values, self.ctx.input_type))

    def finish(self) -> RecordColumns:
        # As columns: the records cross Spark's result path and the driver's unpickling at a
        # fraction of the cost of one pickled object each.
        return RecordColumns.of(self.take())


class CollectCommitter(Committer):
    """Appends each subtask's records to the run's result (``collected[id]``)."""

    def commit(self, committables: list, version: int) -> dict:
        collected = self.context.result.collected.setdefault(self.sink, [])
        for columns in committables:
            collected.extend(columns.records())
        return {}
