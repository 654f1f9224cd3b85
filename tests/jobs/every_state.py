"""A checkpointed job holding every kind of keyed state, timers and window state, for the state
processor's tests (tests/test_state_processor.py): word events "word timestamp", keyed by word.

    sluice run tests/jobs/every_state.py -- --input DIR --running T1 --windows T2 [--last-type NAME]

``--last-type`` names the Row type of the value state ``last`` (LAST_TYPES): a restore with
another one is a state schema change.
"""
import argparse

from runtime.common import Duration, Row, Time, Types, WatermarkStrategy
from runtime.datastream import (
    AggregateFunction, KeyedProcessFunction, StreamExecutionEnvironment, TumblingEventTimeWindows)
from runtime.datastream.connectors.delta import DeltaSink
from runtime.datastream.state import (
    AggregatingStateDescriptor, ListStateDescriptor, MapStateDescriptor, ReducingStateDescriptor,
    ValueStateDescriptor)

EVENT = Types.ROW_NAMED(["word", "ts", "count"], [Types.STRING(), Types.LONG(), Types.LONG()])
RUNNING = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])
TIMER_DELAY = 10 ** 12      # the timers never fire within the tests' input
LAST_TYPES = {
    "v1": Types.ROW_NAMED(["ts", "seen"], [Types.INT(), Types.FLOAT()]),
    "gained": Types.ROW_NAMED(["ts", "seen", "note"], [Types.INT(), Types.FLOAT(), Types.STRING()]),
    "lost": Types.ROW_NAMED(["ts"], [Types.INT()]),
    "widened": Types.ROW_NAMED(["ts", "seen"], [Types.LONG(), Types.DOUBLE()]),
    "narrowed": Types.ROW_NAMED(["ts", "seen"], [Types.SHORT(), Types.FLOAT()]),
    "retyped": Types.ROW_NAMED(["ts", "seen"], [Types.STRING(), Types.FLOAT()]),
}


class Sum(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + value

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


class EveryState(KeyedProcessFunction):
    def __init__(self, last_type):
        self.last_type = last_type

    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.last = ctx.get_state(ValueStateDescriptor("last", self.last_type))
        self.stamps = ctx.get_list_state(ListStateDescriptor("stamps", Types.LONG()))
        self.buckets = ctx.get_map_state(MapStateDescriptor("buckets", Types.STRING(), Types.LONG()))
        self.max_ts = ctx.get_reducing_state(ReducingStateDescriptor("max_ts", max, Types.LONG()))
        self.total = ctx.get_aggregating_state(AggregatingStateDescriptor("total", Sum(), Types.LONG()))

    def process_element(self, value, ctx):
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        fields = self.last_type.get_field_names()
        if "seen" in fields:
            written = {"ts": value.ts % 30000, "seen": float(count)}
            self.last.update(Row(**{f: written.get(f) for f in fields}))
        self.stamps.add(value.ts)
        bucket = f"b{value.ts % 3}"
        self.buckets.put(bucket, (self.buckets.get(bucket) or 0) + 1)
        self.max_ts.add(value.ts)
        self.total.add(value.ts)
        ctx.timer_service().register_event_time_timer(value.ts + TIMER_DELAY)
        yield Row(word=value.word, count=count)


def parse(line: str) -> Row:
    word, ts = line.split()
    return Row(word=word, ts=int(ts), count=1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", required=True)
    parser.add_argument("--running", required=True)
    parser.add_argument("--windows", required=True)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--last-type", default="v1", choices=sorted(LAST_TYPES))
    parser.add_argument("--window-uid", default="window-counts")
    parser.add_argument("--max-parallelism", type=int)
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    if args.max_parallelism:
        env.set_max_parallelism(args.max_parallelism)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    events = (env.read_text_file(args.input).map(parse, output_type=EVENT).uid("parse")
              .assign_timestamps_and_watermarks(
                  WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(2))
                  .with_timestamp_assigner(lambda e, _: e.ts)).uid("timestamps"))
    keyed = events.key_by(lambda e: e.word, key_type=Types.STRING())
    (keyed.process(EveryState(LAST_TYPES[args.last_type]), output_type=RUNNING).set_parallelism(args.parallelism)
     .uid("every-state").sink_to(DeltaSink.for_row_data(args.running)).uid("running-sink"))
    (keyed.window(TumblingEventTimeWindows.of(Time.seconds(10))).sum("count").set_parallelism(args.parallelism)
     .uid(args.window_uid).sink_to(DeltaSink.for_row_data(args.windows)).uid("windows-sink"))
    env.execute("every state")


if __name__ == "__main__":
    main()
