"""The ``sluice`` console script, run as a user would."""
import json
import os
import subprocess
import sys

import pytest

from seed import ROOT, WINDOW, WORDCOUNT
SLUICE = os.path.join(os.path.dirname(sys.executable), "sluice")


def run(*args):
    return subprocess.run([SLUICE, *args], capture_output=True, text=True, cwd=ROOT)


def test_plan_prints_the_visualizer_json():
    result = run("plan", "include/jobs/wordcount.py", "-p", "3")       # the windows take the run's parallelism
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert [(n["id"], n["type"], n["parallelism"]) for n in plan["nodes"]] == [
        (1, "Source: Socket Stream", 1), (2, "Flat Map", 1), (3, "Map", 1),
        (5, WINDOW, 3),
        (6, "Sink: Print to Std. Out", 1)]


def test_plan_passes_job_arguments():
    result = run("plan", WORDCOUNT, "--", "--input", "include/data")
    assert json.loads(result.stdout)["nodes"][0]["type"] == "Source: Custom File Source"


def test_slot_shortage_is_reported_without_a_traceback():
    result = run("plan", WORDCOUNT, "-p", "3", "--format", "slots", "--task-managers", "2",
                 "--slots-per-task-manager", "1")
    assert result.returncode == 1
    assert "Slots required: 3, slots allocated: 2" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_job_and_job_without_execute(tmp_path):
    result = run("plan", "include/jobs/nope.py")
    assert result.returncode == 1 and "Job script not found: include/jobs/nope.py" in result.stderr
    script = tmp_path / "noexec.py"
    script.write_text("from runtime.datastream import StreamExecutionEnvironment\n"
                      "env = StreamExecutionEnvironment.get_execution_environment()\n"
                      "env.from_collection([1]).print()\n")
    result = run("plan", str(script))
    assert result.returncode == 1 and "finished without calling execute()" in result.stderr


@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_syntax_error_is_one_line_and_its_traceback_comes_with_verbose(tmp_path, command):
    script = tmp_path / "typo.py"
    script.write_text("from runtime.datastream import StreamExecutionEnvironment\n"
                      "env = StreamExecutionEnvironment.get_execution_environment()\n"
                      "env.from_collection([1, 2]).map(lambda x: x +).print()\n"
                      "env.execute()\n")
    result = run(command, str(script))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"sluice {command}: {script}, line 3, column 46: SyntaxError: invalid syntax: "
        "env.from_collection([1, 2]).map(lambda x: x +).print()"]
    verbose = run(command, str(script), "--verbose")
    assert verbose.returncode == 1 and "Traceback (most recent call last)" in verbose.stderr
    assert verbose.stderr.strip().splitlines()[-1] == result.stderr.strip()


def test_build_errors_name_the_operator(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("from runtime.common import Types\n"
                      "from runtime.datastream import StreamExecutionEnvironment\n"
                      "env = StreamExecutionEnvironment.get_execution_environment()\n"
                      "s = env.from_collection([('a', 1)], Types.TUPLE([Types.STRING(), Types.LONG()]))\n"
                      "s.key_by(0).sum(3).print()\n"
                      "env.execute()\n")
    result = run("plan", str(script))
    assert result.returncode == 1
    assert "sum(3) on a KeyedStream" in result.stderr and "valid fields are positions 0..1" in result.stderr


def test_a_dynamic_property_must_name_an_execution_option():
    result = run("run", WORDCOUNT, "-D", "sluice.no-such-option=1")
    assert result.returncode == 1
    assert "-D sluice.no-such-option=1: unknown option; Sluice's are sluice.spark.master" in result.stderr
    result = run("run", WORDCOUNT, "-D", "sluice.task.batch-size=many")
    assert result.returncode == 1
    assert "Configuration 'sluice.task.batch-size' must be a int, got 'many'" in result.stderr


STOPPABLE_JOB = '''"""A slow map over generated numbers, epoch after epoch, checkpointed (to stop)."""
import time
from runtime.common import Configuration, Types, WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import DataGeneratorSource


def slowly(n):
    time.sleep(0.05)
    return n


conf = Configuration()
conf.set_string("sluice.epoch.max-records-per-split", "5")
env = StreamExecutionEnvironment.get_execution_environment(conf)
env.enable_checkpointing(60_000)        # rarely: the stop's own epoch checkpoints
(env.from_source(DataGeneratorSource(lambda i: i, count=100_000, type_info=Types.LONG()),
                 WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
 .map(slowly, output_type=Types.LONG()).uid("slowly").print())
env.execute("stoppable")
'''


def test_sluice_stop_ends_a_running_job_with_a_savepoint_that_restores(tmp_path):
    """Flink's ``stop --savepointPath``: the run ends after its epoch, FINISHED, with a savepoint of
    that epoch's checkpoint in a new folder under the path; the savepoint restores."""
    from runtime.execution.history import ExecutionHistory
    from runtime.storage.layout import job_dir
    from waiting import wait_until
    job, warehouse = tmp_path / "stoppable.py", tmp_path / "warehouse"
    job.write_text(STOPPABLE_JOB)
    history = ExecutionHistory(job_dir(str(warehouse), "stoppable"))
    assert "has never run" in run("stop", str(job), "--warehouse", str(warehouse)).stderr
    with open(tmp_path / "run.log", "w") as out:
        proc = subprocess.Popen([SLUICE, "run", str(job), "--warehouse", str(warehouse)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=out)
    try:
        wait_until(lambda: "epoch 1:" in (tmp_path / "run.log").read_text(), 180, "the job's second epoch",
                   interval=0.2, log=tmp_path / "run.log", proc=proc)
        stop = run("stop", str(job), "--warehouse", str(warehouse), "--savepoint-path", str(tmp_path / "points"))
        assert stop.returncode == 0, stop.stderr + (tmp_path / "run.log").read_text()[-3000:]
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    [record] = history.executions()
    path = stop.stdout.split("Savepoint completed. Path: ")[1].split()[0]
    assert (record.state, record.savepoint) == ("FINISHED", path) and path.startswith(str(tmp_path / "points") + "/")
    assert record.last_checkpoint is not None and record.epochs >= 2
    assert run("stop", str(job), "--warehouse", str(warehouse)).stderr.strip() == (
        "sluice stop: Job 'stoppable' is no longer running: its attempt 1 ended FINISHED, so there is nothing to stop.")
    restored = run("restore", str(job), "--warehouse", str(warehouse), "--savepoint", path, "--max-epochs", "1")
    assert restored.returncode == 0, restored.stderr
    assert history.executions()[0].restored_from == record.last_checkpoint


JVM_KILLING_JOB = '''"""Kills its Spark driver's JVM once (a marker file remembers it), then counts to the end."""
import os
import signal
import sys
from runtime.common import Configuration, RestartStrategies, Types, WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import DataGeneratorSource

MARKER = sys.argv[1]


def kill_the_jvm_once(n):
    if n == 30 and not os.path.exists(MARKER):
        open(MARKER, "w").close()
        daemon = os.getppid()       # pyspark's worker daemon, a child of the JVM
        with open(f"/proc/{daemon}/stat") as f:
            jvm = int(f.read().rsplit(")", 1)[1].split()[1])
        os.kill(jvm, signal.SIGKILL)
    return n


conf = Configuration()
conf.set_string("sluice.epoch.max-records-per-split", "10")
env = StreamExecutionEnvironment.get_execution_environment(conf)
env.set_parallelism(1)
env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
(env.from_source(DataGeneratorSource(lambda i: i, count=60, type_info=Types.LONG()),
                 WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
 .map(kill_the_jvm_once, output_type=Types.LONG()).uid("kill").print())
env.execute("jvm killing")
'''


def test_sluice_run_restarts_an_attempt_whose_jvm_died_in_a_fresh_session(tmp_path):
    """Under a control plane (a DAG run id), the driver restarts failed attempts itself; when the
    failure took the Spark JVM with it, the next attempt starts a fresh session (a new application)
    and restores the latest checkpoint: every number comes out (print is at least once across a restore)."""
    from runtime.execution.history import ExecutionHistory
    from runtime.storage.layout import job_dir
    job, warehouse = tmp_path / "jvm_killing.py", tmp_path / "warehouse"
    job.write_text(JVM_KILLING_JOB)
    result = subprocess.run([SLUICE, "run", str(job), "--warehouse", str(warehouse), "-D",
                             "sluice.airflow.dag-run-id=manual__1", "--", str(tmp_path / "killed")],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the next attempt starts a fresh one" in result.stderr
    first, second = ExecutionHistory(job_dir(str(warehouse), "jvm killing")).attempts("manual__1")
    assert [(r.attempt, r.state, r.restarting) for r in (first, second)] == [(1, "FAILED", True), (2, "FINISHED", None)]
    assert second.application_id != first.application_id and second.restored_from == first.last_checkpoint
    printed = [int(line.split()[-1]) for line in result.stdout.splitlines() if line.strip()]
    assert sorted(set(printed)) == list(range(60))
