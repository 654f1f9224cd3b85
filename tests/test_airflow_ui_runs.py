"""What a user triggers from Airflow's UI, through the real Airflow: ``bin/dev airflow`` (airflow
standalone: scheduler with the LocalExecutor, DAG processor, API server, triggerer) started here
in an AIRFLOW_HOME of its own, runs triggered through the REST API as the UI triggers them, and
the Sluice web view's Cancel. Each task runs in a process of its own, as in production.

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

import json
import os
import signal
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from jvm_options import share_spark_classes
from waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
USER, PASSWORD = "admin", "sluice-test-password"

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Airflow:
    def __init__(self, url: str, home: Path, warehouse: Path, log: Path, proc: subprocess.Popen):
        self.url, self.home, self.warehouse, self.log, self.proc = url, home, warehouse, log, proc
        self.token = None

    def request(self, method: str, path: str, body=None, form=None, cookie=False):
        data = json.dumps(body).encode() if body is not None else (
            urllib.parse.urlencode(form).encode() if form is not None else None)
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if body is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header(*(("Cookie", f"_token={self.token}") if cookie else
                                 ("Authorization", f"Bearer {self.token}")))
        try:
            with urllib.request.build_opener(_NoRedirects).open(request, timeout=60) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def api(self, method: str, path: str, body=None):
        status, text = self.request(method, "/api/v2" + path, body)
        assert status in (200, 201), f"{method} {path}: {status} {text[:2000]}"
        return json.loads(text)

    def trigger(self, dag_id: str, conf: dict) -> str:
        return self.api("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf})["dag_run_id"]

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 900) -> str:
        def ended():
            state = self.api("GET", f"/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}")["state"]
            return state if state in ("success", "failed") else None
        return wait_until(ended, timeout, f"the end of {dag_id} run {run_id}", interval=0.5, log=self.log)

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> list[dict]:
        path = (f"/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances/{task_id}/logs/{try_number}"
                "?full_content=true")
        return [e for e in self.api("GET", path)["content"] if isinstance(e, dict)]

    def executions(self, job_name: str):
        from runtime.execution.history import ExecutionHistory
        from runtime.storage.layout import job_dir
        return ExecutionHistory(job_dir(str(self.warehouse), job_name)).executions()


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _tree(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(parent)], capture_output=True, text=True).stdout
        children = {int(p) for p in out.split()}
        found |= children
        todo.extend(children)
    return found


def _alive(pids) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            os.kill(pid, 0)
            alive.add(pid)
        except ProcessLookupError:
            pass
    return alive


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    root = tmp_path_factory.mktemp("airflow-ui")
    home, jobs, warehouse = root / "home", root / "jobs", root / "warehouse"
    home.mkdir()
    jobs.mkdir()
    (jobs / "wordcount.py").symlink_to(ROOT / "include" / "jobs" / "wordcount.py")     # the shipped job
    (jobs / "always_failing.py").write_text(FAILING_JOB)
    (jobs / "slow_counts.py").write_text(SLOW_JOB)
    (home / "passwords.json").write_text(json.dumps({USER: PASSWORD}))
    share_spark_classes()       # the run tasks' drivers inherit SPARK_SUBMIT_OPTS
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update({
        "AIRFLOW_HOME": str(home), "AIRFLOW__API__PORT": str(port), "SLUICE_SKIP_BOOTSTRAP": "1",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW_VAR_SLUICE_WAREHOUSE": str(warehouse), "SLUICE_WAREHOUSE": str(warehouse),
        "SLUICE_JOBS_FOLDER": str(jobs), "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONWARNINGS": ""})
    env.pop("PYTHONWARNINGS")       # bin/dev's own default applies
    log = root / "bin-dev-airflow.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(ROOT / "bin" / "dev"), "airflow"], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    site = Airflow(f"http://127.0.0.1:{port}", home, warehouse, log, proc)
    try:
        wait_until(lambda: site.request("GET", "/api/v2/monitor/health")[0] == 200, 300, "Airflow's answer",
                   interval=0.5, log=log, proc=proc, ignoring=(OSError,))
        status, text = site.request("POST", "/auth/token", {"username": USER, "password": PASSWORD})
        assert status in (200, 201), text
        site.token = json.loads(text)["access_token"]
        def parsed():       # the DAG processor parses the DAG files
            status, text = site.request("GET", "/api/v2/dags?dag_id_pattern=%25")
            return status == 200 and {"wordcount", "always_failing", "slow_counts"} <= {
                d["dag_id"] for d in json.loads(text)["dags"]}
        wait_until(parsed, 300, "the job DAGs parsed", interval=0.5, log=log, proc=proc)
        yield site
    finally:
        if proc.poll() is None:
            tree = _tree(proc.pid)      # before the kill: orphans are re-parented, out of sight
            os.killpg(proc.pid, signal.SIGKILL)
            for pid in _alive(tree):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def test_a_triggered_run_with_conf_then_a_rescale_of_the_shipped_wordcount(airflow):
    first = airflow.trigger("wordcount", {"parallelism": 2, "restore_from": "none"})
    assert airflow.wait_for_run("wordcount", first) == "success"
    [run] = airflow.executions("Socket Window WordCount")
    window = next(name for name in run.parallelism if name.startswith("Window"))
    assert (run.dag_run_id, run.state, run.parallelism[window]) == (first, "FINISHED", 2)

    rescale = airflow.trigger("wordcount", {"parallelism": 3})
    assert airflow.wait_for_run("wordcount", rescale) == "success"
    latest = airflow.executions("Socket Window WordCount")[0]
    assert (latest.dag_run_id, latest.state, latest.parallelism[window]) == (rescale, "FINISHED", 3)
    assert latest.restored_from == run.last_checkpoint is not None
    # The run's own log says which operator runs at what; progress lines are INFO, not errors.
    compile_log = " ".join(e.get("event", "") for e in airflow.task_log("wordcount", rescale, "compile", 1))
    assert f"{window}: parallelism 3 (the run's parallelism)" in compile_log
    run_log = airflow.task_log("wordcount", rescale, "run", 1)
    progress = [e for e in run_log if "epoch 0:" in e.get("event", "") or "restored checkpoint" in e.get("event", "")]
    assert progress and {e.get("level") for e in progress} == {"info"}
    assert not [e for e in run_log if e.get("level") == "error"]


def test_a_failing_job_is_retried_as_its_strategy_says_and_each_attempt_logs_why(airflow):
    run_id = airflow.trigger("always_failing", {})
    assert airflow.wait_for_run("always_failing", run_id) == "failed"
    # Bounded by attempts, not by a clock: one restart, then the strategy gives up.
    attempts = list(reversed(airflow.executions("always failing")))
    assert [(a.attempt, a.restarting) for a in attempts] == [(1, True), (2, False)]
    # Each attempt's log says its failure, cause first, and the decision, as the attempt fails.
    first = airflow.task_log("always_failing", run_id, "run", 1)
    failed = [e for e in first if "attempt 1 failed: Check (1/1) failed: ValueError: 'be' is not allowed" in
              e.get("event", "")]
    decided = [e for e in first if "restarting in" in e.get("event", "") and e.get("level") == "warning"]
    assert failed and failed[0]["level"] == "error" and decided
    last = airflow.task_log("always_failing", run_id, "run", 2)
    assert any("not restarting after failure 2: the restart strategy gave up (Restart with fixed delay (0 ms). "
               "#1 restart attempts.)" in e.get("event", "") and e.get("level") == "error" for e in last), last


def test_cancel_in_the_web_view_stops_a_running_job(airflow):
    run_id = airflow.trigger("slow_counts", {})
    wait_until(lambda: [r for r in airflow.executions("slow counts") if r.dag_run_id == run_id and r.epochs >= 0
                        and r.state == "RUNNING"], 240, "the slow job running", interval=0.5, log=airflow.log)
    page = airflow.request("GET", "/sluice/jobs/slow_counts", cookie=True)[1]
    assert 'class="inline cancel"' in page and run_id in page
    status, _ = airflow.request("POST", "/sluice/jobs/slow_counts/cancel", form={"dag_run_id": run_id}, cookie=True)
    assert status == 303
    assert airflow.wait_for_run("slow_counts", run_id, timeout=60) == "failed"
    wait_until(lambda: airflow.executions("slow counts")[0].state != "RUNNING", 90, "the canceled run's record",
               interval=0.5, log=airflow.log)
    record = airflow.executions("slow counts")[0]
    assert (record.dag_run_id, record.state, record.attempt) == (run_id, "CANCELED", 1)
    tis = airflow.api("GET", f"/dags/slow_counts/dagRuns/{urllib.parse.quote(run_id)}/taskInstances")
    run_ti = next(t for t in tis["task_instances"] if t["task_id"] == "run")
    assert (run_ti["state"], run_ti["try_number"]) == ("failed", 1)


def test_bin_dev_airflow_is_quiet_local_and_stops_its_whole_tree(airflow):
    text = airflow.log.read_text()
    assert "looks like production" not in text
    assert "DeprecationWarning" not in text and "RemovedInAirflow" not in text
    port = urllib.parse.urlsplit(airflow.url).port
    listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
    assert f"127.0.0.1:{port}" in listening and f"0.0.0.0:{port}" not in listening
    tree = _tree(airflow.proc.pid)
    assert len(tree) >= 4       # standalone, scheduler, DAG processor, API server, triggerer, ...
    airflow.proc.send_signal(signal.SIGTERM)
    assert airflow.proc.wait(60) == 143
    wait_until(lambda: not _alive(tree), 30, "the end of bin/dev airflow's process tree", interval=0.1)
    assert not _alive(tree)
