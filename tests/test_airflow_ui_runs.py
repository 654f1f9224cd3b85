"""What a user triggers from Airflow's UI, through the real Airflow: ``bin/dev airflow`` (airflow
standalone: scheduler with the LocalExecutor, DAG processor, API server, triggerer) started here
in an AIRFLOW_HOME of its own, runs triggered through the REST API as the UI triggers them, and
the Sluice web view's Cancel (the Airflow: tests/real_airflow.py, shared by the test run). Each
task runs in a process of its own, as in production.

  * a run of the shipped wordcount with conf, then a rescale of it: the windows really change
    parallelism, from the checkpoint;
  * a job failing on one word is retried as its restart strategy says (one restart), each
    attempt's failure and decision in that attempt's task log at their levels (the default
    strategy's bound of 3 restarts: test_airflow_control_plane.py, through dag.test());
  * Cancel in the web view stops a running job: the run is CANCELED, nothing retries;
  * bin/dev airflow binds 127.0.0.1, prints no auth-manager or deprecation warnings, and stops
    its whole process tree on SIGTERM.
"""
from __future__ import annotations

import signal
import subprocess
import urllib.parse

import pytest

from real_airflow import alive, tree
from waiting import wait_until


FAILING_JOB = '''"""always_failing: a word its map cannot take, restarted once."""
from runtime.common import RestartStrategies, Types
from runtime.datastream import StreamExecutionEnvironment
from runtime.jobmaster import JobDeployment

DEPLOYMENT = JobDeployment(args=("--input", "include/data"))


def check(word):
    if word == "be":
        raise ValueError("'be' is not allowed")
    return word


if __name__ == "__main__":
    import sys
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)      # one subtask fails: "Check (1/1)"
    env.enable_checkpointing(1000)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    (env.read_text_file(sys.argv[2]).flat_map(lambda line: line.split(), output_type=Types.STRING())
     .map(check, output_type=Types.STRING()).name("Check").uid("check").print())
    env.execute("always failing")
'''

SLOW_JOB = '''"""slow_counts: a slow map over generated numbers, epoch after epoch (to cancel)."""
import time
from runtime.common import Types, WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import DataGeneratorSource
from runtime.jobmaster import JobDeployment

DEPLOYMENT = JobDeployment()


def slowly(n):
    time.sleep(0.2)
    return n


if __name__ == "__main__":
    from runtime.common import Configuration
    conf = Configuration()
    conf.set_string("sluice.epoch.max-records-per-split", "5")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.enable_checkpointing(1000)
    (env.from_source(DataGeneratorSource(lambda i: i, count=100_000, type_info=Types.LONG()),
                     WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
     .map(slowly, output_type=Types.LONG()).uid("slowly").print())
    env.execute("slow counts")
'''


AIRFLOW_JOBS = {"always_failing.py": FAILING_JOB, "slow_counts.py": SLOW_JOB}


def test_a_triggered_run_with_conf_then_a_rescale_of_the_shipped_wordcount(real_airflow):
    first = real_airflow.trigger("wordcount", {"parallelism": 2, "restore_from": "none"})
    assert real_airflow.wait_for_run("wordcount", first) == "success"
    [run] = real_airflow.executions("Socket Window WordCount")
    window = next(name for name in run.parallelism if name.startswith("Window"))
    assert (run.dag_run_id, run.state, run.parallelism[window]) == (first, "FINISHED", 2)

    rescale = real_airflow.trigger("wordcount", {"parallelism": 3})
    assert real_airflow.wait_for_run("wordcount", rescale) == "success"
    latest = real_airflow.executions("Socket Window WordCount")[0]
    assert (latest.dag_run_id, latest.state, latest.parallelism[window]) == (rescale, "FINISHED", 3)
    assert latest.restored_from == run.last_checkpoint is not None
    # The run's own log says which operator runs at what; progress lines are INFO, not errors.
    compile_log = " ".join(e.get("event", "") for e in real_airflow.task_log("wordcount", rescale, "compile", 1))
    assert f"{window}: parallelism 3 (the run's parallelism)" in compile_log
    run_log = real_airflow.task_log("wordcount", rescale, "run", 1)
    progress = [e for e in run_log if "epoch 0:" in e.get("event", "") or "restored checkpoint" in e.get("event", "")]
    assert progress and {e.get("level") for e in progress} == {"info"}
    assert not [e for e in run_log if e.get("level") == "error"]


def test_a_failing_job_is_retried_as_its_strategy_says_and_each_attempt_logs_why(real_airflow):
    run_id = real_airflow.trigger("always_failing", {})
    assert real_airflow.wait_for_run("always_failing", run_id) == "failed"
    # Bounded by attempts, not by a clock: one restart, then the strategy gives up.
    attempts = list(reversed(real_airflow.executions("always failing")))
    assert [(a.attempt, a.restarting) for a in attempts] == [(1, True), (2, False)]
    # Each attempt's log says its failure, cause first, and the decision, as the attempt fails.
    first = real_airflow.task_log("always_failing", run_id, "run", 1)
    failed = [e for e in first if "attempt 1 failed: Check (1/1) failed: ValueError: 'be' is not allowed" in
              e.get("event", "")]
    decided = [e for e in first if "restarting in" in e.get("event", "") and e.get("level") == "warning"]
    assert failed and failed[0]["level"] == "error" and decided
    last = real_airflow.task_log("always_failing", run_id, "run", 2)
    assert any("not restarting after failure 2: the restart strategy gave up (Restart with fixed delay (0 ms). "
               "#1 restart attempts.)" in e.get("event", "") and e.get("level") == "error" for e in last), last


def test_cancel_in_the_web_view_stops_a_running_job(real_airflow):
    run_id = real_airflow.trigger("slow_counts", {})
    wait_until(lambda: [r for r in real_airflow.executions("slow counts") if r.dag_run_id == run_id and r.epochs >= 0
                        and r.state == "RUNNING"], 240, "the slow job running", interval=0.5, log=real_airflow.log)
    page = real_airflow.request("GET", "/sluice/jobs/slow_counts", cookie=True)[1]
    assert 'class="inline cancel"' in page and run_id in page
    status, _ = real_airflow.request("POST", "/sluice/jobs/slow_counts/cancel", form={"dag_run_id": run_id}, cookie=True)
    assert status == 303
    assert real_airflow.wait_for_run("slow_counts", run_id, timeout=60) == "failed"
    wait_until(lambda: real_airflow.executions("slow counts")[0].state != "RUNNING", 90, "the canceled run's record",
               interval=0.5, log=real_airflow.log)
    record = real_airflow.executions("slow counts")[0]
    assert (record.dag_run_id, record.state, record.attempt) == (run_id, "CANCELED", 1)
    tis = real_airflow.api("GET", f"/dags/slow_counts/dagRuns/{urllib.parse.quote(run_id)}/taskInstances")
    run_ti = next(t for t in tis["task_instances"] if t["task_id"] == "run")
    assert (run_ti["state"], run_ti["try_number"]) == ("failed", 1)


@pytest.mark.stops_real_airflow
def test_bin_dev_airflow_is_quiet_local_and_stops_its_whole_tree(real_airflow):
    text = real_airflow.log.read_text()
    assert "looks like production" not in text
    assert "DeprecationWarning" not in text and "RemovedInAirflow" not in text
    port = urllib.parse.urlsplit(real_airflow.url).port
    listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
    assert f"127.0.0.1:{port}" in listening and f"0.0.0.0:{port}" not in listening
    pids = tree(real_airflow.proc.pid)
    assert len(pids) >= 4       # standalone, scheduler, DAG processor, API server, triggerer, ...
    real_airflow.proc.send_signal(signal.SIGTERM)
    assert real_airflow.proc.wait(60) == 143
    wait_until(lambda: not alive(pids), 30, "the end of bin/dev airflow's process tree", interval=0.1)
    assert not alive(pids)
