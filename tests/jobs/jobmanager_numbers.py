"""A job for the JobManager's tests: numbers from a DataGeneratorSource into a Delta table, a
checkpoint every epoch, so the table holds each number exactly once however often the job's
driver dies. Bounded (``--count``) or unbounded (``--rate`` numbers a second, until stopped).

    sluice run -d tests/jobs/jobmanager_numbers.py -- --sink TABLE [--count N] [--rate R]
"""
import argparse

from runtime.common import Configuration, RestartStrategies, Row, Time, Types, WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import DataGeneratorSource
from runtime.datastream.connectors.datagen import RateLimiterStrategy
from runtime.datastream.connectors.delta import DeltaSink

NUMBER = Types.ROW_NAMED(["n"], [Types.LONG()])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sink", required=True, help="the Delta table of the numbers")
    parser.add_argument("--count", type=int, help="numbers in all (default: unbounded)")
    parser.add_argument("--rate", type=float, default=20, help="numbers a second of an unbounded job")
    parser.add_argument("--per-epoch", type=int, default=20, help="numbers an epoch of a bounded job")
    parser.add_argument("--name", default="jobmanager numbers")
    parser.add_argument("--restarts", type=int, default=3, help="fixed-delay restarts (0.5 s apart) before it fails")
    args = parser.parse_args(argv)
    conf = Configuration()
    if args.count is not None:
        conf.set_string("sluice.epoch.max-records-per-split", str(args.per_epoch))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(args.restarts, Time.milliseconds(500)))
    rate = RateLimiterStrategy.per_second(args.rate) if args.count is None else RateLimiterStrategy.no_op()
    (env.from_source(DataGeneratorSource(lambda i: i, count=args.count, rate_limiter=rate, type_info=Types.LONG()),
                     WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
     .map(lambda n: Row(n=n), output_type=NUMBER).uid("rows")
     .sink_to(DeltaSink.for_row_data(args.sink)).uid("sink"))
    env.execute(args.name)


if __name__ == "__main__":
    main()
