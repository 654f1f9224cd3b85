"""An upsert job for the upsert sink's tests: word events "word timestamp" from text files, with a
checkpoint every epoch, into two upsert Delta sinks keyed by the word:

  --totals   a rolling ``key_by(word).sum("count")``: one row per word, its latest count
  --latest   a keyed process function's changelog: per event UPDATE_BEFORE (ignored by the sink)
             and UPDATE_AFTER of the word's running count, and a DELETE (a retracted key) each
             time the count reaches a multiple of ``--retract-every``; the next event inserts it again

So after the whole input a word seen n times is (word, n) in both tables, except in --latest
where n % retract_every == 0 leaves no row.

    sluice run tests/jobs/upsert_counts.py -- --input DIR --totals T1 --latest T2
"""
import argparse

from runtime.common import Row, RowKind, Types
from runtime.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from runtime.datastream.connectors.delta import DeltaSink
from runtime.datastream.state import ValueStateDescriptor

COUNT = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])


class LatestCount(KeyedProcessFunction):
    def __init__(self, retract_every: int):
        self.retract_every = retract_every

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        before = self.count.value() or 0
        count = before + 1
        self.count.update(count)
        if before and before % self.retract_every:
            yield Row.of_kind(RowKind.UPDATE_BEFORE, word=value.word, count=before)
        if count % self.retract_every == 0:
            yield Row.of_kind(RowKind.DELETE, word=value.word, count=before)
        else:
            yield Row.of_kind(RowKind.UPDATE_AFTER if before else RowKind.INSERT, word=value.word, count=count)


def parse(line: str) -> Row:
    word, _ = line.split()
    return Row(word=word, count=1)


def build(env, input_path, totals_table, latest_table, parallelism, retract_every):
    words = env.read_text_file(input_path).map(parse, output_type=COUNT).uid("parse")
    keyed = words.key_by("word")
    (keyed.sum("count").set_parallelism(parallelism).uid("totals")
     .sink_to(DeltaSink.for_row_data(totals_table).with_upsert_keys("word")).uid("totals-sink"))
    (keyed.process(LatestCount(retract_every), output_type=COUNT).set_parallelism(parallelism).uid("latest")
     .sink_to(DeltaSink.for_row_data(latest_table).with_upsert_keys("word")).uid("latest-sink"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", required=True)
    parser.add_argument("--totals", required=True, help="upsert Delta table of the rolling sums")
    parser.add_argument("--latest", required=True, help="upsert Delta table of the process function's changelog")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--retract-every", type=int, default=7)
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    env.set_parallelism(args.parallelism)
    build(env, args.input, args.totals, args.latest, args.parallelism, args.retract_every)
    env.execute("upsert counts")


if __name__ == "__main__":
    main()
