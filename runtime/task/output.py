"""Where an operator's records go (Flink's Output): the chained operators and the task's record
writers, on the main output and per side-output tag; and what a function emitted to side outputs
during a batch. Its own module because every operator emits through it and the chain wires it."""
from __future__ import annotations

from itertools import repeat
from typing import Optional

from runtime.datastream.output_tag import is_side_output
from runtime.task.arrow_batch import ArrowBatch, takes_arrow


class Output:
    """Where an operator's records go: chained operators and/or the task's record writers."""

    def __init__(self):
        self.main: list = []        # (target, input_index)
        self.side: dict = {}        # tag_id -> [(target, input_index)]

    def add(self, target, input_index: int, tag_id: Optional[str] = None) -> None:
        (self.main if tag_id is None else self.side.setdefault(tag_id, [])).append((target, input_index))

    def collect(self, values: list, timestamps: list) -> None:
        if values:
            for target, index in self.main:
                if type(values) is ArrowBatch and not takes_arrow(target):
                    # A per-record operator gets the records (decoded once for all such targets).
                    target.process_batch(*values.rows(), index)
                else:
                    target.process_batch(values, timestamps, index)

    def collect_side(self, tag_id: str, values: list, timestamps: list) -> None:
        if values:
            for target, index in self.side.get(tag_id, ()):
                target.process_batch(values, timestamps, index)

    def emit_watermark(self, watermark: int) -> None:
        for target, index in self.main + [t for ts in self.side.values() for t in ts]:
            target.process_watermark(watermark, index)

    def emit_idle(self) -> None:
        for target, index in self.main + [t for ts in self.side.values() for t in ts]:
            target.process_idle(index)


class SideOutputs:
    """What a function emitted to side outputs, per tag, sent on after its main output.

    PyFlink's functions emit to a side output by yielding ``(output_tag, value)`` (its rule: a
    tuple whose first element is an OutputTag); ``ctx.output(output_tag, value)`` does the same.
    A tag no ``get_side_output`` asked for goes nowhere, as in Flink.
    """

    def __init__(self):
        self.by_tag: dict = {}      # tag_id -> ([values], [timestamps])

    def add(self, output_tag, value, timestamp) -> None:
        values, stamps = self.by_tag.setdefault(output_tag.tag_id, ([], []))
        values.append(value)
        stamps.append(timestamp)

    def split(self, results, timestamp, out: list, out_ts: list) -> None:
        """Append ``results`` to ``out`` (main output), the side-output ones to their tags."""
        n = len(out)
        for r in results:
            if is_side_output(r):
                self.add(r[0], r[1], timestamp)
            else:
                out.append(r)
        out_ts.extend(repeat(timestamp, len(out) - n))

    def flush(self, output: Output) -> None:
        by_tag, self.by_tag = self.by_tag, {}
        for tag_id, (values, stamps) in by_tag.items():
            output.collect_side(tag_id, values, stamps)
