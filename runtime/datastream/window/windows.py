"""The windows themselves, as ``pyflink.datastream.window``: TimeWindow, CountWindow, GlobalWindow.

They are the namespaces of window state, so they hash, order and pickle by value (the
snapshot writes them out, see ``runtime.state.snapshot_format``). Times are milliseconds, as in
Flink; ``millis`` reads the ways a job spells a duration.
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Iterable, List, Optional, TypeVar

MAX_LONG_VALUE = 0x7FFFFFFFFFFFFFFF
MIN_LONG_VALUE = -0x8000000000000000

# The type variables of the window classes' generics (PyFlink's names).
T = TypeVar("T")
W = TypeVar("W")
W2 = TypeVar("W2")


def millis(value: Any, what: str = "time") -> int:
    """Milliseconds of an int, a ``Time``/``Duration`` (``to_milliseconds()``) or a timedelta."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be milliseconds as an int or a Time/Duration, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    to_ms = getattr(value, "to_milliseconds", None)
    if callable(to_ms):
        return int(to_ms())
    if isinstance(value, timedelta):
        return value // timedelta(milliseconds=1)
    raise TypeError(f"{what} must be milliseconds as an int or a Time/Duration, got {value!r}")


class Window(ABC):
    """A finite bucket of elements; all of them have arrived once ``max_timestamp()`` passed."""

    @abstractmethod
    def max_timestamp(self) -> int:
        pass


@dataclass(frozen=True, order=True)
class TimeWindow(Window):
    """The interval ``[start, end)`` in milliseconds."""

    start: int
    end: int

    def max_timestamp(self) -> int:
        return self.end - 1

    def intersects(self, other: "TimeWindow") -> bool:
        """True if the windows overlap or touch (touching session windows merge, as in Flink)."""
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: "TimeWindow") -> "TimeWindow":
        """The smallest window containing both."""
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """Start of the window of ``window_size`` (shifted by ``offset``) containing ``timestamp``."""
        # Python's % is a floor modulo, so negative timestamps align downwards like Flink's
        # fixed getWindowStartWithOffset.
        return timestamp - (timestamp - offset + window_size) % window_size

    @staticmethod
    def merge_windows(windows: Iterable["TimeWindow"], callback: Any) -> None:
        """Flink's ``TimeWindow.mergeWindows``: report each group of >1 intersecting windows.

        ``callback`` is a ``MergingWindowAssigner.MergeCallback`` or a plain callable; it gets
        ``(to_be_merged, merge_result)`` with ``to_be_merged`` sorted by (start, end).
        """
        merge = getattr(callback, "merge", callback)
        # Flink collects the candidates in a set, so duplicates never form a group.
        groups: List[tuple] = []
        current: Optional[TimeWindow] = None
        members: List[TimeWindow] = []
        for candidate in sorted(set(windows)):
            if current is None:
                current, members = candidate, [candidate]
            elif current.intersects(candidate):
                current = current.cover(candidate)
                members.append(candidate)
            else:
                groups.append((current, members))
                current, members = candidate, [candidate]
        if current is not None:
            groups.append((current, members))
        for merge_result, to_be_merged in groups:
            if len(to_be_merged) > 1:
                merge(to_be_merged, merge_result)


@dataclass(frozen=True, order=True)
class CountWindow(Window):
    """A count window, identified by its id."""

    id: int

    def max_timestamp(self) -> int:
        return MAX_LONG_VALUE


class GlobalWindow(Window):
    """The single window of ``GlobalWindows``; ``GlobalWindow.get()`` is the singleton."""

    _instance: Optional["GlobalWindow"] = None

    def __new__(cls) -> "GlobalWindow":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    @staticmethod
    def get() -> "GlobalWindow":
        return GlobalWindow()

    def max_timestamp(self) -> int:
        return MAX_LONG_VALUE

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GlobalWindow)

    def __hash__(self) -> int:
        return 0

    def __reduce__(self):
        # Keeps the singleton across pickling to executors.
        return (GlobalWindow.get, ())

    def __repr__(self) -> str:
        return "GlobalWindow"
