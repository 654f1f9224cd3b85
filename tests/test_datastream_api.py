"""The DataStream API: PyFlink names and types, and wrong use failing when the job is built."""
import pytest

from runtime.common import Duration, Row, Time, Types, WatermarkStrategy
from runtime.common.restart_strategy import RestartStrategies
from runtime.datastream import (
    AggregateFunction, CoMapFunction, CountTrigger, KeyedCoProcessFunction, KeyedProcessFunction,
    MapFunction, OutputTag, ProcessWindowFunction, SlidingEventTimeWindows, StreamExecutionEnvironment,
    TumblingEventTimeWindows, EventTimeSessionWindows, CountEvictor)
from runtime.datastream.connectors import DataGeneratorSource, DeltaSink, DeltaSource, NumberSequenceSource
from runtime.graph.stream_graph import StreamGraphError

PAIR = Types.TUPLE([Types.STRING(), Types.LONG()])


def pairs(env):
    return env.from_collection([("a", 1), ("b", 2)], type_info=PAIR)


def names(env):
    return [n.operator_name for n in env.get_stream_graph().nodes]


def test_sum_on_a_missing_field_names_operator_and_fields(env):
    with pytest.raises(ValueError) as e:
        pairs(env).key_by(0).sum(2)
    msg = str(e.value)
    assert "sum(2) on a KeyedStream" in msg and "valid fields are positions 0..1" in msg


def test_sum_on_a_missing_named_field(env):
    rows = env.from_collection([Row(word="a", count=1)])
    with pytest.raises(ValueError, match="sum\\('cnt'\\) on a window.*'word', 'count'"):
        rows.key_by("word").window(TumblingEventTimeWindows.of(Time.seconds(1))).sum("cnt")


def test_sum_on_a_string_field_is_refused(env):
    with pytest.raises(ValueError, match=r"sum\(0\) needs a numeric field, but the field is String"):
        pairs(env).key_by(1).sum(0)


def test_key_by_on_a_missing_field(env):
    with pytest.raises(ValueError, match=r"key_by\(5\).*valid fields"):
        pairs(env).key_by(5)


def test_window_on_a_non_keyed_stream(env):
    with pytest.raises(TypeError, match=r"window\(\) is defined on a KeyedStream: call key_by"):
        pairs(env).window(TumblingEventTimeWindows.of(Time.seconds(5)))
    with pytest.raises(TypeError, match=r"count_window_all"):
        pairs(env).count_window(3)
    with pytest.raises(TypeError, match=r"sum\(\) is defined on a KeyedStream"):
        pairs(env).sum(1)


@pytest.mark.parametrize("bad", [-2, 0, 1.5, True])
def test_bad_parallelism(env, bad):
    with pytest.raises(ValueError, match="must be at least 1"):
        pairs(env).map(lambda x: x).set_parallelism(bad)
    with pytest.raises(ValueError, match="must be at least 1"):
        env.set_parallelism(bad)


def test_non_parallel_sources_stay_at_one(env):
    with pytest.raises(ValueError, match="non parallel operator must be 1.*'Socket Stream'"):
        env.socket_text_stream("localhost", 9999).set_parallelism(2)


def test_settings_on_a_partitioning_are_refused(env):
    with pytest.raises(ValueError, match="set_parallelism\\(\\) applies to an operator"):
        pairs(env).key_by(0).set_parallelism(2)


def test_functions_as_classes_or_lambdas(env):
    class Upper(MapFunction):
        def map(self, value):
            return value[0].upper()

    with pytest.raises(TypeError, match=r"map\(\) expects a MapFunction or a function, got 42"):
        pairs(env).map(42)
    out = pairs(env).map(Upper(), Types.STRING())
    assert out.get_type() == Types.STRING()
    op = out._t.operator
    assert op.function.map(("x", 1)) == "X"
    lam = pairs(env).map(lambda v: v[1] * 10)
    assert lam._t.operator.function.map(("x", 3)) == 30


def test_operator_names_follow_flink(env):
    tag = OutputTag("late")

    class Count(AggregateFunction):
        def create_accumulator(self): return 0
        def add(self, value, acc): return acc + 1
        def get_result(self, acc): return acc
        def merge(self, a, b): return a + b

    class Wrap(ProcessWindowFunction):
        def process(self, key, context, elements):
            yield key, list(elements)

    ts = pairs(env).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1))
        .with_timestamp_assigner(lambda v, t: v[1]))
    keyed = ts.key_by(0)
    keyed.sum(1).print()
    keyed.reduce(lambda a, b: a).print()
    keyed.window(SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5))) \
        .allowed_lateness(Time.seconds(1)).side_output_late_data(tag).aggregate(Count()).print()
    keyed.window(EventTimeSessionWindows.with_gap(Time.seconds(3))).process(Wrap()).print()
    keyed.count_window(3).apply(lambda key, window, items: [len(list(items))]).print()
    keyed.count_window(2, 1).reduce(lambda a, b: b).print()
    ts.window_all(TumblingEventTimeWindows.of(Time.seconds(5))).max(1).print()
    got = [n for n in names(env) if not n.startswith(("Source", "Sink"))]
    assert got == [
        "Timestamps/Watermarks",
        "Keyed Aggregation",
        "Keyed Reduce",
        "Window(SlidingEventTimeWindows(10000, 5000), EventTimeTrigger, Count, PassThroughWindowFunction)",
        "Window(EventTimeSessionWindows(3000), EventTimeTrigger, Wrap)",
        "Window(CountTumblingWindowAssigner(3), PurgingTrigger, <lambda>)",
        "Window(CountSlidingWindowAssigner(2, 1), PurgingTrigger, <lambda>, PassThroughWindowFunction)",
        "Window(TumblingEventTimeWindows(5000), EventTimeTrigger, ComparableAggregator, "
        "PassThroughWindowFunction)",
    ]
    graph = env.get_stream_graph()
    window_all = [n for n in graph.nodes if "TumblingEventTimeWindows" in n.operator_name][0]
    assert window_all.parallelism == 1
    sliding = [n for n in graph.nodes if "Sliding" in n.operator_name][0].operator
    assert sliding.allowed_lateness == 1000 and sliding.late_data_output_tag == tag


def test_window_configuration_errors(env):
    keyed = pairs(env).key_by(0)
    with pytest.raises(ValueError, match="allowed lateness cannot be negative"):
        keyed.window(TumblingEventTimeWindows.of(Time.seconds(1))).allowed_lateness(-5)
    with pytest.raises(ValueError, match="Cannot use a merging WindowAssigner"):
        keyed.window(EventTimeSessionWindows.with_gap(Time.seconds(1))).evictor(CountEvictor.of(2))
    with pytest.raises(ValueError, match="count_window\\(\\): the size must be a positive number"):
        keyed.count_window(0)
    with pytest.raises(TypeError, match="expects a WindowAssigner"):
        keyed.window("5 seconds")


def test_connect_requires_co_functions(env):
    class Both(CoMapFunction):
        def map1(self, value): return value
        def map2(self, value): return value

    a, b = pairs(env), pairs(env)
    a.connect(b).map(Both()).print()
    assert "Co-Map" in names(env)
    with pytest.raises(TypeError, match="expects a CoMapFunction"):
        a.connect(b).map(lambda x: x)

    class Keyed(KeyedCoProcessFunction):
        def process_element1(self, value, ctx): yield value
        def process_element2(self, value, ctx): yield value

    with pytest.raises(TypeError, match="both input streams are of type KeyedStream"):
        a.connect(b).process(Keyed())


def test_keyed_process_function_requires_a_keyed_stream(env):
    class Timers(KeyedProcessFunction):
        def process_element(self, value, ctx): yield value

    with pytest.raises(TypeError, match="call key_by"):
        pairs(env).process(Timers())
    pairs(env).key_by(0).process(Timers()).print()
    assert "KeyedProcess" in names(env)


def test_union_of_different_types_is_refused(env):
    ints = env.from_collection([1, 2])
    with pytest.raises(ValueError, match="Cannot union streams of different types: Tuple2<String, Long> and Long"):
        pairs(env).union(ints)


def test_sources_and_sinks(env):
    env.from_source(NumberSequenceSource(1, 10), WatermarkStrategy.no_watermarks(), "numbers") \
        .map(lambda x: x).sink_to("/tmp/sluice-out")
    env.from_source(DataGeneratorSource(lambda i: i * 2, count=100), WatermarkStrategy.no_watermarks(),
                    "gen").add_sink(lambda v: None)
    env.from_source(DeltaSource.for_bounded_row_data("/tmp/table"), WatermarkStrategy.no_watermarks(),
                    "delta").print("out")
    assert names(env) == ["Source: numbers", "Map", "Sink: Delta Sink", "Source: gen", "Sink: Unnamed",
                          "Source: delta", "Sink: Print to Std. Out"]
    sink = env.get_stream_graph().node(3).operator.sink
    assert sink == DeltaSink.for_row_data("/tmp/sluice-out")
    with pytest.raises(ValueError, match="Collection must not be empty"):
        env.from_collection([])
    with pytest.raises(ValueError, match="port out of range"):
        env.socket_text_stream("localhost", 70000)
    with pytest.raises(TypeError, match="expects a WatermarkStrategy"):
        env.from_source(NumberSequenceSource(1, 2), None, "x")
    with pytest.raises(TypeError, match="sink_to\\(\\) takes a Delta table path"):
        pairs(env).sink_to(42)


def test_environment_settings_travel_in_the_graph(env):
    env.enable_checkpointing(5000)
    env.get_checkpoint_config().set_max_retained_checkpoints(5)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 1000))
    pairs(env).print()
    settings = env.get_stream_graph("my job").settings
    assert settings.job_name == "my job"
    assert dict(settings.checkpoint_config)["interval_ms"] == 5000
    assert dict(settings.checkpoint_config)["max_retained"] == 5
    assert str(settings.restart_strategy) == "Restart with fixed delay (1000 ms). #3 restart attempts."
    with pytest.raises(ValueError, match="larger than or equal to 10 ms"):
        env.enable_checkpointing(5)


def test_from_collection_infers_types(env):
    assert pairs(env).get_type() == PAIR
    assert env.from_collection([("a", 1), ("b", 2)]).get_type() == PAIR
    assert env.from_collection([1, 2]).get_type() == Types.LONG()
    assert env.from_collection([Row(word="a", count=1)]).get_type() == \
        Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])


def test_get_execution_plan_without_running(env):
    pairs(env).key_by(0).sum(1).print()
    assert '"ship_strategy": "HASH"' in env.get_execution_plan()
