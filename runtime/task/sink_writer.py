"""The task side of a sink, as Flink's ``SinkWriter``: the interface the connectors implement.

The driver hands a task the writer class of each of its sinks in its deployment descriptor
(``runtime.connectors.writer_class``, looked up by the sink's descriptor); the sink operator
makes one writer per epoch, gives it the records (``write``) and, when the epoch's input ends,
takes its committable (``finish``): printed lines, collected records, staged Delta files, files
to make visible, or nothing. A writer with state across epochs (a file sink's in-progress part
files) returns it from ``snapshot_state``; it is snapshotted with the operator and handed to the
next epoch's writer (``WriterInitContext.restored``). Committables travel to the driver in the
task's acknowledgement, where the sink's committer (``runtime.connectors.base.Committer``)
commits them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional


def _raise(error: BaseException, record, batch: Optional[list] = None, index: Optional[int] = None):
    raise error


@dataclass(frozen=True)
class WriterInitContext:
    """What a writer knows of the subtask running it (Flink's ``WriterInitContext``)."""

    operator_name: str              # the sink operator's name, for messages
    subtask_index: int
    parallelism: int
    epoch: int
    processing_time: int
    attempt_number: int = 0
    # The declared type of the records (``output_type``/``type_info`` of the stream); None or
    # PICKLED_BYTE_ARRAY when nothing was declared.
    input_type: Any = None
    # ``fail(error, record, batch, index)``: user code failed on ``batch[index]``; raises the
    # failure naming the operator, the subtask and the record (``TaskOperator.fail``).
    fail: Callable = _raise
    # What ``snapshot_state`` returned at the end of the previous epoch (or at the restored
    # checkpoint): [(subtask that wrote it, state)], the subtask's own at the same parallelism,
    # every subtask's after a rescale. Empty for a writer without state or a fresh start.
    restored: tuple = ()
    # The epoch ends in a checkpoint barrier (every epoch does without checkpointing: its sinks
    # commit as it ends), or the job's bounded input ends with it (Flink's end of input).
    barrier: bool = False
    end_of_input: bool = False

    @property
    def subtask_label(self) -> str:
        return f"({self.subtask_index + 1}/{self.parallelism})"


class SinkWriter:
    """Writes one subtask's records of one epoch; ``finish`` returns what the driver commits."""

    def __init__(self, sink, context: WriterInitContext):
        self.sink = sink            # the sink's descriptor
        self.ctx = context

    def write(self, values: list) -> None:
        raise NotImplementedError

    def finish(self) -> Any:
        """The epoch's input ended: the committable (None when there is nothing to commit)."""
        return None

    def snapshot_state(self) -> Any:
        """The writer's state at the end of the epoch, for the next epoch's writer (Flink's
        ``StatefulSinkWriter.snapshotState``); None: the writer keeps none."""
        return None


class BufferingSinkWriter(SinkWriter):
    """A writer that keeps the epoch's records until ``finish``, which takes them (``take``)."""

    def __init__(self, sink, context: WriterInitContext):
        super().__init__(sink, context)
        self.records: list = []

    def write(self, values: list) -> None:
        self.records.extend(values)

    def take(self) -> list:
        records, self.records = self.records, []
        return records
