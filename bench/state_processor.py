"""The state processor (runtime/state_processor): bootstrapping N keys into a savepoint and
reading N keys' state into a DataFrame, each against writing the same rows to a Delta table with
delta-rs (``write_deltalake``) in the same run, alternated, the median of ``--runs``.

The rows: N string keys ``k<i>`` with a LONG value. *bootstrap*: ``SavepointWriter.new_savepoint()
.with_operator(uid, OperatorTransformation.bootstrap_with(table).key_by("key", STRING)
.transform(f))``, ``--parallelism`` subtasks in this process (an Arrow table) or in Spark
(``--spark``: a DataFrame, mapInArrow); ``f`` is ``ValueStateBootstrapFunction(
ValueStateDescriptor("value", LONG), "value")`` (columnar), or with ``--per-key`` a Python
``KeyedStateBootstrapFunction`` called per key. *read*: ``SavepointReader.read_keyed_state``
(a DataFrame Spark reads from the state files) written to Spark's ``noop`` sink (every row and
column materialised, nothing stored: Spark's own way to time a read), and the Arrow view
(``keyed_state``) beside it. The Spark session starts outside the timings. Every result is
checked, untimed (the keys and values read back are those bootstrapped). Beside the wall time,
each step's CPU seconds (this process's threads, and Spark's JVM for the read; not the Python
workers of a ``--spark`` bootstrap, shown as n/a): on a shared machine the load moves the wall
time, the CPU time much less.

    .venv/bin/python bench/state_processor.py [--keys 10000000] [--runs 5] [--spark] [--per-key]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from runtime.common import Types  # noqa: E402
from runtime.datastream.state import ValueStateDescriptor  # noqa: E402
from runtime.state_processor.bootstrap import (  # noqa: E402
    KeyedStateBootstrapFunction, OperatorTransformation, ValueStateBootstrapFunction)
from runtime.state_processor.reader import SavepointReader  # noqa: E402
from runtime.state_processor.writer import SavepointWriter  # noqa: E402


class SetValue(KeyedStateBootstrapFunction):
    def open(self, ctx):
        self.state = ctx.get_state(ValueStateDescriptor("value", Types.LONG()))

    def process_element(self, value, ctx):
        self.state.update(value.value)


def rows(n: int) -> pa.Table:
    ids = pa.array(range(n), pa.int64())
    return pa.table({"key": pc.binary_join_element_wise("k", pc.cast(ids, pa.string()), ""), "value": ids})


def timed(fn, cpu):
    """(wall seconds, CPU seconds, result) of fn(); ``cpu()`` counts the CPU time of every process
    doing the work (this one, and Spark's JVM for a read): on a shared machine the wall time
    follows the load, the CPU time much less."""
    t, c = time.perf_counter(), cpu()
    out = fn()
    return time.perf_counter() - t, cpu() - c, out


def jvm_cpu(spark):
    """The CPU seconds Spark's JVM (local mode: the driver and its executors) has used so far."""
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()

    def cpu() -> float:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return cpu


def materialised(df):
    df.write.format("noop").mode("overwrite").save()
    return df


def checked(df, n: int) -> bool:
    """One aggregate over every column: the rows, the values' sum, keys not ``k<value>``."""
    from pyspark.sql import functions as F
    got = df.agg(F.count("*").alias("n"), F.sum("value").alias("total"), F.min("key_group").alias("lo"),
                 F.sum((F.col("key") != F.concat(F.lit("k"), F.col("value").cast("string"))).cast("int"))
                 .alias("bad")).collect()[0]
    return got["n"] == n and got["total"] == n * (n - 1) // 2 and got["bad"] == 0 and got["lo"] >= 0


def arrow_checked(state: pa.Table, n: int) -> bool:
    return state.num_rows == n and pc.sum(state.column("value")).as_py() == n * (n - 1) // 2 and pc.all(pc.equal(
        state.column("key"), pc.binary_join_element_wise("k", pc.cast(state.column("value"), pa.string()), ""))).as_py()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=10_000_000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--spark", action="store_true", help="bootstrap from a DataFrame in Spark (local[2])")
    p.add_argument("--per-key", action="store_true", help="a Python KeyedStateBootstrapFunction call per key")
    p.add_argument("--workdir")
    args = p.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="bench-state-processor-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    from deltalake import write_deltalake
    from runtime.state_processor.session import state_processor_session
    spark = state_processor_session("local[2]", "bench-state-processor")
    table = rows(args.keys)
    data = spark.createDataFrame(table).repartition(args.parallelism).cache() if args.spark else table
    if args.spark:
        data.count()
    function = SetValue() if args.per_key else ValueStateBootstrapFunction(
        ValueStateDescriptor("value", Types.LONG()), "value")
    times: dict[str, list] = {k: [] for k in ("delta", "bootstrap", "read", "arrow")}
    cpus: dict[str, list] = {k: [] for k in times}
    jvm = jvm_cpu(spark)
    ok = True
    for run in range(args.runs):
        delta = os.path.join(work, f"delta-{run}")
        savepoint = os.path.join(work, f"savepoint-{run}")
        steps = [("delta", lambda: write_deltalake(delta, table)),
                 ("bootstrap", lambda: SavepointWriter.new_savepoint(128).with_operator(
                     "counts", OperatorTransformation.bootstrap_with(data).key_by("key", key_type=Types.STRING())
                     .transform(function).set_parallelism(args.parallelism)).write(savepoint))]
        for name, step in steps if run % 2 == 0 else steps[::-1]:     # alternated
            s, c, _ = timed(step, time.process_time)
            times[name].append(s)
            cpus[name].append(c)
        s, c, df = timed(lambda: materialised(SavepointReader.read(savepoint).read_keyed_state(
            spark, "counts", "value")), lambda: time.process_time() + jvm())
        times["read"].append(s)
        cpus["read"].append(c)
        s, c, state = timed(lambda: SavepointReader.read(savepoint).keyed_state("counts", "value"), time.process_time)
        times["arrow"].append(s)
        cpus["arrow"].append(c)
        ok = ok and arrow_checked(state, args.keys) and (run < args.runs - 1 or checked(df, args.keys))
        del state, df
        shutil.rmtree(delta, ignore_errors=True)
        shutil.rmtree(savepoint, ignore_errors=True)
    median = {k: statistics.median(v) for k, v in times.items()}
    cpu = {k: statistics.median(v) for k, v in cpus.items()}
    print(f"{args.keys:,} keys, bootstrap {'per key' if args.per_key else 'columnar'} "
          f"{'in Spark (DataFrame)' if args.spark else 'in process (Arrow table)'}, parallelism {args.parallelism}, "
          f"median of {args.runs} alternated runs")
    print(f"{'what':<52}{'s':>9}{'keys/s':>13}{'/ delta-rs':>12}{'CPU s':>9}{'/ delta-rs':>12}")
    for what, key in (("delta-rs write_deltalake of the rows", "delta"),
                      ("bootstrap (SavepointWriter)", "bootstrap"),
                      ("read: DataFrame (read_keyed_state, noop sink)", "read"),
                      ("read: Arrow (keyed_state)", "arrow")):
        s = median[key]
        counted = not (args.spark and key == "bootstrap")
        print(f"{what:<52}{s:>9.2f}{args.keys / s:>13,.0f}{s / median['delta']:>11.1f}x"
              + (f"{cpu[key]:>9.2f}{cpu[key] / cpu['delta']:>11.1f}x" if counted else f"{'n/a':>9}{'n/a':>12}"))
    print("runs (s):", {k: [round(x, 2) for x in v] for k, v in times.items()})
    print("runs (CPU s):", {k: [round(x, 2) for x in v] for k, v in cpus.items()})
    print("checks:", "ok" if ok else "FAILED")
    spark.stop()
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
