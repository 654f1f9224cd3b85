"""Window model as ``pyflink.datastream.window``: windows, assigners, triggers, evictors.

Pure Python with Flink's semantics; the engine drives these objects through the
context interfaces declared here (``WindowAssigner.WindowAssignerContext``,
``Trigger.TriggerContext`` / ``Trigger.OnMergeContext``, ``Evictor.EvictorContext``).
"""
from __future__ import annotations

import numbers
import operator
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from typing import Any, Callable, Generic, Iterable, List, Optional, TypeVar

__all__ = [
    "MAX_LONG_VALUE",
    "MIN_LONG_VALUE",
    "Window",
    "TimeWindow",
    "CountWindow",
    "GlobalWindow",
    "TimestampedValue",
    "WindowAssigner",
    "MergingWindowAssigner",
    "SessionWindowTimeGapExtractor",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "EventTimeSessionWindows",
    "ProcessingTimeSessionWindows",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "GlobalWindows",
    "CountTumblingWindowAssigner",
    "CountSlidingWindowAssigner",
    "TriggerResult",
    "Trigger",
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "PurgingTrigger",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "NeverTrigger",
    "Evictor",
    "CountEvictor",
    "TimeEvictor",
    "DeltaEvictor",
]

MAX_LONG_VALUE = 0x7FFFFFFFFFFFFFFF
MIN_LONG_VALUE = -0x8000000000000000

T = TypeVar("T")
W = TypeVar("W")
W2 = TypeVar("W2")

_NO_TIMESTAMP_MESSAGE = (
    "Record has no timestamp (Long.MIN_VALUE). Is the time characteristic set to "
    "'ProcessingTime', or did you forget to call 'assign_timestamps_and_watermarks(...)'?"
)


def _millis(value: Any, what: str = "time") -> int:
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


def _event_timestamp(timestamp: Optional[int]) -> int:
    # Flink marks "no timestamp" with Long.MIN_VALUE; the engine may pass None instead.
    if timestamp is None or timestamp <= MIN_LONG_VALUE:
        raise RuntimeError(_NO_TIMESTAMP_MESSAGE)
    return timestamp


def _processing_time(context: Any, assigner: Any) -> int:
    if context is None:
        raise RuntimeError(f"{assigner} needs a WindowAssignerContext for the processing time")
    return context.get_current_processing_time()


def _long_type_info() -> Any:
    # Type info only guides serialization; the Python state backend can live without it,
    # and runtime.common is developed separately, so a missing module is tolerated.
    try:
        from runtime.common.typeinfo import Types
    except ImportError:
        return None
    return Types.LONG()


def _reducing_descriptor(name: str, reduce_function: Callable) -> Any:
    # Late import: the state module is developed concurrently and imports nothing from here.
    from runtime.datastream.state import ReducingStateDescriptor

    return ReducingStateDescriptor(name, reduce_function, _long_type_info())


def _value_descriptor(name: str) -> Any:
    from runtime.datastream.state import ValueStateDescriptor

    return ValueStateDescriptor(name, _long_type_info())


# --------------------------------------------------------------------------- windows


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


# --------------------------------------------------------------------------- triggers


class TriggerResult(Enum):
    """What to do with a window pane: the value is ``(fire, purge)``."""

    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def is_fire(self) -> bool:
        return self.value[0]

    def is_purge(self) -> bool:
        return self.value[1]


class Trigger(ABC, Generic[T, W]):
    """Decides when a window pane is evaluated; keeps its state only through the context."""

    class TriggerContext(ABC):
        """Timers and window-and-key scoped state for one trigger invocation."""

        @abstractmethod
        def get_current_processing_time(self) -> int:
            pass

        @abstractmethod
        def get_current_watermark(self) -> int:
            pass

        @abstractmethod
        def register_processing_time_timer(self, time: int) -> None:
            pass

        @abstractmethod
        def register_event_time_timer(self, time: int) -> None:
            pass

        @abstractmethod
        def delete_processing_time_timer(self, time: int) -> None:
            pass

        @abstractmethod
        def delete_event_time_timer(self, time: int) -> None:
            pass

        @abstractmethod
        def get_partitioned_state(self, state_descriptor: Any) -> Any:
            """The state for ``state_descriptor`` scoped to the current key and window."""

    class OnMergeContext(TriggerContext):
        """The context of ``Trigger.on_merge``."""

        @abstractmethod
        def merge_partitioned_state(self, state_descriptor: Any) -> None:
            """Merge the merged-away windows' state for ``state_descriptor`` into the new window."""

    @abstractmethod
    def on_element(self, element: T, timestamp: int, window: W,
                   ctx: "Trigger.TriggerContext") -> TriggerResult:
        pass

    @abstractmethod
    def on_processing_time(self, time: int, window: W, ctx: "Trigger.TriggerContext") -> TriggerResult:
        pass

    @abstractmethod
    def on_event_time(self, time: int, window: W, ctx: "Trigger.TriggerContext") -> TriggerResult:
        pass

    def can_merge(self) -> bool:
        """True if ``on_merge`` is implemented, i.e. usable with merging (session) windows."""
        return False

    def on_merge(self, window: W, ctx: "Trigger.OnMergeContext") -> None:
        raise NotImplementedError("This trigger does not support merging.")

    @abstractmethod
    def clear(self, window: W, ctx: "Trigger.TriggerContext") -> None:
        """Delete the timers and state this trigger holds for ``window``."""


class EventTimeTrigger(Trigger[Any, TimeWindow]):
    """Fires once the watermark passes the window's max timestamp."""

    @staticmethod
    def create() -> "EventTimeTrigger":
        return EventTimeTrigger()

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            # Late but within allowed lateness: the window is already due.
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        # A timer already due would fire for a window that no longer exists.
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window, ctx) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())

    def __repr__(self) -> str:
        return "EventTimeTrigger()"


class ProcessingTimeTrigger(Trigger[Any, TimeWindow]):
    """Fires once processing time passes the window's max timestamp."""

    @staticmethod
    def create() -> "ProcessingTimeTrigger":
        return ProcessingTimeTrigger()

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.FIRE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        if window.max_timestamp() > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window, ctx) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())

    def __repr__(self) -> str:
        return "ProcessingTimeTrigger()"


class CountTrigger(Trigger[Any, Window]):
    """Fires (without purging) each time the pane has received ``count`` more elements.

    The count lives in ``ctx.get_partitioned_state(ReducingStateDescriptor("count", add, LONG))``.
    """

    def __init__(self, count: int):
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count <= 0:
            raise ValueError(f"CountTrigger count must be a positive int, got {count!r}")
        self._count = int(count)
        self._descriptor = None

    @staticmethod
    def of(count: int) -> "CountTrigger":
        return CountTrigger(count)

    def get_count(self) -> int:
        return self._count

    def _count_descriptor(self):
        if self._descriptor is None:
            # operator.add rather than a lambda keeps the trigger picklable.
            self._descriptor = _reducing_descriptor("count", operator.add)
        return self._descriptor

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        count = ctx.get_partitioned_state(self._count_descriptor())
        count.add(1)
        if count.get() >= self._count:
            count.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        ctx.merge_partitioned_state(self._count_descriptor())

    def clear(self, window, ctx) -> None:
        ctx.get_partitioned_state(self._count_descriptor()).clear()

    def __repr__(self) -> str:
        return f"CountTrigger({self._count})"


class PurgingTrigger(Trigger[Any, Window]):
    """Wraps a trigger and turns its FIRE into FIRE_AND_PURGE."""

    def __init__(self, nested_trigger: Trigger):
        self.nested_trigger = nested_trigger

    @staticmethod
    def of(nested_trigger: Trigger) -> "PurgingTrigger":
        return PurgingTrigger(nested_trigger)

    @staticmethod
    def _purging(result: TriggerResult) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        return self._purging(self.nested_trigger.on_element(element, timestamp, window, ctx))

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return self._purging(self.nested_trigger.on_processing_time(time, window, ctx))

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return self._purging(self.nested_trigger.on_event_time(time, window, ctx))

    def can_merge(self) -> bool:
        return self.nested_trigger.can_merge()

    def on_merge(self, window, ctx) -> None:
        self.nested_trigger.on_merge(window, ctx)

    def clear(self, window, ctx) -> None:
        self.nested_trigger.clear(window, ctx)

    def __repr__(self) -> str:
        return f"PurgingTrigger({self.nested_trigger})"


class _ContinuousTrigger(Trigger[Any, TimeWindow]):
    """Shared state handling of the continuous triggers: the next fire time in "fire-time"."""

    def __init__(self, interval: Any):
        interval = _millis(interval, "interval")
        if interval <= 0:
            raise ValueError(f"{type(self).__name__} interval must be > 0, got {interval}")
        self.interval = interval
        self._descriptor = None

    @classmethod
    def of(cls, interval: Any) -> "_ContinuousTrigger":
        return cls(interval)

    def _fire_time_descriptor(self):
        if self._descriptor is None:
            self._descriptor = _reducing_descriptor("fire-time", min)
        return self._descriptor

    def _register_timer(self, ctx, time: int) -> None:
        raise NotImplementedError

    def _delete_timer(self, ctx, time: int) -> None:
        raise NotImplementedError

    def _register_next_fire_timestamp(self, time: int, window, ctx, fire_timestamp) -> None:
        # Never later than the window's end, so the last partial interval still fires.
        next_fire = min(time + self.interval, window.max_timestamp())
        fire_timestamp.add(next_fire)
        self._register_timer(ctx, next_fire)

    def _fire_if_due(self, time: int, window, ctx) -> TriggerResult:
        fire_timestamp = ctx.get_partitioned_state(self._fire_time_descriptor())
        if fire_timestamp.get() == time:
            fire_timestamp.clear()
            self._register_next_fire_timestamp(time, window, ctx, fire_timestamp)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        ctx.merge_partitioned_state(self._fire_time_descriptor())
        next_fire = ctx.get_partitioned_state(self._fire_time_descriptor()).get()
        if next_fire is not None:
            self._register_timer(ctx, next_fire)

    def clear(self, window, ctx) -> None:
        fire_timestamp = ctx.get_partitioned_state(self._fire_time_descriptor())
        time = fire_timestamp.get()
        if time is not None:
            self._delete_timer(ctx, time)
            fire_timestamp.clear()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.interval})"


class ContinuousEventTimeTrigger(_ContinuousTrigger):
    """Fires every ``interval`` of event time within the window, and at its end."""

    def _register_timer(self, ctx, time: int) -> None:
        ctx.register_event_time_timer(time)

    def _delete_timer(self, ctx, time: int) -> None:
        ctx.delete_event_time_timer(time)

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        fire_timestamp = ctx.get_partitioned_state(self._fire_time_descriptor())
        if fire_timestamp.get() is None:
            self._register_next_fire_timestamp(
                timestamp - timestamp % self.interval, window, ctx, fire_timestamp)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        return self._fire_if_due(time, window, ctx)


class ContinuousProcessingTimeTrigger(_ContinuousTrigger):
    """Fires every ``interval`` of processing time within the window."""

    def _register_timer(self, ctx, time: int) -> None:
        ctx.register_processing_time_timer(time)

    def _delete_timer(self, ctx, time: int) -> None:
        ctx.delete_processing_time_timer(time)

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        fire_timestamp = ctx.get_partitioned_state(self._fire_time_descriptor())
        if fire_timestamp.get() is None:
            now = ctx.get_current_processing_time()
            self._register_next_fire_timestamp(now - now % self.interval, window, ctx, fire_timestamp)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return self._fire_if_due(time, window, ctx)

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE


class NeverTrigger(Trigger[Any, GlobalWindow]):
    """Never fires; the default trigger of ``GlobalWindows``."""

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_merge(self, window, ctx) -> None:
        pass

    def clear(self, window, ctx) -> None:
        pass

    def __repr__(self) -> str:
        return "NeverTrigger()"


# --------------------------------------------------------------------------- assigners


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
        size = _millis(size, "size")
        offset = _millis(offset, "offset")
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
        size = _millis(size, "size")
        slide = _millis(slide, "slide")
        offset = _millis(offset, "offset")
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
        session_gap = _millis(session_gap, "session gap")
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
        gap = _millis(extract(element), "session gap")
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
            self._descriptor = _value_descriptor("tumble-count-assigner")
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
            self._descriptor = _value_descriptor("slide-count-assigner")
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


# --------------------------------------------------------------------------- evictors


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
        window_size = _millis(window_size, "window_size")
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
