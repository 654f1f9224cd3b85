"""One real Airflow for the test run: ``bin/dev airflow`` (airflow standalone: scheduler with the
LocalExecutor, DAG processor, API server, triggerer) in an AIRFLOW_HOME of its own, started once
by the session fixture ``real_airflow`` (conftest.py) for every test that triggers runs as a user
does, through the REST API and the Sluice web view.

Its jobs folder holds the shipped wordcount and the jobs each test module declares in a
module-level ``AIRFLOW_JOBS = {"file.py": source}``: all are there before Airflow starts, so the
DAG processor parses them once.

That Airflow runs its jobs' drivers in its run tasks (spark_default says ``sluice-deploy:
in-process``, so bin/dev starts no JobManager for it). ``start(..., jobmanager=True)`` starts an
Airflow as ``bin/dev airflow`` runs by default: a Sluice JobManager beside it (started first, as
bin/dev would, in a session of its own; bin/dev finds it answering and uses it), named by
``sluice_default``, to which the job DAGs deploy their runs (tests/test_airflow_deferred_runs.py).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from jvm_options import share_spark_classes
from waiting import log_tail, wait_until

ROOT = Path(__file__).resolve().parent.parent
USER, PASSWORD = "admin", "sluice-test-password"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Airflow:
    def __init__(self, url: str, home: Path, warehouse: Path, log: Path, env: dict, jobmanager=None):
        self.url, self.home, self.warehouse, self.log, self.env = url, home, warehouse, log, env
        self.jobmanager = jobmanager        # tests/airflow_jobmanager.py's, or None
        self.proc = None
        self.token = None

    def launch(self) -> None:
        """``bin/dev airflow``, its output appended to the log; returns once the UI answers, the test
        user is logged in and ``dag_ids`` are parsed."""
        with open(self.log, "a") as out:
            self.proc = subprocess.Popen([str(ROOT / "bin" / "dev"), "airflow"], cwd=ROOT, env=self.env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(lambda: self.request("GET", "/api/v2/monitor/health")[0] == 200, 600, "Airflow's answer",
                   interval=0.5, log=self.log, proc=self.proc, ignoring=(OSError,))
        status, text = self.request("POST", "/auth/token", {"username": USER, "password": PASSWORD})
        assert status in (200, 201), text
        self.token = json.loads(text)["access_token"]

    def wait_parsed(self, dag_ids: set) -> None:
        def parsed():       # the DAG processor parses the DAG files
            status, text = self.request("GET", "/api/v2/dags?dag_id_pattern=%25&limit=100")
            return status == 200 and dag_ids <= {d["dag_id"] for d in json.loads(text)["dags"]}
        wait_until(parsed, 300, "the job DAGs parsed", interval=0.5, log=self.log, proc=self.proc)

    def kill(self) -> None:
        """SIGKILL every process of this Airflow (bin/dev, standalone, scheduler, DAG processor, API
        server, triggerer, executor workers, tasks): what a crash of its host's processes does. A
        JobManager beside it is not one of them."""
        if self.proc is None or self.proc.poll() is not None:
            return
        tree_pids = tree(self.proc.pid)      # before the kill: orphans are re-parented, out of sight
        os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in alive(tree_pids):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()

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
        for _ in range(5):
            # SQLite (this Airflow's metadata database, as a development Airflow's) refuses a write
            # while the scheduler holds its lock past the busy timeout: the API answers 500 "Database
            # error" and rolls the request back. A user would click again; so does the test.
            if status != 500 or "Database error" not in text:
                break
            time.sleep(2)
            status, text = self.request(method, "/api/v2" + path, body)
        assert status in (200, 201), f"{method} {path}: {status} {text[:2000]}"
        return json.loads(text)

    def trigger(self, dag_id: str, conf: dict) -> str:
        return self.api("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf})["dag_run_id"]

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 420) -> str:
        def ended():
            state = self.api("GET", f"/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}")["state"]
            return state if state in ("success", "failed") else None
        return wait_until(ended, timeout, f"the end of {dag_id} run {run_id}", interval=0.5,
                          log=lambda: self.run_report(dag_id, run_id))

    def run_report(self, dag_id: str, run_id: str) -> str:
        """Why a run did not end: the end of Airflow's own log without the API server's access lines
        (the wait's polls), then the run's task instances and the end of each unfinished one's log
        (last: the failure shows the end of this text)."""
        own = [line[:300] for line in log_tail(self.log, 200_000).splitlines() if "http.access" not in line]
        lines = ["--- Airflow's log, without the API server's access lines:", *own[-15:], f"--- {dag_id} {run_id}:"]
        try:
            tis = self.api("GET", f"/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances")
            for ti in tis["task_instances"]:
                lines.append(f"task {ti['task_id']}: {ti['state']}, try {ti['try_number']}")
                if ti["state"] not in ("success", "skipped", None) and ti["try_number"]:
                    events = self.task_log(dag_id, run_id, ti["task_id"], ti["try_number"])
                    lines += [f"  {e.get('event', '')} {e.get('error_detail', '')}"[:300] for e in events[-12:]]
        except Exception as e:      # the report is for a failure message: say what it could not read
            lines.append(f"(the run's task instances could not be read: {e!r})")
        return "\n".join(lines)

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


def tree(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(parent)], capture_output=True, text=True).stdout
        children = {int(p) for p in out.split()}
        found |= children
        todo.extend(children)
    return found


def alive(pids) -> set[int]:
    living = set()
    for pid in pids:
        try:
            os.kill(pid, 0)
            living.add(pid)
        except ProcessLookupError:
            pass
    return living


def start(root: Path, jobs_sources: dict[str, str], jobmanager: bool = False):
    """Yields the running Airflow; stops its whole process tree after (and the JobManager beside it,
    with its drivers)."""
    home, jobs, warehouse = root / "home", root / "jobs", root / "warehouse"
    home.mkdir()
    jobs.mkdir()
    (jobs / "wordcount.py").symlink_to(ROOT / "include" / "jobs" / "wordcount.py")     # the shipped job
    for name, source in jobs_sources.items():
        (jobs / name).write_text(source)
    (home / "passwords.json").write_text(json.dumps({USER: PASSWORD}))
    share_spark_classes()       # the run tasks' drivers inherit SPARK_SUBMIT_OPTS
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update({
        "AIRFLOW_HOME": str(home), "AIRFLOW__API__PORT": str(port), "SLUICE_SKIP_BOOTSTRAP": "1",
        # Log servers of their own: another test run's Airflow may hold 8793 and 8794.
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW_VAR_SLUICE_WAREHOUSE": str(warehouse), "SLUICE_WAREHOUSE": str(warehouse),
        "SLUICE_JOBS_FOLDER": str(jobs), "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONWARNINGS": ""})
    env.pop("PYTHONWARNINGS")       # bin/dev's own default applies
    manager = None
    if jobmanager:
        import airflow_jobmanager
        manager = airflow_jobmanager.start(root, str(warehouse), "local[2]", env=env)
        env.update(airflow_jobmanager.connection_env(manager))
    else:       # the project's spark_default, its runs in their tasks' processes
        env["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "local[*]", "extra": {
            "deploy-mode": "client", "sluice-deploy": "in-process"}})
    site = Airflow(f"http://127.0.0.1:{port}", home, warehouse, root / "bin-dev-airflow.log", env, manager)
    try:
        site.launch()
        site.wait_parsed({"wordcount", *(Path(n).stem for n in jobs_sources)})
        yield site
    finally:
        site.kill()
        if manager is not None:
            manager.stop()
