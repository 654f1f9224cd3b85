"""``CEP.pattern(stream, pattern)``: the CEP operator, built on the keyed machinery.

The operator is a KeyedProcessFunction (Flink's CepOperator): per key, the NFA's state in a
ValueState and, in event time, the not-yet-processed events in a MapState of timestamp ->
events, each timestamp with an event-time timer. When the watermark passes a timestamp the
buffered events are fed to the NFA in timestamp order, so out-of-order input matches as if
ordered; events at or behind the watermark are late (dropped, or side output). Being plain
keyed state and timers, checkpoints, restore and rescaling by key groups need nothing more.
"""
from __future__ import annotations

from typing import Optional

from runtime.common import Types
from runtime.datastream.data_stream import DataStream, KeyedStream, NullByteKeySelector
from runtime.datastream.functions import KeyedProcessFunction, TimeDomain
from runtime.datastream.output_tag import OutputTag, is_side_output
from runtime.datastream.state import MapStateDescriptor, ValueStateDescriptor

from .functions import PatternProcessFunction, SelectAdapter, TimedOutPartialMatchHandler
from .nfa import compile_pattern
from .pattern import Pattern

NFA_STATE = "nfaStateName"            # Flink's CepOperator state names
EVENT_QUEUE = "elementQueueState"


class CEP:
    @staticmethod
    def pattern(input_stream: DataStream, pattern: Pattern) -> "PatternStream":
        if not isinstance(input_stream, DataStream):
            raise TypeError(f"CEP.pattern needs a DataStream or KeyedStream, got {input_stream!r}")
        compile_pattern(pattern)  # a malformed pattern fails here, when the job is built
        return PatternStream(input_stream, pattern)


class PatternStream:
    """A stream of matches of ``pattern``; event time unless ``in_processing_time()``."""

    def __init__(self, stream: DataStream, pattern: Pattern, event_time: bool = True,
                 late_data_tag: Optional[OutputTag] = None):
        self._stream, self._pattern = stream, pattern
        self._event_time, self._late_data_tag = event_time, late_data_tag

    def in_processing_time(self) -> "PatternStream":
        return PatternStream(self._stream, self._pattern, False, self._late_data_tag)

    def in_event_time(self) -> "PatternStream":
        return PatternStream(self._stream, self._pattern, True, self._late_data_tag)

    def side_output_late_data(self, output_tag: OutputTag) -> "PatternStream":
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"side_output_late_data needs an OutputTag, got {output_tag!r}")
        return PatternStream(self._stream, self._pattern, self._event_time, output_tag)

    def process(self, pattern_process_function: PatternProcessFunction, output_type=None) -> DataStream:
        if not isinstance(pattern_process_function, PatternProcessFunction):
            raise TypeError(f"PatternStream.process needs a PatternProcessFunction, got {pattern_process_function!r}")
        operator = CepOperator(self._pattern, pattern_process_function, self._event_time, self._late_data_tag)
        stream = self._stream
        if isinstance(stream, KeyedStream):
            return stream.process(operator, output_type).name("CepOperator")
        # As Flink: a plain stream is matched as one, by a single subtask under a constant key.
        return (stream.key_by(NullByteKeySelector()).process(operator, output_type)
                .name("GlobalCepOperator").force_non_parallel())

    def select(self, pattern_select_function, timeout_tag: Optional[OutputTag] = None, timeout_fn=None,
               output_type=None) -> DataStream:
        """``pattern_select_function(match) -> result``; with ``timeout_tag`` and
        ``timeout_fn(match, timeout_timestamp) -> result``, timed-out partial matches go to that
        side output."""
        return self.process(SelectAdapter(pattern_select_function, False, timeout_tag, timeout_fn), output_type)

    def flat_select(self, pattern_flat_select_function, timeout_tag: Optional[OutputTag] = None,
                    timeout_fn=None, output_type=None) -> DataStream:
        """As ``select``, the functions returning or yielding any number of results."""
        return self.process(SelectAdapter(pattern_flat_select_function, True, timeout_tag, timeout_fn),
                            output_type)


class _MatchContext:
    """The ``ctx`` of PatternProcessFunction and TimedOutPartialMatchHandler calls."""
    __slots__ = ("_ctx", "_timestamp")

    def __init__(self, ctx, timestamp):
        self._ctx, self._timestamp = ctx, timestamp

    def timestamp(self) -> int:
        return self._timestamp

    def current_processing_time(self) -> int:
        return self._ctx.timer_service().current_processing_time()

    def output(self, output_tag, value) -> None:
        self._ctx.output(output_tag, value)


class CepOperator(KeyedProcessFunction):
    def __init__(self, pattern: Pattern, function: PatternProcessFunction, event_time: bool,
                 late_data_tag: Optional[OutputTag]):
        self.pattern, self.function = pattern, function
        self.event_time, self.late_data_tag = event_time, late_data_tag

    def open(self, runtime_context):
        self.nfa = compile_pattern(self.pattern)
        self.nfa_state = runtime_context.get_state(ValueStateDescriptor(NFA_STATE))
        self.queue = runtime_context.get_map_state(MapStateDescriptor(EVENT_QUEUE, Types.LONG()))
        self.function.open(runtime_context)

    def close(self):
        self.function.close()

    def process_element(self, value, ctx):
        timers = ctx.timer_service()
        if not self.event_time:
            now = timers.current_processing_time()
            state, out = self._advance(self._state(), now, ctx)
            started = _has_started(state)
            state, matches = self.nfa.process(state, value, now)
            out += self._matches(matches, now, ctx)
            if self.nfa.window_ms and _has_started(state) > started:
                timers.register_processing_time_timer(now + self.nfa.window_ms)
            self._save(state)
            return out
        timestamp = ctx.timestamp()
        if timestamp is None:
            raise ValueError(
                f"CEP in event time needs record timestamps, and record {value!r} has none: call "
                f"assign_timestamps_and_watermarks(...) before CEP.pattern(...), or use "
                f"PatternStream.in_processing_time()")
        if timestamp > timers.current_watermark():
            events = self.queue.get(timestamp)
            if events is None:
                events = []
                timers.register_event_time_timer(timestamp)
            events.append(value)
            self.queue.put(timestamp, events)
        elif self.late_data_tag is not None:
            ctx.output(self.late_data_tag, value)
        return None

    def on_timer(self, timestamp, ctx):
        if ctx.time_domain() == TimeDomain.PROCESSING_TIME:
            # a timer is due at its timestamp, also when the end of a bounded input fires it early
            now = max(timestamp, ctx.timer_service().current_processing_time())
            state, out = self._advance(self._state(), now, ctx)
            self._save(state)
            return out
        timers = ctx.timer_service()
        watermark = timers.current_watermark()
        state, out = self._state(), []
        for ts in sorted(t for t in self.queue.keys() if t <= watermark):
            if ts != timestamp:  # released with this one: its own timer has nothing left to do
                timers.delete_event_time_timer(ts)
            state, timed_out = self._advance(state, ts, ctx)
            out += timed_out
            for event in self.queue.get(ts):
                state, matches = self.nfa.process(state, event, ts)
                out += self._matches(matches, ts, ctx)
            self.queue.remove(ts)
        state, timed_out = self._advance(state, watermark, ctx)
        out += timed_out
        next_timeout = self.nfa.earliest_timeout(state)
        if next_timeout is not None:  # wake up when the oldest partial match times out
            timers.register_event_time_timer(next_timeout)
        self._save(state)
        return out

    def _state(self):
        return self.nfa_state.value() or self.nfa.initial_state()

    def _save(self, state) -> None:
        if self.nfa.is_empty(state):
            self.nfa_state.clear()  # keys with nothing pending keep no state
        else:
            self.nfa_state.update(state)

    def _advance(self, state, time, ctx):
        state, matches, timed_out = self.nfa.advance_time(state, time)
        out = self._matches(matches, time, ctx)
        handler = self.function if isinstance(self.function, TimedOutPartialMatchHandler) else None
        for match, timeout_timestamp in (timed_out if handler is not None else ()):
            match_ctx = _MatchContext(ctx, timeout_timestamp)
            # Flink's handler has only side outputs: ``yield output_tag, value`` or ctx.output.
            for r in handler.process_timed_out_match(match, match_ctx) or ():
                if not is_side_output(r):
                    raise TypeError(f"{type(handler).__name__}.process_timed_out_match returned {r!r}; a timed-out "
                                    f"match goes to a side output: yield output_tag, value (or ctx.output)")
                match_ctx.output(r[0], r[1])
        return state, out

    def _matches(self, matches, timestamp, ctx) -> list:
        out = []
        for match in matches:
            result = self.function.process_match(match, _MatchContext(ctx, timestamp))
            if result is not None:
                out.extend(result)
        return out


def _has_started(state) -> int:
    return sum(1 for cs in state.partial_matches if cs.start_id is not None)
