"""A real Sluice JobManager beside a test's Airflow (``sluice jobmanager`` on a free loopback port, started as
``bin/dev airflow`` starts the one beside Airflow: include/local_airflow/jobmanager.py), and its
end: the JobManager, then every driver it started (drivers run in sessions of their own, so they
outlive it: the test kills them by the pids their folders name)."""
from __future__ import annotations

import glob
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from real_airflow import free_port


@dataclass
class JobManager:
    url: str
    port: int
    warehouse: str
    log: Path
    proc: object

    def client(self):
        from runtime.jobmanager.rest_client import RestClusterClient
        return RestClusterClient(self.url)

    def connection(self) -> dict:
        """The ``sluice_default`` connection naming it (Connection kwargs; as JSON, an AIRFLOW_CONN_ value)."""
        return {"conn_type": "sluice", "host": "127.0.0.1", "port": self.port}

    def driver_pids(self) -> set[int]:
        from runtime.jobmanager.driver import driver_alive, read_json
        pids = set()
        for folder in glob.glob(os.path.join(self.warehouse, "jobmanager", "drivers", "*")):
            info = read_json(folder, "driver.json")
            if info and driver_alive(folder):
                pids.add(int(info["pid"]))
        return pids

    def stop(self) -> None:
        drivers = self.driver_pids()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in drivers | self.driver_pids():
            try:
                os.killpg(pid, signal.SIGKILL)      # the driver's session: its JVM and Python workers
            except ProcessLookupError:
                pass


def start(root: Path, warehouse: str, master: str = "local[2]", env=None) -> JobManager:
    from include.local_airflow.jobmanager import Address, start as start_jobmanager
    port = free_port()
    address = Address(f"http://127.0.0.1:{port}", "127.0.0.1", port)
    log = root / "jobmanager.log"
    proc = start_jobmanager(address, warehouse, master, str(log), env=env)
    return JobManager(address.url, port, warehouse, log, proc)


def connection_env(jobmanager: JobManager) -> dict:
    """The environment that names it as ``sluice_default`` to every Airflow process."""
    return {"AIRFLOW_CONN_SLUICE_DEFAULT": json.dumps(jobmanager.connection())}
