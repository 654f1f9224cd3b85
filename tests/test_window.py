"""Window model: assigners, merging, triggers and evictors against hand-computed results."""
import pickle
import re
from dataclasses import FrozenInstanceError
from datetime import timedelta

import pytest

from runtime.datastream.window import (
    MAX_LONG_VALUE,
    MIN_LONG_VALUE,
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountEvictor,
    CountSlidingWindowAssigner,
    CountTrigger,
    CountTumblingWindowAssigner,
    CountWindow,
    DeltaEvictor,
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    EventTimeTrigger,
    GlobalWindow,
    GlobalWindows,
    MergingWindowAssigner,
    NeverTrigger,
    ProcessingTimeSessionWindows,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeEvictor,
    TimestampedValue,
    TimeWindow,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)

NO_TIMESTAMP = (
    "Record has no timestamp (Long.MIN_VALUE). Is the time characteristic set to "
    "'ProcessingTime', or did you forget to call 'assign_timestamps_and_watermarks(...)'?"
)


# ----------------------------------------------------------------- a trigger context for unit tests


def _name(descriptor):
    return descriptor.get_name()


def _reducer(descriptor):
    return descriptor.reduce_function       # a ReduceFunction's reduce, or the callable itself


class FakeReducingState:
    def __init__(self, store, key, reduce):
        self._store, self._key, self._reduce = store, key, reduce

    def get(self):
        return self._store.get(self._key)

    def add(self, value):
        current = self._store.get(self._key)
        self._store[self._key] = value if current is None else self._reduce(current, value)

    def clear(self):
        self._store.pop(self._key, None)


# The trigger tests run with their state in a dict and in each keyed state backend (the
# window's namespace, merge_namespaces for merging windows): see trigger_state below.
TRIGGER_STATES = ["dict", "hashmap", "rocksdb"]
_trigger_state = {"kind": "dict", "backends": [], "dir": None}


def pytest_generate_tests(metafunc):
    if "trigger" in metafunc.function.__name__:
        metafunc.parametrize("trigger_state", TRIGGER_STATES, indirect=True)


@pytest.fixture(autouse=True)
def trigger_state(request, tmp_path):
    _trigger_state.update(kind=getattr(request, "param", "dict"), dir=tmp_path)
    yield _trigger_state["kind"]
    for backend in _trigger_state["backends"]:
        backend.dispose()
    _trigger_state.update(kind="dict", backends=[], dir=None)


def _backend():
    from runtime.state.heap import HeapKeyedStateBackend
    from runtime.state.key_groups import KeyGroupRange
    from runtime.state.rocksdb import RocksDBKeyedStateBackend
    kind, made = _trigger_state["kind"], _trigger_state["backends"]
    if kind == "hashmap":
        backend = HeapKeyedStateBackend("WindowOperator", KeyGroupRange(0, 127), 128)
    else:
        path = _trigger_state["dir"] / f"store-{len(made)}"
        backend = RocksDBKeyedStateBackend("WindowOperator", KeyGroupRange(0, 127), 128, str(path))
    made.append(backend)
    backend.set_current_key("key")
    return backend


class FakeTriggerContext(Trigger.OnMergeContext):
    """State in a dict keyed by (window, descriptor name), or in a keyed state backend under
    the window's namespace; timers recorded in lists."""

    def __init__(self, window, watermark=MIN_LONG_VALUE, processing_time=0):
        self.window = window
        self.watermark = watermark
        self.processing_time = processing_time
        self.merged_windows = []
        self.state = {}
        self.backend = None if _trigger_state["kind"] == "dict" else _backend()
        self.event_timers, self.processing_timers = [], []
        self.deleted_event_timers, self.deleted_processing_timers = [], []

    def get_current_processing_time(self):
        return self.processing_time

    def get_current_watermark(self):
        return self.watermark

    def register_processing_time_timer(self, time):
        self.processing_timers.append(time)

    def register_event_time_timer(self, time):
        self.event_timers.append(time)

    def delete_processing_time_timer(self, time):
        self.deleted_processing_timers.append(time)

    def delete_event_time_timer(self, time):
        self.deleted_event_timers.append(time)

    def get_partitioned_state(self, state_descriptor):
        if self.backend is not None:
            state = self.backend.get_partitioned_state(state_descriptor)
            state.set_current_namespace(self.window)
            return state
        return FakeReducingState(self.state, (self.window, _name(state_descriptor)),
                                 _reducer(state_descriptor))

    def merge_partitioned_state(self, state_descriptor):
        if self.backend is not None:
            self.backend.get_partitioned_state(state_descriptor).merge_namespaces(self.window, self.merged_windows)
            return
        target = self.get_partitioned_state(state_descriptor)
        for window in self.merged_windows:
            value = self.state.pop((window, _name(state_descriptor)), None)
            if value is not None:
                target.add(value)

    def value(self, name):
        if self.backend is not None:
            state = self.backend.states.get(name)
            if state is None:
                return None
            state.set_current_namespace(self.window)
            return state.get()
        return self.state.get((self.window, name))


class FakeValueState:
    def __init__(self, store, key):
        self._store, self._key = store, key

    def value(self):
        return self._store.get(self._key)

    def update(self, value):
        self._store[self._key] = value

    def clear(self):
        self._store.pop(self._key, None)


class FakeRuntimeContext:
    def __init__(self):
        self.store = {}

    def get_state(self, descriptor):
        return FakeValueState(self.store, _name(descriptor))


class FakeAssignerContext(WindowAssigner.WindowAssignerContext):
    def __init__(self, processing_time=0):
        self.processing_time = processing_time
        self.runtime_context = FakeRuntimeContext()

    def get_current_processing_time(self):
        return self.processing_time

    def get_runtime_context(self):
        return self.runtime_context


class FakeTime:
    """What runtime.common.time.Time/Duration offer: to_milliseconds()."""

    def __init__(self, millis):
        self.millis = millis

    def to_milliseconds(self):
        return self.millis


def tv(value, timestamp=None):
    return TimestampedValue(value, timestamp)


# ----------------------------------------------------------------- windows


def test_time_window_basics():
    w = TimeWindow(0, 5000)
    assert w.max_timestamp() == 4999
    assert w.intersects(TimeWindow(4999, 6000))
    assert w.intersects(TimeWindow(5000, 6000))  # touching counts, as in Flink
    assert not w.intersects(TimeWindow(5001, 6000))
    assert w.cover(TimeWindow(3000, 8000)) == TimeWindow(0, 8000)
    assert sorted([TimeWindow(5, 9), TimeWindow(0, 7), TimeWindow(0, 3)]) == [
        TimeWindow(0, 3), TimeWindow(0, 7), TimeWindow(5, 9)]
    assert {TimeWindow(0, 5000), TimeWindow(0, 5000)} == {w}
    assert repr(w) == "TimeWindow(start=0, end=5000)"
    with pytest.raises(FrozenInstanceError):
        w.start = 1


def test_count_and_global_windows():
    assert CountWindow(3).max_timestamp() == 0x7FFFFFFFFFFFFFFF == MAX_LONG_VALUE
    assert CountWindow(3) == CountWindow(3) and CountWindow(3) != CountWindow(4)
    assert GlobalWindow.get() is GlobalWindow.get() is GlobalWindow()
    assert GlobalWindow.get().max_timestamp() == 0x7FFFFFFFFFFFFFFF
    assert pickle.loads(pickle.dumps(GlobalWindow.get())) is GlobalWindow.get()
    assert GlobalWindow.get() != TimeWindow(0, 1)


def test_get_window_start_with_offset():
    assert TimeWindow.get_window_start_with_offset(7, 0, 5) == 5
    assert TimeWindow.get_window_start_with_offset(-7, 0, 5) == -10
    assert TimeWindow.get_window_start_with_offset(-5, 0, 5) == -5
    assert TimeWindow.get_window_start_with_offset(7, 3, 5) == 3
    assert TimeWindow.get_window_start_with_offset(2, 3, 5) == -2


# ----------------------------------------------------------------- tumbling


def test_tumbling_event_time_without_offset():
    a = TumblingEventTimeWindows.of(5000)
    assert a.assign_windows("x", 0, None) == [TimeWindow(0, 5000)]
    assert a.assign_windows("x", 4999, None) == [TimeWindow(0, 5000)]
    assert a.assign_windows("x", 5000, None) == [TimeWindow(5000, 10000)]
    assert a.assign_windows("x", -1, None) == [TimeWindow(-5000, 0)]
    assert a.assign_windows("x", -5000, None) == [TimeWindow(-5000, 0)]
    assert a.assign_windows("x", -5001, None) == [TimeWindow(-10000, -5000)]
    assert a.is_event_time()
    assert isinstance(a.get_default_trigger(), EventTimeTrigger)


def test_tumbling_event_time_with_offset():
    a = TumblingEventTimeWindows.of(5000, 1000)
    assert a.assign_windows("x", 0, None) == [TimeWindow(-4000, 1000)]
    assert a.assign_windows("x", 999, None) == [TimeWindow(-4000, 1000)]
    assert a.assign_windows("x", 1000, None) == [TimeWindow(1000, 6000)]
    assert a.assign_windows("x", -4001, None) == [TimeWindow(-9000, -4000)]

    negative = TumblingEventTimeWindows.of(5000, -1000)
    assert negative.assign_windows("x", 0, None) == [TimeWindow(-1000, 4000)]
    assert negative.assign_windows("x", 4000, None) == [TimeWindow(4000, 9000)]
    assert negative.assign_windows("x", -1001, None) == [TimeWindow(-6000, -1000)]


def test_time_values_accept_time_like_objects_and_timedelta():
    a = TumblingEventTimeWindows.of(FakeTime(5000), FakeTime(1000))
    assert a.assign_windows("x", 0, None) == [TimeWindow(-4000, 1000)]
    b = SlidingEventTimeWindows.of(timedelta(seconds=10), timedelta(seconds=5))
    assert str(b) == "SlidingEventTimeWindows(10000, 5000)"
    assert str(EventTimeSessionWindows.with_gap(FakeTime(3000))) == "EventTimeSessionWindows(3000)"
    with pytest.raises(TypeError):
        TumblingEventTimeWindows.of("5s")
    with pytest.raises(TypeError):
        TumblingEventTimeWindows.of(True)


def test_tumbling_processing_time_uses_context_clock():
    a = TumblingProcessingTimeWindows.of(5000)
    # The element timestamp is ignored; only the context's clock counts.
    assert a.assign_windows("x", 1, FakeAssignerContext(12345)) == [TimeWindow(10000, 15000)]
    assert TumblingProcessingTimeWindows.of(5000, 2000).assign_windows(
        "x", None, FakeAssignerContext(12345)) == [TimeWindow(12000, 17000)]
    assert not a.is_event_time()
    assert isinstance(a.get_default_trigger(), ProcessingTimeTrigger)


# ----------------------------------------------------------------- sliding


def test_sliding_event_time_windows_for_a_timestamp():
    a = SlidingEventTimeWindows.of(10000, 5000)
    assert a.assign_windows("x", 12000, None) == [TimeWindow(10000, 20000), TimeWindow(5000, 15000)]
    assert a.assign_windows("x", 10000, None) == [TimeWindow(10000, 20000), TimeWindow(5000, 15000)]
    assert a.assign_windows("x", 9999, None) == [TimeWindow(5000, 15000), TimeWindow(0, 10000)]

    b = SlidingEventTimeWindows.of(10000, 3000)
    assert b.assign_windows("x", 7000, None) == [
        TimeWindow(6000, 16000), TimeWindow(3000, 13000), TimeWindow(0, 10000)]


def test_sliding_event_time_negative_timestamp_with_offset():
    a = SlidingEventTimeWindows.of(10000, 5000, 1000)
    assert a.assign_windows("x", -2000, None) == [TimeWindow(-4000, 6000), TimeWindow(-9000, 1000)]


def test_sliding_with_slide_larger_than_size_drops_gap_elements():
    a = SlidingEventTimeWindows.of(1000, 5000)
    assert a.assign_windows("x", 500, None) == [TimeWindow(0, 1000)]
    assert a.assign_windows("x", 1500, None) == []


def test_sliding_processing_time():
    a = SlidingProcessingTimeWindows.of(10000, 5000)
    assert a.assign_windows("x", None, FakeAssignerContext(12000)) == [
        TimeWindow(10000, 20000), TimeWindow(5000, 15000)]
    assert not a.is_event_time()


# ----------------------------------------------------------------- sessions


class RecordingCallback(MergingWindowAssigner.MergeCallback):
    def __init__(self):
        self.calls = []

    def merge(self, to_be_merged, merge_result):
        self.calls.append((sorted(to_be_merged), merge_result))


def test_session_assign_and_merge_groups():
    a = EventTimeSessionWindows.with_gap(3000)
    assert a.assign_windows("x", 1000, None) == [TimeWindow(1000, 4000)]

    windows = [TimeWindow(20000, 23000), TimeWindow(5000, 8000), TimeWindow(0, 3000),
               TimeWindow(30000, 33000), TimeWindow(2000, 5000), TimeWindow(21000, 24000),
               TimeWindow(10000, 13000)]
    callback = RecordingCallback()
    a.merge_windows(windows, callback)
    assert callback.calls == [
        ([TimeWindow(0, 3000), TimeWindow(2000, 5000), TimeWindow(5000, 8000)], TimeWindow(0, 8000)),
        ([TimeWindow(20000, 23000), TimeWindow(21000, 24000)], TimeWindow(20000, 24000)),
    ]


def test_merge_windows_covering_window_and_plain_callable():
    calls = []
    TimeWindow.merge_windows(
        [TimeWindow(9000, 12000), TimeWindow(1000, 2000), TimeWindow(0, 10000)],
        lambda group, result: calls.append((list(group), result)))
    assert calls == [([TimeWindow(0, 10000), TimeWindow(1000, 2000), TimeWindow(9000, 12000)],
                      TimeWindow(0, 12000))]


def test_merge_windows_no_callback_for_singletons_or_duplicates():
    callback = RecordingCallback()
    TimeWindow.merge_windows([TimeWindow(0, 10), TimeWindow(0, 10), TimeWindow(20, 30)], callback)
    assert callback.calls == []


def test_processing_time_sessions():
    a = ProcessingTimeSessionWindows.with_gap(3000)
    assert a.assign_windows("x", 1, FakeAssignerContext(500)) == [TimeWindow(500, 3500)]
    assert isinstance(a.get_default_trigger(), ProcessingTimeTrigger)
    assert not a.is_event_time()


def test_dynamic_sessions():
    a = EventTimeSessionWindows.with_dynamic_gap(lambda e: e["gap"])
    assert isinstance(a, DynamicEventTimeSessionWindows)
    assert a.assign_windows({"gap": 700}, 1000, None) == [TimeWindow(1000, 1700)]
    with pytest.raises(ValueError, match=re.escape("Dynamic session time gap must satisfy 0 < gap")):
        a.assign_windows({"gap": 0}, 1000, None)

    class Gap(SessionWindowTimeGapExtractor):
        def extract(self, element):
            return element * 10

    b = ProcessingTimeSessionWindows.with_dynamic_gap(Gap())
    assert isinstance(b, DynamicProcessingTimeSessionWindows)
    assert b.assign_windows(5, None, FakeAssignerContext(100)) == [TimeWindow(100, 150)]
    callback = RecordingCallback()
    b.merge_windows([TimeWindow(100, 150), TimeWindow(140, 200)], callback)
    assert callback.calls == [([TimeWindow(100, 150), TimeWindow(140, 200)], TimeWindow(100, 200))]


# ----------------------------------------------------------------- global and count assigners


def test_global_windows():
    a = GlobalWindows.create()
    assert a.assign_windows("x", None, None) == [GlobalWindow.get()]
    assert isinstance(a.get_default_trigger(), NeverTrigger)
    assert not a.is_event_time()


def test_count_tumbling_assigner_ids_per_key_state():
    a = CountTumblingWindowAssigner.of(3)
    key_a, key_b = FakeAssignerContext(), FakeAssignerContext()
    ids = [a.assign_windows(i, None, key_a)[0].id for i in range(7)]
    assert ids == [0, 0, 0, 1, 1, 1, 2]
    assert a.assign_windows("y", None, key_b) == [CountWindow(0)]
    assert str(a.get_default_trigger()) == "PurgingTrigger(CountTrigger(3))"


def test_count_sliding_assigner_ids():
    # Window k holds the elements numbered 2k .. 2k+3.
    a = CountSlidingWindowAssigner.of(4, 2)
    ctx = FakeAssignerContext()
    got = [[w.id for w in a.assign_windows(i, None, ctx)] for i in range(6)]
    assert got == [[0], [0], [1, 0], [1, 0], [2, 1], [2, 1]]

    # Slide beyond size: element 2 (of 0,1,2) falls between windows.
    b = CountSlidingWindowAssigner.of(2, 3)
    ctx = FakeAssignerContext()
    assert [[w.id for w in b.assign_windows(i, None, ctx)] for i in range(4)] == [[0], [0], [], [1]]


# ----------------------------------------------------------------- triggers


def test_trigger_result_flags():
    assert [(r.is_fire(), r.is_purge()) for r in TriggerResult] == [
        (False, False), (True, True), (True, False), (False, True)]
    assert [r.name for r in TriggerResult] == ["CONTINUE", "FIRE_AND_PURGE", "FIRE", "PURGE"]


def test_event_time_trigger():
    t = EventTimeTrigger.create()
    window = TimeWindow(0, 5000)
    ctx = FakeTriggerContext(window, watermark=1000)
    assert t.on_element("x", 100, window, ctx) is TriggerResult.CONTINUE
    assert ctx.event_timers == [4999]

    late = FakeTriggerContext(window, watermark=4999)
    assert t.on_element("x", 100, window, late) is TriggerResult.FIRE
    assert late.event_timers == []

    assert t.on_event_time(4999, window, ctx) is TriggerResult.FIRE
    assert t.on_event_time(3000, window, ctx) is TriggerResult.CONTINUE
    assert t.on_processing_time(4999, window, ctx) is TriggerResult.CONTINUE

    merged = TimeWindow(0, 8000)
    on_merge = FakeTriggerContext(merged, watermark=2000)
    t.on_merge(merged, on_merge)
    assert on_merge.event_timers == [7999]
    passed = FakeTriggerContext(merged, watermark=7999)
    t.on_merge(merged, passed)
    assert passed.event_timers == []

    t.clear(window, ctx)
    assert ctx.deleted_event_timers == [4999]
    assert t.can_merge()


def test_processing_time_trigger():
    t = ProcessingTimeTrigger.create()
    window = TimeWindow(0, 5000)
    ctx = FakeTriggerContext(window, processing_time=10)
    assert t.on_element("x", None, window, ctx) is TriggerResult.CONTINUE
    assert ctx.processing_timers == [4999]
    assert t.on_processing_time(4999, window, ctx) is TriggerResult.FIRE
    assert t.on_event_time(4999, window, ctx) is TriggerResult.CONTINUE
    t.on_merge(TimeWindow(0, 8000), FakeTriggerContext(window, processing_time=9000))
    t.clear(window, ctx)
    assert ctx.deleted_processing_timers == [4999]


def test_count_trigger_fires_every_n():
    t = CountTrigger.of(3)
    window = GlobalWindow.get()
    ctx = FakeTriggerContext(window)
    results = [t.on_element(i, None, window, ctx) for i in range(7)]
    C, F = TriggerResult.CONTINUE, TriggerResult.FIRE
    assert results == [C, C, F, C, C, F, C]
    assert ctx.value("count") == 1
    t.clear(window, ctx)
    assert ctx.value("count") is None


def test_count_trigger_merges_counts():
    t = CountTrigger.of(3)
    a, b, merged = TimeWindow(0, 10), TimeWindow(5, 15), TimeWindow(0, 15)
    ctx = FakeTriggerContext(a)
    t.on_element("x", 1, a, ctx)
    ctx.window = b
    t.on_element("y", 6, b, ctx)
    ctx.window, ctx.merged_windows = merged, [a, b]
    t.on_merge(merged, ctx)
    assert ctx.value("count") == 2
    assert t.on_element("z", 7, merged, ctx) is TriggerResult.FIRE


def test_purging_trigger_turns_fire_into_fire_and_purge():
    t = PurgingTrigger.of(CountTrigger.of(2))
    window = GlobalWindow.get()
    ctx = FakeTriggerContext(window)
    C, FP = TriggerResult.CONTINUE, TriggerResult.FIRE_AND_PURGE
    assert [t.on_element(i, None, window, ctx) for i in range(4)] == [C, FP, C, FP]

    e = PurgingTrigger.of(EventTimeTrigger.create())
    w = TimeWindow(0, 5000)
    assert e.on_event_time(4999, w, FakeTriggerContext(w)) is FP
    assert e.on_event_time(10, w, FakeTriggerContext(w)) is C
    assert e.can_merge()
    assert not PurgingTrigger.of(NeverTrigger()).can_merge()


def test_continuous_event_time_trigger():
    t = ContinuousEventTimeTrigger.of(1000)
    window = TimeWindow(0, 5000)
    ctx = FakeTriggerContext(window, watermark=0)
    assert t.on_element("x", 1500, window, ctx) is TriggerResult.CONTINUE
    assert ctx.event_timers == [4999, 2000]
    assert ctx.value("fire-time") == 2000
    # A second element does not move the pending fire time.
    assert t.on_element("y", 1700, window, ctx) is TriggerResult.CONTINUE
    assert ctx.event_timers == [4999, 2000, 4999]

    assert t.on_event_time(2500, window, ctx) is TriggerResult.CONTINUE
    assert t.on_event_time(2000, window, ctx) is TriggerResult.FIRE
    assert ctx.value("fire-time") == 3000
    assert ctx.event_timers[-1] == 3000
    assert t.on_event_time(4999, window, ctx) is TriggerResult.FIRE

    t.clear(window, ctx)
    assert ctx.deleted_event_timers == [3000]
    assert ctx.value("fire-time") is None

    late = FakeTriggerContext(window, watermark=5000)
    assert t.on_element("z", 100, window, late) is TriggerResult.FIRE


def test_continuous_processing_time_trigger_caps_at_window_end():
    t = ContinuousProcessingTimeTrigger.of(1000)
    window = TimeWindow(0, 2500)
    ctx = FakeTriggerContext(window, processing_time=1234)
    assert t.on_element("x", None, window, ctx) is TriggerResult.CONTINUE
    assert ctx.processing_timers == [2000]
    assert t.on_processing_time(2000, window, ctx) is TriggerResult.FIRE
    assert ctx.processing_timers == [2000, 2499]
    assert t.on_processing_time(2200, window, ctx) is TriggerResult.CONTINUE


def test_never_trigger():
    t = NeverTrigger()
    w = GlobalWindow.get()
    ctx = FakeTriggerContext(w)
    assert t.on_element("x", 1, w, ctx) is TriggerResult.CONTINUE
    assert t.on_event_time(MAX_LONG_VALUE, w, ctx) is TriggerResult.CONTINUE
    assert t.on_processing_time(1, w, ctx) is TriggerResult.CONTINUE


# ----------------------------------------------------------------- evictors


def test_count_evictor_before_and_after():
    elements = [tv(i, i) for i in range(5)]
    e = CountEvictor.of(2)
    e.evict_after(elements, 5, GlobalWindow.get(), None)
    assert len(elements) == 5
    e.evict_before(elements, 5, GlobalWindow.get(), None)
    assert elements == [tv(3, 3), tv(4, 4)]

    after = CountEvictor.of(2, do_evict_after=True)
    elements = [tv("a"), tv("b"), tv("c")]
    after.evict_before(elements, 3, GlobalWindow.get(), None)
    assert len(elements) == 3
    after.evict_after(elements, 3, GlobalWindow.get(), None)
    assert elements == [tv("b"), tv("c")]

    small = [tv("a")]
    e.evict_before(small, 1, GlobalWindow.get(), None)
    assert small == [tv("a")]


def test_time_evictor_keeps_recent():
    elements = [tv("a", 1500), tv("b", 100), tv("c", 2000), tv("d", 1000), tv("e", 1100)]
    TimeEvictor.of(1000).evict_before(elements, 5, TimeWindow(0, 3000), None)
    assert elements == [tv("a", 1500), tv("c", 2000), tv("e", 1100)]

    untimed = [tv("a"), tv("b")]
    TimeEvictor.of(1000).evict_before(untimed, 2, GlobalWindow.get(), None)
    assert untimed == [tv("a"), tv("b")]


def test_delta_evictor():
    elements = [tv(v) for v in [1, 10, 12, 14, 15]]
    DeltaEvictor.of(5.0, lambda old, new: abs(new - old)).evict_before(
        elements, 5, GlobalWindow.get(), None)
    assert [e.value for e in elements] == [12, 14, 15]

    class Delta:
        def get_delta(self, old, new):
            return abs(new - old)

    elements = [tv(v) for v in [1, 10, 12]]
    after = DeltaEvictor.of(3, Delta(), do_evict_after=True)
    after.evict_before(elements, 3, GlobalWindow.get(), None)
    assert len(elements) == 3
    after.evict_after(elements, 3, GlobalWindow.get(), None)
    assert [e.value for e in elements] == [10, 12]


# ----------------------------------------------------------------- strings and errors


def test_flink_to_strings():
    gap = SessionWindowTimeGapExtractor
    assert str(TumblingEventTimeWindows.of(5000)) == "TumblingEventTimeWindows(5000)"
    assert repr(TumblingEventTimeWindows.of(5000, 100)) == "TumblingEventTimeWindows(5000)"
    assert str(TumblingProcessingTimeWindows.of(5000)) == "TumblingProcessingTimeWindows(5000)"
    assert str(SlidingEventTimeWindows.of(10000, 5000)) == "SlidingEventTimeWindows(10000, 5000)"
    assert str(SlidingProcessingTimeWindows.of(10000, 5000)) == "SlidingProcessingTimeWindows(10000, 5000)"
    assert str(EventTimeSessionWindows.with_gap(3000)) == "EventTimeSessionWindows(3000)"
    assert str(ProcessingTimeSessionWindows.with_gap(3000)) == "ProcessingTimeSessionWindows(3000)"
    assert str(EventTimeSessionWindows.with_dynamic_gap(gap)) == "DynamicEventTimeSessionWindows()"
    assert (str(ProcessingTimeSessionWindows.with_dynamic_gap(gap))
            == "DynamicProcessingTimeSessionWindows()")
    assert str(GlobalWindows.create()) == "GlobalWindows()"
    assert str(CountTumblingWindowAssigner.of(3)) == "CountTumblingWindowAssigner(3)"
    assert str(CountSlidingWindowAssigner.of(4, 2)) == "CountSlidingWindowAssigner(4, 2)"

    assert str(EventTimeTrigger.create()) == "EventTimeTrigger()"
    assert str(ProcessingTimeTrigger.create()) == "ProcessingTimeTrigger()"
    assert str(CountTrigger.of(3)) == "CountTrigger(3)"
    assert str(PurgingTrigger.of(CountTrigger.of(3))) == "PurgingTrigger(CountTrigger(3))"
    assert repr(PurgingTrigger.of(CountTrigger.of(3))) == "PurgingTrigger(CountTrigger(3))"
    assert str(ContinuousEventTimeTrigger.of(1000)) == "ContinuousEventTimeTrigger(1000)"
    assert str(ContinuousProcessingTimeTrigger.of(1000)) == "ContinuousProcessingTimeTrigger(1000)"
    assert str(NeverTrigger()) == "NeverTrigger()"

    assert str(CountEvictor.of(2)) == "CountEvictor(2)"
    assert str(TimeEvictor.of(5000)) == "TimeEvictor(5000)"
    assert str(DeltaEvictor.of(1, abs)).endswith(", 1.0)")


@pytest.mark.parametrize("assigner", [
    TumblingEventTimeWindows.of(5000),
    SlidingEventTimeWindows.of(10000, 5000),
    EventTimeSessionWindows.with_gap(3000),
    EventTimeSessionWindows.with_dynamic_gap(lambda e: 10),
], ids=str)
@pytest.mark.parametrize("timestamp", [None, MIN_LONG_VALUE])
def test_event_time_assigners_reject_missing_timestamp(assigner, timestamp):
    with pytest.raises(RuntimeError, match=re.escape(NO_TIMESTAMP)):
        assigner.assign_windows("x", timestamp, FakeAssignerContext())


TUMBLING = "TumblingEventTimeWindows parameters must satisfy abs(offset) < size"
SLIDING = "SlidingEventTimeWindows parameters must satisfy abs(offset) < slide and size > 0"


@pytest.mark.parametrize("build, message", [
    (lambda: TumblingEventTimeWindows.of(0), TUMBLING),
    (lambda: TumblingEventTimeWindows.of(-5), TUMBLING),
    (lambda: TumblingEventTimeWindows.of(5000, 5000), TUMBLING),
    (lambda: TumblingEventTimeWindows.of(5000, -5000), TUMBLING),
    (lambda: TumblingProcessingTimeWindows.of(0),
     "TumblingProcessingTimeWindows parameters must satisfy abs(offset) < size"),
    (lambda: SlidingEventTimeWindows.of(0, 1000), SLIDING),
    (lambda: SlidingEventTimeWindows.of(1000, 0), SLIDING),
    (lambda: SlidingEventTimeWindows.of(10000, 5000, 5000), SLIDING),
    (lambda: SlidingProcessingTimeWindows.of(1000, -1),
     "SlidingProcessingTimeWindows parameters must satisfy abs(offset) < slide and size > 0"),
    (lambda: EventTimeSessionWindows.with_gap(0), "EventTimeSessionWindows parameters must satisfy 0 < size"),
    (lambda: ProcessingTimeSessionWindows.with_gap(-1),
     "ProcessingTimeSessionWindows parameters must satisfy 0 < size"),
    (lambda: CountTrigger.of(0), "CountTrigger count must be a positive int"),
    (lambda: ContinuousEventTimeTrigger.of(0), "ContinuousEventTimeTrigger interval must be > 0"),
    (lambda: CountTumblingWindowAssigner.of(0), "window_size must be a positive int"),
    (lambda: CountSlidingWindowAssigner.of(2, 0), "window_slide must be a positive int"),
    (lambda: CountEvictor.of(-1), "CountEvictor max_count must be an int >= 0"),
])
def test_invalid_parameters(build, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build()


def test_unused_assigners_and_triggers_pickle():
    for obj in [TumblingEventTimeWindows.of(5000, 1000), SlidingEventTimeWindows.of(10, 5),
                EventTimeSessionWindows.with_gap(3), GlobalWindows.create(),
                CountTumblingWindowAssigner.of(3), PurgingTrigger.of(CountTrigger.of(3)),
                ContinuousEventTimeTrigger.of(1000), CountEvictor.of(2), TimeEvictor.of(10)]:
        assert str(pickle.loads(pickle.dumps(obj))) == str(obj)
