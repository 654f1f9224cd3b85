"""A driver's start with its Python daemons forked from the fork server (the engine imported once:
runtime.execution.daemon_fork_server) against Spark's own daemons (``spark.python.daemon.module=
pyspark.daemon``: each a new interpreter, its worker importing the engine), in the same run,
alternated, each run a new driver process.

    .venv/bin/python bench/python_workers.py [--runs 5] [--keyed 4] [--parallelism 2]

The job: 2,000 records -> ``--keyed`` keyed operators one after another (each a running count,
``key_by().reduce()``: its subtasks keep their state in Python worker pools of their own,
``--keyed`` x ``--parallelism`` pools beside the slots' ``--parallelism``) -> ``execute_and_collect``,
checked against the counts it must give. Then the same job at ``--parallelism`` + 1 in the same
driver, as after a rescale (pools for the new subtasks start).

Figures per side, medians: the session's start (JVM and the slots' workers), the job's run, the
run at the new parallelism, the driver process's whole life, and the machine's CPU seconds over it (/proc/stat:
every process, so the machine must be quiet; the daemons' and workers' own accounting is lost
when they are reaped by a parent that ignores SIGCHLD, as Spark's daemon does).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIDES = ("forked", "spark")

DRIVER = '''
import json, sys, time
t0 = time.time()
from runtime.common import Row, Types
from runtime.datastream import StreamExecutionEnvironment
from runtime.execution.spark import get_spark_session

side, keyed, parallelism = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
PAIR = Types.ROW_NAMED(["key", "n"], [Types.STRING(), Types.LONG()])


settings = {} if side == "forked" else {"spark.python.daemon.module": "pyspark.daemon"}
get_spark_session(f"local[{parallelism}]", "bench-python-workers", settings)
t1 = time.time()


def run(p):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(p)
    stream = env.from_collection([Row(key=f"k{i % 100}", n=1) for i in range(2000)], type_info=PAIR)
    for i in range(keyed):
        stream = stream.key_by(lambda r: r.key).reduce(lambda a, b: Row(key=a.key, n=a.n + 1)).uid(f"count-{i}")
    return sorted((r.key, r.n) for r in stream.execute_and_collect())


first = run(parallelism)
t2 = time.time()
again = run(parallelism + 1)
t3 = time.time()
print(json.dumps({"session_s": t1 - t0, "job_s": t2 - t1, "rescaled_s": t3 - t2,
                  "ok": first == again == sorted((f"k{k}", n) for k in range(100) for n in range(1, 21))}))
'''


def machine_cpu() -> float:
    """Seconds of CPU every process of the machine used so far (user, nice, system, irq, softirq)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:8]]
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / os.sysconf("SC_CLK_TCK")


def one(side: str, args, work: str) -> dict:
    before, start = machine_cpu(), time.time()
    out = subprocess.run([sys.executable, "-c", DRIVER, side, str(args.keyed), str(args.parallelism)],
                         cwd=work, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT), timeout=600)
    if out.returncode:
        raise SystemExit(f"{side} run failed:\n{out.stderr[-3000:]}")
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    figures.update(process_s=time.time() - start, cpu_s=machine_cpu() - before)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keyed", type=int, default=4, help="keyed operators one after another (4)")
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="sluice-bench-python-workers-")
    runs: dict = {side: [] for side in SIDES}
    for i in range(args.runs):
        for side in SIDES if i % 2 == 0 else SIDES[::-1]:        # alternated
            runs[side].append(one(side, args, work))
            print(f"run {i + 1} {side}: " + json.dumps({k: round(v, 2) if isinstance(v, float) else v
                                                       for k, v in runs[side][-1].items()}), flush=True)
    pools = args.parallelism * (args.keyed + 1)
    print(f"\n{args.keyed} keyed operators at parallelism {args.parallelism} ({pools} worker pools), then "
          f"{args.parallelism + 1}; median of {args.runs} alternated runs, a new driver each")
    print(f"{'':34}{'forked':>10}{'Spark':>10}{'Spark / forked':>16}")
    ok = all(r["ok"] for side in SIDES for r in runs[side])
    for key, label in (("session_s", "session start (s)"), ("job_s", "the job (s)"),
                       ("rescaled_s", f"again at parallelism {args.parallelism + 1} (s)"), ("process_s", "driver process (s)"),
                       ("cpu_s", "machine CPU (s)")):
        f, s = (statistics.median(r[key] for r in runs[side]) for side in SIDES)
        print(f"{label:34}{f:10.2f}{s:10.2f}{s / f:15.2f}x")
    print("results:", "ok" if ok else "WRONG")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
