"""A real JobManager for the tests (tests/test_jobmanager*.py, test_cluster.py): ``sluice jobmanager``
in a process (and session) of its own on a free loopback port kept across restarts, with a warehouse
of its own, the job the tests submit (tests/jobs/jobmanager_numbers.py) and what they read back.

    jm = JobManagerProcess(warehouse, logs).start()
    jm.client.submit_job(script=NUMBERS, args=numbers_args(sink))
    jm.kill()           # SIGKILL: its drivers run on
    jm.start()          # a new JobManager on the same warehouse and port adopts them
    jm.close()          # the JobManager, then every driver it left (their sessions: JVMs too)

No standby drivers unless the test asks (``"--standby-drivers", "1"``): each is a JVM kept running.
"""
from __future__ import annotations

import glob
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable, Optional

from seed import ROOT
from waiting import wait_until

SLUICE = os.path.join(os.path.dirname(sys.executable), "sluice")
NUMBERS = os.path.join(ROOT, "tests", "jobs", "jobmanager_numbers.py")
TERMINAL = ("FINISHED", "CANCELED", "FAILED")


def numbers_args(sink, *more: str) -> list[str]:
    """The numbers job's arguments: its Delta sink, then ``more`` (--count, --rate, --name, --restarts)."""
    return ["--sink", str(sink), *more]


def sink_numbers(sink) -> list[int]:
    """The numbers in the sink's Delta table, sorted (each once, when the job wrote them exactly once)."""
    from deltalake import DeltaTable
    if not os.path.isdir(os.path.join(str(sink), "_delta_log")):
        return []
    return sorted(DeltaTable(str(sink)).to_pyarrow_table().column("n").to_pylist())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JobManagerProcess:
    def __init__(self, warehouse: Path, logs: Path, master: str = "local[1]", *options: str,
                 env: Optional[dict] = None):
        self.warehouse, self.logs, self.master, self.options = Path(warehouse), Path(logs), master, options
        self.env = env
        self.port = free_port()
        self.log = self.logs / "jobmanager.log"
        self.process: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 60) -> "JobManagerProcess":
        """Start it (again) and wait until it published its address (``address.json``)."""
        from runtime.jobmanager.rest_client import RestClusterClient, address_file
        standby = () if "--standby-drivers" in self.options else ("--standby-drivers", "0")
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a") as out:
            self.process = subprocess.Popen(
                [SLUICE, "jobmanager", "--warehouse", str(self.warehouse), "--port", str(self.port),
                 "--master", self.master, *standby, *self.options],
                cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                env=self.env)

        def published():
            with open(address_file(str(self.warehouse))) as f:
                found = json.load(f)
            return found["url"] if found["pid"] == self.process.pid else None
        self.url = wait_until(published, timeout, "the JobManager's address.json", log=self.log, proc=self.process,
                              ignoring=(OSError, ValueError))
        self.client = RestClusterClient(self.url, timeout_s=60)
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing of it runs, its drivers run on."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def drivers(self, assigned_only: bool = True) -> list[int]:
        """The pids of the live drivers in this warehouse (each checked by its command line), sorted:
        those given a job (``assigned_only``), or all (standbys too)."""
        from runtime.jobmanager.driver import driver_alive, read_json
        found = []
        for folder in glob.glob(os.path.join(self.warehouse, "jobmanager", "drivers", "*")):
            info = read_json(folder, "driver.json")
            if info and driver_alive(folder) and (
                    not assigned_only or os.path.exists(os.path.join(folder, "assignment.json"))):
                found.append(int(info["pid"]))
        return sorted(found)

    def close(self) -> None:
        """The JobManager, then every driver (its session: the JVM and Python workers too)."""
        self.stop()
        for pid in self.drivers(assigned_only=False):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def driver_log(self, jid: str) -> str:
        """The end of the logs of the job's drivers (for a failure message)."""
        texts = []
        for log in sorted(glob.glob(os.path.join(self.warehouse, "jobmanager", "drivers", "*", "driver.log"))):
            if os.path.exists(os.path.join(os.path.dirname(log), "assignment.json")) and \
                    jid in Path(os.path.dirname(log), "assignment.json").read_text():
                texts.append(f"--- {log}\n{Path(log).read_text(errors='replace')[-4000:]}")
        return "\n".join(texts) or f"(no driver log of job {jid})"

    def _logs(self, jid: str) -> str:
        return self.driver_log(jid) + "\n--- JobManager ---\n" + self.log.read_text(errors="replace")[-3000:]

    def wait_for(self, jid: str, condition: Callable[[dict], bool], timeout: float, what: str) -> dict:
        """The job's details once ``condition(details)`` holds."""
        def check():
            details = self.client.job_details(jid)
            return details if condition(details) else None
        return wait_until(check, timeout, f"job {jid}: {what}", interval=0.3, log=lambda: self._logs(jid))

    def wait_for_checkpoints(self, jid: str, completed: int, timeout: float = 180) -> dict:
        """The job's checkpoint statistics once ``completed`` checkpoints completed; fails at once
        when the job ended first."""
        def check():
            stats = self.client.job_checkpoints(jid)
            if stats["counts"]["completed"] >= completed:
                return stats
            state = self.client.job_details(jid)["state"]
            assert state not in TERMINAL, f"job {jid} ended {state} first:\n{self._logs(jid)}"
            return None
        return wait_until(check, timeout, f"{completed} completed checkpoint(s) of job {jid}", interval=0.3,
                          log=lambda: self._logs(jid))
