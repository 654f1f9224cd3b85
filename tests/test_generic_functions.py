"""The window function classes are generic as PyFlink 2.3's (pyflink/datastream/functions.py):
``WindowFunction[IN, OUT, KEY, W]``, ``AllWindowFunction[IN, OUT, W]``,
``ProcessWindowFunction[IN, OUT, KEY, W]``, ``ProcessAllWindowFunction[IN, OUT, W]`` and their
``Context[W2]``, so the shipped windowing examples' classes (``class
CountWindowProcessFunction(ProcessWindowFunction[tuple, tuple, str, TimeWindow])``) port by
changing imports. The jobs below subclass the generic forms and run on local Spark at
parallelism 2; the answers are worked out by hand from the data.
"""
from typing import Iterable

from runtime.common import Types, WatermarkStrategy
from runtime.datastream import (
    AggregateFunction, AllWindowFunction, ProcessAllWindowFunction, ProcessWindowFunction, WindowFunction)
from runtime.datastream.functions import as_function
from runtime.datastream.window import CountWindow, TimeWindow, TumblingEventTimeWindows
from runtime_env import job_env

# (name, value, event time in ms)
EVENT = Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()])
DATA = [("hi", 1, 1000), ("hi", 2, 2000), ("hello", 3, 3000), ("hi", 4, 6000), ("hello", 5, 9000),
        ("hi", 6, 15000)]


class CountWindowProcessFunction(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
    """The shape of PyFlink's windowing examples."""

    def process(self, key: str, context: ProcessWindowFunction.Context[TimeWindow],
                elements: Iterable[tuple]) -> Iterable[tuple]:
        window, values = context.window(), [e[1] for e in elements]
        yield "process", key, window.start, window.end, len(values), sum(values)


class SumOfReduced(WindowFunction[tuple, tuple, str, TimeWindow]):
    def apply(self, key: str, window: TimeWindow, inputs: Iterable[tuple]) -> Iterable[tuple]:
        (reduced,) = inputs
        yield "reduce", key, window.start, window.end, reduced[1]


class SumWindowFunction(WindowFunction[tuple, tuple, str, CountWindow]):
    """PyFlink's tumbling_count_window example's function."""

    def apply(self, key: str, window: CountWindow, inputs: Iterable[tuple]):
        yield key, window.id, sum(e[1] for e in inputs)


class AllInWindow(ProcessAllWindowFunction[tuple, tuple, TimeWindow]):
    def process(self, context: ProcessAllWindowFunction.Context[TimeWindow],
                elements: Iterable[tuple]) -> Iterable[tuple]:
        yield "process_all", context.window().start, sorted(e[0] for e in elements)


class Average(AggregateFunction):
    def create_accumulator(self):
        return 0, 0

    def add(self, value, accumulator):
        return accumulator[0] + value[1], accumulator[1] + 1

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, acc_a, acc_b):
        return acc_a[0] + acc_b[0], acc_a[1] + acc_b[1]


class AverageInWindow(AllWindowFunction[float, tuple, TimeWindow]):
    def apply(self, window: TimeWindow, inputs: Iterable[float]) -> Iterable[tuple]:
        yield "apply_all", window.start, list(inputs)


def events(tmp_path):
    env = job_env(tmp_path, parallelism=2)
    stamps = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[2])
    return env.from_collection(DATA, type_info=EVENT).assign_timestamps_and_watermarks(stamps)


def test_generic_keyed_window_functions_run_in_a_job(spark, tmp_path):
    windowed = events(tmp_path).key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(5000))
    processed = windowed.process(CountWindowProcessFunction())
    reduced = windowed.reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])),
                              window_function=SumOfReduced())
    got = sorted(processed.union(reduced).execute_and_collect("generic keyed windows"))
    # hi: 1 and 2 in [0, 5000), 4 in [5000, 10000), 6 in [15000, 20000);
    # hello: 3 in [0, 5000), 5 in [5000, 10000).
    assert got == sorted([
        ("process", "hi", 0, 5000, 2, 3), ("process", "hi", 5000, 10000, 1, 4),
        ("process", "hi", 15000, 20000, 1, 6), ("process", "hello", 0, 5000, 1, 3),
        ("process", "hello", 5000, 10000, 1, 5),
        ("reduce", "hi", 0, 5000, 3), ("reduce", "hi", 5000, 10000, 4), ("reduce", "hi", 15000, 20000, 6),
        ("reduce", "hello", 0, 5000, 3), ("reduce", "hello", 5000, 10000, 5)])


def test_a_generic_window_function_over_count_windows(spark, tmp_path):
    got = sorted(events(tmp_path).key_by(lambda e: e[0]).count_window(2).apply(SumWindowFunction())
                 .execute_and_collect("generic count windows"))
    # hi: 1 2 | 4 6; hello: 3 5.
    assert got == [("hello", 0, 8), ("hi", 0, 3), ("hi", 1, 10)]


def test_generic_all_window_functions_run_in_a_job(spark, tmp_path):
    windowed = events(tmp_path).window_all(TumblingEventTimeWindows.of(10000))
    processed = windowed.process(AllInWindow())
    averaged = windowed.aggregate(Average(), window_function=AverageInWindow())
    got = sorted(processed.union(averaged).execute_and_collect("generic all windows"), key=repr)
    # [0, 10000): 1 2 3 4 5 (hi hi hello hi hello), average 3.0; [10000, 20000): 6 (hi).
    assert got == sorted([("process_all", 0, ["hello", "hello", "hi", "hi", "hi"]),
                          ("process_all", 10000, ["hi"]),
                          ("apply_all", 0, [3.0]), ("apply_all", 10000, [6.0])], key=repr)


def test_the_generic_forms_are_the_classes_a_job_passes():
    # Subscripting gives PyFlink's parameters; a subclass of a subscripted form is an instance of
    # the plain class, so the API takes it as it is.
    assert len(ProcessWindowFunction.__parameters__) == 4 and len(WindowFunction.__parameters__) == 4
    assert len(AllWindowFunction.__parameters__) == 3 and len(ProcessAllWindowFunction.__parameters__) == 3
    assert len(ProcessWindowFunction.Context.__parameters__) == 1
    assert ProcessWindowFunction.Context[TimeWindow].__origin__ is ProcessWindowFunction.Context
    function = CountWindowProcessFunction()
    assert as_function(function, ProcessWindowFunction, "process") is function
    assert as_function(SumWindowFunction(), WindowFunction, "apply").__class__ is SumWindowFunction
