"""``bin/dev airflow``, the development Airflow, as the test run's shared ``real_airflow`` runs it:
nothing of it listens beyond the loopback address, its executor is sized to the machine, the job
DAGs run when triggered, its log is free of the warnings it used to repeat, and it says it is
ready when its UI answers."""
from __future__ import annotations

import os
import re
import subprocess

from real_airflow import free_port, tree
from waiting import wait_until

NOISE = ("Triggerer's async thread was blocked", "Pydantic serializer warnings", "PydanticSerializationUnexpectedValue",
         "InsecureKeyLengthWarning", "The HMAC key is", "ASGI app factory detected")
LOOPBACK = re.compile(r"(127\.\d+\.\d+\.\d+|\[::ffff:127\.\d+\.\d+\.\d+\]|\[::1\]):\d+")


def listening(pids: set) -> list[tuple[str, int, str]]:
    """(local address, pid, process name) of every listening TCP socket of ``pids``."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        for name, pid in re.findall(r'\("([^"]*)",pid=(\d+)', line):
            if int(pid) in pids:
                found.append((fields[3], int(pid), name))
    return found


def environment(pid: int) -> dict:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(e.split("=", 1) for e in f.read().decode(errors="replace").split("\0") if "=" in e)


def tree_children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def command(pid: int) -> str:
    """The process's whole command line (ps cuts it at 80 columns when its output is not a terminal)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except FileNotFoundError:
        return ""


def test_bin_dev_airflow_listens_on_loopback_sizes_its_executor_and_logs_no_noise(real_airflow):
    site = real_airflow
    # A task's log, read back through the API server (a savepoint of the wordcount, or its refusal).
    wait_until(lambda: site.request("GET", "/api/v2/dags/sluice_savepoint")[0] == 200, 300,
               "the savepoint DAG parsed", interval=0.5, log=site.log)
    run = site.trigger("sluice_savepoint", {"job": "wordcount"})
    site.wait_for_run("sluice_savepoint", run)
    events = site.task_log("sluice_savepoint", run, "savepoint", 1)
    # The task's own outcome: a savepoint, or (no run checkpointed the job yet) the refusal.
    # (A failure's message is in the event's error detail, hence the whole event.)
    assert any("Savepoint completed" in str(e) or "Cannot take a savepoint" in str(e) for e in events), events
    assert not any("Could not read served logs" in e.get("event", "") for e in events)

    pids = tree(site.proc.pid) | {site.proc.pid}
    sockets = listening(pids)
    assert [s for s in sockets if not LOOPBACK.fullmatch(s[0])] == []
    # The scheduler's process (airflow standalone starts it again should it exit under load).
    scheduler = wait_until(lambda: next((p for p in tree(site.proc.pid)
                                         if re.search(r"\bairflow scheduler$", command(p))), None),
                           60, "the scheduler's process", interval=0.5, log=site.log)
    env = environment(scheduler)
    ports = {int(env["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"]), int(env["AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT"])}
    serving = {int(address.rsplit(":", 1)[1]) for address, _, name in sockets if name.startswith("airflow serve")}
    assert ports <= serving, sockets

    parallelism = int(env["AIRFLOW__CORE__PARALLELISM"])
    assert parallelism == max(4, 2 * os.cpu_count())
    # The executor's workers are the scheduler's children (a task they run is a child of theirs).
    workers = [p for p in tree_children(scheduler) if command(p).startswith("airflow worker -- LocalExecutor")]
    assert 0 < len(workers) <= parallelism

    dags = site.api("GET", "/dags?limit=100")["dags"]
    assert {d["dag_id"] for d in dags if not d["is_paused"]} >= {"wordcount", "sluice_savepoint"}
    assert [d["dag_id"] for d in dags if d["is_paused"]] == []

    log = site.log.read_text()
    assert [line for line in log.splitlines() if any(n in line for n in NOISE)] == []
    # "Ready" is said once, when the UI answers (bin/dev asks its health endpoint): standalone's own
    # line, which comes once its scheduler heartbeats, tens of seconds earlier, is held back (issue 50, item 8).
    ready = [line for line in log.splitlines() if "Airflow is ready" in line]
    assert ready == [f"bin/dev airflow: Airflow is ready: the UI answers at {site.url} (Ctrl-C stops it)"], ready


def test_bin_dev_airflow_says_ready_when_the_ui_answers(tmp_path):
    """bin/dev's say_ready, between standalone and the terminal: lines pass as they come, standalone's
    own "Airflow is ready" is held back, and readiness is said once the health endpoint answers."""
    import sys
    import threading
    import time
    import urllib.request
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    functions = subprocess.run(["sed", "-n", "/^say_ready() {/,/^}/p;/^ui_answers() {/,/^}/p",
                                os.path.join(root, "bin", "dev")], capture_output=True, text=True, check=True).stdout
    port = free_port()
    health = tmp_path / "api" / "v2" / "monitor"
    health.mkdir(parents=True)
    (health / "health").write_text("{}")
    answers = tmp_path / "answers"      # made once the server answers; a line comes 3 s later
    script = (f"{functions}\n(echo 'api-server | starting'; echo 'standalone | Airflow is ready'; "
              f"until [ -e {answers} ]; do sleep 0.1; done; sleep 3; echo 'scheduler | later') "
              f"| say_ready http://127.0.0.1:{port}")
    seen = []
    said = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True)
    reader = threading.Thread(target=lambda: seen.extend((time.monotonic(), line.rstrip("\n")) for line in said.stdout))
    reader.start()
    time.sleep(1.5)
    serving = time.monotonic()      # the UI answers from now on
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=1),
                   30, "the server's answer", interval=0.1, ignoring=(OSError,))
        answers.touch()
        said.wait(timeout=30)
        reader.join()
    finally:
        server.terminate()
        server.wait()
    lines = [line for _, line in seen]
    assert lines == ["api-server | starting", f"bin/dev airflow: Airflow is ready: the UI answers at "
                     f"http://127.0.0.1:{port} (Ctrl-C stops it)", "scheduler | later"], lines
    assert seen[1][0] >= serving
