"""What travels on a channel between two subtasks (Flink's StreamElement kinds).

A producer's RecordWriter appends these per consumer channel; the consumer's input gates read
them in order. They are pickled once per channel, so they are plain named tuples: cheap to make
and to pickle, readable by name.
"""
from __future__ import annotations

from typing import Any, NamedTuple


class RecordBatch(NamedTuple):
    """Consecutive records (Flink's StreamRecords) with their timestamps (None: no timestamp)."""
    values: list
    timestamps: list


class PreAggregatedPanes(NamedTuple):
    """A vectorised window aggregation's partial results (local-global aggregation): per
    (key, window start) the accumulator, a representative record and the number of records."""
    keys: Any
    starts: Any
    accumulators: Any
    representatives: Any
    counts: Any

    @property
    def record_count(self) -> int:
        return int(self.counts.sum())


class Watermark(NamedTuple):
    """Event time on this channel has reached ``timestamp``."""
    timestamp: int


class Idle(NamedTuple):
    """Flink's WatermarkStatus.IDLE: the channel sends no watermarks until it sends records again."""


IDLE = Idle()
