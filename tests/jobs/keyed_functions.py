"""Functions of keyed streams with keyed state, for tests/test_keyed_functions.py: a map, a
flat_map and a filter of a KeyedStream, and a CoMap and CoFlatMap of two keyed streams, each
keeping a count per word in a ValueState, into one Delta table of (function, word, n).

    sluice run tests/jobs/keyed_functions.py -- --input DIR --output TABLE [--parallelism P]
"""
import argparse

from runtime.common import Row, Types
from runtime.datastream import (
    CoFlatMapFunction, CoMapFunction, FilterFunction, FlatMapFunction, MapFunction, StreamExecutionEnvironment)
from runtime.datastream.connectors.delta import DeltaSink
from runtime.datastream.state import ValueStateDescriptor

OUT = Types.ROW_NAMED(["fn", "word", "n"], [Types.STRING(), Types.STRING(), Types.LONG()])


def counter(runtime_context):
    return runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))


def count(state) -> int:
    n = (state.value() or 0) + 1
    state.update(n)
    return n


class CountMap(MapFunction):
    def open(self, runtime_context):
        self.count = counter(runtime_context)

    def map(self, word):
        return Row(fn="map", word=word, n=count(self.count))


class EveryThird(FlatMapFunction):
    """Yields the 1st, 4th, 7th ... record of each word (a generator: drained under its key)."""

    def open(self, runtime_context):
        self.count = counter(runtime_context)

    def flat_map(self, word):
        n = count(self.count)
        if n % 3 == 1:
            yield Row(fn="flat_map", word=word, n=n)


class FirstOfEachWord(FilterFunction):
    def open(self, runtime_context):
        self.count = counter(runtime_context)

    def filter(self, word):
        return count(self.count) == 1


class CountBoth(CoMapFunction):
    """One count per word over both inputs (the second input's words are upper case)."""

    def open(self, runtime_context):
        self.count = counter(runtime_context)

    def map1(self, word):
        return Row(fn="co_map", word=word, n=count(self.count))

    def map2(self, word):
        return Row(fn="co_map", word=word.lower(), n=count(self.count))


class CountBothFlat(CoFlatMapFunction):
    def open(self, runtime_context):
        self.count = counter(runtime_context)

    def flat_map1(self, word):
        yield Row(fn="co_flat_map", word=word, n=count(self.count))

    def flat_map2(self, word):
        yield Row(fn="co_flat_map", word=word.lower(), n=count(self.count))


def build(env, input_path, output):
    words = env.read_text_file(input_path).map(lambda line: line.split()[0], output_type=Types.STRING()).uid("words")
    upper = words.map(str.upper, output_type=Types.STRING()).uid("upper")
    keyed = words.key_by(lambda w: w)
    outputs = [
        keyed.map(CountMap(), output_type=OUT).uid("map"),
        keyed.flat_map(EveryThird(), output_type=OUT).uid("flat_map"),
        keyed.filter(FirstOfEachWord()).uid("filter")
             .map(lambda w: Row(fn="filter", word=w, n=1), output_type=OUT).uid("filter-rows"),
        words.connect(upper).key_by(lambda w: w, str.lower).map(CountBoth(), output_type=OUT).uid("co_map"),
        words.connect(upper).key_by(lambda w: w, str.lower).flat_map(CountBothFlat(), output_type=OUT)
             .uid("co_flat_map"),
    ]
    outputs[0].union(*outputs[1:]).sink_to(DeltaSink.for_row_data(output)).uid("sink")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True, help="Delta table of (fn, word, n)")
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(args.parallelism)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    build(env, args.input, args.output)
    env.execute("keyed functions")


if __name__ == "__main__":
    main()
