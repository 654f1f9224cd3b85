"""Evictors, as ``pyflink.datastream.window``: elements removed from a pane around the window function.

An evictor edits the pane's list of ``TimestampedValue`` in place, before or after the
function runs; so a window with an evictor keeps its elements, never a pre-aggregate.
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, List, Optional

from runtime.datastream.window.windows import T, W, Window, millis


@dataclass
class TimestampedValue(Generic[T]):
    """An element of a window pane with its timestamp (None: no timestamp), as given to evictors."""

    value: T
    timestamp: Optional[int] = None

    def get_value(self) -> T:
        return self.value

    def get_timestamp(self) -> Optional[int]:
        return self.timestamp

    def has_timestamp(self) -> bool:
        return self.timestamp is not None


class Evictor(ABC, Generic[T, W]):
    """Removes elements from a pane before and/or after the window function runs.

    ``elements`` is a mutable list of ``TimestampedValue`` that the evictor edits in place;
    ``size`` is its length when the pane fired.
    """

    class EvictorContext(ABC):
        @abstractmethod
        def get_current_processing_time(self) -> int:
            pass

        @abstractmethod
        def get_current_watermark(self) -> int:
            pass

    @abstractmethod
    def evict_before(self, elements: List[TimestampedValue], size: int, window: W,
                     ctx: Optional["Evictor.EvictorContext"] = None) -> None:
        pass

    @abstractmethod
    def evict_after(self, elements: List[TimestampedValue], size: int, window: W,
                    ctx: Optional["Evictor.EvictorContext"] = None) -> None:
        pass


class _BeforeOrAfterEvictor(Evictor[Any, Window]):
    def __init__(self, do_evict_after: bool):
        self._do_evict_after = bool(do_evict_after)

    def _evict(self, elements: List[TimestampedValue], size: int) -> None:
        raise NotImplementedError

    def evict_before(self, elements, size, window, ctx=None) -> None:
        if not self._do_evict_after:
            self._evict(elements, size)

    def evict_after(self, elements, size, window, ctx=None) -> None:
        if self._do_evict_after:
            self._evict(elements, size)


class CountEvictor(_BeforeOrAfterEvictor):
    """Keeps the last ``max_count`` elements."""

    def __init__(self, max_count: int, do_evict_after: bool = False):
        if isinstance(max_count, bool) or not isinstance(max_count, numbers.Integral) or max_count < 0:
            raise ValueError(f"CountEvictor max_count must be an int >= 0, got {max_count!r}")
        super().__init__(do_evict_after)
        self._max_count = int(max_count)

    @staticmethod
    def of(max_count: int, do_evict_after: bool = False) -> "CountEvictor":
        return CountEvictor(max_count, do_evict_after)

    def _evict(self, elements, size) -> None:
        if size > self._max_count:
            del elements[: size - self._max_count]

    def __repr__(self) -> str:
        return f"CountEvictor({self._max_count})"


class TimeEvictor(_BeforeOrAfterEvictor):
    """Keeps elements newer than ``max timestamp in pane - window_size``."""

    def __init__(self, window_size: Any, do_evict_after: bool = False):
        window_size = millis(window_size, "window_size")
        if window_size < 0:
            raise ValueError(f"TimeEvictor window_size must be >= 0, got {window_size}")
        super().__init__(do_evict_after)
        self._window_size = window_size

    @staticmethod
    def of(window_size: Any, do_evict_after: bool = False) -> "TimeEvictor":
        return TimeEvictor(window_size, do_evict_after)

    def _evict(self, elements, size) -> None:
        # As Flink: a pane without timestamps (processing time) is left alone.
        if not elements or not elements[0].has_timestamp():
            return
        cutoff = max(e.timestamp for e in elements if e.timestamp is not None) - self._window_size
        elements[:] = [e for e in elements if e.timestamp is None or e.timestamp > cutoff]

    def __repr__(self) -> str:
        return f"TimeEvictor({self._window_size})"


class DeltaEvictor(_BeforeOrAfterEvictor):
    """Evicts elements whose ``delta(element, last element)`` is >= ``threshold``.

    ``delta_function`` is a callable ``(old, new) -> float`` or has ``get_delta(old, new)``.
    """

    def __init__(self, threshold: float, delta_function: Any, do_evict_after: bool = False):
        super().__init__(do_evict_after)
        self._threshold = float(threshold)
        self._delta_function = delta_function
        self._delta = getattr(delta_function, "get_delta", delta_function)

    @staticmethod
    def of(threshold: float, delta_function: Any, do_evict_after: bool = False) -> "DeltaEvictor":
        return DeltaEvictor(threshold, delta_function, do_evict_after)

    def _evict(self, elements, size) -> None:
        if not elements:
            return
        last = elements[-1].value
        elements[:] = [e for e in elements if self._delta(e.value, last) < self._threshold]

    def __repr__(self) -> str:
        return f"DeltaEvictor({self._delta_function!r}, {self._threshold})"
