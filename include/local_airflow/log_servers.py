"""An Airflow whose components all run on one host (``bin/dev airflow``): its log servers listen
on that host's loopback address only.

The scheduler (for the LocalExecutor's tasks) and the triggerer each start a log server (ports
``[logging] worker_log_server_port`` and ``trigger_log_server_port``) from which the API server
reads a running task's log. Airflow 3.3 binds it to every interface and has no setting for the
address; ``SLUICE_LOG_SERVER_HOST`` (set by ``bin/dev airflow``) names one, and
plugins/airflow_local_settings.py, which every Airflow process imports at start, then installs
``serve_logs`` below in place of Airflow's. The API server finds a task's log server at the host
name the task recorded, so ``[core] hostname_callable`` is
``include.local_airflow.log_servers.log_server_host`` (bin/dev puts the project on every Airflow
process's path).
"""
from __future__ import annotations

import os

HOST_ENV = "SLUICE_LOG_SERVER_HOST"


def log_server_host() -> str:
    """The host name tasks record (``[core] hostname_callable``): where the log servers listen."""
    return os.environ.get(HOST_ENV) or "127.0.0.1"


def serve_logs(port=None) -> None:
    """Airflow's ``airflow.utils.serve_logs.serve_logs`` (3.3), listening on ``log_server_host()``."""
    import uvicorn
    from setproctitle import setproctitle
    from airflow.configuration import conf
    setproctitle("airflow serve-logs")
    uvicorn.run("airflow.utils.serve_logs.log_server:get_app", factory=True, host=log_server_host(),
                port=port or conf.getint("logging", "WORKER_LOG_SERVER_PORT"),
                log_level=conf.get("logging", "uvicorn_logging_level", fallback="info").lower(),
                log_config=None, access_log=False)


def bind_log_servers() -> None:
    """Install ``serve_logs`` when SLUICE_LOG_SERVER_HOST asks for it. The scheduler and the
    triggerer import Airflow's from ``airflow.utils.serve_logs`` when they start its process."""
    if os.environ.get(HOST_ENV):
        import airflow.utils.serve_logs
        airflow.utils.serve_logs.serve_logs = serve_logs
