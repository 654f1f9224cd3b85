"""Warm standby drivers: the pool of drivers the JobManager keeps started, with their JVM,
SparkSession and Python workers up (``runtime.jobmanager.driver``), so that a submitted job's first
epoch waits for none of them (Flink's session cluster keeps its TaskManagers running between jobs).

A standby is a driver folder holding ``standby.json`` and no ``assignment.json``. ``take()`` claims
one (it removes ``standby.json``: a claimed driver is the caller's, and a JobManager restarted
after kill -9 does not offer it again), starts a replacement once ``replenish_delay_s`` has passed
(so that its JVM's start does not slow the taken driver's first epoch on a small machine), and
returns the folder for the caller's ``assignment.json``. A JobManager restarted after kill -9
adopts the standbys it finds alive (``start``) and stops the others.

A warm driver holds memory while it waits (docs/operations/jobmanager.md, "Warm drivers"), and on
a cluster master it also holds executors: the default pool is one driver on a local master and
none on a cluster's, unless configured.
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Optional

from runtime.jobmanager.driver import (
    ASSIGNMENT, DRIVER, LOG, READY, RESULT, driver_alive, drivers_dir, launch_driver, read_json, write_json)

log = logging.getLogger(__name__)

STANDBY = "standby.json"
REPLENISH_DELAY_S = 10.0    # a taken driver's first epochs run before its replacement's JVM starts
STOP_GRACE_S = 10.0         # a stopped standby's SIGTERM, then SIGKILL
CHECK_EVERY_S = 1.0         # how often the pool replaces a standby that died


@dataclass(frozen=True)
class Standby:
    """A taken standby: its folder, and its process when this process started it (the caller
    now waits for it; None for one adopted after a JobManager restart)."""
    directory: str
    process: Optional[subprocess.Popen] = None


def default_size(master: str) -> int:
    """One warm driver on a local master; none on a cluster, where it would hold executors."""
    return 1 if master.startswith("local") else 0


class StandbyDrivers:
    """The JobManager's pool of ``size`` warm drivers for ``master`` (default: ``default_size``)."""

    def __init__(self, warehouse: str, master: str, size: Optional[int] = None, env: Optional[dict] = None,
                 replenish_delay_s: float = REPLENISH_DELAY_S) -> None:
        if size is not None and size < 0:
            raise ValueError(f"standby drivers: {size} is not a number of drivers; use 0 (none) or more")
        self.warehouse, self.master, self.env = warehouse, master, env
        self.size = default_size(master) if size is None else size
        self.replenish_delay_s = replenish_delay_s
        self.root = drivers_dir(warehouse)
        self._lock = threading.Lock()
        self._standbys: list[str] = []                  # folders, oldest first
        self._children: dict[str, subprocess.Popen] = {}     # drivers this process started: reaped here
        self._replenish_at = 0.0
        self._stopped = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # ---- the JobManager's calls ----------------------------------------------------------------

    def start(self) -> None:
        """Adopt the standbys a previous JobManager left running (up to ``size``, of this master),
        stop the rest, start the missing ones, and keep the pool full from a thread of its own."""
        os.makedirs(self.root, exist_ok=True)
        with self._lock:
            for directory in self._orphans():
                info = read_json(directory, DRIVER) or {}
                if len(self._standbys) < self.size and info.get("master") == self.master and driver_alive(directory):
                    log.info("adopted standby driver %s (pid %s)", directory, info.get("pid"))
                    self._standbys.append(directory)
                else:
                    self._stop_driver(directory)
            self._top_up()
        self._thread = threading.Thread(target=self._keep_full, name="sluice-standby-drivers", daemon=True)
        self._thread.start()

    def take(self) -> Optional[Standby]:
        """A standby, now the caller's: a ready one, else one still starting (it reads its
        assignment once ready: sooner than a new driver); None when the pool has none."""
        with self._lock:
            self._forget_dead()
            ready = [d for d in self._standbys if read_json(d, READY) is not None]
            chosen = (ready or self._standbys or [None])[0]
            if chosen is None:
                return None
            self._standbys.remove(chosen)
            os.remove(os.path.join(chosen, STANDBY))
            self._replenish_at = time.time() + self.replenish_delay_s
            return Standby(chosen, self._children.pop(chosen, None))

    def standbys(self) -> list[str]:
        """The standbys' folders (ready or starting)."""
        with self._lock:
            self._forget_dead()
            return list(self._standbys)

    def ready(self) -> list[str]:
        """The standbys that are ready."""
        return [d for d in self.standbys() if read_json(d, READY) is not None]

    def ready_count(self) -> int:
        """The REST overview's "standby-drivers"."""
        return len(self.ready())

    def stop(self) -> None:
        """Stop the standbys (a JobManager's orderly end); the drivers it handed out keep running."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(CHECK_EVERY_S * 5)
        with self._lock:
            for directory in self._standbys:
                self._stop_driver(directory)
            self._standbys.clear()

    close = stop        # the Dispatcher's name for it

    # ---- inside ----------------------------------------------------------------------------------

    def _orphans(self) -> list[str]:
        """Standby folders under the drivers' folder that no pool of this process holds."""
        found = []
        for name in sorted(os.listdir(self.root)):
            directory = os.path.join(self.root, name)
            if (os.path.isfile(os.path.join(directory, STANDBY)) and directory not in self._standbys
                    and not os.path.exists(os.path.join(directory, ASSIGNMENT))):
                found.append(directory)
        return found

    def _launch(self) -> None:
        directory = os.path.join(self.root, f"driver-{uuid.uuid4().hex[:12]}")
        os.makedirs(directory)
        write_json(directory, STANDBY, {"master": self.master, "created_at": time.time()})
        self._children[directory] = launch_driver(directory, self.warehouse, self.master, self.env)
        self._standbys.append(directory)
        log.info("standby driver %s starting (%s)", directory, self.master)

    def _top_up(self) -> None:
        while len(self._standbys) < self.size:
            self._launch()

    def _forget_dead(self) -> None:
        """Drop (and reap) the standbys that died, an out-of-memory kill say, saying why in the
        JobManager's log: ``_keep_full`` replaces them."""
        for directory in list(self._standbys):
            proc = self._children.get(directory)
            if proc.poll() is None if proc is not None else driver_alive(directory):
                continue
            self._standbys.remove(directory)
            self._children.pop(directory, None)
            log.warning("standby driver %s died; the end of its log:\n%s", directory, _log_tail(directory))
            shutil.rmtree(directory, ignore_errors=True)

    def _keep_full(self) -> None:
        while not self._stopped.wait(CHECK_EVERY_S):
            with self._lock:
                self._forget_dead()
                if time.time() >= self._replenish_at:
                    self._top_up()

    def _stop_driver(self, directory: str) -> None:
        """SIGTERM to its process group (a standby exits without a result), SIGKILL after the
        grace; its folder goes."""
        proc = self._children.pop(directory, None)
        info = read_json(directory, DRIVER)
        pid = proc.pid if proc is not None else int(info["pid"]) if info and driver_alive(directory) else None
        if pid is not None:
            alive = (lambda: proc.poll() is None) if proc is not None else (lambda: driver_alive(directory))
            for signum, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)):
                try:
                    os.killpg(pid, signum)
                except ProcessLookupError:
                    break
                deadline = time.time() + grace
                while time.time() < deadline and alive():
                    time.sleep(0.05)
                if not alive():
                    break
        if read_json(directory, RESULT) is None and not os.path.exists(os.path.join(directory, ASSIGNMENT)):
            shutil.rmtree(directory, ignore_errors=True)


def _log_tail(directory: str, chars: int = 2000) -> str:
    try:
        with open(os.path.join(directory, LOG), "rb") as f:
            f.seek(max(0, os.path.getsize(f.name) - chars))
            return f.read().decode("utf-8", "replace")
    except OSError as e:
        return f"({e})"


StandbyPool = StandbyDrivers    # the name the JobManager's first draft used (design52.md)
