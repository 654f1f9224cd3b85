"""A user ``SinkFunction`` (``add_sink``): its ``invoke`` runs for each record in the task; there
is nothing left to commit on the driver."""
from __future__ import annotations

from runtime.task.sink_writer import SinkWriter


class SinkFunctionWriter(SinkWriter):
    """Calls the function's ``invoke(value, context)`` per record; a failure names the record.
    The sink operator opens and closes the function, as any user function."""

    def write(self, values) -> None:
        invoke = self.sink.invoke
        i = 0
        try:
            for i, v in enumerate(values):
                invoke(v, None)
        except Exception as e:
            self.ctx.fail(e, values[i], values, i)
