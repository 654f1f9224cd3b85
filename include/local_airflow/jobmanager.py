"""The Sluice JobManager beside the development Airflow (``bin/dev airflow``, the tests' real
Airflow): at the address the ``sluice_default`` connection names, started with ``sluice jobmanager``
in a session of its own, so that stopping or killing Airflow leaves it, and the jobs it runs,
running. One that already answers there is used as it is (a second ``bin/dev airflow`` after the
first was stopped finds its jobs still running).

    python -m include.local_airflow.jobmanager      # prints the URL it answers at

Its log is ``$AIRFLOW_HOME/logs/jobmanager.log``; ``sluice list`` shows its jobs; it stops on
SIGTERM (its jobs' drivers keep running, and a JobManager started again adopts them).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Optional

CONNECTION = "sluice_default"
LOG_NAME = "jobmanager.log"
START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Address:
    url: str
    host: str
    port: int
    token: Optional[str] = None


def address(conn_id: str = CONNECTION) -> Optional[Address]:
    """Where the connection says the JobManager is; None without the connection (runs deploy
    in-process, or with spark-submit)."""
    from urllib.parse import urlsplit
    from airflow.exceptions import AirflowNotFoundException
    from airflow.models import Connection
    from sluice_airflow.hooks import url_of
    try:
        conn = Connection.get_connection_from_secrets(conn_id)
    except AirflowNotFoundException:
        return None
    url = url_of(conn.host, conn.port, conn.schema, conn_id)
    parts = urlsplit(url)
    return Address(url, parts.hostname or "127.0.0.1", parts.port or 8081, conn.password or None)


def answers(where: Address) -> bool:
    from runtime.jobmanager.rest_client import JobManagerError, RestClusterClient
    try:
        RestClusterClient(where.url, token=where.token, timeout_s=2).overview()
        return True
    except JobManagerError:
        return False


def start(where: Address, warehouse: str, master: str, log_path: str, env: Optional[dict] = None) -> subprocess.Popen:
    """``sluice jobmanager`` at ``where`` in a new session, its output appended to ``log_path``; returns
    once it answers (RuntimeError with its log's end if it exits or does not answer in time)."""
    from runtime.jobmanager.rest_client import TOKEN_VARIABLE
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    sluice = os.path.join(os.path.dirname(sys.executable), "sluice")
    env = dict(os.environ if env is None else env)
    if where.token:
        env[TOKEN_VARIABLE] = where.token       # not on its command line, which every user of the host sees
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sluice, "jobmanager", "--host", where.host, "--port", str(where.port),
                                 "--warehouse", warehouse, "--master", master], env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not answers(where):
        if proc.poll() is not None or time.monotonic() > deadline:
            with open(log_path, errors="replace") as f:
                tail = f.read()[-3000:]
            if proc.poll() is None:
                proc.kill()
            raise RuntimeError(f"The Sluice JobManager did not start at {where.url} (exit code {proc.poll()}); "
                               f"its log {log_path} ends:\n{tail}")
        time.sleep(0.5)
    return proc


def spark_connection(conn_id: str = "spark_default"):
    from airflow.exceptions import AirflowNotFoundException
    from airflow.models import Connection
    try:
        return Connection.get_connection_from_secrets(conn_id)
    except AirflowNotFoundException:
        return None


def warehouse() -> str:
    """The warehouse the run tasks use: the ``sluice_warehouse`` variable (read as Airflow's own
    processes read it), else $SLUICE_WAREHOUSE, else the project's ./warehouse."""
    from airflow.models import Variable
    from runtime.jobmaster.control_plane import warehouse_location
    return warehouse_location(Variable.get("sluice_warehouse", default_var=None))


def main() -> int:
    from sluice_airflow.hooks import DEPLOY_EXTRA, JOBMANAGER, master_of
    where, spark = address(), spark_connection()
    said = (spark.extra_dejson if spark is not None else {}).get(DEPLOY_EXTRA)
    if where is None or said not in (None, JOBMANAGER):
        print(f"bin/dev: the job DAGs' runs deploy without a JobManager ("
              f"{f'no {CONNECTION!r} connection' if where is None else f'spark_default says {DEPLOY_EXTRA}={said}'}"
              f"): none started.")
        return 0
    if answers(where):
        print(f"bin/dev: the Sluice JobManager at {where.url} answers: the job DAGs deploy to it.")
        return 0
    home = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")
    log = os.path.join(home, "logs", LOG_NAME)
    try:
        proc = start(where, warehouse(), master_of(spark), log)
    except RuntimeError as e:
        print(f"bin/dev: {e}", file=sys.stderr)
        return 1
    print(f"bin/dev: started the Sluice JobManager at {where.url} (pid {proc.pid}, log {log}); it keeps running "
          f"when Airflow stops: `kill {proc.pid}` stops it, its jobs' drivers keep running.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
