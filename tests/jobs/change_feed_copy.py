"""A checkpointed job for the change-feed restore tests: a Delta table's change data feed from a
starting version (DeltaSource.for_change_data_feed, bounded) copied into another Delta table,
with each change's _change_type, _commit_version and _commit_timestamp (as epoch ms), and a
checkpoint every epoch.

    sluice run tests/jobs/change_feed_copy.py -- --table T --starting-version 1 --out T2
"""
import argparse

from runtime.common import Row, Types, WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import DeltaSink, DeltaSource

CHANGE = Types.ROW_NAMED(["id", "v", "_change_type", "_commit_version", "_commit_timestamp"],
                         [Types.LONG(), Types.STRING(), Types.STRING(), Types.LONG(), Types.LONG()])


def as_row(change) -> Row:
    # The change columns by name: a Row's attributes with a leading underscore are refused (PyFlink's).
    return Row(id=change.id, v=change.v, _change_type=change["_change_type"],
               _commit_version=change["_commit_version"],
               _commit_timestamp=int(change["_commit_timestamp"].timestamp() * 1000))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--table", required=True)
    parser.add_argument("--starting-version", type=int, default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    (env.from_source(DeltaSource.for_change_data_feed(args.table, args.starting_version, continuous=False),
                     WatermarkStrategy.no_watermarks(), "changes").uid("changes")
        .map(as_row, output_type=CHANGE).uid("as-row")
        .sink_to(DeltaSink.for_row_data(args.out)).uid("copy"))
    env.execute("change feed copy")


if __name__ == "__main__":
    main()
