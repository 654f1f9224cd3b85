"""Triggers, as ``pyflink.datastream.window``: when a window pane is evaluated and purged.

A trigger keeps no state of its own: the engine calls it with a ``Trigger.TriggerContext``
whose timers and partitioned state are scoped to the current key and window, so the same
trigger object serves every pane and its state is checkpointed with the window's.
"""
from __future__ import annotations

import numbers
import operator
from abc import ABC, abstractmethod
from enum import Enum
from typing import Any, Generic

from runtime.common.typeinfo import Types
from runtime.datastream.state import ReducingStateDescriptor
from runtime.datastream.window.windows import GlobalWindow, T, TimeWindow, W, Window, millis


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
            self._descriptor = ReducingStateDescriptor("count", operator.add, Types.LONG())
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
        interval = millis(interval, "interval")
        if interval <= 0:
            raise ValueError(f"{type(self).__name__} interval must be > 0, got {interval}")
        self.interval = interval
        self._descriptor = None

    @classmethod
    def of(cls, interval: Any) -> "_ContinuousTrigger":
        return cls(interval)

    def _fire_time_descriptor(self):
        if self._descriptor is None:
            self._descriptor = ReducingStateDescriptor("fire-time", min, Types.LONG())
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
