"""Inputs and expected answers for the checkpoint tests (tests/jobs/checkpointed_counts.py)."""
import atexit
import collections
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from deltalake import DeltaTable

from jvm_options import share_spark_classes
from runtime.common.faults import halts
from waiting import log_tail, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join(os.path.dirname(__file__), "jobs", "checkpointed_counts.py")
LINES_PER_EPOCH = 40        # per file: the job's input is cut into epochs of this many lines


def write_input(folder, seed: int, files: int = 2, lines: int = 160, words: int = 25,
                start_ms: int = 0) -> list[tuple[str, int]]:
    """Files of "word timestamp" lines, out of order by up to 1.5 s (within the 2 s bound), from
    ``start_ms`` on (the epoch's start by default: event time, not wall-clock time)."""
    r = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(words)]
    events = []
    os.makedirs(folder, exist_ok=True)
    for f in range(files):
        with open(os.path.join(folder, f"part-{f}.txt"), "w") as out:
            for i in range(lines):
                word, ts = r.choice(vocabulary), start_ms + i * 250 + r.randint(0, 1500)
                out.write(f"{word} {ts}\n")
                events.append((word, ts))
    return events


def first_lines(folder, n: int) -> list[tuple[str, int]]:
    """The events of each input file's first ``n`` lines (what the first epochs read)."""
    events = []
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as f:
            for line in list(f)[:n]:
                word, ts = line.split()
                events.append((word, int(ts)))
    return events


def expected_windows(events) -> collections.Counter:
    """(word, count) per 10 s window, as a multiset."""
    per_window = collections.Counter((w, ts - ts % 10_000) for w, ts in events)
    return collections.Counter((w, n) for (w, _), n in per_window.items())


def expected_running(events) -> collections.Counter:
    totals = collections.Counter(w for w, _ in events)
    return collections.Counter((w, k) for w, n in totals.items() for k in range(1, n + 1))


def table_rows(path) -> collections.Counter:
    rows = DeltaTable(str(path)).to_pyarrow_table(columns=["word", "count"]).to_pylist()
    return collections.Counter((r["word"], r["count"]) for r in rows)


def sink_checkpoints(table) -> set:
    """The checkpoint ids a sink's commits carry in the Delta ``table`` (their app transactions)."""
    log_dir = Path(table) / "_delta_log"
    if not log_dir.exists():
        return set()
    return {json.loads(line)["txn"]["version"] for name in sorted(os.listdir(log_dir)) if name.endswith(".json")
            for line in (log_dir / name).read_text().splitlines() if '"txn"' in line}


def job_args(tmp_path, *extra) -> list[str]:
    return ["--input", str(tmp_path / "in"), "--windows", str(tmp_path / "windows"),
            "--running", str(tmp_path / "running"), *extra]


# The drivers kill_at starts are forked from one server per test run that has imported what a
# driver imports before its JVM starts (runtime, pyspark, pyarrow, deltalake: about 0.7 s of each
# `python -m runtime.cli run`). Each child is the driver: it leaves the server's session for one
# of its own, takes the run's environment (SLUICE_HALT_AT and SLUICE_HALT_MARKER are read when a
# fault point is reached, runtime.common.faults), then runs runtime.cli as `python -m` does; its
# JVM and Python workers start as they would from a fresh process, and the test SIGKILLs the
# child's process group as before. The server itself starts no thread and no JVM.
_FORK_SERVER = r"""
import importlib, json, os, sys
import runtime.cli, pyspark.sql, pyarrow, deltalake
for name in ("runtime.execution.executor", "runtime.execution.spark", "runtime.datastream", "runtime.connectors.files",
             "runtime.task.stream_task", "runtime.checkpoint.savepoint", "pyspark.java_gateway", "pyarrow.dataset"):
    try:                            # what a run imports later anyway: only sooner here
        importlib.import_module(name)
    except ImportError:
        pass
import threading
if threading.active_count() != 1:
    sys.exit("the fork server's imports started threads: " + repr(threading.enumerate()))
requests, replies = os.fdopen(os.dup(0), "r"), os.dup(1)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)
for line in requests:
    req = json.loads(line)
    if req["op"] == "poll":         # {"pid"}: its exit code, or null while it runs
        done, status = os.waitpid(req["pid"], os.WNOHANG)
        os.write(replies, (json.dumps(os.waitstatus_to_exitcode(status) if done else None) + "\n").encode())
        continue
    ready_r, ready_w = os.pipe()   # {"args", "env", "cwd", "log"}: fork a driver
    pid = os.fork()
    if pid == 0:
        break
    os.close(ready_w)
    os.read(ready_r, 1)             # its own session first: the test kills its process group
    os.close(ready_r)
    os.write(replies, f"{pid}\n".encode())
else:
    sys.exit(0)                     # the tests closed the pipe
os.setsid()
os.close(ready_r)
os.write(ready_w, b"x")
os.close(ready_w)
requests.close()
os.close(replies)
log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.dup2(log, 1)
os.dup2(log, 2)
os.close(log)
os.close(null)
os.environ.clear()
os.environ.update(req["env"])
os.chdir(req["cwd"])
sys.path[0] = req["cwd"]
sys.argv = ["-m", *req["args"]]
del importlib, json, name, line, requests, replies, null, log, req, pid, ready_r, ready_w
import runpy
runpy.run_module("runtime.cli", run_name="__main__", alter_sys=True)
"""


class _ForkServer:
    def __init__(self):
        self.lock = threading.Lock()
        self.log = tempfile.NamedTemporaryFile(prefix="sluice-fork-server-", suffix=".log")     # its own errors
        self.proc = subprocess.Popen([sys.executable, "-c", _FORK_SERVER], cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        atexit.register(self.close)

    def _ask(self, request: dict) -> str:
        with self.lock:
            try:
                self.proc.stdin.write(json.dumps(request) + "\n")
                self.proc.stdin.flush()
                reply = self.proc.stdout.readline()
            except BrokenPipeError:
                reply = ""
        assert reply, f"the fork server exited with {self.proc.wait()}:\n{log_tail(self.log.name)}"
        return reply

    def start(self, args: list[str], env: dict, log) -> "_Driver":
        return _Driver(self, int(self._ask({"op": "run", "args": args, "env": env, "cwd": ROOT, "log": str(log)})))

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


class _Driver:
    """A forked driver, as much of subprocess.Popen as kill_at uses."""

    def __init__(self, server: _ForkServer, pid: int):
        self.server, self.pid, self.returncode = server, pid, None

    def poll(self):
        if self.returncode is None:
            self.returncode = json.loads(self.server._ask({"op": "poll", "pid": self.pid}))
        return self.returncode

    def wait(self):
        while self.poll() is None:
            time.sleep(0.01)
        return self.returncode


_server = []
_server_lock = threading.Lock()


def _fork_server() -> _ForkServer:
    with _server_lock:
        if not _server:
            _server.append(_ForkServer())
        return _server[0]


def kill_at(tmp_path, point: str, epoch, restore: bool, *extra: str, job: str = JOB, args=None,
            also: tuple = ()) -> str:
    """Run the job with ``sluice run`` until it reaches ``point`` in ``epoch`` ("*": the first
    time it reaches ``point``), then SIGKILL its process group ("killed"); "finished" if it
    ended first. ``restore``: --restore-from latest.
    ``job`` and its ``args``: another job script than checkpointed_counts (``job_args``).
    ``also``: more (point, epoch) halts the job must be held at too before the kill, each in the
    process that reaches it (runtime.common.faults), e.g. ("mid-epoch", epoch + 1): epoch's
    checkpoint halted in its completion while the next epoch's task is halted mid-epoch."""
    return _run(tmp_path, ((point, epoch), *also), restore, extra, job, args)


def run_to_end(tmp_path, restore: bool, *extra: str, job: str = JOB, args=None) -> None:
    """The job's run to its end, in a driver process of its own as kill_at's runs (several at once)."""
    assert _run(tmp_path, (), restore, extra, job, args) == "finished"


def _run(tmp_path, halting: tuple, restore: bool, extra: tuple, job: str, args) -> str:
    share_spark_classes()
    wanted = ",".join(f"{p}:{e}" for p, e in halting)
    name = f"{halting[0][0]}-{halting[0][1]}" if halting else "end"
    stem = str(tmp_path / f"halted-{name}")
    markers = [Path(m) for m in halts(wanted, stem).values()]
    env = {**os.environ, "PYTHONPATH": ROOT, **({"SLUICE_HALT_AT": wanted, "SLUICE_HALT_MARKER": stem} if halting else {})}
    cmd = ["run", job, "--warehouse", str(tmp_path / "warehouse"), "--master", "local[1]",
           "--max-records-per-split", str(LINES_PER_EPOCH)]
    if restore:
        cmd += ["--restore-from", "latest"]
    cmd += list(extra)
    log = tmp_path / f"log-{name}.txt"
    proc = _fork_server().start(cmd + ["--", *(job_args(tmp_path) if args is None else args)], env, log)
    try:
        wait_until(lambda: (markers and all(m.exists() for m in markers)) or proc.poll() is not None, 240,
                   f"{wanted or 'nothing'} or the run's end", interval=0.05, log=log)
    finally:
        reached = [m for m in markers if m.exists()]
        try:
            os.killpg(proc.pid, signal.SIGKILL)     # the driver, its JVM and their children
        except ProcessLookupError:
            pass                                    # it ended by itself: its log says how
        for m in reached:
            try:
                os.kill(int(m.read_text().split(":")[2]), signal.SIGKILL)   # a halted Spark worker has its own group
            except ProcessLookupError:
                pass
        proc.wait()
    halted = bool(markers) and len(reached) == len(markers)
    assert halted or (proc.returncode == 0 and not reached), (
        f"halted at {[m.read_text().strip() for m in reached]} of {wanted or 'nothing'}:\n" + log.read_text()[-3000:])
    return "killed" if halted else "finished"
