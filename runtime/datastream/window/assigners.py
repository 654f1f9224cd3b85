"""Window assigners, as ``pyflink.datastream.window``: which windows an element belongs to.

Tumbling, sliding and session windows in event and processing time, global windows, and
PyFlink's count windows; each names its default trigger. The engine offers the current
processing time (and, for count windows, keyed state) through a
``WindowAssigner.WindowAssignerContext``.
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from typing import Any, Generic, Iterable, List, Optional

from runtime.common.typeinfo import Types
from runtime.datastream.state import ValueStateDescriptor
from runtime.datastream.window.triggers import (
    CountTrigger, EventTimeTrigger, NeverTrigger, ProcessingTimeTrigger, PurgingTrigger, Trigger)
from runtime.datastream.window.windows import (
    MIN_LONG_VALUE, CountWindow, GlobalWindow, T, TimeWindow, W, W2, millis)

_NO_TIMESTAMP_MESSAGE = (
    "Record has no timestamp (Long.MIN_VALUE). Is the time characteristic set to "
    "'ProcessingTime', or did you forget to call 'assign_timestamps_and_watermarks(...)'?"
)


def _event_timestamp(timestamp: Optional[int]) -> int:
    # Flink marks "no timestamp" with Long.MIN_VALUE; the engine may pass None instead.
    if timestamp is None or timestamp <= MIN_LONG_VALUE:
        raise RuntimeError(_NO_TIMESTAMP_MESSAGE)
    return timestamp


def _processing_time(context: Any, assigner: Any) -> int:
    if context is None:
        raise RuntimeError(f"{assigner} needs a WindowAssignerContext for the processing time")
    return context.get_current_processing_time()


class WindowAssigner(ABC, Generic[T, W]):
    """Assigns zero or more windows to each element."""

    class WindowAssignerContext(ABC):
        """What the runtime offers an assigner while assigning one element."""

        @abstractmethod
        def get_current_processing_time(self) -> int:
            pass

        def get_runtime_context(self) -> Any:
            """The keyed runtime context; only count assigners need it (for ``get_state``)."""
            raise NotImplementedError("this WindowAssignerContext has no runtime context")

    @abstractmethod
    def assign_windows(self, element: T, timestamp: Optional[int],
                       context: "WindowAssigner.WindowAssignerContext") -> List[W]:
        pass

    @abstractmethod
    def get_default_trigger(self, env: Any = None) -> Trigger:
        pass

    @abstractmethod
    def is_event_time(self) -> bool:
        pass


class MergingWindowAssigner(WindowAssigner[T, W]):
    """An assigner whose windows can merge (sessions)."""

    class MergeCallback(ABC, Generic[W2]):
        @abstractmethod
        def merge(self, to_be_merged: Iterable[W2], merge_result: W2) -> None:
            pass

    @abstractmethod
    def merge_windows(self, windows: Iterable[W], callback: Any) -> None:
        """Report through ``callback.merge(to_be_merged, merge_result)`` which windows merge."""


class SessionWindowTimeGapExtractor(ABC):
    """Extracts the session gap (milliseconds) of an element for dynamic session windows."""

    @abstractmethod
    def extract(self, element: Any) -> int:
        pass


class _TimeWindowAssigner(WindowAssigner[Any, TimeWindow]):
    """Base of the assigners that come in an event-time and a processing-time variant.

    A public subclass sets ``_event_time``; that alone picks the clock an element is placed by,
    the default trigger and ``is_event_time()``.
    """

    _event_time: bool

    def _time_of(self, timestamp: Optional[int], context: Any) -> int:
        if self._event_time:
            return _event_timestamp(timestamp)
        return _processing_time(context, self)

    def get_default_trigger(self, env=None) -> Trigger:
        return EventTimeTrigger.create() if self._event_time else ProcessingTimeTrigger.create()

    def is_event_time(self) -> bool:
        return self._event_time


class _TumblingWindows(_TimeWindowAssigner):
    def __init__(self, size: Any, offset: Any = 0):
        size = millis(size, "size")
        offset = millis(offset, "offset")
        # abs(offset) < size also rules out size <= 0.
        if abs(offset) >= size:
            raise ValueError(f"{type(self).__name__} parameters must satisfy abs(offset) < size")
        self._size = size
        self._offset = offset

    @classmethod
    def of(cls, size: Any, offset: Any = 0) -> "_TumblingWindows":
        return cls(size, 0 if offset is None else offset)

    def get_size(self) -> int:
        return self._size

    def assign_windows(self, element, timestamp, context=None) -> List[TimeWindow]:
        start = TimeWindow.get_window_start_with_offset(
            self._time_of(timestamp, context), self._offset, self._size)
        return [TimeWindow(start, start + self._size)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._size})"


class TumblingEventTimeWindows(_TumblingWindows):
    """Fixed-size, non-overlapping windows by element timestamp."""

    _event_time = True


class TumblingProcessingTimeWindows(_TumblingWindows):
    """Fixed-size, non-overlapping windows by processing time."""

    _event_time = False


class _SlidingWindows(_TimeWindowAssigner):
    def __init__(self, size: Any, slide: Any, offset: Any = 0):
        size = millis(size, "size")
        slide = millis(slide, "slide")
        offset = millis(offset, "offset")
        # abs(offset) < slide also rules out slide <= 0.
        if abs(offset) >= slide or size <= 0:
            raise ValueError(
                f"{type(self).__name__} parameters must satisfy abs(offset) < slide and size > 0")
        self._size = size
        self._slide = slide
        self._offset = offset

    @classmethod
    def of(cls, size: Any, slide: Any, offset: Any = 0) -> "_SlidingWindows":
        return cls(size, slide, 0 if offset is None else offset)

    def get_size(self) -> int:
        return self._size

    def get_slide(self) -> int:
        return self._slide

    def assign_windows(self, element, timestamp, context=None) -> List[TimeWindow]:
        timestamp = self._time_of(timestamp, context)
        # Flink's loop: latest start first, down to the first window still containing timestamp.
        last_start = TimeWindow.get_window_start_with_offset(timestamp, self._offset, self._slide)
        return [TimeWindow(start, start + self._size)
                for start in range(last_start, timestamp - self._size, -self._slide)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._size}, {self._slide})"


class SlidingEventTimeWindows(_SlidingWindows):
    """Windows of ``size`` every ``slide`` by element timestamp; an element is in each that holds it."""

    _event_time = True


class SlidingProcessingTimeWindows(_SlidingWindows):
    """Windows of ``size`` every ``slide`` by processing time."""

    _event_time = False


class _MergingTimeWindowAssigner(_TimeWindowAssigner, MergingWindowAssigner[Any, TimeWindow]):
    """Sessions with a fixed or per-element gap: ``[t, t + gap)`` for an element at time t,
    merged when they touch."""

    def _gap_of(self, element: Any) -> int:
        raise NotImplementedError

    def assign_windows(self, element, timestamp, context=None) -> List[TimeWindow]:
        start = self._time_of(timestamp, context)
        return [TimeWindow(start, start + self._gap_of(element))]

    def merge_windows(self, windows, callback) -> None:
        TimeWindow.merge_windows(windows, callback)


class _SessionWindows(_MergingTimeWindowAssigner):
    def __init__(self, session_gap: Any):
        session_gap = millis(session_gap, "session gap")
        if session_gap <= 0:
            raise ValueError(f"{type(self).__name__} parameters must satisfy 0 < size")
        self._session_gap = session_gap

    @classmethod
    def with_gap(cls, gap: Any) -> "_SessionWindows":
        return cls(gap)

    @classmethod
    def with_dynamic_gap(cls, extractor: Any) -> "_DynamicSessionWindows":
        if cls._event_time:
            return DynamicEventTimeSessionWindows(extractor)
        return DynamicProcessingTimeSessionWindows(extractor)

    def get_gap(self) -> int:
        return self._session_gap

    def _gap_of(self, element: Any) -> int:
        return self._session_gap

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._session_gap})"


class EventTimeSessionWindows(_SessionWindows):
    """Sessions by element timestamp: ``[ts, ts + gap)`` per element, merged when they touch."""

    _event_time = True


class ProcessingTimeSessionWindows(_SessionWindows):
    """Sessions by processing time."""

    _event_time = False


class _DynamicSessionWindows(_MergingTimeWindowAssigner):
    def __init__(self, session_window_time_gap_extractor: Any):
        self._extractor = session_window_time_gap_extractor

    @classmethod
    def with_dynamic_gap(cls, extractor: Any) -> "_DynamicSessionWindows":
        return cls(extractor)

    def _gap_of(self, element: Any) -> int:
        extract = getattr(self._extractor, "extract", self._extractor)
        gap = millis(extract(element), "session gap")
        if gap <= 0:
            raise ValueError("Dynamic session time gap must satisfy 0 < gap")
        return gap

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class DynamicEventTimeSessionWindows(_DynamicSessionWindows):
    """Event-time sessions whose gap a ``SessionWindowTimeGapExtractor`` (or callable) gives per element."""

    _event_time = True


class DynamicProcessingTimeSessionWindows(_DynamicSessionWindows):
    """Processing-time sessions with a per-element gap."""

    _event_time = False


class GlobalWindows(WindowAssigner[Any, GlobalWindow]):
    """Puts every element in the one ``GlobalWindow``; needs a custom trigger to ever fire."""

    @staticmethod
    def create() -> "GlobalWindows":
        return GlobalWindows()

    def assign_windows(self, element, timestamp, context=None) -> List[GlobalWindow]:
        return [GlobalWindow.get()]

    def get_default_trigger(self, env=None) -> Trigger:
        return NeverTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "GlobalWindows()"


def _next_count(context: Any, descriptor: Any) -> int:
    """Return this key's element count so far (0-based index of the element) and bump it."""
    state = context.get_runtime_context().get_state(descriptor)
    current = state.value() or 0
    state.update(current + 1)
    return current


def _check_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


class CountTumblingWindowAssigner(WindowAssigner[Any, CountWindow]):
    """PyFlink's tumbling count windows: element n (per key, from 0) goes to ``CountWindow(n // size)``.

    The per-key count is a ValueState ("tumble-count-assigner") obtained through
    ``context.get_runtime_context().get_state(descriptor)``.
    """

    def __init__(self, window_size: int):
        self._window_size = _check_count("window_size", window_size)
        self._descriptor = None

    @staticmethod
    def of(window_size: int) -> "CountTumblingWindowAssigner":
        return CountTumblingWindowAssigner(window_size)

    def assign_windows(self, element, timestamp, context) -> List[CountWindow]:
        if self._descriptor is None:
            self._descriptor = ValueStateDescriptor("tumble-count-assigner", Types.LONG())
        return [CountWindow(_next_count(context, self._descriptor) // self._window_size)]

    def get_default_trigger(self, env=None) -> Trigger:
        # A filled count window never receives another element, so purging on fire yields
        # the same output as PyFlink's plain CountTrigger but frees the pane's state.
        return PurgingTrigger.of(CountTrigger.of(self._window_size))

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CountTumblingWindowAssigner({self._window_size})"


class CountSlidingWindowAssigner(WindowAssigner[Any, CountWindow]):
    """PyFlink's sliding count windows: window k holds elements ``k*slide .. k*slide + size - 1``.

    The per-key count is a ValueState ("slide-count-assigner") as for the tumbling variant.
    """

    def __init__(self, window_size: int, window_slide: int):
        self._window_size = _check_count("window_size", window_size)
        self._window_slide = _check_count("window_slide", window_slide)
        self._descriptor = None

    @staticmethod
    def of(window_size: int, window_slide: int) -> "CountSlidingWindowAssigner":
        return CountSlidingWindowAssigner(window_size, window_slide)

    def assign_windows(self, element, timestamp, context) -> List[CountWindow]:
        if self._descriptor is None:
            self._descriptor = ValueStateDescriptor("slide-count-assigner", Types.LONG())
        n = _next_count(context, self._descriptor)
        windows = []
        window_id = n // self._window_slide
        # Latest window first, as PyFlink; ids never go negative.
        while window_id >= 0 and window_id * self._window_slide + self._window_size > n:
            windows.append(CountWindow(window_id))
            window_id -= 1
        return windows

    def get_default_trigger(self, env=None) -> Trigger:
        # Each window id receives exactly window_size elements, then no more (see tumbling).
        return PurgingTrigger.of(CountTrigger.of(self._window_size))

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CountSlidingWindowAssigner({self._window_size}, {self._window_slide})"
