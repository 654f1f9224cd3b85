"""The sink behind ``print()`` (Flink's PrintSink): each subtask formats its records as lines, the
driver prints them in subtask order as each epoch ends."""
from __future__ import annotations

import sys

from runtime.connectors.base import Committer
from runtime.connectors.java_strings import printed_text
from runtime.task.sink_writer import SinkWriter


class PrintWriter(SinkWriter):
    """A subtask's lines: each record as PyFlink prints it (``java_strings``: Java's toString for a
    declared type, Python's str otherwise) behind Flink's PrintSinkOutputWriter prefix,
    "id:2> " / "id> " / "2> " / "" (the subtask number only above parallelism 1)."""

    def __init__(self, sink, context):
        super().__init__(sink, context)
        prefix = sink.sink_identifier or ""
        if context.parallelism > 1:
            prefix += (":" if prefix else "") + str(context.subtask_index + 1)
        self.prefix = prefix + "> " if prefix else ""
        self.lines: list[str] = []

    def write(self, values) -> None:
        prefix, declared = self.prefix, self.ctx.input_type
        self.lines.extend(prefix + printed_text(v, declared) for v in values)

    def finish(self) -> list[str]:
        lines, self.lines = self.lines, []
        return lines


class PrintCommitter(Committer):
    """Prints each subtask's lines as they come, and keeps them in the run's result (``printed``)."""

    def commit(self, committables: list, version: int) -> dict:
        out = sys.stderr if self.sink.to_stderr else sys.stdout
        for lines in committables:
            for line in lines:
                print(line, file=out, flush=False)
            self.context.result.printed.extend(lines)
        out.flush()
        return {}
