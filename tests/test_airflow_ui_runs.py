"""What a user triggers from Airflow's UI, through the real Airflow: ``bin/dev airflow`` (airflow
standalone: scheduler with the LocalExecutor, DAG processor, API server, triggerer) started here
in an AIRFLOW_HOME of its own, runs triggered through the REST API as the UI triggers them, and
the Sluice web view's Cancel (the Airflow: tests/real_airflow.py, shared by the test run). Each
task runs in a process of its own, as in production.

  * a run of the shipped wordcount with conf, then a rescale of it: the windows really change
    parallelism, from the checkpoint;
  * a job failing on one word is restarted as its restart strategy says (one restart) by its
    driver, in the same Spark application, within the run task's one Airflow try, each attempt's
    failure and decision in the task log at their levels (the default strategy's bound of 3
    restarts: test_airflow_control_plane.py, through dag.test()); a job that fails once succeeds
    on its second attempt in the same Spark application, and ``finish`` runs;
  * Stop with savepoint in the web view ends a running job after its epoch with a savepoint: the
    run is FINISHED, its DAG run succeeds; the savepoint's Restore button starts a run from it,
    and Cancel in the web view stops that run: CANCELED, nothing retries, one quiet line in the
    task log instead of the teardown's errors;
  * a run refused before it deploys (parallelism 200) changes neither the job's plan nor the view;
  * bin/dev airflow binds 127.0.0.1, prints no auth-manager or deprecation warnings, and stops
    its whole process tree on SIGTERM.
"""
from __future__ import annotations

import json
import signal
import subprocess
import urllib.parse

import pytest

from real_airflow import alive, tree
from waiting import wait_until


FAILING_JOB = '''"""NAME: a word its map cannot take (WHEN), restarted once."""
import os
from runtime.common import RestartStrategies, Types
from runtime.datastream import StreamExecutionEnvironment
from runtime.jobmaster import JobDeployment

DEPLOYMENT = JobDeployment(args=("--input", "include/data", "{warehouse}/NAME.failed"))


def checker(marker, once):
    def check(word):
        if word == "be" and not (once and os.path.exists(marker)):
            if once:
                open(marker, "w").close()
            raise ValueError("'be' is not allowed")
        return word
    return check


if __name__ == "__main__":
    import sys
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)      # one subtask fails: "Check (1/1)"
    env.enable_checkpointing(1000)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    (env.read_text_file(sys.argv[2]).flat_map(lambda line: line.split(), output_type=Types.STRING())
     .map(checker(sys.argv[3], ONCE), output_type=Types.STRING()).name("Check").uid("check").print())
    env.execute("NAME")
'''


def failing_job(name: str, once: bool) -> str:
    return (FAILING_JOB.replace("NAME", name).replace("WHEN", "once" if once else "always")
            .replace("ONCE", str(once)))


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


AIRFLOW_JOBS = {"always_failing.py": failing_job("always_failing", once=False),
                "failing_once.py": failing_job("failing_once", once=True), "slow_counts.py": SLOW_JOB}


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

    # A run refused before it deploys (a parallelism above the restored state's max parallelism,
    # refused in execution_graph) changes neither the job's plan nor what the view draws.
    refused = real_airflow.trigger("wordcount", {"parallelism": 200})
    assert real_airflow.wait_for_run("wordcount", refused) == "failed"
    tis = real_airflow.api("GET", f"/dags/wordcount/dagRuns/{urllib.parse.quote(refused)}/taskInstances")
    assert {t["task_id"]: t["state"] for t in tis["task_instances"]}["execution_graph"] == "failed"
    status, text = real_airflow.request("GET", "/sluice/api/jobs/wordcount", cookie=True)
    assert status == 200, text
    shown = {v["name"]: v["parallelism"] for v in json.loads(text)["graph"]["vertices"]}
    assert shown[window] == 3
    assert real_airflow.executions("Socket Window WordCount")[0].dag_run_id == rescale


def test_a_failing_job_is_retried_as_its_strategy_says_and_each_attempt_logs_why(real_airflow):
    run_id = real_airflow.trigger("always_failing", {})
    once_id = real_airflow.trigger("failing_once", {})        # runs meanwhile: no extra wait
    assert real_airflow.wait_for_run("always_failing", run_id) == "failed"
    # Bounded by attempts, not by a clock: one restart, then the strategy gives up. The driver
    # restarted the attempt itself, in its Spark application, within the run task's one try.
    attempts = list(reversed(real_airflow.executions("always_failing")))
    assert [(a.attempt, a.restarting) for a in attempts] == [(1, True), (2, False)]
    assert attempts[0].application_id is not None and attempts[1].application_id == attempts[0].application_id
    assert run_task(real_airflow, "always_failing", run_id)["try_number"] == 1
    # Each attempt's failure, cause first, and the decision on it, as the attempt fails.
    log = real_airflow.task_log("always_failing", run_id, "run", 1)
    failed = [e for e in log if "attempt 1 failed: Check (1/1) failed: ValueError: 'be' is not allowed" in
              e.get("event", "")]
    decided = [e for e in log if "restarting in" in e.get("event", "") and e.get("level") == "warning"]
    assert failed and failed[0]["level"] == "error" and decided
    assert any("attempt 2 failed: Check (1/1) failed" in e.get("event", "") and e.get("level") == "error" for e in log)
    assert any("not restarting after failure 2: the restart strategy gave up (Restart with fixed delay (0 ms). "
               "#1 restart attempts.)" in e.get("event", "") and e.get("level") == "error" for e in log), log

    # Fails once, then the second attempt restores and finishes, in the same Spark application.
    assert real_airflow.wait_for_run("failing_once", once_id) == "success"
    first, second = reversed(real_airflow.executions("failing_once"))
    assert [(r.attempt, r.state, r.restarting) for r in (first, second)] == [(1, "FAILED", True), (2, "FINISHED", None)]
    assert first.application_id is not None and second.application_id == first.application_id
    assert second.restored_from == first.last_checkpoint
    assert run_task(real_airflow, "failing_once", once_id)["try_number"] == 1


# What Airflow itself logs when a task's run is failed under it (Airflow's "task" logger).
AIRFLOWS_OWN = ("Server indicated the task shouldn't be running anymore", "Task failed with exception",
                "Failed to report terminal task state", "Task killed!")


def run_task(real_airflow, dag_id: str, run_id: str, task_id: str = "run") -> dict:
    tis = real_airflow.api("GET", f"/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances")
    return next(t for t in tis["task_instances"] if t["task_id"] == task_id)


def test_stop_with_savepoint_then_a_restore_of_it_canceled_quietly_in_the_web_view(real_airflow):
    def running(run_id):
        return lambda: [r for r in real_airflow.executions("slow counts") if r.dag_run_id == run_id
                        and r.state == "RUNNING"]

    run_id = real_airflow.trigger("slow_counts", {})
    wait_until(running(run_id), 240, "the slow job running", interval=0.5, log=real_airflow.log)
    page = real_airflow.request("GET", "/sluice/jobs/slow_counts", cookie=True)[1]
    assert 'class="inline cancel"' in page and 'class="inline stop"' in page and run_id in page
    status, text = real_airflow.request("POST", "/sluice/jobs/slow_counts/stop", form={"dag_run_id": run_id}, cookie=True)
    assert status == 303, text
    # Stop with savepoint: the job ends after its epoch, FINISHED, the DAG run succeeds, finish runs.
    assert real_airflow.wait_for_run("slow_counts", run_id, timeout=120) == "success"
    stopped = real_airflow.executions("slow counts")[0]
    assert (stopped.dag_run_id, stopped.state, stopped.attempt) == (run_id, "FINISHED", 1)
    assert stopped.savepoint and stopped.last_checkpoint is not None
    assert run_task(real_airflow, "slow_counts", run_id, "finish")["state"] == "success"
    note = real_airflow.api("GET", f"/dags/slow_counts/dagRuns/{urllib.parse.quote(run_id)}")["note"]
    assert "Stop with savepoint requested from the Sluice web view by admin" in note
    # The savepoint is in the view's savepoints with its Restore button, which starts a run from it.
    page = real_airflow.request("GET", "/sluice/jobs/slow_counts", cookie=True)[1]
    assert f'data-savepoint="{stopped.savepoint}"' in page
    status, _ = real_airflow.request("POST", "/sluice/jobs/slow_counts/restore",
                                     form={"checkpoint": stopped.savepoint}, cookie=True)
    assert status == 303
    restored_id = next(r["dag_run_id"] for r in real_airflow.api("GET", "/dags/slow_counts/dagRuns")["dag_runs"]
                       if r["dag_run_id"] != run_id)
    wait_until(running(restored_id), 240, "the restored run running", interval=0.5, log=real_airflow.log)

    # Cancel: the run is CANCELED, nothing retries, and its log says so once, without errors.
    status, _ = real_airflow.request("POST", "/sluice/jobs/slow_counts/cancel", form={"dag_run_id": restored_id},
                                     cookie=True)
    assert status == 303
    assert real_airflow.wait_for_run("slow_counts", restored_id, timeout=60) == "failed"
    wait_until(lambda: real_airflow.executions("slow counts")[0].state != "RUNNING", 90, "the canceled run's record",
               interval=0.5, log=real_airflow.log)
    record = real_airflow.executions("slow counts")[0]
    assert (record.dag_run_id, record.state, record.attempt) == (restored_id, "CANCELED", 1)
    assert record.restored_from == stopped.last_checkpoint
    ti = run_task(real_airflow, "slow_counts", restored_id)
    assert (ti["state"], ti["try_number"]) == ("failed", 1)
    # After Airflow's note that the run was failed, the job says once, as a warning, that it was
    # canceled; no error from Spark, py4j or the runtime: only Airflow's own lines about a task whose
    # run was failed under it (its supervisor's and task runner's, which any killed task logs).
    log = real_airflow.task_log("slow_counts", restored_id, "run", 1)
    start = next(i for i, e in enumerate(log) if "shouldn't be running anymore" in e.get("event", ""))
    said = [e for e in log[start:] if "canceled after" in e.get("event", "")]
    assert len(said) == 1 and said[0]["level"] == "warning", log[start:]
    errors = [e for e in log[start:] if e.get("level") in ("error", "critical")]
    assert errors and all(e.get("logger") == "task" and e["event"].startswith(AIRFLOWS_OWN) for e in errors), errors
    # A second Cancel, now that the run ended, is refused.
    status, text = real_airflow.request("POST", "/sluice/jobs/slow_counts/cancel", form={"dag_run_id": restored_id},
                                        cookie=True)
    assert status == 409 and "no running run" in text


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
