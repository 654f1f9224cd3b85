"""The seed job on a real Spark standalone cluster (a master and two one-core workers on
loopback), giving the same results as in local mode.

The cluster job runs in its own process (``sluice run --master spark://...``), so this
test run keeps its one local SparkSession.
"""
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter

import pytest

from seed import ROOT

SPARK_HOME = os.path.dirname(__import__("pyspark").__file__)
SLUICE = os.path.join(os.path.dirname(sys.executable), "sluice")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    logs = tmp_path_factory.mktemp("spark-logs")
    env = dict(os.environ, SPARK_HOME=SPARK_HOME, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_LOG_DIR=str(logs), SPARK_WORKER_DIR=str(logs / "work"))
    spark_class = os.path.join(SPARK_HOME, "bin", "spark-class")
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    procs = [subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(free_port())],
        env=env, stdout=open(logs / "master.log", "w"), stderr=subprocess.STDOUT)]
    try:
        wait_for_port(port)
        for i in range(2):
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
                 "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                 "--work-dir", str(logs / f"worker-{i}")],
                env=env, stdout=open(logs / f"worker-{i}.log", "w"), stderr=subprocess.STDOUT))
        yield master_url
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def run_wordcount(master: str, tmp_path, input_dir, *job_args, parallelism: int = 3) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SLUICE, "run", "include/jobs/wordcount.py", "--master", master, "-p", str(parallelism),
         "--warehouse", str(tmp_path / "warehouse"), "--", "--input", str(input_dir), *job_args],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))


def counts(stdout: str) -> dict:
    found = re.findall(r"Row\(word='([^']*)', count=(\d+)\)", stdout)
    return {w: int(c) for w, c in found}


def test_seed_job_on_a_standalone_cluster_matches_local_mode(standalone_cluster, tmp_path):
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
    local = run_wordcount("local[2]", tmp_path / "l", input_dir, "--window-parallelism", "2")
    assert local.returncode == 0, local.stderr[-3000:]
    assert counts(cluster.stdout) == counts(local.stdout) == expected
