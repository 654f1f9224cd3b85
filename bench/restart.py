"""Restart benchmark: time from an attempt's failure to the next attempt's first completed epoch,
with the restart in the driver's own Spark session (a run under a control plane, as Airflow's run
task runs it now) against the next attempt in a new driver process (a cold Spark start: what an
Airflow retry paid before), in the same run.

    .venv/bin/python bench/restart.py                 # 3 rounds
    .venv/bin/python bench/restart.py --rounds 1

The job: a DataGeneratorSource of 400 numbers, 20 per epoch, a map that fails once at number 200
(a marker file remembers it failed), a checkpoint every epoch, fixed-delay(1, 0): no delay, so the
gap is the restart's own cost. Each side runs ``sluice run`` in a process of its own (a cold JVM
at the start for both):

  in-session   one driver with ``-D sluice.airflow.dag-run-id=...``: it records the failure,
               asks the strategy and runs attempt 2 in the same SparkSession, restoring the
               latest checkpoint.
  new driver   the same job without a control plane: the driver fails and exits; a second
               ``sluice run`` restores the latest checkpoint in a new JVM. (An Airflow retry
               adds the scheduler's pick-up and the task process's start on top: not counted.)

From the failed attempt's ``ended_at`` in the execution history to the end of the next attempt's
first epoch in the epoch log's metrics (its ``started_at`` + ``duration_ms``). The ratio printed is
new driver / in-session.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
SLUICE = os.path.join(os.path.dirname(sys.executable), "sluice")

JOB = '''
import os, sys
from runtime.common import Configuration, RestartStrategies, Types, WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import DataGeneratorSource

MARKER = sys.argv[1]


def fail_once(n):
    if n == 200 and not os.path.exists(MARKER):
        open(MARKER, "w").close()
        raise RuntimeError("injected failure at 200")
    return n


conf = Configuration()
conf.set_string("sluice.epoch.max-records-per-split", "20")
env = StreamExecutionEnvironment.get_execution_environment(conf)
env.set_parallelism(1)
env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
(env.from_source(DataGeneratorSource(lambda i: i, count=400, type_info=Types.LONG()),
                 WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
 .map(fail_once, output_type=Types.LONG()).uid("fail-once").print())
env.execute("restart bench")
'''


def sluice_run(job: str, warehouse: str, marker: str, *options: str) -> int:
    return subprocess.run([SLUICE, "run", job, "--warehouse", warehouse, *options, "--", marker],
                          cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


def gap(warehouse: str) -> float:
    """Seconds from the failed attempt's end to the end of the next attempt's first epoch."""
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.execution.history import ExecutionHistory
    from runtime.storage.layout import job_dir
    directory = job_dir(warehouse, "restart bench")
    failed, next_run = sorted(ExecutionHistory(directory).executions(), key=lambda r: r.started_at)
    assert (failed.state, next_run.state) == ("FAILED", "FINISHED"), (failed, next_run)
    first = CheckpointStorage(directory).epoch_metrics(next_run.run_id)[0]
    return first["started_at"] + first["duration_ms"] / 1000 - failed.ended_at


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="sluice-restart-bench-")
    job = os.path.join(work, "restart_bench.py")
    with open(job, "w") as f:
        f.write(JOB)
    in_session, new_driver = [], []
    for i in range(args.rounds):
        w = os.path.join(work, f"in-session-{i}")
        assert sluice_run(job, w, os.path.join(w + ".marker"), "-D", f"sluice.airflow.dag-run-id=bench-{i}") == 0
        in_session.append(gap(w))
        w = os.path.join(work, f"new-driver-{i}")
        assert sluice_run(job, w, w + ".marker") == 1          # fails, no control plane: no restart
        assert sluice_run(job, w, w + ".marker") == 0          # the next attempt: a new driver, restoring
        new_driver.append(gap(w))
        print(f"round {i + 1}: in-session {in_session[-1]:.2f} s, new driver {new_driver[-1]:.2f} s", flush=True)
    a, b = statistics.median(in_session), statistics.median(new_driver)
    print(f"failure -> next attempt's first epoch (median of {args.rounds}): in-session {a:.2f} s, "
          f"new driver {b:.2f} s, ratio {b / a:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
