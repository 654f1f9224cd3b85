"""The seed job on a real Spark standalone cluster (a master and two one-core workers on
loopback, on two loopback addresses: two hosts to Spark's scheduler), giving the same results
as in local mode; and keyed subtasks with local RocksDB stores scheduled back to their stores.

The cluster job runs in its own process (``sluice run --master spark://...``), so this
test run keeps its one local SparkSession.
"""
import contextlib
import os
import re
import socket
import subprocess
import sys
from collections import Counter

import pytest

from jvm_options import share_spark_classes, short_lived_jvm
from seed import ROOT, WORDCOUNT
from waiting import wait_until

SPARK_HOME = os.path.dirname(__import__("pyspark").__file__)
SLUICE = os.path.join(os.path.dirname(sys.executable), "sluice")
# Two hosts to Spark (Linux routes all of 127.0.0.0/8 to loopback), each with its own local dirs.
WORKER_HOSTS = ("127.0.0.1", "127.0.0.2")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 60, log=None) -> None:
    def accepts():
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    wait_until(accepts, timeout, f"a connection to 127.0.0.1:{port}", interval=0.1, log=log, ignoring=(OSError,))


@contextlib.contextmanager
def spark_standalone(logs, environ=None):
    """A master and a one-core worker per WORKER_HOSTS address, each worker with its own work and
    local dirs; yields the master URL. ``environ``: the processes' environment (os.environ)."""
    share_spark_classes()       # for the drivers (sluice run --master spark://...) run against it
    env = dict(os.environ if environ is None else environ, SPARK_HOME=SPARK_HOME, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_LOG_DIR=str(logs), SPARK_WORKER_DIR=str(logs / "work"),
               # The master, the workers and the executors they start (which inherit a worker's
               # environment) live for a test: as the drivers' SPARK_SUBMIT_OPTS (jvm_options.py).
               JAVA_TOOL_OPTIONS=short_lived_jvm())
    spark_class = os.path.join(SPARK_HOME, "bin", "spark-class")
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    procs = [subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(free_port())],
        env=env, stdout=open(logs / "master.log", "w"), stderr=subprocess.STDOUT)]
    try:
        wait_for_port(port, log=logs / "master.log")
        for i, host in enumerate(WORKER_HOSTS):
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", master_url, "--host", host,
                 "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                 "--work-dir", str(logs / f"worker-{i}")],
                env=dict(env, SPARK_LOCAL_IP=host, SPARK_LOCAL_DIRS=str(logs / f"local-{i}")),
                stdout=open(logs / f"worker-{i}.log", "w"), stderr=subprocess.STDOUT))
        yield master_url
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    with spark_standalone(tmp_path_factory.mktemp("spark-logs")) as master_url:
        yield master_url


def run_wordcount(master: str, tmp_path, input_dir, *job_args, parallelism: int = 3) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SLUICE, "run", "include/jobs/wordcount.py", "--master", master, "-p", str(parallelism),
         "--warehouse", str(tmp_path / "warehouse"), "--", "--input", str(input_dir), *job_args],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))


def counts(stdout: str) -> dict:
    # The counts are a ROW_NAMED stream: PyFlink prints them as +I[word,count].
    found = re.findall(r"\+I\[([^,\]]*),(\d+)\]", stdout)
    return {w: int(c) for w, c in found}


def test_seed_job_on_a_standalone_cluster_matches_local_mode(standalone_cluster, spark, tmp_path):
    text = ["the quick brown fox jumps over the lazy dog"] * 40 + ["the end"] * 3
    input_dir = tmp_path / "in"
    input_dir.mkdir()
    (input_dir / "a.txt").write_text("\n".join(text[:20]) + "\n")
    (input_dir / "b.txt").write_text("\n".join(text[20:]) + "\n")
    expected = dict(Counter(w for line in text for w in line.split()))

    # Two one-core executors are two slots: the seed's three window subtasks do not fit.
    too_wide = run_wordcount(standalone_cluster, tmp_path / "w", input_dir)
    assert too_wide.returncode == 1
    assert "Slots required: 3, slots allocated: 2" in too_wide.stderr
    cluster = run_wordcount(standalone_cluster, tmp_path / "c", input_dir, "--window-parallelism", "2")
    assert cluster.returncode == 0, cluster.stderr[-3000:]
    # Local mode: the same job on the test run's session (no second local JVM to start).
    from runtime.client import run_job
    local = run_job(WORDCOUNT, ["--input", str(input_dir), "--window-parallelism", "2"], parallelism=3,
                    warehouse=str(tmp_path / "l" / "warehouse"), master="local[2]", quiet=True)
    assert counts(cluster.stdout) == counts("\n".join(local.printed)) == expected


def test_keyed_subtasks_run_where_their_local_stores_are(standalone_cluster, tmp_path):
    """With state.backend.type rocksdb, each keyed subtask's store stays in its executor's local
    dir; later epochs run each subtask on that executor's host (execution/locality.py), so every
    store is found. Without the preference, each epoch's two reduce tasks land on either
    executor: about half the stores would be rebuilt."""
    input_dir = tmp_path / "in"
    input_dir.mkdir()
    words = [f"w{(i * 7) % 13}" for i in range(240)]
    (input_dir / "events.txt").write_text("".join(f"{w} {i * 100}\n" for i, w in enumerate(words)))
    warehouse = tmp_path / "warehouse"
    run = subprocess.run(
        [SLUICE, "run", "tests/jobs/checkpointed_counts.py", "--master", standalone_cluster,
         "--warehouse", str(warehouse), "--max-records-per-split", "40", "-D", "state.backend.type=rocksdb",
         "--", "--input", str(input_dir), "--windows", str(tmp_path / "windows"),
         "--running", str(tmp_path / "running"), "--parallelism", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))
    assert run.returncode == 0, run.stderr[-3000:]
    local = [tuple(map(int, m)) for m in re.findall(r"local state (\d+)/(\d+)", run.stderr)]
    # 240 records, 40 per epoch, and the end of input; one keyed vertex (the window and the
    # running count chained) of two subtasks: two stores, built in epoch 0, found ever after.
    assert len(local) == 7, run.stderr[-3000:]
    assert local[0] == (0, 2)
    assert local[1:] == [(2, 2)] * 6, run.stderr[-3000:]
    from deltalake import DeltaTable
    running = DeltaTable(str(tmp_path / "running")).to_pyarrow_table().to_pylist()
    assert Counter(r["word"] for r in running) == Counter(words)
    assert {r["word"]: r["count"] for r in running if r["count"] == Counter(words)[r["word"]]} == Counter(words)


def test_the_jobmanagers_drivers_run_their_epochs_on_the_cluster(standalone_cluster, tmp_path):
    """A JobManager whose drivers use the standalone master: the submitted job's epochs run on the
    cluster's executors (its attempt's Spark application is the master's, app-...), exactly once."""
    from jobmanager_env import NUMBERS, JobManagerProcess, numbers_args, sink_numbers
    from runtime.execution.history import ExecutionHistory
    from runtime.storage.layout import job_dir
    jm = JobManagerProcess(tmp_path / "warehouse", tmp_path / "logs", standalone_cluster,
                           env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")).start()
    try:
        sink = tmp_path / "numbers"
        jid = jm.client.submit_job(script=NUMBERS, args=numbers_args(sink, "--count", "60", "--name", "on cluster"))["jobid"]
        details = jm.client.wait_for_terminal(jid, 300)
        assert details["state"] == "FINISHED", jm.driver_log(jid)
        assert sink_numbers(sink) == list(range(60))
        attempt, = ExecutionHistory(job_dir(str(jm.warehouse), "on cluster")).attempts(details["dag-run-id"])
        assert attempt.state == "FINISHED" and attempt.epochs == 3
        assert attempt.application_id.startswith("app-"), attempt.application_id     # local mode's are local-...
    finally:
        jm.close()
