"""``NumberSequenceSource(start, end)``: the numbers start..end inclusive, split over subtasks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from runtime.datastream.connectors.base import Source


@dataclass(frozen=True)
class NumberSequenceSource(Source):
    default_name: ClassVar[str] = "Sequence Source"

    start: int
    end: int

    def __post_init__(self):
        if self.end < self.start:
            raise ValueError(f"NumberSequenceSource: end ({self.end}) must not be below start ({self.start})")

    @property
    def produced_type(self):
        from runtime.common.typeinfo import Types
        return Types.LONG()
