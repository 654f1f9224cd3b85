"""The sink operator (Flink's SinkWriterOperator / StreamSink): records to the sink's writer,
the writer's state in checkpoints, its committable to the driver when the epoch ends."""
from __future__ import annotations

from runtime.task.operators import TaskOperator
from runtime.task.sink_writer import WriterInitContext


class StreamSink(TaskOperator):
    """A sink: its records go to the writer the driver chose for its descriptor (print, collect,
    Delta, a user SinkFunction: ``runtime.task.sink_writer``); when the epoch's input ends, the
    writer's committable goes to the driver."""

    WRITER_STATE = "SinkWriterState"    # the writer's state, one entry per subtask

    restored_writer: tuple = ()

    def open(self):
        super().open()
        ctx = self.ctx
        self.writer = ctx.sink_writers[self.node.id](self.spec.sink, WriterInitContext(
            self.name, ctx.subtask_index, ctx.parallelism, ctx.epoch, ctx.processing_time,
            ctx.attempt_number, self.input_type, self.fail, self.restored_writer, ctx.barrier,
            ctx.end_of_input))

    def snapshot(self, incremental: bool = False) -> dict:
        snapshot = super().snapshot(incremental)
        state = self.writer.snapshot_state()
        if state is not None:
            snapshot["operator_state"] = {self.WRITER_STATE: ("split", [state])}
        return snapshot

    def restore(self, snapshot: dict) -> None:
        super().restore(snapshot)
        self.restored_writer = tuple(snapshot.get("operator_state", {}).get(self.WRITER_STATE, ()))

    def user_functions(self):
        return [self.spec.sink]     # opened and closed when it is a Function (a SinkFunction)

    @property
    def takes_arrow(self) -> bool:
        # A writer that takes ArrowBatches (the collect sink) gets them as they are.
        return getattr(self.writer, "takes_arrow", False)

    def process_batch(self, values, timestamps, input_index):
        self.records_in += len(values)
        self.writer.write(values)

    def process_watermark(self, watermark, input_index):
        self.current_watermark = max(self.current_watermark, watermark)

    def process_idle(self, input_index):
        pass

    def committable(self):
        """What the driver commits of this epoch (the writer's ``finish``)."""
        return self.writer.finish()

    def dispose(self) -> None:
        super().dispose()
        self.writer = None
