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
  new driver   the same job with ``no_restart``: the driver fails and exits; a second
               ``sluice run`` restores the latest checkpoint in a new JVM. (An Airflow retry
               adds the scheduler's pick-up and the task process's start on top: not counted.)
  JobManager   the job submitted to a ``sluice jobmanager`` (runtime/jobmanager), 1,000,000 numbers and
               no injected failure; once 3 checkpoints completed its driver is killed with SIGKILL.
               The JobManager notices, records the failure with the strategy's decision and starts
               the next attempt in another driver, restoring the latest checkpoint: a new JVM
               (``--standby-drivers 0``), or a warm standby driver (``--standby-drivers 1``, killed
               once the standby is ready). Measured from the kill.

From the failed attempt's ``ended_at`` in the execution history (the JobManager: the kill) to the
end of the next attempt's first epoch in the epoch log's metrics (its ``started_at`` +
``duration_ms``). The ratios printed are against in-session.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

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
COUNT = int(sys.argv[2]) if len(sys.argv) > 2 else 400
# "none": the run fails at its first failure (Flink's no_restart), for the next attempt in a new driver.
RESTART = sys.argv[3] if len(sys.argv) > 3 else "fixed-delay"


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
env.set_restart_strategy(RestartStrategies.no_restart() if RESTART == "none" else
                         RestartStrategies.fixed_delay_restart(1, 0))
(env.from_source(DataGeneratorSource(lambda i: i, count=COUNT, type_info=Types.LONG()),
                 WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
 .map(fail_once, output_type=Types.LONG()).uid("fail-once").print())
env.execute("restart bench")
'''


def sluice_run(job: str, warehouse: str, marker: str, *options: str, job_args: tuple = ()) -> int:
    return subprocess.run([SLUICE, "run", job, "--warehouse", warehouse, *options, "--", marker, *job_args],
                          cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


def gap(warehouse: str) -> float:
    """Seconds from the failed attempt's end to the end of the next attempt's first epoch."""
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.execution.history import ExecutionHistory
    from runtime.storage.layout import job_dir
    directory = job_dir(warehouse, "restart bench")
    failed, next_run = sorted(ExecutionHistory(directory).executions(), key=lambda r: r.started_at)
    assert (failed.state, next_run.state) == ("FAILED", "FINISHED"), (failed, next_run)
    first = CheckpointStorage(directory).epoch_log.epoch_metrics(next_run.run_id)[0]
    return first["started_at"] + first["duration_ms"] / 1000 - failed.ended_at


def wait(condition, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not happen within {timeout} s")


def jobmanager_gap(job: str, w: str, standby: int) -> float:
    """Seconds from a SIGKILL of the job's driver under a JobManager to the end of the next
    attempt's first epoch (in another driver, restoring the latest checkpoint)."""
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.execution.history import ExecutionHistory
    from runtime.jobmanager.rest_client import RestClusterClient, address_file
    from runtime.storage.layout import job_dir
    os.makedirs(w)
    open(w + ".marker", "w").close()        # no injected failure: the kill is the failure
    with open(w + ".jobmanager.log", "w") as log:
        jm = subprocess.Popen([SLUICE, "jobmanager", "--warehouse", w, "--port", "0", "--standby-drivers",
                               str(standby)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def url():
            try:
                with open(address_file(w)) as f:
                    return json.load(f)["url"]
            except (OSError, ValueError):
                return None
        client = RestClusterClient(wait(url, 60, "the JobManager's address"))
        jid = client.submit_job(script=job, args=[w + ".marker", "1000000"])["jobid"]     # runs until canceled
        wait(lambda: client.job_checkpoints(jid)["counts"]["completed"] >= 3, 300, "3 checkpoints")
        if standby:
            wait(lambda: client.overview()["standby-drivers"] >= standby, 300, "a ready standby driver")
        killed = time.time()
        os.kill(client.job_details(jid)["driver"]["pid"], signal.SIGKILL)
        directory = job_dir(w, "restart bench")
        history = ExecutionHistory(directory)

        def next_epoch():
            second = [r for r in history.attempts(client.job_details(jid)["dag-run-id"]) if r.attempt == 2]
            epochs = CheckpointStorage(directory).epoch_log.epoch_metrics(second[0].run_id) if second else []
            return epochs[0] if epochs else None
        first = wait(next_epoch, 300, "the next attempt's first epoch")
        client.cancel_job(jid)
        client.wait_for_terminal(jid, 120)
        return first["started_at"] + first["duration_ms"] / 1000 - killed
    finally:
        jm.terminate()
        jm.wait(60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="sluice-restart-bench-")
    job = os.path.join(work, "restart_bench.py")
    with open(job, "w") as f:
        f.write(JOB)
    in_session, new_driver, jm_cold, jm_warm = [], [], [], []
    for i in range(args.rounds):
        w = os.path.join(work, f"in-session-{i}")
        assert sluice_run(job, w, os.path.join(w + ".marker"), "-D", f"sluice.airflow.dag-run-id=bench-{i}") == 0
        in_session.append(gap(w))
        w = os.path.join(work, f"new-driver-{i}")
        assert sluice_run(job, w, w + ".marker", job_args=("400", "none")) == 1     # fails: no restart in it
        assert sluice_run(job, w, w + ".marker") == 0          # the next attempt: a new driver, restoring
        new_driver.append(gap(w))
        jm_cold.append(jobmanager_gap(job, os.path.join(work, f"jobmanager-cold-{i}"), 0))
        jm_warm.append(jobmanager_gap(job, os.path.join(work, f"jobmanager-warm-{i}"), 1))
        print(f"round {i + 1}: in-session {in_session[-1]:.2f} s, new driver {new_driver[-1]:.2f} s, JobManager "
              f"driver kill -9: new driver {jm_cold[-1]:.2f} s, standby driver {jm_warm[-1]:.2f} s", flush=True)
    a, b = statistics.median(in_session), statistics.median(new_driver)
    c, d = statistics.median(jm_cold), statistics.median(jm_warm)
    print(f"failure -> next attempt's first epoch (median of {args.rounds}): in-session {a:.2f} s, "
          f"new driver {b:.2f} s (ratio {b / a:.1f}x); JobManager after a driver kill -9: new driver {c:.2f} s "
          f"({c / a:.1f}x), standby driver {d:.2f} s ({d / a:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
