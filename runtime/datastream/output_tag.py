"""Side output tags (``pyflink.datastream.OutputTag``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OutputTag:
    tag_id: str
    type_info: Any = None

    def __post_init__(self):
        if not isinstance(self.tag_id, str) or not self.tag_id:
            raise ValueError(f"OutputTag needs a non-empty string id, got {self.tag_id!r}")

    def __eq__(self, other):
        # Flink compares tags by id only.
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    def __hash__(self):
        return hash(self.tag_id)

    def __str__(self):
        return f"OutputTag({self.tag_id})"


def is_side_output(record) -> bool:
    """PyFlink's rule for what a function returns or yields: ``(output_tag, value)``, a tuple
    whose first element is an OutputTag, goes to that side output, anything else to the main
    output (pyflink.fn_execution.datastream: ``_emit_results``)."""
    return isinstance(record, tuple) and len(record) > 0 and isinstance(record[0], OutputTag)
