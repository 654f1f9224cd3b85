"""The driver process (runtime/jobmanager/driver.py) as the JobManager drives it: real processes,
real Spark in local mode, real Delta tables. A driver starts, says it is ready, runs the plan it is
assigned, writes result.json and exits; SIGTERM cancels the job (CANCELED in the history and the
result); driver_alive tells the folder's driver from another process that has its pid."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections import Counter

import pytest

from runtime.execution.history import ExecutionHistory
from runtime.jobmanager.driver import (
    ASSIGNMENT, DRIVER, LOG, READY, RESULT, driver_alive, launch_driver, read_json, write_assignment, write_json)
from runtime.jobmaster.deployment import JobDeployment, JobSpec
from runtime.jobmaster.plans import load_plan
from runtime.jobmaster.steps import RunRequest, compile_step, run_options
from runtime.storage.layout import job_dir
from jobmanager_env import NUMBERS, sink_numbers
from seed import ROOT, WORDCOUNT
from waiting import wait_until

MASTER = "local[2]"
START_S = 180       # a cold driver's JVM and session on a loaded 2-core machine


def compiled(spec: JobSpec, warehouse: str, jobid: str) -> dict:
    """The assignment of ``spec``'s plan, as the JobManager writes it (``run_options``)."""
    request = RunRequest(parallelism=spec.deployment.parallelism)
    plan = compile_step(spec, request, warehouse, jobid)["plan"]
    job = load_plan(plan)
    return {"jobid": jobid, "job_name": job.job_graph.job_name, "plan": plan,
            "options": run_options(job, request, warehouse, MASTER, jobid)}


def wordcount(warehouse: str) -> JobSpec:
    return JobSpec("wordcount", WORDCOUNT, JobDeployment(
        args=("--input", "include/data", "--output", "{warehouse}/wordcount-results"), parallelism=2))


def start(directory: str, warehouse: str):
    proc = launch_driver(directory, warehouse, MASTER)
    log = os.path.join(directory, LOG)
    wait_until(lambda: read_json(directory, READY), START_S, "the driver's ready.json", log=log, proc=proc)
    return proc, log


def session_commands(session: int) -> list[list[str]]:
    """The command lines of the processes of a session (a driver's: its JVM, its Python workers)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[3]) != session:
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                found.append(f.read().decode(errors="replace").split("\0"))
        except (OSError, IndexError):
            continue
    return found


def words_in(path: str) -> Counter:
    words: Counter = Counter()
    for name in os.listdir(path):
        with open(os.path.join(path, name)) as f:
            words.update(f.read().split())
    return words


@pytest.mark.slow
def test_a_driver_gets_ready_runs_its_assignment_and_says_how_it_ended(tmp_path):
    from deltalake import DeltaTable
    warehouse = str(tmp_path / "warehouse")
    directory = str(tmp_path / "warehouse" / "jobmanager" / "drivers" / "d1")
    assignment = compiled(wordcount(warehouse), warehouse, "a" * 32)
    proc, log = start(directory, warehouse)
    try:
        info, ready = read_json(directory, DRIVER), read_json(directory, READY)
        assert info["pid"] == ready["pid"] == proc.pid and info["master"] == MASTER
        assert ready["ready_at"] >= info["started_at"] and ready["warm_s"] > 0
        assert driver_alive(directory)
        assert read_json(directory, RESULT) is None
        write_json(directory, ASSIGNMENT, assignment)
        result = wait_until(lambda: read_json(directory, RESULT), 120, "result.json", log=log, proc=None)
        assert proc.wait(60) == 0, open(log).read()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    [record] = ExecutionHistory(job_dir(warehouse, assignment["job_name"])).executions()
    assert result == {"jobid": "a" * 32, "state": "FINISHED", "run_id": record.run_id, "failure": None,
                      "savepoint": None}
    assert (record.state, record.dag_run_id) == ("FINISHED", "a" * 32)
    rows = DeltaTable(os.path.join(warehouse, "wordcount-results")).to_pyarrow_table().to_pylist()
    counts: Counter = Counter()
    for row in rows:
        counts[row["word"]] += row["count"]
    assert counts == words_in(os.path.join(ROOT, "include", "data")) and len(counts) > 10
    text = open(log).read()
    assert "driver ready in" in text and "epoch 0:" in text     # the driver's log is in its folder
    assert not driver_alive(directory)      # exited: driver.json names no live driver


@pytest.mark.slow
def test_sigterm_cancels_the_job_of_a_new_driver_and_the_result_says_canceled(tmp_path):
    """A new driver for a job (its assignment there before it starts: no generic warm-up, no
    ready.json; the run starts its own session). SIGTERM while it runs: CANCELED."""
    warehouse = str(tmp_path / "warehouse")
    directory = str(tmp_path / "drivers" / "d2")
    spec = JobSpec("cancelable", NUMBERS, JobDeployment(args=("--sink", "{warehouse}/numbers", "--name", "cancelable"),
                                                       parallelism=1))
    assignment = compiled(spec, warehouse, "b" * 32)
    os.makedirs(directory)
    write_assignment(directory, assignment)
    proc = launch_driver(directory, warehouse, MASTER)
    log = os.path.join(directory, LOG)
    try:
        wait_until(lambda: re.search(r"epoch 1: ", open(log).read()), START_S, "the job's second epoch", log=log,
                   proc=proc)
        [jvm] = [argv for argv in session_commands(proc.pid) if os.path.basename(argv[0]) == "java"]
        assert f"-XX:ErrorFile={directory}/hs_err_pid%p.log" in jvm     # a crash report goes to its folder
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, open(log).read()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    [record] = ExecutionHistory(job_dir(warehouse, "cancelable")).executions()
    assert record.state == "CANCELED" and record.epochs >= 2
    assert read_json(directory, RESULT) == {"jobid": "b" * 32, "state": "CANCELED", "run_id": record.run_id,
                                            "failure": None, "savepoint": None}
    assert read_json(directory, READY) is None
    numbers = sink_numbers(os.path.join(warehouse, "numbers"))      # what its checkpoints committed, once each
    assert numbers and numbers == list(range(len(numbers)))
    text = open(log).read()
    assert "Traceback" not in text and "[cancelable] Spark session up in" in text


def test_a_driver_stopped_by_sigterm_before_a_job_exits_without_a_result(tmp_path):
    """A standby the JobManager stops before giving it a job: no result.json (it ran no job).
    Stopped while it starts, it does not wait for its session."""
    directory = str(tmp_path / "d3")
    proc = launch_driver(directory, str(tmp_path / "warehouse"), MASTER)
    try:
        wait_until(lambda: read_json(directory, DRIVER), 60, "driver.json", log=os.path.join(directory, LOG),
                   proc=proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert read_json(directory, RESULT) is None and read_json(directory, READY) is None


def test_driver_alive_is_false_for_another_process_with_the_drivers_pid(tmp_path):
    """pids are reused: a live process that is not the folder's driver is not it."""
    directory = str(tmp_path / "d4")
    os.makedirs(directory)
    assert not driver_alive(directory)      # no driver.json
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        write_json(directory, DRIVER, {"pid": other.pid, "started_at": 0, "master": MASTER})
        assert not driver_alive(directory)
        write_json(directory, DRIVER, {"pid": os.getpid(), "started_at": 0, "master": MASTER})
        assert not driver_alive(directory)
    finally:
        other.kill()
        other.wait()
    write_json(directory, DRIVER, {"pid": other.pid, "started_at": 0, "master": MASTER})
    assert not driver_alive(directory)      # gone


# ---- the standby pool ---------------------------------------------------------------------------

@pytest.mark.slow
def test_the_pool_replaces_a_taken_standby_and_a_restarted_pool_adopts_the_live_ones(tmp_path):
    """A pool of one: take() hands out its driver (a ready one, warm; the caller now owns its
    process), which runs its assignment; a replacement starts and gets ready; a second pool on the
    same warehouse (a JobManager restarted after kill -9) adopts the live standby instead of
    starting another, and stop() ends it and removes its folder."""
    from runtime.jobmanager.standby import STANDBY, StandbyDrivers
    warehouse = str(tmp_path / "warehouse")
    pool = StandbyDrivers(warehouse, MASTER, size=1, replenish_delay_s=0)
    assert StandbyDrivers(warehouse, "spark://cluster:7077").size == 0     # a cluster's: none unless configured
    assert StandbyDrivers(warehouse, MASTER).size == 1
    pool.start()
    try:
        [first] = pool.standbys()
        wait_until(pool.ready, START_S, "the first standby ready", log=os.path.join(first, LOG))
        assert pool.ready_count() == 1
        taken = pool.take()
        assert taken.directory == first and taken.process.pid == read_json(first, DRIVER)["pid"]
        assert not os.path.exists(os.path.join(first, STANDBY))
        assignment = compiled(wordcount(warehouse), warehouse, "c" * 32)
        write_json(first, ASSIGNMENT, assignment)
        assert taken.process.wait(START_S) == 0, open(os.path.join(first, LOG)).read()[-3000:]
        assert read_json(first, RESULT)["state"] == "FINISHED"
        second = wait_until(lambda: pool.ready(), START_S, "the replacement ready")[0]
        assert second != first and pool.standbys() == [second]
        pool._stopped.set()         # the JobManager killed: its pool's thread starts nothing more
        again = StandbyDrivers(warehouse, MASTER, size=1)
        again.start()
        try:
            assert again.standbys() == [second] and driver_alive(second)     # adopted, none started
            assert len(os.listdir(os.path.dirname(second))) == 2      # the first driver's and this one
        finally:
            again.stop()
        assert not driver_alive(second) and not os.path.exists(second)
    finally:
        pool.stop()
        for directory in (d for d in os.listdir(os.path.join(warehouse, "jobmanager", "drivers"))):
            path = os.path.join(warehouse, "jobmanager", "drivers", directory)
            info = read_json(path, DRIVER)
            if info and driver_alive(path):
                os.killpg(info["pid"], signal.SIGKILL)


def test_an_assignment_without_its_plan_or_a_uri_warehouse_is_refused_naming_the_fix(tmp_path):
    from runtime.jobmanager.driver import drivers_dir
    with pytest.raises(ValueError, match=r"assignment.json lacks plan: the JobManager writes"):
        write_assignment(str(tmp_path), {"jobid": "d" * 32, "options": {}})
    assert not os.path.exists(tmp_path / ASSIGNMENT)
    with pytest.raises(ValueError, match="needs a local warehouse folder for them, not s3://bucket/w"):
        drivers_dir("s3://bucket/w")
    # Written by another hand: the driver ends FAILED saying why (not a death the JobManager would restart).
    write_json(str(tmp_path), ASSIGNMENT, {"jobid": "d" * 32, "plan": ""})
    proc = launch_driver(str(tmp_path), str(tmp_path / "warehouse"), MASTER)
    assert proc.wait(60) == 1
    assert read_json(str(tmp_path), RESULT) == {"jobid": "d" * 32, "state": "FAILED", "run_id": None, "savepoint": None,
                                                "failure": 'assignment.json lacks plan: the JobManager writes '
                                                           '{"jobid", "job_name", "plan", "options"}'}


@pytest.mark.slow
def test_a_jobmanager_runs_a_submitted_job_on_its_warm_standby_and_starts_another(tmp_path):
    """Through the REST API: `sluice jobmanager --standby-drivers 1` keeps a driver ready; a submit
    runs on it (the job's driver is the standby's folder and process), the sink holds each number
    once, and a new standby gets ready for the next submit."""
    from jobmanager_env import JobManagerProcess, numbers_args
    from runtime.jobmanager.standby import STANDBY
    jobmanager = JobManagerProcess(tmp_path / "warehouse", tmp_path / "logs", MASTER, "--standby-drivers", "1").start()
    try:
        wait_until(lambda: jobmanager.client.overview()["standby-drivers"] == 1, START_S, "a ready standby",
                   log=jobmanager.log)
        [standby] = jobmanager.drivers(assigned_only=False)
        sink = tmp_path / "numbers"
        jid = jobmanager.client.submit_job(script=NUMBERS, args=numbers_args(sink, "--count", "60"))["jobid"]
        details = jobmanager.wait_for(jid, lambda d: d["state"] in ("FINISHED", "CANCELED", "FAILED"), 120, "its end")
        assert details["state"] == "FINISHED", details
        assert details["driver"]["pid"] == standby
        assert not os.path.exists(os.path.join(details["driver"]["directory"], STANDBY))
        assert sink_numbers(sink) == list(range(60))
        wait_until(lambda: jobmanager.client.overview()["standby-drivers"] == 1, START_S, "the next standby ready",
                   log=jobmanager.log)
        assert standby not in jobmanager.drivers(assigned_only=False)
    finally:
        jobmanager.close()


JARS_JOB = '''"""Numbers printed by a job that adds a jar (which a running SparkSession does not have)."""
import sys
from runtime.common import Types
from runtime.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.add_jars(sys.argv[1])
env.from_collection([1, 2, 3], type_info=Types.LONG()).print()
env.execute("with a jar")
'''


@pytest.mark.slow
def test_a_job_that_adds_jars_runs_on_a_standby_in_a_session_of_its_own(tmp_path):
    """The warm session lacks the job's jar (a session takes jars as it starts): the standby starts
    the session the job needs instead of failing it with "cannot be added"."""
    import zipfile
    jar, script = tmp_path / "extra.jar", tmp_path / "with_jar.py"
    with zipfile.ZipFile(jar, "w") as f:
        f.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    script.write_text(JARS_JOB)
    warehouse = str(tmp_path / "warehouse")
    directory = str(tmp_path / "d5")
    assignment = compiled(JobSpec("with-jar", str(script), JobDeployment(args=(str(jar),), parallelism=1)), warehouse,
                          "e" * 32)
    proc, log = start(directory, warehouse)
    try:
        write_assignment(directory, assignment)
        assert proc.wait(START_S) == 0, open(log).read()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert read_json(directory, RESULT)["state"] == "FINISHED", open(log).read()[-3000:]
    text = open(log).read()
    assert "does not fit job with a jar" in text and "[with a jar] Spark session up in" in text
