"""The process operators (Flink's ProcessOperator, KeyedProcessOperator, CoProcessOperator,
KeyedCoProcessOperator) and the ``ctx`` their functions get: timestamp, timer service, side
outputs, current key. The broadcast operator (runtime.task.broadcast_operator) builds on them."""
from __future__ import annotations

from typing import Callable

from runtime.datastream import functions as fn
from runtime.state.backend import VOID_NAMESPACE
from runtime.task.operators import TaskOperator, UserCodeException
from runtime.task.output import SideOutputs
from runtime.task.timer_service import InternalTimerService


class _TimerService(fn.TimerService):
    def __init__(self, operator: TaskOperator):
        self._op = operator

    def current_processing_time(self) -> int:
        return self._op.ctx.processing_time

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def _timers(self) -> InternalTimerService:
        if self._op.timers is None:
            raise RuntimeError(
                f"Setting timers is only supported on a keyed streams: '{self._op.name}' is not keyed. "
                "Use key_by(...).process(KeyedProcessFunction).")
        return self._op.timers

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._timers().register_processing_time_timer(VOID_NAMESPACE, timestamp)

    def register_event_time_timer(self, timestamp: int) -> None:
        self._timers().register_event_time_timer(VOID_NAMESPACE, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._timers().delete_processing_time_timer(VOID_NAMESPACE, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._timers().delete_event_time_timer(VOID_NAMESPACE, timestamp)


class ProcessContext(fn.KeyedProcessFunction.OnTimerContext, fn.KeyedCoProcessFunction.OnTimerContext,
                     fn.ProcessFunction.Context):
    """The ``ctx`` of process functions: timestamp, timers, side outputs, current key."""

    def __init__(self, operator: TaskOperator):
        self._op = operator
        self._timer_service = _TimerService(operator)
        self._timestamp = None
        self._key = None
        self._domain = None
        self.side_outputs = SideOutputs()

    def timestamp(self):
        return self._timestamp

    def timer_service(self):
        return self._timer_service

    def get_current_key(self):
        return self._key

    def time_domain(self):
        return self._domain

    def output(self, output_tag, value) -> None:
        self.side_outputs.add(output_tag, value, self._timestamp)


class ProcessOperatorBase(TaskOperator):
    """Process functions, one- and two-input, keyed or not."""

    def open(self):
        self.pctx = ProcessContext(self)
        super().open()

    def _run(self, method: Callable, values, timestamps, input_index: int) -> None:
        ctx = self.pctx
        out, out_ts = [], []
        # The inputs with a key selector (not the broadcast side of a keyed broadcast operator).
        keyed = self.backend is not None and self.key_selectors[max(input_index - 1, 0)] is not None
        keys = self.keys_of(values, input_index) if keyed else None
        i = 0
        # The main output goes on when it holds a batch (a function that yields many records of
        # one, as flat_map in runtime.task.operators); side outputs after it, as before.
        limit = self.ctx.batch_size
        try:
            for i, (v, t) in enumerate(zip(values, timestamps)):
                ctx._timestamp = t
                if keyed:
                    ctx._key = keys[i]
                    self.backend.set_current_key(ctx._key)
                result = method(v, ctx)
                if result is not None:
                    ctx.side_outputs.split(result, t, out, out_ts)
                    if len(out) >= limit:
                        self.output.collect(out, out_ts)
                        out, out_ts = [], []
        except UserCodeException:
            raise
        except Exception as e:
            self.fail(e, values[i], values, i)
        self.output.collect(out, out_ts)
        ctx.side_outputs.flush(self.output)

    def _on_timer(self, timestamp: int, key, domain) -> None:
        on_timer = getattr(self.spec.function, "on_timer", None)
        if on_timer is None:
            return
        ctx = self.pctx
        ctx._timestamp, ctx._key, ctx._domain = timestamp, key, domain
        results = self._call_drained(on_timer, f"timer {timestamp} of key {key!r}", timestamp, ctx)
        values, stamps = [], []
        ctx.side_outputs.split(results, timestamp if domain == fn.TimeDomain.EVENT_TIME else None, values, stamps)
        self.output.collect(values, stamps)
        ctx.side_outputs.flush(self.output)

    def on_event_time(self, timestamp, key, namespace):
        self._on_timer(timestamp, key, fn.TimeDomain.EVENT_TIME)

    def on_processing_time(self, timestamp, key, namespace):
        self._on_timer(timestamp, key, fn.TimeDomain.PROCESSING_TIME)


class ProcessOperator(ProcessOperatorBase):
    def process_batch(self, values, timestamps, input_index):
        self._run(self.spec.function.process_element, values, timestamps, input_index)


class CoProcessOperator(ProcessOperatorBase):
    def process_batch(self, values, timestamps, input_index):
        f = self.spec.function
        method = f.process_element1 if input_index == 1 else f.process_element2
        self._run(method, values, timestamps, input_index)
