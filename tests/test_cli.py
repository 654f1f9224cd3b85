"""The ``sluice`` console script, run as a user would."""
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time

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


STOPPABLE_JOB = '''"""A slow map over generated numbers (as many as its argument says), epoch after epoch,
checkpointed (to stop)."""
import sys
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
(env.from_source(DataGeneratorSource(lambda i: i, count=int(sys.argv[1]), type_info=Types.LONG()),
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
    assert "has never run" in run("stop", str(job), "--warehouse", str(warehouse), "--", "100000").stderr
    with open(tmp_path / "run.log", "w") as out:
        proc = subprocess.Popen([SLUICE, "run", str(job), "--warehouse", str(warehouse), "--", "100000"], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=out)
    try:
        wait_until(lambda: "epoch 1:" in (tmp_path / "run.log").read_text(), 180, "the job's second epoch",
                   interval=0.2, log=tmp_path / "run.log", proc=proc)
        stop = run("stop", str(job), "--warehouse", str(warehouse), "--savepoint-path", str(tmp_path / "points"),
                   "--", "100000")
        assert stop.returncode == 0, stop.stderr + (tmp_path / "run.log").read_text()[-3000:]
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    [record] = history.executions()
    path = stop.stdout.split("Savepoint completed. Path: ")[1].split()[0]
    assert (record.state, record.savepoint) == ("FINISHED", path) and path.startswith(str(tmp_path / "points") + "/")
    assert record.last_checkpoint is not None and record.epochs >= 2
    # the hint restores the same job: its warehouse and its arguments
    assert f"Restore with: sluice restore {job} --warehouse {warehouse} --savepoint {path} -- 100000" in stop.stdout
    assert run("stop", str(job), "--warehouse", str(warehouse), "--", "100000").stderr.strip() == (
        "sluice stop: Job 'stoppable' is no longer running: its attempt 1 ended FINISHED, so there is nothing to stop.")
    restored = run("restore", str(job), "--warehouse", str(warehouse), "--savepoint", path, "--max-epochs", "1",
                   "--", "100000")
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


def parent(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def command(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().split(b"\\0")


def the_jvm():
    """This worker's JVM: its daemon's parent (Spark's own daemon), or for a daemon forked from the
    driver's fork server (runtime.execution.daemon_fork_server) the parent of a daemon module's
    process that asked that server (its server in its environment)."""
    daemon = parent(os.getpid())
    if b"java" in command(parent(daemon))[0]:
        return parent(daemon)
    server = f"SLUICE_DAEMON_FORK_SERVER={os.environ['SLUICE_DAEMON_FORK_SERVER']}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                asked = server in f.read().split(b"\\0") and b"serve" not in command(pid)
            if asked and b"java" in command(parent(pid))[0]:
                return parent(pid)
        except OSError:
            continue
    raise RuntimeError("no JVM found")


def kill_the_jvm_once(n):
    if n == 30 and not os.path.exists(MARKER):
        open(MARKER, "w").close()
        os.kill(the_jvm(), signal.SIGKILL)
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
    """The job's restart strategy applies to `sluice run` as to a job Flink's CLI submits, with no
    control plane (no DAG run id): the driver restarts the failed attempt itself; when the failure
    took the Spark JVM with it, the next attempt starts a fresh session (a new application) and
    restores the latest checkpoint: every number comes out (print is at least once across a restore)."""
    from runtime.execution.history import ExecutionHistory
    from runtime.storage.layout import job_dir
    job, warehouse = tmp_path / "jvm_killing.py", tmp_path / "warehouse"
    job.write_text(JVM_KILLING_JOB)
    result = subprocess.run([SLUICE, "run", str(job), "--warehouse", str(warehouse), "--", str(tmp_path / "killed")],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "attempt 1 failed" in result.stderr and "the next attempt starts a fresh one" in result.stderr
    second, first = ExecutionHistory(job_dir(str(warehouse), "jvm killing")).executions()
    assert [(r.dag_run_id, r.attempt, r.state, r.restarting) for r in (first, second)] == [
        ("", 1, "FAILED", True), ("", 2, "FINISHED", None)]
    assert second.application_id != first.application_id and second.restored_from == first.last_checkpoint
    printed = [int(line.split()[-1]) for line in result.stdout.splitlines() if line.strip()]
    assert sorted(set(printed)) == list(range(60))


def test_a_run_bounded_by_max_epochs_finishes(spark, tmp_path):
    """A run that --max-epochs ends is a bounded run that finished, as Flink's stop: FINISHED in the
    result, the epoch log, the execution history (the web view's) and Airflow's finish step alike;
    only a cancel is CANCELED."""
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.client import run_job
    from runtime.execution.history import ExecutionHistory
    from runtime.graph.execution_state import ExecutionState
    from runtime.jobmaster.steps import finish_step, outcome
    from runtime.storage.delta_files import read_table
    from runtime.storage.layout import job_dir
    job, warehouse = tmp_path / "stoppable.py", str(tmp_path / "warehouse")
    job.write_text(STOPPABLE_JOB)
    result = run_job(str(job), ["1000"], warehouse=warehouse, max_epochs=2)
    assert result.epoch_count == 2
    assert {v.execution_state for v in result.execution_graph.all_execution_vertices} == {ExecutionState.FINISHED}
    [record] = ExecutionHistory(job_dir(warehouse, "stoppable")).executions()
    assert (record.run_id, record.state) == (result.run_id, "FINISHED")
    epoch_log = read_table(CheckpointStorage(job_dir(warehouse, "stoppable")).epoch_log.path).to_pylist()
    assert sorted(r["status"] for r in epoch_log if r["kind"] == "run") == ["FINISHED", "RUNNING"]   # its claim, its end
    assert finish_step(warehouse, outcome(warehouse, "stoppable", result.run_id))["state"] == "FINISHED"


def test_help_says_each_command_on_a_line_of_its_own():
    result = run("--help")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    for command in ("plan", "run", "restore", "checkpoints", "savepoint", "stop", "state", "maintain"):
        assert sum(line.startswith(f"    sluice {command} JOB.py") for line in lines) == 1, result.stdout


def test_state_as_json_holds_a_session_windows_merging_set():
    """A session window operator's merging window set is a dict keyed by TimeWindow: JSON has no
    such keys, so it is a list of key/value pairs, each window its fields."""
    from runtime.cli import jsonable
    from runtime.datastream.window import TimeWindow
    row = {"kind": "keyed", "state": "merging-window-set", "key_group": 3, "key": ("a", 1), "namespace": None,
           "value": {TimeWindow(0, 31_000): TimeWindow(0, 31_000)}, "subtask": None}
    assert json.loads(json.dumps(jsonable(row))) == {
        "kind": "keyed", "state": "merging-window-set", "key_group": 3, "key": ["a", 1], "namespace": None,
        "value": [{"key": {"start": 0, "end": 31_000}, "value": {"start": 0, "end": 31_000}}], "subtask": None}
    assert jsonable({"a": {1, 2}, 3: b"x"}) == {"a": [1, 2], 3: "b'x'"}


CANCELABLE_JOB = '''"""Numbers stamped a second apart from 2026-01-01 UTC, five an epoch, a checkpoint each
epoch, until canceled; the second epoch is slow."""
import sys
import time
from runtime.common import Configuration, Types, WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import DataGeneratorSource

START = 1_767_225_600_000


def slowly(n):
    time.sleep(6 if n == 7 else 0.05)
    return n


conf = Configuration()
conf.set_string("sluice.epoch.max-records-per-split", "5")
env = StreamExecutionEnvironment.get_execution_environment(conf)
env.set_parallelism(1)
env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
stamps = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda n, _: START + n * 1000)
(env.from_source(DataGeneratorSource(lambda i: i, count=int(sys.argv[1]), type_info=Types.LONG()), stamps,
                 "numbers").uid("numbers")
 .map(slowly, output_type=Types.LONG()).uid("slowly").print())
env.execute("cancelable")
'''


def _process_tree(pid: int) -> set:
    children: dict = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    tree, todo = set(), [pid]
    while todo:
        tree.add(todo[-1])
        todo.extend(children.get(todo.pop(), ()))
    return tree


def _cancel_bound(started_s: float) -> float:
    """Seconds a canceled run may take to exit: its Spark session and JVM stop as slowly as they
    started, so on a loaded machine the bound grows with the time the run took to get going (60 s
    on a quiet one, where the exit takes a few); a hang exceeds any bound."""
    return min(300.0, max(60.0, 3 * started_s))


def _exit_code(proc, timeout: float, log) -> int:
    """``proc``'s exit code, or a failure after ``timeout`` s naming what each of its processes was
    doing (state, CPU time, what it waits in) and the end of its log."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pids = ",".join(map(str, _process_tree(proc.pid)))
        ps = subprocess.run(["ps", "-o", "pid,stat,time,wchan:24,args", "-p", pids], capture_output=True, text=True)
        pytest.fail(f"the run did not exit within {timeout:.0f} s of Ctrl-C:\n{ps.stdout[:4000]}\n"
                    f"{log.read_text(errors='replace')[-3000:]}")


def _listening(pids: set) -> list:
    """The local addresses of the TCP sockets ``pids`` listen on, as ``ss -ltnp`` shows them."""
    found = []
    for line in subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout.splitlines():
        owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if owners & pids:
            found.append(line.split()[3].rsplit(":", 1)[0])
    return found


@contextlib.contextmanager
def _sigint_not_ignored():
    """A terminal's command starts with SIGINT at its default. A suite started by a non-interactive
    shell's `&` (as `nohup .ci/run &` does) runs with SIGINT ignored, which exec passes on, and a
    `sluice run` started so keeps it ignored, as a background command should. Catching SIGINT here
    while the child starts gives it the default, since exec resets caught signals."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def test_sluice_run_in_a_terminal_listens_on_loopback_says_its_progress_and_stops_at_ctrl_c(tmp_path):
    """A `sluice run` as a person sees it in a terminal. Its driver listens on loopback only, with no
    warning about the hostname (no SPARK_LOCAL_IP set). It says when the Spark session is up and how
    it starts before its first epoch, watermarks as UTC times, and when a slow epoch started. Ctrl-C
    (SIGINT to the terminal's process group) cancels it: no traceback, no line twice, the latest
    completed checkpoint named, and the command that resumes it, with the warehouse and the job's arguments."""
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.execution.history import ExecutionHistory
    from runtime.storage.layout import job_dir
    from waiting import wait_until
    job, warehouse, log = tmp_path / "cancelable.py", tmp_path / "warehouse", tmp_path / "run.log"
    job.write_text(CANCELABLE_JOB)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    began = time.monotonic()
    with open(log, "w") as out, _sigint_not_ignored():
        proc = subprocess.Popen([SLUICE, "run", str(job), "--warehouse", str(warehouse), "--", "100000"], cwd=ROOT,
                                env=env, stdout=subprocess.DEVNULL, stderr=out, start_new_session=True)
    try:
        wait_until(lambda: "epoch 3:" in log.read_text(), 180, "the job's fourth epoch", log=log, proc=proc)
        sockets = _listening(_process_tree(proc.pid))
        os.killpg(proc.pid, signal.SIGINT)
        assert _exit_code(proc, _cancel_bound(time.monotonic() - began), log) == 130, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert sockets and set(sockets) <= {"127.0.0.1", "[::ffff:127.0.0.1]", "[::1]"}, sockets
    assert "resolves to a loopback address" not in text
    ours = [line for line in text.splitlines() if "[cancelable]" in line or line.startswith("sluice")]
    assert ours[0].startswith("[cancelable] Spark session up in ") and ours[0].endswith(")")
    assert ours[1] == "[cancelable] no checkpoint to restore: the job starts fresh"
    # an epoch's line comes once its checkpoint completed, while the next epoch runs
    assert re.fullmatch(r"\[cancelable\] epoch 0: 5 records in, 5 out, watermark 2026-01-01 00:00:0\d\.\d{3} UTC, "
                        r"\d+ ms, checkpoint 1 \(\d+ ms\); biggest: .+ \d+ ms, .+ \d+ ms", ours[3]), ours
    assert re.fullmatch(r"\[cancelable\] epoch 1 started at 20\d\d-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC, "
                        r"running for 5 s", ours[2]), ours
    assert [line.split(":")[0] for line in ours[4:6]] == ["[cancelable] epoch 1", "[cancelable] epoch 2"], ours
    # Ctrl-C
    assert "Traceback" not in text and "py4j" not in text
    assert len(ours) == len(set(ours)), ours
    epochs = [line for line in ours if re.match(r"\[cancelable\] epoch \d+: ", line)]
    latest = CheckpointStorage(job_dir(str(warehouse), "cancelable")).checkpoints.completed()[-1].checkpoint_id
    assert ours[-2:] == [
        f"WARNING: [cancelable] canceled after {len(epochs)} epoch(s) of attempt 1; its completed checkpoints "
        f"stay (latest: {latest})",
        f"sluice run: canceled; resume it with: sluice run {job} --warehouse {warehouse} -- 100000"], ours
    assert latest >= len(epochs)
    [record] = ExecutionHistory(job_dir(str(warehouse), "cancelable")).executions()
    assert (record.state, record.last_checkpoint) == ("CANCELED", latest)
