"""A job for the delta-spark sink tests: "word id" lines from text files, a checkpoint every epoch,
each line appended once to every ``--append`` table as (word, id) and counted per word into every
``--upsert`` table as (word, count), each a Delta sink whose writer Sluice chooses from the table's
protocol (``--writer`` forces one).

    sluice run tests/jobs/estate_sinks.py -- --input DIR --append T1,T2 --upsert U1,U2
"""
import argparse

from runtime.common import Row, Types
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors.delta import DeltaSink

EVENT = Types.ROW_NAMED(["word", "id"], [Types.STRING(), Types.STRING()])
COUNT = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])


def parse(line: str) -> Row:
    word, id_ = line.split()
    return Row(word=word, id=id_)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", required=True)
    parser.add_argument("--append", default="", help="comma-separated Delta tables taking each line once")
    parser.add_argument("--upsert", default="", help="comma-separated Delta tables of each word's count")
    parser.add_argument("--writer", default=None, help="delta-rs or delta-spark (default: per table)")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    env.set_parallelism(2)
    events = env.read_text_file(args.input).map(parse, output_type=EVENT).uid("parse")
    for i, table in enumerate(t for t in args.append.split(",") if t):
        events.sink_to(DeltaSink.for_row_data(table).with_writer(args.writer)).uid(f"append-{i}")
    if args.upsert:
        counts = (events.map(lambda e: Row(word=e.word, count=1), output_type=COUNT).uid("one")
                  .key_by("word").sum("count").uid("counts"))
        for i, table in enumerate(t for t in args.upsert.split(",") if t):
            counts.sink_to(DeltaSink.for_row_data(table).with_upsert_keys("word").with_writer(args.writer)).uid(f"upsert-{i}")
    env.execute("estate sinks")


if __name__ == "__main__":
    main()
