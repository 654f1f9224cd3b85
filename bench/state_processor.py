"""The state processor (runtime/state_processor): bootstrapping N keys into a savepoint and
reading N keys' state into a DataFrame, each against writing the same rows to a Delta table with
delta-rs (``write_deltalake``) in the same run.

The rows: N string keys ``k<i>`` with a LONG value. *bootstrap*: ``SavepointWriter.new_savepoint()
.with_operator(uid, OperatorTransformation.bootstrap_with(table).key_by("key", STRING)
.transform(f))`` where ``f`` sets a ValueState[LONG] per key (a Python call per key, as Flink's
KeyedStateBootstrapFunction), ``--parallelism`` subtasks in this process (an Arrow table) or in
Spark (``--spark``: a DataFrame, mapInArrow). *read*: ``SavepointReader.keyed_state`` (Arrow) and
the DataFrame of it (``spark.createDataFrame``, counted). The Spark session starts outside the
timings. Every result is checked (the keys and values read back are those bootstrapped).

    .venv/bin/python bench/state_processor.py [--keys 10000000] [--spark]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from runtime.common import Types  # noqa: E402
from runtime.datastream.state import ValueStateDescriptor  # noqa: E402
from runtime.state_processor.bootstrap import KeyedStateBootstrapFunction, OperatorTransformation  # noqa: E402
from runtime.state_processor.reader import SavepointReader, to_dataframe  # noqa: E402
from runtime.state_processor.writer import SavepointWriter  # noqa: E402


class SetValue(KeyedStateBootstrapFunction):
    def open(self, ctx):
        self.state = ctx.get_state(ValueStateDescriptor("value", Types.LONG()))

    def process_element(self, value, ctx):
        self.state.update(value.value)


def rows(n: int) -> pa.Table:
    ids = pa.array(range(n), pa.int64())
    return pa.table({"key": pc.binary_join_element_wise("k", pc.cast(ids, pa.string()), ""), "value": ids})


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=10_000_000)
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--spark", action="store_true", help="bootstrap from a DataFrame in Spark (local[2])")
    p.add_argument("--workdir")
    args = p.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="bench-state-processor-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    from deltalake import write_deltalake
    from runtime.execution.spark import get_spark_session
    spark = get_spark_session("local[2]", "bench-state-processor")
    table = rows(args.keys)
    data = spark.createDataFrame(table).repartition(args.parallelism).cache() if args.spark else table
    if args.spark:
        data.count()

    delta_s, _ = timed(lambda: write_deltalake(os.path.join(work, "delta"), table))
    savepoint = os.path.join(work, "savepoint")
    bootstrap_s, _ = timed(lambda: SavepointWriter.new_savepoint(128).with_operator(
        "counts", OperatorTransformation.bootstrap_with(data).key_by("key", key_type=Types.STRING())
        .transform(SetValue()).set_parallelism(args.parallelism)).write(savepoint))
    arrow_s, state = timed(lambda: SavepointReader.read(savepoint).keyed_state("counts", "value"))
    df_s, counted = timed(lambda: to_dataframe(spark, state).count())
    read_s = arrow_s + df_s
    ok = counted == args.keys and state.num_rows == args.keys and \
        pc.sum(state.column("value")).as_py() == args.keys * (args.keys - 1) // 2 and \
        pc.all(pc.equal(state.column("key"), pc.binary_join_element_wise(
            "k", pc.cast(state.column("value"), pa.string()), ""))).as_py()
    print(f"{args.keys:,} keys, bootstrap {'in Spark (DataFrame)' if args.spark else 'in process (Arrow table)'}, "
          f"parallelism {args.parallelism}")
    print(f"{'what':<44}{'s':>9}{'keys/s':>13}{'/ delta-rs':>12}")
    for what, s in (("delta-rs write_deltalake of the rows", delta_s),
                    ("bootstrap (SavepointWriter)", bootstrap_s),
                    ("read: SavepointReader -> Arrow", arrow_s),
                    ("read: -> DataFrame (createDataFrame, count)", df_s),
                    ("read: both", read_s)):
        print(f"{what:<44}{s:>9.2f}{args.keys / s:>13,.0f}{s / delta_s:>11.1f}x")
    print("checks:", "ok" if ok else "FAILED")
    spark.stop()
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
