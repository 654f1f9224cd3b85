"""A checkpointed job for the checkpoint tests: word events "word timestamp" from text files,
counted per word in 10-second event-time windows (window state, timers) into one Delta table,
and as a running count in typed keyed state into another, with a checkpoint every epoch.

    sluice run tests/jobs/checkpointed_counts.py -- --input DIR --windows T1 --running T2
"""
import argparse
import os
import signal

from runtime.common import Configuration, Duration, Row, Time, Types, WatermarkStrategy
from runtime.common.throwables import ThrowableType
from runtime.datastream import KeyedProcessFunction, StreamExecutionEnvironment, TumblingEventTimeWindows
from runtime.datastream.connectors.delta import DeltaSink
from runtime.datastream.state import ValueStateDescriptor

EVENT = Types.ROW_NAMED(["word", "ts", "count"], [Types.STRING(), Types.LONG(), Types.LONG()])
RUNNING = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])


class RunningCount(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.events = runtime_context.get_metrics_group().add_group("running").counter("events")

    def process_element(self, value, ctx):
        self.events.inc()
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        yield Row(word=value.word, count=count)


def parse(line: str) -> Row:
    word, ts = line.split()
    return Row(word=word, ts=int(ts), count=1)


class InjectedUnrecoverableError(RuntimeError):
    """A failure a restart cannot cure, as a state type that cannot migrate is."""

    throwable_type = ThrowableType.NON_RECOVERABLE_ERROR


class FailAt:
    """Fails on the first event at or after ``ts`` (an epoch in the middle of the input): every
    time, or only once when ``marker`` is given (the marker file remembers it failed). ``kill``:
    the process running the task dies instead (SIGKILL, as a crash in native code);
    ``unrecoverable``: with an error no restart can cure."""

    def __init__(self, ts: int, marker=None, kill: bool = False, unrecoverable: bool = False):
        self.ts, self.marker, self.kill, self.unrecoverable = ts, marker, kill, unrecoverable

    def __call__(self, event):
        if event.ts >= self.ts and not (self.marker and os.path.exists(self.marker)):
            if self.marker:
                open(self.marker, "w").close()
            if self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise (InjectedUnrecoverableError if self.unrecoverable else RuntimeError)(
                f"injected failure at event {event}")
        return event


def build(env, input_path, windows_table, running_table, parallelism, window_uid="window-counts", fail=None):
    events = env.read_text_file(input_path).map(parse, output_type=EVENT).uid("parse")
    if fail is not None:
        events = events.map(fail, output_type=EVENT).uid("fail")
    events = (events
              .assign_timestamps_and_watermarks(
                  WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(2))
                  .with_timestamp_assigner(lambda e, _: e.ts)).uid("timestamps"))
    keyed = events.key_by(lambda e: e.word, key_type=Types.STRING())
    (keyed.window(TumblingEventTimeWindows.of(Time.seconds(10))).sum("count")
     .set_parallelism(parallelism).uid(window_uid)
     .sink_to(DeltaSink.for_row_data(windows_table)).uid("windows-sink"))
    (keyed.process(RunningCount(), output_type=RUNNING).set_parallelism(parallelism).uid("running-count")
     .sink_to(DeltaSink.for_row_data(running_table)).uid("running-sink"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", required=True)
    parser.add_argument("--windows", required=True, help="Delta table of the window counts")
    parser.add_argument("--running", required=True, help="Delta table of the running counts")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--window-uid", default="window-counts")
    parser.add_argument("--max-parallelism", type=int)
    parser.add_argument("--checkpoint-interval-ms", type=int, help="checkpoint by time instead of every epoch")
    args = parser.parse_args(argv)
    conf = Configuration()
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    if args.max_parallelism:
        env.set_max_parallelism(args.max_parallelism)
    if args.checkpoint_interval_ms:
        env.enable_checkpointing(args.checkpoint_interval_ms)
    else:
        env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    build(env, args.input, args.windows, args.running, args.parallelism, args.window_uid)
    env.execute("checkpointed counts")


if __name__ == "__main__":
    main()
