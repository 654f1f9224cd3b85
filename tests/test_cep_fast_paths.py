"""CEP's fast paths give what its general paths give, without Spark.

- The NFA: a pattern whose conditions read the event alone runs on compiled edges (one filter
  per state, the start state's test without the edge search, the shared initial state); the same
  pattern with each condition reading the context too (``(e, ctx)``) takes the general search
  everywhere. Both must find the same matches and timeouts, in the same order.
- The operator: CepOperator keeps a batch's events in memory until a watermark releases them,
  releases a key's events at once and caches the NFA states of the epoch; the reference below
  is the per-event path it replaced, a KeyedProcessFunction keeping every event in the MapState
  with a timer and reading and writing the NFA state per event. Both must emit the same matches,
  timeouts and late events (the values carry the matches' ctx.timestamp()).

Patterns cover within-time, the skip strategies, looping, optional, greedy and times quantifiers,
NOT patterns, groups and until; inputs are seeded random sequences over a few keys, out of order.
"""
import pickle
import random

import pytest

from runtime.cep import AfterMatchSkipStrategy as Skip
from runtime.cep import CEP, Pattern, PatternProcessFunction, TimedOutPartialMatchHandler
from runtime.cep.nfa import compile_pattern
from runtime.common import Duration, Time, Types, WatermarkStrategy
from runtime.common.watermark_strategy import MAX_WATERMARK
from runtime.datastream import KeyedProcessFunction, OutputTag, TimeDomain
from runtime.datastream.state import MapStateDescriptor, ValueStateDescriptor
from runtime_env import job_env
from task_harness import collect_in_tasks


def is_(kind):
    return lambda e: e[1] == kind


def simple(f):
    return f


def reading_ctx(f):
    return lambda e, ctx: f(e)


# Each builds a pattern with ``cond`` wrapping every condition.
PATTERNS = {
    "next within": lambda cond: Pattern.begin("a").where(cond(is_("a"))).next("b").where(cond(is_("b")))
    .within(Time.milliseconds(15)),
    "loop, skip past last": lambda cond: Pattern.begin("a", Skip.skip_past_last_event()).where(cond(is_("a")))
    .followed_by("b").where(cond(is_("b"))).one_or_more().followed_by("c").where(cond(is_("c")))
    .within(Time.milliseconds(40)),
    "greedy times, skip to next": lambda cond: Pattern.begin("a", Skip.skip_to_next()).where(cond(is_("a")))
    .times(1, 3).greedy().followed_by("c").where(cond(is_("c"))),
    "optional, skip to first": lambda cond: Pattern.begin("a", Skip.skip_to_first("c")).where(cond(is_("a")))
    .next("b").where(cond(is_("b"))).optional().followed_by("c").where(cond(is_("c")))
    .within(Time.milliseconds(30)),
    "any and combinations, skip to last": lambda cond: Pattern.begin("a", Skip.skip_to_last("b"))
    .where(cond(is_("a"))).followed_by_any("b").where(cond(is_("b"))).times_or_more(2).allow_combinations()
    .followed_by("c").where(cond(is_("c"))).within(Time.milliseconds(25)),
    "not next, not followed by": lambda cond: Pattern.begin("a").where(cond(is_("a"))).not_next("x")
    .where(cond(is_("x"))).followed_by("b").where(cond(is_("b"))).not_followed_by("y")
    .where(cond(lambda e: e[1] == "c" and e[2] % 2 == 0)).followed_by("c").where(cond(is_("c")))
    .within(Time.milliseconds(50)),
    "group, consecutive": lambda cond: Pattern.begin("s").where(cond(is_("a"))).followed_by(
        Pattern.begin("b").where(cond(is_("b"))).next("c").where(cond(is_("c")))).times(1, 2).consecutive()
    .within(Time.milliseconds(60)),
    "until, or": lambda cond: Pattern.begin("a").where(cond(is_("a"))).or_(cond(is_("c"))).one_or_more()
    .until(cond(is_("x"))).followed_by("b").where(cond(is_("b"))).within(Time.milliseconds(20)),
    "optional start": lambda cond: Pattern.begin("a").where(cond(is_("a"))).optional().next("b")
    .where(cond(is_("b"))).next("c").where(cond(is_("c"))),
}


def events(seed: int, n: int = 400, keys: int = 5, kinds: str = "abcxy", disorder: int = 3) -> list:
    """(key, kind, timestamp, n): timestamps rising about 1 ms a record, up to ``disorder`` early."""
    rng = random.Random(seed)
    return [(f"k{rng.randrange(keys)}", rng.choice(kinds), max(0, i - rng.randrange(disorder + 1)), i)
            for i in range(n)]


def show(match) -> tuple:
    return tuple((name, tuple(e[3] for e in evs)) for name, evs in match.items())


def run_nfa(pattern, stream) -> tuple:
    """Per key in timestamp order: (matches, timeouts) as the NFA gives them, a pickle per step."""
    nfa = compile_pattern(pattern)
    states, matches, timeouts = {}, [], []
    for e in sorted(stream, key=lambda e: e[2]):
        state, found, timed_out = nfa.step(states.get(e[0], nfa.initial_state()), e, e[2])
        states[e[0]] = pickle.loads(pickle.dumps(state))
        matches += [(e[0], show(m)) for m in found]
        timeouts += [(e[0], show(m), ts) for m, ts in timed_out]
    for key, state in states.items():
        _, found, timed_out = nfa.advance_time(state, MAX_WATERMARK)
        matches += [(key, show(m)) for m in found]
        timeouts += [(key, show(m), ts) for m, ts in timed_out]
    return matches, timeouts


@pytest.mark.parametrize("name", list(PATTERNS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_compiled_nfa_matches_as_the_general_search(name, seed):
    stream = events(seed)
    fast = compile_pattern(PATTERNS[name](simple))
    assert fast.start_takes is not None or name == "optional start"    # the fast start is taken
    general = compile_pattern(PATTERNS[name](reading_ctx))
    assert general.start_takes is None and not any(n.plain and n.edges for n in general.nodes.values())
    expected = run_nfa(PATTERNS[name](reading_ctx), stream)
    assert expected[0] or name == "next within", "the input makes matches"
    assert run_nfa(PATTERNS[name](simple), stream) == expected


@pytest.mark.parametrize("name", list(PATTERNS))
def test_what_the_start_refuses_leaves_the_state_as_it_is_and_what_it_takes_processes_as_asked_anew(name):
    nfa = compile_pattern(PATTERNS[name](simple))
    hits = [(e, nfa.start_hit(nfa.initial, e)) for e in events(4)]
    passed = [e for e, hit in hits if hit is False]
    assert passed or nfa.start_test is None
    for e in passed:
        assert nfa.process(nfa.initial, e, e[2]) == (nfa.initial, [])
    for e, hit in hits:
        if hit is not None:
            assert nfa.process(nfa.initial, e, e[2], hit) == nfa.process(nfa.initial, e, e[2])
    started = nfa.process(nfa.initial, ("k", "a", 1, 1), 1)[0]
    assert started is nfa.initial or all(nfa.start_hit(started, e) is None for e in events(4))


def test_the_start_condition_runs_once_per_event_in_event_time(tmp_path):
    """As Flink evaluates an edge's condition once per event: the operator's shortcut hands the
    start's answer on to the NFA instead of asking the condition again."""
    calls = tmp_path / "calls"

    def counted(e):
        with open(calls, "a") as f:
            f.write(f"{e}\n")
        return e[1] == "a"
    records = [(k, kind, 1, t * 1000) for t, kinds in enumerate(["ab", "ba", "aa"]) for k, kind in zip("kj", kinds)]
    stream = (job_env(tmp_path).from_collection(records, EVENT)
              .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps()
                                                .with_timestamp_assigner(lambda e, _: e[3]))
              .key_by(lambda e: e[0]))
    pattern = Pattern.begin("hot").where(counted).next("b").where(is_("b"))
    found = collect_in_tasks(CEP.pattern(stream, pattern).process(Matches()))
    assert sorted(calls.read_text().split("\n")[:-1]) == sorted(map(str, records))
    assert len(found) == 1      # k: a then b; j: b, a, a


def test_a_failing_condition_is_named_on_every_path():
    def broken(e):
        raise ValueError("no temperature")
    for cond in (simple, reading_ctx):
        nfa = compile_pattern(Pattern.begin("hot").where(cond(broken)).next("b").where(cond(is_("b"))))
        with pytest.raises(RuntimeError, match=r"pattern 'hot' \(TAKE edge\) on event .*no temperature"):
            nfa.process(nfa.initial_state(), ("k", "a", 1, 1), 1)


# -- the operator against the per-event path it replaced ----------------------------------------

TIMED_OUT = OutputTag("timed-out")
LATE = OutputTag("late")
EVENT = Types.TUPLE([Types.STRING(), Types.STRING(), Types.LONG(), Types.LONG()])


class Matches(PatternProcessFunction, TimedOutPartialMatchHandler):
    def process_match(self, match, ctx):
        yield "match", show(match), ctx.timestamp()

    def process_timed_out_match(self, match, ctx):
        ctx.output(TIMED_OUT, ("timed out", show(match), ctx.timestamp()))


class PerEventCep(KeyedProcessFunction):
    """The per-event path: every event waits in the MapState with a timer; a timer releases its
    key's events behind the watermark; the NFA state is read and written per event."""

    def __init__(self, pattern, function, event_time):
        self.pattern, self.function, self.event_time = pattern, function, event_time

    def open(self, runtime_context):
        self.nfa = compile_pattern(self.pattern)
        self.nfa_state = runtime_context.get_state(ValueStateDescriptor("nfa"))
        self.queue = runtime_context.get_map_state(MapStateDescriptor("queue", Types.LONG()))

    def process_element(self, value, ctx):
        timers = ctx.timer_service()
        if not self.event_time:
            now = timers.current_processing_time()
            state, out = self._advance(self._state(), now, ctx)
            started = _started(state)
            state, matches = self.nfa.process(state, value, now)
            out += self._matches(matches, now)
            if self.nfa.window_ms and _started(state) > started:
                timers.register_processing_time_timer(now + self.nfa.window_ms)
            self._save(state)
            return out
        timestamp = ctx.timestamp()
        if timestamp > timers.current_watermark():
            events = self.queue.get(timestamp)
            if events is None:
                events = []
                timers.register_event_time_timer(timestamp)
            self.queue.put(timestamp, events + [value])
            return None
        return [(LATE, value)]

    def on_timer(self, timestamp, ctx):
        if ctx.time_domain() == TimeDomain.PROCESSING_TIME:
            state, out = self._advance(self._state(), max(timestamp, ctx.timer_service().current_processing_time()),
                                       ctx)
            self._save(state)
            return out
        timers = ctx.timer_service()
        watermark = timers.current_watermark()
        state, out = self._state(), []
        for ts in sorted(t for t in self.queue.keys() if t <= watermark):
            if ts != timestamp:
                timers.delete_event_time_timer(ts)
            for event in self.queue.get(ts):
                self._save(state)
                state, found, timed_out = self.nfa.step(self._state(), event, ts)
                out += self._matches(found, ts) + self._timeouts(timed_out, ctx)
            self.queue.remove(ts)
        state, more = self._advance(state, watermark, ctx)
        out += more
        next_timeout = self.nfa.earliest_timeout(state)
        if next_timeout is not None:
            timers.register_event_time_timer(next_timeout)
        self._save(state)
        return out

    def _state(self):
        return self.nfa_state.value() or self.nfa.initial_state()

    def _save(self, state):
        self.nfa_state.clear() if self.nfa.is_empty(state) else self.nfa_state.update(state)

    def _advance(self, state, time, ctx):
        state, found, timed_out = self.nfa.advance_time(state, time)
        return state, self._matches(found, time) + self._timeouts(timed_out, ctx)

    def _matches(self, matches, timestamp):
        return [("match", show(m), timestamp) for m in matches]

    def _timeouts(self, timed_out, ctx):
        return [(TIMED_OUT, ("timed out", show(m), ts)) for m, ts in timed_out]


def _started(state):
    return sum(1 for cs in state.partial_matches if cs.start_id is not None)


def run_operator(tmp_path, pattern, stream, event_time: bool, per_event: bool) -> list:
    env = job_env(tmp_path, 1, task__batch_size=7)     # a watermark every 7 records
    source = env.from_collection(stream, EVENT)
    if event_time:
        source = source.assign_timestamps_and_watermarks(
            WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(3))
            .with_timestamp_assigner(lambda e, _: e[2]))
    keyed = source.key_by(lambda e: e[0], key_type=Types.STRING())
    if per_event:
        matches = keyed.process(PerEventCep(pattern, Matches(), event_time))
    else:
        patterns = CEP.pattern(keyed, pattern)
        patterns = patterns.side_output_late_data(LATE) if event_time else patterns.in_processing_time()
        matches = patterns.process(Matches())
    matches = matches.set_parallelism(2)
    out = matches.union(matches.get_side_output(TIMED_OUT),
                        matches.get_side_output(LATE).map(lambda e: ("late", e[3])))
    return sorted(collect_in_tasks(out), key=repr)


@pytest.mark.parametrize("name", ["next within", "loop, skip past last", "optional, skip to first",
                                  "not next, not followed by", "until, or"])
@pytest.mark.parametrize("event_time", [True, False], ids=["event time", "processing time"])
def test_the_operator_matches_as_the_per_event_path(tmp_path, name, event_time):
    stream = events(7, n=300, keys=6, disorder=5)
    stream += [("k1", "a", 3, 1000), ("k2", "b", 10, 1001)]     # behind the watermark: late
    pattern = PATTERNS[name](simple)
    got = run_operator(tmp_path / "fast", pattern, stream, event_time, per_event=False)
    assert got == run_operator(tmp_path / "per-event", pattern, stream, event_time, per_event=True)
    assert any(r[0] == "match" for r in got)
    assert any(r[0] == "timed out" for r in got) or name == "until, or" or not event_time
    assert (("late", 1000) in got) == event_time


@pytest.mark.parametrize("name", ["next within", "loop, skip past last", "not next, not followed by"])
def test_events_in_timestamp_order_wait_a_run_of_one_timestamp_at_a_time(tmp_path, name):
    # In-order batches take the run-at-a-time path: four records a timestamp, a key twice in some
    # runs, runs across two batches of 7; the late records' batch takes the record-at-a-time one.
    stream = [(k, kind, ts // 4, n) for k, kind, ts, n in events(11, n=300, keys=6, disorder=0)]
    stream += [("k1", "a", 3, 1000), ("k2", "b", 10, 1001)]
    pattern = PATTERNS[name](simple)
    got = run_operator(tmp_path / "fast", pattern, stream, True, per_event=False)
    assert got == run_operator(tmp_path / "per-event", pattern, stream, True, per_event=True)
    assert any(r[0] == "match" for r in got) and ("late", 1000) in got


def test_event_time_without_timestamps_names_the_record_and_the_fix(tmp_path):
    stream = job_env(tmp_path).from_collection([("k", "a", 1, 0)], EVENT).key_by(lambda e: e[0])
    with pytest.raises(AssertionError, match=r"CepOperator \(1/1\) failed: ValueError: CEP in event time needs "
                                             r"record timestamps.*call assign_timestamps_and_watermarks.*"
                                             r"\(on record \('k', 'a', 1, 0\)\)"):
        collect_in_tasks(CEP.pattern(stream, PATTERNS["next within"](simple)).process(Matches()))


def test_a_failing_start_condition_fails_the_operator_naming_its_pattern(tmp_path):
    # In event time a key's one due event is tested by the start's condition before anything else.
    def broken(e):
        if e[2] == 7:
            raise ValueError("no temperature")
        return e[1] == "a"
    stream = (job_env(tmp_path).from_collection([("k", "a", 1, 0), ("j", "b", 7, 1000)], EVENT)
              .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps()
                                                .with_timestamp_assigner(lambda e, _: e[3]))
              .key_by(lambda e: e[0]))
    pattern = Pattern.begin("hot").where(broken).next("b").where(is_("b"))
    with pytest.raises(AssertionError, match=r"CepOperator \(1/1\) failed: RuntimeError: Failure happened in filter "
                                             r"function of pattern 'hot' \(TAKE edge\) on event \('j', 'b', 7, 1000\)"):
        collect_in_tasks(CEP.pattern(stream, pattern).process(Matches()))
