"""Watermark strategies as in ``pyflink.common.watermark_strategy``.

A strategy is a small immutable description; the task runtime turns it into a
generator per source split (``create_generator``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from runtime.common.time import to_millis

# Java's Long.MIN_VALUE / MAX_VALUE, the watermark bounds Flink uses.
MIN_WATERMARK = -(2 ** 63)
MAX_WATERMARK = 2 ** 63 - 1


class TimestampAssigner:
    """Extracts the event timestamp (epoch milliseconds) of a record."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        raise NotImplementedError


class _CallableTimestampAssigner(TimestampAssigner):
    def __init__(self, fn: Callable[[Any, int], int]):
        self.fn = fn
        # The function itself: one call per record instead of two.
        self.extract_timestamp = fn

    def __getstate__(self):
        return {"fn": self.fn}

    def __setstate__(self, state):
        self.__init__(state["fn"])


class WatermarkGenerator:
    """Flink's periodic watermark generator: sees events, emits on demand."""

    def on_event(self, timestamp: int) -> None:
        raise NotImplementedError

    def current_watermark(self) -> int:
        raise NotImplementedError


class BoundedOutOfOrdernessWatermarks(WatermarkGenerator):
    def __init__(self, max_out_of_orderness_ms: int):
        self.delay = max_out_of_orderness_ms
        # Flink starts at MIN + delay + 1 so the first watermark is MIN_WATERMARK.
        self.max_timestamp = MIN_WATERMARK + self.delay + 1

    def on_event(self, timestamp: int) -> None:
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp

    def current_watermark(self) -> int:
        return self.max_timestamp - self.delay - 1


class NoWatermarksGenerator(WatermarkGenerator):
    def on_event(self, timestamp: int) -> None:
        pass

    def current_watermark(self) -> int:
        return MIN_WATERMARK


@dataclass(frozen=True)
class WatermarkStrategy:
    """How a source split's records get timestamps and its watermarks.

    ``max_out_of_orderness_ms`` is None for ``no_watermarks()``; 0 for monotonous timestamps.
    """

    max_out_of_orderness_ms: Optional[int] = None
    timestamp_assigner: Optional[TimestampAssigner] = None
    idleness_ms: Optional[int] = None

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness) -> "WatermarkStrategy":
        ms = to_millis(max_out_of_orderness, "max_out_of_orderness")
        if ms < 0:
            raise ValueError(f"max_out_of_orderness must not be negative, got {ms} ms")
        return WatermarkStrategy(max_out_of_orderness_ms=ms)

    @staticmethod
    def for_monotonous_timestamps() -> "WatermarkStrategy":
        return WatermarkStrategy(max_out_of_orderness_ms=0)

    @staticmethod
    def no_watermarks() -> "WatermarkStrategy":
        return WatermarkStrategy()

    def with_timestamp_assigner(self, timestamp_assigner) -> "WatermarkStrategy":
        if not isinstance(timestamp_assigner, TimestampAssigner):
            if not callable(timestamp_assigner):
                raise TypeError(
                    "with_timestamp_assigner expects a TimestampAssigner or a function "
                    f"(value, record_timestamp) -> int, got {timestamp_assigner!r}")
            timestamp_assigner = _CallableTimestampAssigner(timestamp_assigner)
        return replace(self, timestamp_assigner=timestamp_assigner)

    def with_idleness(self, idle_timeout) -> "WatermarkStrategy":
        ms = to_millis(idle_timeout, "idle_timeout")
        if ms <= 0:
            raise ValueError(f"idle_timeout must be positive, got {ms} ms")
        return replace(self, idleness_ms=ms)

    @property
    def has_watermarks(self) -> bool:
        return self.max_out_of_orderness_ms is not None

    def create_generator(self) -> WatermarkGenerator:
        if self.max_out_of_orderness_ms is None:
            return NoWatermarksGenerator()
        return BoundedOutOfOrdernessWatermarks(self.max_out_of_orderness_ms)

    def __str__(self) -> str:
        if self.max_out_of_orderness_ms is None:
            return "NoWatermarks"
        return f"BoundedOutOfOrderness({self.max_out_of_orderness_ms} ms)"
