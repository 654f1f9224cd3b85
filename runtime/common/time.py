"""Durations as in ``pyflink.common.time``: ``Time`` for windows, ``Duration`` for watermarks."""
from __future__ import annotations

from dataclasses import dataclass


def to_millis(value, what: str = "time") -> int:
    """Milliseconds of a Time, Duration or plain int of milliseconds."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a Time, a Duration or milliseconds as an int, got {value!r}")
    if isinstance(value, int):
        return value
    to_ms = getattr(value, "to_milliseconds", None)
    if to_ms is None:
        raise TypeError(f"{what} must be a Time, a Duration or milliseconds as an int, got {value!r}")
    return int(to_ms())


@dataclass(frozen=True, order=True)
class Time:
    """A window size or interval (Flink's ``org.apache.flink.streaming.api.windowing.time.Time``)."""

    millis: int

    @staticmethod
    def milliseconds(n: int) -> "Time":
        return Time(int(n))

    @staticmethod
    def seconds(n: int) -> "Time":
        return Time(int(n * 1000))

    @staticmethod
    def minutes(n: int) -> "Time":
        return Time(int(n * 60_000))

    @staticmethod
    def hours(n: int) -> "Time":
        return Time(int(n * 3_600_000))

    @staticmethod
    def days(n: int) -> "Time":
        return Time(int(n * 86_400_000))

    def to_milliseconds(self) -> int:
        return self.millis

    def __str__(self) -> str:
        return f"{self.millis} ms"


@dataclass(frozen=True, order=True)
class Duration:
    """A ``java.time.Duration`` as PyFlink exposes it."""

    millis: int

    @staticmethod
    def of_millis(n: int) -> "Duration":
        return Duration(int(n))

    @staticmethod
    def of_seconds(n: int) -> "Duration":
        return Duration(int(n * 1000))

    @staticmethod
    def of_minutes(n: int) -> "Duration":
        return Duration(int(n * 60_000))

    @staticmethod
    def of_hours(n: int) -> "Duration":
        return Duration(int(n * 3_600_000))

    @staticmethod
    def of_days(n: int) -> "Duration":
        return Duration(int(n * 86_400_000))

    @staticmethod
    def zero() -> "Duration":
        return Duration(0)

    def to_milliseconds(self) -> int:
        return self.millis

    def __str__(self) -> str:
        return f"PT{self.millis / 1000:g}S"
