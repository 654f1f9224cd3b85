"""PyFlink's side outputs: a function yields ``(output_tag, value)`` to send ``value`` to that
side output (PyFlink's rule: a tuple whose first element is an OutputTag), in every function
that can emit, also from ``on_timer`` and CEP's functions; ``ctx.output(tag, value)`` is the
same. Each job runs through the task harness without Spark, in one epoch and with one record
per epoch; the answers follow from the functions by hand.
"""
import pytest

from runtime.cep import CEP, Pattern, PatternProcessFunction, TimedOutPartialMatchHandler
from runtime.common import Duration, Time, Types, WatermarkStrategy
from runtime.datastream import (
    CoProcessFunction, KeyedCoProcessFunction, KeyedProcessFunction, OutputTag, ProcessAllWindowFunction,
    ProcessFunction, ProcessWindowFunction, TumblingEventTimeWindows)
from runtime.execution.executor import JobExecutionException
from runtime_env import job_env
from task_harness import collect_in_tasks

ODD = OutputTag("odd", Types.LONG())
TIMER = OutputTag("timer", Types.STRING())
WAYS = {"in tasks": None, "one epoch": {}, "an epoch per record": dict(epoch__max_records_per_split=1)}


def collect(tmp_path, way, build):
    """Main and side output of ``build(env) -> (stream, [tags])``, as sorted lists."""
    env = job_env(tmp_path, **(WAYS[way] or {}))
    stream, tags = build(env)
    sides = [stream.get_side_output(tag).map(lambda v, name=tag.tag_id: (name, v)) for tag in tags]
    everything = stream.map(lambda v: ("main", v))
    for side in sides:
        everything = everything.union(side)
    in_tasks = WAYS[way] is None
    out = collect_in_tasks(everything) if in_tasks else list(everything.execute_and_collect("side outputs"))
    return ({tag: sorted(v for t, v in out if t == tag) for tag in ["main", *[t.tag_id for t in tags]]})


def numbers(env, n=6):
    return env.from_collection(list(range(1, n + 1)), type_info=Types.LONG())


class SplitOdd(ProcessFunction):
    def process_element(self, value, ctx):
        if value % 2:
            yield ODD, value * 10
        else:
            yield value


class KeyedSplit(KeyedProcessFunction):
    """Odd values to the side output by yield, even ones by ctx.output (the alias), both keyed."""

    def process_element(self, value, ctx):
        yield (ODD, value) if value % 2 else value
        if not value % 2:
            ctx.output(ODD, -value)


@pytest.mark.parametrize("way", list(WAYS))
def test_process_functions_yield_to_side_outputs(spark, tmp_path, way):
    got = collect(tmp_path / "p", way, lambda env: (numbers(env).process(SplitOdd(), Types.LONG()), [ODD]))
    assert got == {"main": [2, 4, 6], "odd": [10, 30, 50]}
    got = collect(tmp_path / "k", way, lambda env: (
        numbers(env).key_by(lambda v: v % 3).process(KeyedSplit(), Types.LONG()), [ODD]))
    assert got == {"main": [2, 4, 6], "odd": [-6, -4, -2, 1, 3, 5]}


class TimerToSide(KeyedProcessFunction):
    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 100)
        yield value

    def on_timer(self, timestamp, ctx):
        yield TIMER, f"{ctx.get_current_key()}@{timestamp}"
        yield "fired", timestamp


@pytest.mark.parametrize("way", list(WAYS))
def test_on_timer_yields_to_side_outputs(spark, tmp_path, way):
    def build(env):
        stream = (env.from_collection([("a", 1000), ("b", 2000)],
                                      type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
                  .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps()
                                                    .with_timestamp_assigner(lambda e, _: e[1]))
                  .key_by(lambda e: e[0])
                  .process(TimerToSide()))
        return stream, [TIMER]
    got = collect(tmp_path, way, build)
    # a's timer (1100) fires at b's watermark (1999), b's (2100) at the end of the input.
    assert got == {"main": [("a", 1000), ("b", 2000), ("fired", 1100), ("fired", 2100)],
                   "timer": ["a@1100", "b@2100"]}


class CoSplit(CoProcessFunction):
    def process_element1(self, value, ctx):
        yield ODD, value

    def process_element2(self, value, ctx):
        yield value


class KeyedCoSplit(KeyedCoProcessFunction):
    def process_element1(self, value, ctx):
        yield (ODD, value) if value % 2 else value

    def process_element2(self, value, ctx):
        yield ODD, value + 100


@pytest.mark.parametrize("way", list(WAYS))
def test_co_process_functions_yield_to_side_outputs(spark, tmp_path, way):
    got = collect(tmp_path / "co", way, lambda env: (
        numbers(env, 3).connect(numbers(env, 2)).process(CoSplit(), Types.LONG()), [ODD]))
    assert got == {"main": [1, 2], "odd": [1, 2, 3]}
    got = collect(tmp_path / "keyed", way, lambda env: (
        numbers(env, 3).connect(numbers(env, 2)).key_by(lambda v: v, lambda v: v)
        .process(KeyedCoSplit(), Types.LONG()), [ODD]))
    assert got == {"main": [2], "odd": [1, 3, 101, 102]}


class WindowSplit(ProcessWindowFunction):
    def process(self, key, context, elements):
        values = [e[1] for e in elements]
        yield key, sum(values)
        yield ODD, context.window().start


class AllWindowSplit(ProcessAllWindowFunction):
    def process(self, context, elements):
        yield len(elements)
        yield ODD, context.window().end


@pytest.mark.parametrize("way", list(WAYS))
def test_window_functions_yield_to_side_outputs(spark, tmp_path, way):
    events = [("a", 1000), ("b", 1500), ("a", 2500), ("a", 4200)]

    def timestamped(env):
        return (env.from_collection(events, type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
                .assign_timestamps_and_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(
                    Duration.of_millis(0)).with_timestamp_assigner(lambda e, _: e[1])))
    got = collect(tmp_path / "keyed", way, lambda env: (
        timestamped(env).key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(2)))
        .process(WindowSplit()), [ODD]))
    # Windows [0, 2000), [2000, 4000), [4000, 6000) of a, [0, 2000) of b: sums to the main output,
    # window starts to the side output.
    assert got == {"main": [("a", 1000), ("a", 2500), ("a", 4200), ("b", 1500)], "odd": [0, 0, 2000, 4000]}
    got = collect(tmp_path / "all", way, lambda env: (
        timestamped(env).window_all(TumblingEventTimeWindows.of(Time.seconds(2))).process(AllWindowSplit()),
        [ODD]))
    assert got == {"main": [1, 1, 2], "odd": [2000, 4000, 6000]}


TIMED_OUT = OutputTag("timed-out")
MATCHED_AT = OutputTag("matched-at", Types.LONG())


class YieldingPairs(PatternProcessFunction, TimedOutPartialMatchHandler):
    def process_match(self, match, ctx):
        yield match["a"][0][0], [e[2] for e in match["a"] + match["b"]]
        yield MATCHED_AT, ctx.timestamp()

    def process_timed_out_match(self, match, ctx):
        yield TIMED_OUT, (match["a"][0][0], [e[2] for e in match["a"]], ctx.timestamp())


@pytest.mark.parametrize("way", list(WAYS))
def test_cep_functions_yield_to_side_outputs(spark, tmp_path, way):
    def build(env):
        events = [("k1", "b", 20), ("k1", "a", 10), ("k2", "a", 5), ("k2", "b", 300), ("k1", "a", 400)]
        stream = (env.from_collection(events, Types.TUPLE([Types.STRING(), Types.STRING(), Types.LONG()]))
                  .assign_timestamps_and_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(
                      Duration.of_millis(50)).with_timestamp_assigner(lambda e, _: e[2])))
        pattern = (Pattern.begin("a").where(lambda e: e[1] == "a").followed_by("b").where(lambda e: e[1] == "b")
                   .within(Time.milliseconds(100)))
        return CEP.pattern(stream.key_by(lambda e: e[0]), pattern).process(YieldingPairs()), [MATCHED_AT, TIMED_OUT]
    got = collect(tmp_path, way, build)
    # k1's a (10) and b (20) match at 20; k2's a (5) times out at 105, before its b (300);
    # k1's second a (400) times out at 500, when the input ends.
    assert got == {"main": [("k1", [10, 20])], "matched-at": [20],
                   "timed-out": [("k1", [400], 500), ("k2", [5], 105)]}


class TimedOutToMain(PatternProcessFunction, TimedOutPartialMatchHandler):
    def process_match(self, match, ctx):
        return []

    def process_timed_out_match(self, match, ctx):
        yield "timed out"


def test_a_timed_out_match_goes_to_side_outputs_only(spark, tmp_path):
    env = job_env(tmp_path)
    events = env.from_collection([("k", "a", 1)], Types.TUPLE([Types.STRING(), Types.STRING(), Types.LONG()]))
    pattern = Pattern.begin("a").where(lambda e: e[1] == "a").next("b").within(Time.milliseconds(10))
    CEP.pattern(events.key_by(lambda e: e[0]), pattern).in_processing_time().process(TimedOutToMain()).print()
    with pytest.raises(JobExecutionException, match=r"TimedOutToMain.process_timed_out_match returned "
                                                    r"'timed out'; a timed-out match goes to a side output"):
        env.execute("timed out")


class FailingTimer(KeyedProcessFunction):
    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 100)

    def on_timer(self, timestamp, ctx):
        yield TIMER, "before"
        raise ValueError("timer broke")


class FailingWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield ODD, 1
        raise ValueError("window broke")


def test_a_function_failing_while_it_yields_is_named(spark, tmp_path):
    def keyed(env):
        return (env.from_collection([("a", 1000)], type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
                .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps()
                                                  .with_timestamp_assigner(lambda e, _: e[1]))
                .key_by(lambda e: e[0]))
    env = job_env(tmp_path / "timer")
    keyed(env).process(FailingTimer()).name("Timers").print()
    with pytest.raises(JobExecutionException,
                       match=r"Timers \(1/1\) failed: ValueError: timer broke \(on record \"timer 1100 of key 'a'\"\)"):
        env.execute("timer")
    env = job_env(tmp_path / "window")
    keyed(env).window(TumblingEventTimeWindows.of(Time.seconds(2))).process(FailingWindow()).name("Windows").print()
    with pytest.raises(JobExecutionException,
                       match=r"Windows \(1/1\) failed: ValueError: window broke \(on record \"window .* of key 'a'\"\)"):
        env.execute("window")
