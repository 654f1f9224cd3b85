"""A checkpointed CEP job for tests/test_cep.py: "key kind timestamp" lines, an `a` followed by
a `b` per key, each match a row (key, a, b) in a Delta table, a checkpoint every epoch.

    sluice run tests/jobs/cep_matches.py -- --input DIR --output TABLE [--parallelism P]
"""
import argparse

from runtime.cep import CEP, Pattern
from runtime.common import Configuration, Duration, Row, Types, WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors.delta import DeltaSink

EVENT = Types.TUPLE([Types.STRING(), Types.STRING(), Types.LONG()])
MATCH = Types.ROW_NAMED(["key", "a", "b"], [Types.STRING(), Types.LONG(), Types.LONG()])


def parse(line: str):
    key, kind, ts = line.split()
    return key, kind, int(ts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args(argv)
    conf = Configuration()
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    env.set_parallelism(2)      # one input file, two source subtasks: one has no split (idle)
    events = (env.read_text_file(args.input).map(parse, output_type=EVENT).uid("parse")
              .assign_timestamps_and_watermarks(
                  WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(5))
                  .with_timestamp_assigner(lambda e, _: e[2])).uid("timestamps"))
    pattern = (Pattern.begin("a").where(lambda e: e[1] == "a")
               .followed_by("b").where(lambda e: e[1] == "b"))
    (CEP.pattern(events.key_by(lambda e: e[0], key_type=Types.STRING()), pattern)
     .select(lambda m: Row(key=m["a"][0][0], a=m["a"][0][2], b=m["b"][0][2]), output_type=MATCH)
     .set_parallelism(args.parallelism).uid("cep")
     .sink_to(DeltaSink.for_row_data(args.output)).uid("matches-sink"))
    env.execute("cep matches")


if __name__ == "__main__":
    main()
