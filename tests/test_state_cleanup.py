"""A key's state is gone once its windows and timers are (issue 50, item 1).

Every stateful operator kind runs here epoch by epoch on both backends, each epoch ending in a
checkpoint (the first a full snapshot, the others increments) written to state files by the
task's own state manager. Each epoch's task either keeps its backend (a kept heap or RocksDB
store, as a reused PySpark worker does) or rebuilds it from the checkpoint's files (full
snapshot, then the increments with their deletions), as a new worker does. At the end the
operator's full snapshot holds nothing but what Flink keeps per key for good (a count window's
counter, a rolling aggregate), and neither does the state rebuilt from the checkpoint's chain:
a deletion is written as a tombstone, so a restore does not bring it back. A real Spark job per
backend checks the same through ``sluice state``'s reader.
"""
import dataclasses

import pytest

from runtime.cep import CEP, Pattern, PatternProcessFunction, TimedOutPartialMatchHandler
from runtime.checkpoint.savepoint import read_state
from runtime.checkpoint.storage import CheckpointStorage
from runtime.common import Time, Types, WatermarkStrategy
from runtime.common.watermark_strategy import MAX_WATERMARK
from runtime.datastream import (
    AggregateFunction, KeyedBroadcastProcessFunction, KeyedCoProcessFunction, KeyedProcessFunction, OutputTag,
    ProcessWindowFunction, StreamExecutionEnvironment)
from runtime.datastream.state import MapStateDescriptor, ValueStateDescriptor
from runtime.datastream.window import (
    ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger, CountEvictor, CountTrigger,
    DynamicEventTimeSessionWindows, EventTimeSessionWindows, GlobalWindows, ProcessingTimeSessionWindows,
    PurgingTrigger, SlidingEventTimeWindows, SlidingProcessingTimeWindows, TumblingEventTimeWindows,
    TumblingProcessingTimeWindows)
from runtime.graph.job_graph import create_job_graph
from runtime.state import kept_stores
from runtime.state.snapshot_format import TIMER_PREFIX, decode_keys
from runtime.state.snapshot_reader import read_state_file
from runtime.task.deployment import Acknowledgement, RestoredState, TaskDeploymentDescriptor
from runtime.task.operators import UserCodeException
from runtime.task.stream_task import StreamTask
from runtime_env import job_env

EVENT = Types.TUPLE([Types.STRING(), Types.LONG()])
T0 = 1_700_000_000_000      # processing time of the first epoch


class _Recorder:
    """The head operator's output: what it emits, and nothing downstream."""

    def __init__(self):
        self.records: list = []

    def collect(self, values, timestamps) -> None:
        self.records.extend(values)

    def collect_side(self, tag_id, values, timestamps) -> None:
        self.records.extend((tag_id, v) for v in values)

    def emit_watermark(self, watermark) -> None:
        pass

    def emit_idle(self) -> None:
        pass


@dataclasses.dataclass
class Epoch:
    """What one epoch brings: records (value, timestamp), then a watermark; at ``now``."""

    records: list = dataclasses.field(default_factory=list)
    watermark: int = None
    now: int = T0
    end: bool = False       # the bounded input ends: every processing-time timer fires


class KeyedEpochs:
    """The keyed operator of a job (``build(keyed stream) -> stream``) run epoch by epoch in this
    process, each epoch a task of its own ending in a checkpoint, as the driver deploys them."""

    kept_paths: set = set()     # of the backends a worker may keep

    def __init__(self, build, backend: str, folder, kept: bool):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.get_configuration().set_string("state.backend.type", backend)
        env.set_parallelism(1)
        build(env.from_collection([("a", 0)], type_info=EVENT).key_by(lambda e: e[0], key_type=Types.STRING())).print()
        self.job_graph = create_job_graph(env.get_stream_graph("cleanup"))
        self.vertex = [v for v in self.job_graph.vertices if v.is_keyed][-1]     # the last: build's
        self.folder, self.kept = folder, kept
        self.epoch, self.watermark = 0, None
        self.chain: list = []           # the checkpoint's state files: a full snapshot, then increments
        self.checksums: dict = {}
        self.out: list = []
        self.live_state = None          # the last task's full snapshot of its operator

    def _task(self, epoch: int, now: int, incremental: bool, snapshot: bool = True) -> StreamTask:
        op_id = self.vertex.head.operator_id
        restored = RestoredState({op_id: tuple(self.chain)}, {op_id: 1}, dict(self.checksums)) if self.chain else None
        tdd = TaskDeploymentDescriptor(
            self.vertex.id, 0, 0, epoch=epoch or 0, processing_time=now, end_of_input=False, restored_state=restored,
            snapshot_dir=str(self.folder / f"checkpoint-{epoch}" / "{table}") if snapshot else None,
            state_version=None if epoch is None else f"v{epoch}",
            next_state_version=None if epoch is None else f"v{epoch + 1}",
            state_dir=str(self.folder / ("local" if epoch is not None else "rebuilt")),
            incremental=frozenset({op_id}) if incremental else frozenset())
        task = StreamTask(self.job_graph, tdd, {})
        restored = Acknowledgement(self.vertex.id, 0)
        task.state.restore(task.chain.all_operators, restored)
        head = task.head
        KeyedEpochs.kept_paths.add(getattr(head.backend, "path", None))
        if self.kept and epoch and head.keeps_local_state():
            assert (restored.store_hits, restored.store_misses) == (1, 0), "the kept backend was not used"
        head.output = _Recorder()
        if self.watermark is not None:
            head.current_watermark = self.watermark
            head.input_watermarks = [self.watermark, self.watermark]
            if head.timers is not None:
                head.timers.current_watermark = self.watermark
        head.open()
        return task

    def run(self, epoch: Epoch) -> list:
        """One epoch; what the operator emitted."""
        task = self._task(self.epoch, epoch.now, incremental=self.epoch > 0)
        head = task.head
        incremental = task.state.incremental(head)
        try:
            head.advance_processing_time(epoch.now)
            if epoch.records:
                head.process_batch([v for v, _ in epoch.records], [t for _, t in epoch.records], 1)
            if epoch.watermark is not None:
                for index in (1, 2) if head.spec.two_input else (1,):      # both inputs of a connect
                    head.process_watermark(epoch.watermark, index)
                self.watermark = head.current_watermark
            if epoch.end:
                head.advance_processing_time(MAX_WATERMARK)
            head.close()
            ack = Acknowledgement(self.vertex.id, 0)
            task.state.snapshot([head], ack)
            self.live_state = self._rows(head.snapshot())
        finally:
            task.chain.dispose()
        # As the driver's StateChains: a whole snapshot replaces the chain (none written: no
        # state), an increment extends it.
        paths = [f.path for f in ack.state_files]
        self.chain = self.chain + paths if incremental else paths
        self.checksums.update((f.path, f.checksum) for f in ack.state_files)
        self.epoch += 1
        self.out.extend(head.output.records)
        return head.output.records

    def restored_state(self) -> dict:
        """The operator's state as a task rebuilds it from the checkpoint's files (a store of its
        own: the epochs' kept backend stays as it is)."""
        task = self._task(None, T0, incremental=False, snapshot=False)
        try:
            return self._rows(task.head.snapshot())
        finally:
            task.chain.dispose()

    @staticmethod
    def _rows(snapshot: dict) -> dict:
        return {"keyed": sorted((name, str(ns), key, value) for _, name, ns, key, value in snapshot.get("keyed", ())),
                "timers": sorted((domain, t, key, str(ns)) for _, domain, t, key, ns in snapshot.get("timers", ()))}

    def last_increment(self) -> list:
        """(state, key, deleted) of the keyed rows the last checkpoint's increment wrote."""
        table = read_state_file(self.chain[-1])
        assert "deleted" in table.column_names, "the last snapshot was a full one"
        return sorted(zip(table.column("state_name").to_pylist(), decode_keys(table),
                          table.column("deleted").fill_null(False).to_pylist()))


@pytest.fixture(params=["hashmap", "rocksdb"])
def backend(request):
    return request.param


@pytest.fixture
def keeping(monkeypatch):
    """Workers that keep their backends between tasks (a reused PySpark worker's), closed after."""
    monkeypatch.setattr(kept_stores, "keeps_stores", lambda: True)
    yield True
    while KeyedEpochs.kept_paths:      # the stores this test's runs left open
        store = kept_stores.take(KeyedEpochs.kept_paths.pop())
        if store is not None:
            store.close()


@pytest.fixture(params=["kept", "rebuilt"])
def kept(request):
    """Whether each epoch's task finds the backend its last task kept or rebuilds it from the
    checkpoint's files (full snapshot, then increments), as a new worker does."""
    return request.getfixturevalue("keeping") if request.param == "kept" else False


def run_epochs(tmp_path, backend, kept, build, epochs) -> KeyedEpochs:
    run = KeyedEpochs(build, backend, tmp_path, kept)
    for epoch in epochs:
        run.run(epoch)
    return run


NOTHING = {"keyed": [], "timers": []}


def assert_no_state(run: KeyedEpochs, kept_for_good=()) -> None:
    """Nothing left in the live operator's snapshot nor in the state rebuilt from the
    checkpoint, but the states named in ``kept_for_good``."""
    def without(rows):
        return {"keyed": [r for r in rows["keyed"] if r[0] not in kept_for_good], "timers": rows["timers"]}
    assert without(run.live_state) == NOTHING
    assert without(run.restored_state()) == NOTHING


# ---- session windows (the reproduction) ---------------------------------------------

def _sum(a, b):
    return a[0], a[1] + b[1]


def test_a_session_windows_merging_set_goes_with_its_last_window(tmp_path, backend, kept):
    """a@0, a@1000, b@100000, a record an epoch: each session's merging-window-set entry is
    removed once its window fires, in the live state and in the checkpoint's chain."""
    run = KeyedEpochs(lambda s: s.window(EventTimeSessionWindows.with_gap(Time.seconds(30))).reduce(_sum),
                      backend, tmp_path, kept)
    run.run(Epoch([(("a", 1), 0)], watermark=0))
    run.run(Epoch([(("a", 2), 1000)], watermark=1000))
    live = run.live_state["keyed"]
    assert [r[:3] for r in live if r[0] == "merging-window-set"] == [("merging-window-set", "None", "a")]
    run.run(Epoch([(("b", 5), 100_000)], watermark=100_000))       # a's session (0, 31000) fires
    assert run.out == [("a", 3)]
    assert [r[2] for r in run.live_state["keyed"]] == ["b", "b"]   # b's merging set and contents
    # The increment deletes a's rows (a tombstone each, not an empty set), and writes b's.
    assert [r for r in run.last_increment() if not r[0].startswith(TIMER_PREFIX)] == [
        ("merging-window-set", "a", True), ("merging-window-set", "b", False),
        ("window-contents", "a", True), ("window-contents", "b", False)]
    # A late record of a (its session is past the watermark) leaves a without a row too.
    assert run.run(Epoch([(("a", 9), 2000)], watermark=100_000)) == []
    assert [r[2] for r in run.live_state["keyed"]] == ["b", "b"]
    run.run(Epoch([], watermark=MAX_WATERMARK))
    assert run.out == [("a", 3), ("b", 5)]
    assert [r for r in run.last_increment() if not r[0].startswith(TIMER_PREFIX)] == [
        ("merging-window-set", "b", True), ("window-contents", "b", True)]
    assert_no_state(run)


# ---- every window kind: its contents, trigger state and timers go when the window does ------

class Sizes(ProcessWindowFunction):
    """Emits (key, window start, elements); with ``per_window``, keeps a count per window in window
    state, which its ``clear`` removes when the window is cleaned up (Flink calls it then)."""

    def __init__(self, per_window: bool = True):
        self.per_window = per_window

    def process(self, key, context, elements):
        if self.per_window:
            fired = context.window_state().get_state(FIRED)
            fired.update((fired.value() or 0) + 1)
        yield key, getattr(context.window(), "start", None), sorted(v for _, v in elements)

    def clear(self, context):
        if self.per_window:
            context.window_state().get_state(FIRED).clear()


FIRED = ValueStateDescriptor("fired", Types.LONG())


class Total(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + value[1]

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


def _tumbling_event_time(s):
    return s.window(TumblingEventTimeWindows.of(Time.seconds(10)))


def _processing_time(assigner):
    return lambda s: s.window(assigner).reduce(_sum)


# Records of keys a and b in windows of 10 s, the watermark passing them epoch by epoch.
IN_EVENT_TIME = [Epoch([(("a", 1), 1000), (("b", 2), 2000)], watermark=2000),
                 Epoch([(("a", 3), 11_000), (("a", 4), 12_000)], watermark=12_000),
                 Epoch([(("b", 5), 13_000)], watermark=13_000),
                 Epoch([], watermark=MAX_WATERMARK)]
# The same at processing times T0 + 1 s, + 11 s..., the last epoch's end of input firing the rest.
IN_PROCESSING_TIME = [Epoch([(("a", 1), None), (("b", 2), None)], now=T0 + 1000),
                      Epoch([(("a", 3), None), (("a", 4), None)], now=T0 + 11_000),
                      Epoch([(("b", 5), None)], now=T0 + 13_000),
                      Epoch([], now=T0 + 14_000, end=True)]
# Two elements of each key's count windows an epoch apart, every window full at the end.
IN_COUNTS = IN_PROCESSING_TIME[:3] + [Epoch([(("a", 6), None)], now=T0 + 14_000, end=True)]
# Every 4 s of a window and at its end: at 4, 8 and 9.999 s, then at 12, 16 and 19.999 s (b's from 16).
CONTINUOUS = [("a", 1)] * 3 + [("a", 7)] * 3 + [("b", 2)] * 3 + [("b", 5)] * 2

CASES = {
    # name: (build, epochs, what it emits (sorted), states Flink keeps per key for good)
    "tumbling event time, reduce": (
        lambda s: _tumbling_event_time(s).reduce(_sum), IN_EVENT_TIME,
        [("a", 1), ("a", 7), ("b", 2), ("b", 5)], ()),
    "tumbling event time, built-in sum (local-global)": (
        lambda s: _tumbling_event_time(s).sum(1), IN_EVENT_TIME,
        [("a", 1), ("a", 7), ("b", 2), ("b", 5)], ()),
    "sliding event time, process with window state": (
        lambda s: s.window(SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5))).process(Sizes()),
        IN_EVENT_TIME,
        [("a", -5000, [1]), ("a", 0, [1]), ("a", 5000, [3, 4]), ("a", 10_000, [3, 4]), ("b", -5000, [2]),
         ("b", 0, [2]), ("b", 5000, [5]), ("b", 10_000, [5])], ()),
    "tumbling event time, aggregate with evictor": (
        lambda s: _tumbling_event_time(s).evictor(CountEvictor.of(1)).reduce(_sum), IN_EVENT_TIME,
        [("a", 1), ("a", 4), ("b", 2), ("b", 5)], ()),
    "tumbling event time, count trigger": (
        lambda s: _tumbling_event_time(s).trigger(CountTrigger.of(2)).reduce(_sum), IN_EVENT_TIME,
        [("a", 7)], ()),
    "tumbling event time, continuous event-time trigger": (
        lambda s: _tumbling_event_time(s).trigger(ContinuousEventTimeTrigger.of(Time.seconds(4))).reduce(_sum),
        IN_EVENT_TIME, CONTINUOUS, ()),
    "event-time sessions, count trigger": (
        lambda s: s.window(EventTimeSessionWindows.with_gap(Time.seconds(5))).trigger(CountTrigger.of(2)).reduce(_sum),
        IN_EVENT_TIME, [("a", 7)], ()),
    "event-time sessions, process": (
        lambda s: s.window(EventTimeSessionWindows.with_gap(Time.seconds(5))).process(Sizes(per_window=False)),
        IN_EVENT_TIME,
        [("a", 1000, [1]), ("a", 11_000, [3, 4]), ("b", 2000, [2]), ("b", 13_000, [5])], ()),
    "tumbling event time over the whole stream (window_all)": (
        lambda s: s.map(lambda e: e, output_type=EVENT).window_all(TumblingEventTimeWindows.of(Time.seconds(10)))
        .reduce(_sum), IN_EVENT_TIME, [("a", 3), ("a", 12)], ()),
    "dynamic event-time sessions, aggregate": (
        lambda s: s.window(DynamicEventTimeSessionWindows.with_dynamic_gap(lambda e: 5000)).aggregate(Total()),
        IN_EVENT_TIME, [1, 2, 5, 7], ()),
    "tumbling processing time, continuous processing-time trigger": (
        lambda s: s.window(TumblingProcessingTimeWindows.of(Time.seconds(10)))
        .trigger(ContinuousProcessingTimeTrigger.of(Time.seconds(4))).reduce(_sum), IN_PROCESSING_TIME,
        CONTINUOUS, ()),
    "tumbling processing time": (
        _processing_time(TumblingProcessingTimeWindows.of(Time.seconds(10))), IN_PROCESSING_TIME,
        [("a", 1), ("a", 7), ("b", 2), ("b", 5)], ()),
    "sliding processing time": (
        _processing_time(SlidingProcessingTimeWindows.of(Time.seconds(10), Time.seconds(5))), IN_PROCESSING_TIME,
        [("a", 1), ("a", 1), ("a", 7), ("a", 7), ("b", 2), ("b", 2), ("b", 5), ("b", 5)], ()),
    "processing-time sessions": (
        _processing_time(ProcessingTimeSessionWindows.with_gap(Time.seconds(5))), IN_PROCESSING_TIME,
        [("a", 1), ("a", 7), ("b", 2), ("b", 5)], ()),
    # PyFlink's count windows keep each key's element count for good (its assigner's ValueState).
    "count windows": (
        lambda s: s.count_window(2).reduce(_sum), IN_COUNTS, [("a", 4), ("a", 10), ("b", 7)],
        ("tumble-count-assigner",)),
    "global windows, purging count trigger (Flink's countWindow)": (
        lambda s: s.window(GlobalWindows.create()).trigger(PurgingTrigger.of(CountTrigger.of(2))).reduce(_sum),
        IN_COUNTS, [("a", 4), ("a", 10), ("b", 7)], ()),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_windows_state_and_timers_go_once_it_has_fired_and_is_cleaned_up(tmp_path, backend, keeping, case):
    """Kept backends (the state is rebuilt from the checkpoint at the end): the session and CEP
    tests rebuild it every epoch too."""
    build, epochs, emitted, kept_for_good = CASES[case]
    run = run_epochs(tmp_path, backend, keeping, build, epochs)
    assert sorted(run.out) == emitted
    assert_no_state(run, kept_for_good)


def test_per_window_state_of_merging_windows_is_refused_as_in_flink(tmp_path):
    """A session merged into another would keep its per-window state for good: Flink's
    MergingWindowStateStore refuses it, and so does Sluice, naming the operator and the state."""
    run = KeyedEpochs(lambda s: s.window(EventTimeSessionWindows.with_gap(Time.seconds(5))).process(Sizes()),
                      "hashmap", tmp_path, kept=False)
    with pytest.raises(UserCodeException, match=r"per-window state is not allowed when using merging windows "
                                                 r"\('fired' of context.window_state\(\) with EventTimeSessionWindows\)"):
        run.run(Epoch(IN_EVENT_TIME[0].records, watermark=MAX_WATERMARK))


def test_allowed_lateness_keeps_a_windows_state_until_its_end_plus_the_lateness(tmp_path, backend, kept):
    run = KeyedEpochs(lambda s: _tumbling_event_time(s).allowed_lateness(Time.seconds(5)).reduce(_sum),
                      backend, tmp_path, kept)
    run.run(Epoch([(("a", 1), 1000)], watermark=1000))
    assert run.run(Epoch([], watermark=10_000)) == [("a", 1)]       # fired, kept for late records
    window = "TimeWindow(start=0, end=10000)"
    assert run.live_state == {"keyed": [("window-contents", window, "a", ("a", 1))],
                              "timers": [("event", 14_999, "a", window)]}
    assert run.run(Epoch([(("a", 2), 2000)], watermark=12_000)) == [("a", 3)]    # late, within the lateness
    assert run.live_state["timers"] == [("event", 14_999, "a", window)]
    run.run(Epoch([], watermark=15_000))                                   # end + lateness passed
    assert_no_state(run)
    assert run.run(Epoch([(("a", 4), 3000)], watermark=16_000)) == []      # too late: dropped, not kept
    assert_no_state(run)


class CountUntilTimer(KeyedProcessFunction):
    """Counts a key's records until a timer 5 s after its first; the timer emits the count and
    clears it (``state.clear()`` in ``on_timer``)."""

    def __init__(self, event_time: bool):
        self.event_time = event_time

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        if self.count.value() is None:
            timers = ctx.timer_service()
            if self.event_time:
                timers.register_event_time_timer(ctx.timestamp() + 5000)
            else:
                timers.register_processing_time_timer(timers.current_processing_time() + 5000)
        self.count.update((self.count.value() or 0) + value[1])

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), self.count.value()
        self.count.clear()


@pytest.mark.parametrize("event_time, emitted", [
    (True, [("a", 8), ("b", 2), ("b", 5)]),    # a's three records are in before its timer at 6 s fires
    (False, [("a", 1), ("a", 7), ("b", 2), ("b", 5)]),
], ids=["event time", "processing time"])
def test_a_keyed_process_functions_state_cleared_in_on_timer_leaves_no_row(tmp_path, backend, kept, event_time,
                                                                          emitted):
    epochs = IN_EVENT_TIME if event_time else IN_PROCESSING_TIME
    run = run_epochs(tmp_path, backend, kept, lambda s: s.process(CountUntilTimer(event_time)), epochs[:1])
    assert [r[:3] for r in run.live_state["keyed"]] == [("count", "None", "a"), ("count", "None", "b")]
    assert len(run.live_state["timers"]) == 2
    for epoch in epochs[1:]:
        run.run(epoch)
    assert sorted(run.out) == emitted
    assert_no_state(run)


class _Counting:
    """CountUntilTimer in event time, on the keyed side of a two-input function."""

    def open(self, runtime_context):
        self.counting = CountUntilTimer(event_time=True)
        self.counting.open(runtime_context)

    def on_timer(self, timestamp, ctx):
        return self.counting.on_timer(timestamp, ctx)


class CountBothUntilTimer(_Counting, KeyedCoProcessFunction):
    """Both connected keyed streams counted, the second's records tenfold."""

    def process_element1(self, value, ctx):
        self.counting.process_element(value, ctx)

    def process_element2(self, value, ctx):
        self.counting.process_element((value[0], value[1] * 10), ctx)


RULES = MapStateDescriptor("rules", Types.STRING(), Types.LONG())


class CountUntilTimerWithRules(_Counting, KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value[0], value[1])

    def process_element(self, value, ctx):
        self.counting.process_element(value, ctx)


TWO_INPUTS = {
    "KeyedCoProcessFunction": lambda s: s.connect(s).process(CountBothUntilTimer()),
    "KeyedBroadcastProcessFunction": lambda s: s.connect(
        s._env.from_collection([("x", 1)], type_info=EVENT).broadcast(RULES)).process(CountUntilTimerWithRules()),
}


@pytest.mark.parametrize("function", list(TWO_INPUTS))
def test_a_two_input_keyed_functions_state_cleared_in_on_timer_leaves_no_row(tmp_path, backend, kept, function):
    run = run_epochs(tmp_path, backend, kept, TWO_INPUTS[function], IN_EVENT_TIME)
    assert sorted(run.out) == [("a", 8), ("b", 2), ("b", 5)]
    assert_no_state(run)


class Matches(PatternProcessFunction, TimedOutPartialMatchHandler):
    """Pairs of a (kind 1) then b (kind 2) of a key; a partial match that times out goes to a side output."""

    def process_match(self, match, ctx):
        yield "match", [e[0] for e in match["a"] + match["b"]]

    def process_timed_out_match(self, match, ctx):
        ctx.output(TIMED_OUT, [e[0] for e in match["a"]])


TIMED_OUT = OutputTag("timed-out", Types.PICKLED_BYTE_ARRAY())


def _cep(event_time: bool):
    pattern = (Pattern.begin("a").where(lambda e: e[1] == 1).followed_by("b").where(lambda e: e[1] == 2)
               .within(Time.milliseconds(100)))
    return lambda s: (CEP.pattern(s, pattern) if event_time else CEP.pattern(s, pattern).in_processing_time()
                      ).process(Matches())


def test_ceps_partial_matches_go_when_they_complete_or_time_out(tmp_path, backend, kept):
    run = KeyedEpochs(_cep(event_time=True), backend, tmp_path, kept)
    run.run(Epoch([(("k1", 1), 10), (("k2", 1), 5), (("k3", 2), 7)], watermark=50))
    assert sorted(r[2] for r in run.live_state["keyed"]) == ["k1", "k2"]     # a partial match each
    assert run.run(Epoch([(("k1", 2), 60)], watermark=60)) == [("match", ["k1", "k1"])]
    assert run.run(Epoch([], watermark=200)) == [("timed-out", ["k2"])]
    assert_no_state(run)
    run.run(Epoch([(("k4", 1), 300)], watermark=250))       # waits for the watermark, in the checkpoint
    assert [r[:3] for r in run.live_state["keyed"]] == [("elementQueueState", "None", "k4")]
    assert run.live_state["timers"] == [("event", 300, "k4", "None")]
    assert run.run(Epoch([], watermark=MAX_WATERMARK)) == [("timed-out", ["k4"])]
    assert_no_state(run)


def test_ceps_partial_matches_in_processing_time_go_when_they_complete_or_time_out(tmp_path, backend, kept):
    run = KeyedEpochs(_cep(event_time=False), backend, tmp_path, kept)
    run.run(Epoch([(("k1", 1), None)], now=T0))
    assert run.run(Epoch([(("k1", 2), None), (("k2", 1), None)], now=T0 + 10)) == [("match", ["k1", "k1"])]
    assert [r[2] for r in run.live_state["keyed"]] == ["k2"]
    assert run.run(Epoch([], now=T0 + 20, end=True)) == [("timed-out", ["k2"])]
    assert_no_state(run)


def test_a_rolling_reduce_keeps_its_value_per_key_as_flink_does(tmp_path, backend, kept):
    run = run_epochs(tmp_path, backend, kept, lambda s: s.reduce(_sum), IN_EVENT_TIME)
    assert [r[2:] for r in run.live_state["keyed"]] == [("a", ("a", 8)), ("b", ("b", 7))]
    assert run.restored_state() == run.live_state


# ---- a real Spark job per backend, read as `sluice state` reads it ---------------------------

@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_jobs_last_checkpoint_holds_no_state_of_finished_sessions_timers_or_matches(spark, tmp_path, backend):
    """The issue's reproduction (a@0, a@1000, b@100000, 30 s sessions, a record an epoch, a checkpoint
    each epoch), with a process function and CEP on the same keys: at the end of input every window,
    timer and partial match is done, and the last checkpoint holds no row of any of them."""
    env = job_env(tmp_path, epoch__max_records_per_split=1)
    env.get_configuration().set_string("state.backend.type", backend)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[1])
    events = (env.from_collection([("a", 0), ("a", 1000), ("b", 100_000)], type_info=EVENT)
              .assign_timestamps_and_watermarks(strategy))
    keyed = events.key_by(lambda e: e[0], key_type=Types.STRING())
    sessions = (keyed.window(EventTimeSessionWindows.with_gap(Time.seconds(30)))
                .reduce(lambda x, y: (x[0], x[1] + y[1])).uid("sessions"))
    timers = keyed.process(CountUntilTimer(event_time=True)).uid("timers")
    starts = Pattern.begin("a").where(lambda e: e[0] == "a").followed_by("b").where(lambda e: e[0] == "b")
    matches = CEP.pattern(keyed, starts.within(Time.seconds(10))).process(Matches()).uid("cep")
    got = sorted(sessions.union(timers).union(matches).execute_and_collect("state cleanup"), key=str)
    assert got == [("a", 1000), ("a", 1000), ("b", 100_000), ("b", 100_000)]
    storage = CheckpointStorage(str(tmp_path / "warehouse" / "state-cleanup"))
    assert len(storage.checkpoints.history()) >= 3
    for uid in ("sessions", "timers", "cep"):
        assert read_state(storage, uid) == [], uid


def test_a_heap_drops_a_windows_dict_when_its_state_leaves_it_empty(tmp_path):
    """Between snapshots too: an epoch of many windows does not hold an empty dict per window."""
    from runtime.datastream.state import ListStateDescriptor
    from runtime.datastream.window import TimeWindow
    from state_helpers import keyed_backend
    backend = keyed_backend("hashmap", tmp_path)
    contents = backend.get_partitioned_state(ListStateDescriptor("contents", Types.LONG()))
    count = backend.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    for start in range(0, 100_000, 1000):
        window = TimeWindow(start, start + 1000)
        for key in ("a", "b"):
            backend.set_current_key(key)
            contents.set_current_namespace(window)
            contents.add(start)
            count.set_current_namespace(window)
            assert count.value() is None        # only read
        if start >= 2000:                       # the window before the last fires and is purged
            for key in ("a", "b"):
                backend.set_current_key(key)
                contents.set_current_namespace(TimeWindow(start - 2000, start - 1000))
                assert contents.get() == [start - 2000]
                contents.clear()
    contents.set_current_namespace(None)
    count.set_current_namespace(None)
    assert sorted(str(ns) for ns in backend.tables["contents"] if ns is not None) == [
        "TimeWindow(start=98000, end=99000)", "TimeWindow(start=99000, end=100000)"]
    assert list(backend.tables["count"]) == [None]
