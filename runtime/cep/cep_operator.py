"""Flink's CepOperator: the executing operator of ``CEP.pattern``, a batch of records at a time.

Per key, the NFA's state is a ValueState and, in event time, the events that wait for the
watermark are a MapState of timestamp -> events with an event-time timer per timestamp, as
Flink keeps them; checkpoints, restores and rescaling by key groups need nothing more.

What it spares per event: the events of a batch wait in memory (timestamp -> key -> events)
until a watermark passes them, so an event released within its epoch never touches the MapState
or a timer; only those still waiting when the epoch ends (``close``, before the snapshot) are
written to the MapState with their timers. A watermark releases each key's due events at once.
The NFA states the epoch touches are kept here and written back at ``close``: a key's state is
read from the backend once per epoch (the keys of a watermark announced to the backend first, so
RocksDB reads them in one ``multi_get``) and written once, or not at all when its events left
it as it was. The timers that fire first (the restored waiting events, timeouts) take the key's
in-memory events with them, in timestamp order, so a key's events are matched in order however
they were kept. In processing time a batch's records are matched key by key, in arrival order.
"""
from __future__ import annotations

import heapq
from bisect import bisect_right
from itertools import islice
from operator import le

from runtime.common import Types
from runtime.datastream.key_selector import select_keys
from runtime.datastream.output_tag import is_side_output
from runtime.datastream.state import MapStateDescriptor, ValueStateDescriptor
from runtime.state.backend import VOID_NAMESPACE
from runtime.task.operators import TaskOperator, UserCodeException
from runtime.task.output import SideOutputs
from runtime.task.runtime_context import StreamingRuntimeContext

from .functions import TimedOutPartialMatchHandler
from .nfa import compile_pattern

NFA_STATE = "nfaStateName"            # Flink's CepOperator state names
EVENT_QUEUE = "elementQueueState"
_CACHED_KEYS = 1 << 17


class _MatchContext:
    """The ``ctx`` of PatternProcessFunction and TimedOutPartialMatchHandler calls."""
    __slots__ = ("_op", "_timestamp", "_stamp")

    def __init__(self, operator: "CepOperator", timestamp, stamp):
        self._op, self._timestamp, self._stamp = operator, timestamp, stamp

    def timestamp(self) -> int:
        return self._timestamp

    def current_processing_time(self) -> int:
        return self._op.ctx.processing_time

    def output(self, output_tag, value) -> None:
        self._op.side_outputs.add(output_tag, value, self._stamp)


class CepOperator(TaskOperator):
    """The spec's function is ``runtime.cep.cep.CepFunction``: the pattern, the user's
    PatternProcessFunction, the time domain and the late-data tag."""

    def user_functions(self) -> list:
        return [self.spec.function.function]

    def open(self) -> None:
        cep = self.spec.function
        self.nfa = compile_pattern(cep.pattern)
        self.function, self.event_time, self.late_data_tag = cep.function, cep.event_time, cep.late_data_tag
        self.handler = self.function if isinstance(self.function, TimedOutPartialMatchHandler) else None
        context = StreamingRuntimeContext(self)
        self.nfa_state = context.get_state(ValueStateDescriptor(NFA_STATE))
        self.queue = context.get_map_state(MapStateDescriptor(EVENT_QUEUE, Types.LONG()))
        self.side_outputs = SideOutputs()
        self.out, self.out_ts = [], []
        self.waiting: dict = {}         # timestamp -> {key: [events]}: this epoch's, not yet released
        self.waiting_times: list = []   # their timestamps, a heap
        self.due: dict = {}             # what the current watermark releases: key -> events at due_at,
        self.due_at = None              # or key -> [(timestamp, events), ...] when due_at is None
        # The NFA states of the keys this epoch touched, written back to the ValueState at close
        # (or when there are _CACHED_KEYS of them): a key's state is read from the backend once
        # per epoch and written at most once, however many watermarks release its events.
        self.cache: dict = {}
        self.dirty: set = set()
        # The keys with events in the MapState (restored; written only at close): a timer of any
        # other key reads none (33,000 reads at the end of a 100,000-key run otherwise).
        self.queued_keys = set(self.backend.keys(EVENT_QUEUE)) if self.event_time else set()
        super().open()

    def close(self) -> None:
        self._write_back()
        self._flush_waiting()
        super().close()

    # ---- records -----------------------------------------------------------------------

    def process_batch(self, values, timestamps, input_index) -> None:
        keys = select_keys(self.key_selectors[0], values, self.each)
        if not self.event_time:
            self._match_in_processing_time(values, timestamps, keys)
            return
        if self._wait_in_order(values, timestamps, keys):
            return
        waiting, watermark, late = self.waiting, self.current_watermark, None
        i = 0
        try:
            for i, (value, timestamp, key) in enumerate(zip(values, timestamps, keys)):
                if timestamp is None:
                    raise ValueError(
                        f"CEP in event time needs record timestamps, and record {value!r} has none: call "
                        f"assign_timestamps_and_watermarks(...) before CEP.pattern(...), or use "
                        f"PatternStream.in_processing_time()")
                if timestamp > watermark:
                    by_key = waiting.get(timestamp) or self._waiting_at(timestamp)
                    events = by_key.get(key)
                    if events is None:
                        by_key[key] = [value]
                    else:
                        events.append(value)
                elif self.late_data_tag is not None:
                    if late is None:
                        late = ([], [])
                    late[0].append(value)
                    late[1].append(timestamp)
        except Exception as e:
            self.fail(e, values[i], values, i)
        if late is not None:
            self.output.collect_side(self.late_data_tag.tag_id, *late)

    def _wait_in_order(self, values, timestamps, keys) -> bool:
        """The usual batch in event time: timestamps in order, none late. Its runs of one
        timestamp wait a run at a time, a run of distinct keys new to its timestamp in one
        ``dict.update`` (0.5 µs a record less than one at a time). False, having done nothing,
        for any other batch."""
        n = len(timestamps)
        try:
            in_order = n and timestamps[0] > self.current_watermark and \
                all(map(le, timestamps, islice(timestamps, 1, None)))
        except TypeError:       # a record without a timestamp: named as it fails
            return False
        if not in_order:
            return False
        lo = 0
        while lo < n:
            timestamp = timestamps[lo]
            hi = bisect_right(timestamps, timestamp, lo)
            by_key = self._waiting_at(timestamp)
            run = keys[lo:hi]
            if len(set(run)) == hi - lo and by_key.keys().isdisjoint(run):
                by_key.update(zip(run, [[v] for v in values[lo:hi]]))
            else:       # a key twice in the run, or waiting at its timestamp already
                for key, value in zip(run, values[lo:hi]):
                    by_key.setdefault(key, []).append(value)
            lo = hi
        return True

    def _waiting_at(self, timestamp) -> dict:
        """The events waiting at ``timestamp``, by key: a dict made, and its time queued, when
        none wait there yet (a dict in ``waiting`` is never empty)."""
        by_key = self.waiting.get(timestamp)
        if by_key is None:
            by_key = self.waiting[timestamp] = {}
            heapq.heappush(self.waiting_times, timestamp)
        return by_key

    def _match_in_processing_time(self, values, timestamps, keys) -> None:
        # Key by key (each key's state read and written once), each key's records in arrival order.
        by_key: dict = {}
        for i, key in enumerate(keys):
            at = by_key.get(key)
            if at is None:
                by_key[key] = [i]
            else:
                at.append(i)
        self.backend.prepare_keys(list(by_key))
        now = self.ctx.processing_time
        window = self.nfa.window_ms
        i = 0
        try:
            for key, indexes in by_key.items():
                i = indexes[0]
                self.backend.set_current_key(key)
                before = state = self._state(key)
                state = self._advance(state, now, timestamps[indexes[0]])
                started = _started(state)
                for i in indexes:
                    state, matches = self.nfa.process(state, values[i], now)
                    if matches:
                        self._matches(matches, now, timestamps[i])
                if window and _started(state) > started:
                    self.timers.register_processing_time_timer(VOID_NAMESPACE, now + window)
                self._save(key, before, state)
        except UserCodeException:
            raise
        except Exception as e:
            self.fail(e, values[i], values, i)
        self._emit()

    # ---- time --------------------------------------------------------------------------

    def process_watermark(self, watermark: int, input_index: int) -> None:
        if watermark <= self.current_watermark:
            return
        self.current_watermark = watermark
        waiting, times = self.waiting, self.waiting_times
        released = []
        while times and times[0] <= watermark:
            timestamp = heapq.heappop(times)
            released.append((timestamp, waiting.pop(timestamp)))
        if len(released) == 1:      # the usual: {key: events} of one timestamp
            self.due_at, self.due = released[0]
        else:                       # {key: [(timestamp, events), ...]}
            self.due_at, self.due = None, {}
            for timestamp, by_key in released:
                for key, events in by_key.items():
                    runs = self.due.get(key)
                    if runs is None:
                        self.due[key] = [(timestamp, events)]
                    else:
                        runs.append((timestamp, events))
        # The timers first: a key with a restored waiting event or a timeout reads its MapState
        # and takes its in-memory events along; every other key's events need no MapState read.
        self.timers.advance_watermark(watermark, self.on_event_time)
        due, due_at, self.due = self.due, self.due_at, {}
        if due:
            self.backend.prepare_keys(list(due))
            if due_at is not None:
                # The usual key: one event the start refuses while nothing has started, which
                # changes nothing: passed over without the release.
                cache, nfa = self.cache, self.nfa
                for key, events in due.items():
                    hit = nfa.start_hit(cache.get(key) or self._read_state(key), events[0]) if len(events) == 1 else None
                    if hit is False:
                        continue
                    self._release(key, ((due_at, events),), watermark, due_at, hit)
            else:
                for key, runs in due.items():
                    self._release(key, runs, watermark, runs[0][0])
        self._emit()
        self.output.emit_watermark(watermark)

    def on_event_time(self, timestamp, key, namespace) -> None:
        runs = self.due.pop(key, None)
        if runs is None:
            runs = ()
        elif self.due_at is not None:
            runs = ((self.due_at, runs),)
        try:
            runs = self._with_queued(key, runs, self.current_watermark, timestamp)
        except Exception as e:
            self.fail(e, f"timer {timestamp} of key {key!r}")
        self._release(key, runs, self.current_watermark, timestamp)

    def on_processing_time(self, timestamp, key, namespace) -> None:
        # a timer is due at its timestamp, also when the end of a bounded input fires it early
        now = max(timestamp, self.ctx.processing_time)
        try:
            self.backend.set_current_key(key)
            before = self._state(key)
            self._save(key, before, self._advance(before, now, None))
        except UserCodeException:
            raise
        except Exception as e:
            self.fail(e, f"timer {timestamp} of key {key!r}")
        self._emit()

    def _release(self, key, runs, watermark: int, stamp: int, first_hit=None) -> None:
        """Match ``key``'s events due at ``watermark``, ``runs`` of (timestamp, events) in
        timestamp order. What it emits is stamped ``stamp``, the first timer's time, as each
        timer's output is. The backend's current key is set only to read or write. ``first_hit``:
        ``NFA.start_hit`` of the key's state and first event, when it was asked."""
        try:
            nfa = self.nfa
            initial = nfa.initial
            before = state = self.cache.get(key) or self._read_state(key)
            for timestamp, events in runs:
                if state is not initial:    # the initial state has nothing to time out
                    state = self._advance(state, timestamp, stamp)
                for event in events:
                    state, matches = nfa.process(state, event, timestamp, first_hit)
                    first_hit = None
                    if matches:
                        self._matches(matches, timestamp, stamp)
            timeout = nfa.earliest_timeout(state)
            if timeout is not None and timeout <= watermark:    # else nothing times out
                state = self._advance(state, watermark, stamp)
                timeout = nfa.earliest_timeout(state)
            if state is not before:
                # a timeout already registered for the state as it was is not registered again
                if timeout is not None and timeout != nfa.earliest_timeout(before):
                    self.backend.set_current_key(key)
                    self.timers.register_event_time_timer(VOID_NAMESPACE, timeout)
                self.cache[key] = state
                self.dirty.add(key)
        except UserCodeException:
            raise
        except Exception as e:
            self.fail(e, f"timer {stamp} of key {key!r}")

    def _with_queued(self, key, runs, watermark: int, stamp: int) -> list:
        """``runs`` merged with the key's MapState events due at ``watermark`` (those came first
        at a timestamp both have), which leave the MapState; their timers, but ``stamp``'s, go."""
        if key not in self.queued_keys:
            return runs
        queued = sorted(t for t in self.queue.keys() if t <= watermark)
        if not queued:
            return runs
        merged = dict.fromkeys(queued)
        for timestamp in queued:
            if timestamp != stamp:
                self.timers.delete_event_time_timer(VOID_NAMESPACE, timestamp)
            merged[timestamp] = self.queue.get(timestamp)
            self.queue.remove(timestamp)
        for timestamp, events in runs:
            merged[timestamp] = merged.get(timestamp, []) + events
        return sorted(merged.items())

    def _flush_waiting(self) -> None:
        """The events still waiting at the end of the epoch go to the MapState, each timestamp
        with its timer, so the checkpoint holds them (Flink's layout: what a restore reads)."""
        waiting, self.waiting, self.waiting_times = self.waiting, {}, []
        for timestamp, by_key in sorted(waiting.items()):
            self.backend.prepare_keys(list(by_key))
            for key, events in by_key.items():
                self.backend.set_current_key(key)
                queued = self.queue.get(timestamp)
                self.queue.put(timestamp, events if queued is None else queued + events)
                self.timers.register_event_time_timer(VOID_NAMESPACE, timestamp)

    # ---- the NFA state and the user's functions ----------------------------------------

    def _state(self, key):
        return self.cache.get(key) or self._read_state(key)

    def _read_state(self, key):
        """``key``'s NFA state from the backend, cached for the epoch."""
        if len(self.cache) >= _CACHED_KEYS:
            self._write_back()
        self.backend.set_current_key(key)
        state = self.cache[key] = self.nfa_state.value() or self.nfa.initial
        return state

    def _save(self, key, before, state) -> None:
        if state is not before:
            self.cache[key] = state
            self.dirty.add(key)

    def _write_back(self) -> None:
        dirty, cache = self.dirty, self.cache
        self.dirty, self.cache = set(), {}
        for key in dirty:
            self.backend.set_current_key(key)
            state = cache[key]
            if self.nfa.is_empty(state):
                self.nfa_state.clear()  # keys with nothing pending keep no state
            else:
                self.nfa_state.update(state)

    def _advance(self, state, time: int, stamp):
        state, matches, timed_out = self.nfa.advance_time(state, time, self.handler is not None)
        if matches:
            self._matches(matches, time, stamp)
        if self.handler is not None:
            for match, timeout_timestamp in timed_out:
                match_ctx = _MatchContext(self, timeout_timestamp, stamp)
                # Flink's handler has only side outputs: ``yield output_tag, value`` or ctx.output.
                for r in self.handler.process_timed_out_match(match, match_ctx) or ():
                    if not is_side_output(r):
                        raise TypeError(f"{type(self.handler).__name__}.process_timed_out_match returned {r!r}; a "
                                        f"timed-out match goes to a side output: yield output_tag, value (or "
                                        f"ctx.output)")
                    match_ctx.output(r[0], r[1])
        return state

    def _matches(self, matches, timestamp: int, stamp) -> None:
        for match in matches:
            result = self.function.process_match(match, _MatchContext(self, timestamp, stamp))
            if result is not None:
                self.side_outputs.split(result, stamp, self.out, self.out_ts)

    def _emit(self) -> None:
        out, out_ts = self.out, self.out_ts
        if out:
            self.out, self.out_ts = [], []
            self.output.collect(out, out_ts)
        self.side_outputs.flush(self.output)


def _started(state) -> int:
    return sum(1 for cs in state.partial_matches if cs.start_id is not None)

