"""SluiceHook: the Airflow connections a Sluice job is deployed with.

- ``sluice_default`` (type ``sluice``): the Sluice JobManager's REST address and token, as Flink's
  ``rest.address``/``rest.port``: host (a name, or a whole ``http://host:port`` URL), port (8081,
  Flink's, when unset), schema (``http`` or ``https``), password (the JobManager's bearer token,
  ``sluice jobmanager --token``).
- ``spark_default`` (type ``spark``): the Spark master (host, and port when the host has no
  scheme, as the Spark provider's connections have it), and in its extra ``sluice-deploy``: how a
  run deploys. ``jobmanager`` submits the run to the JobManager and defers while it runs;
  ``in-process`` runs the driver in the task's own process (``dag.test()``, the fast tests);
  ``spark-submit`` submits the driver with spark-submit. Unset: ``jobmanager`` when a
  ``sluice_default`` connection exists, else ``in-process`` for a local master and
  ``spark-submit`` for a cluster.

Only Airflow's public API: ``BaseHook.get_connection`` and the Connection's fields.
"""
from __future__ import annotations

from typing import Any, Optional

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

JOBMANAGER, IN_PROCESS, SPARK_SUBMIT = "jobmanager", "in-process", "spark-submit"
DEPLOY_MODES = (JOBMANAGER, IN_PROCESS, SPARK_SUBMIT)
DEPLOY_EXTRA = "sluice-deploy"
DEFAULT_PORT = 8081         # Flink's rest.port
NO_SPARK_CONNECTION_MASTER = "yarn"     # the Spark provider's master without a connection


class SluiceHook(BaseHook):
    """The JobManager named by ``sluice_conn_id`` and the Spark master of ``spark_conn_id``."""

    conn_name_attr = "sluice_conn_id"
    default_conn_name = "sluice_default"
    conn_type = "sluice"
    hook_name = "Sluice JobManager"

    def __init__(self, sluice_conn_id: str = default_conn_name, spark_conn_id: str = "spark_default",
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.sluice_conn_id, self.spark_conn_id = sluice_conn_id, spark_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {"hidden_fields": ["login", "extra"], "relabeling": {"password": "Token"},
                "placeholders": {"host": "127.0.0.1 (or http://host:8081)", "port": str(DEFAULT_PORT),
                                 "schema": "http"}}

    # ---- the JobManager ----------------------------------------------------------------------

    def _connection(self, conn_id: str):
        """The connection, or None when it is not defined."""
        try:
            return self.get_connection(conn_id)
        except AirflowNotFoundException:
            return None

    def _sluice_connection(self):
        return self._connection(self.sluice_conn_id)

    def jobmanager_url(self) -> str:
        conn = self._sluice_connection()
        if conn is None:
            raise AirflowFailException(
                f"There is no Airflow connection '{self.sluice_conn_id}' naming the Sluice JobManager: add it "
                f"(type sluice, host 127.0.0.1, port {DEFAULT_PORT}; airflow_settings.yaml has it, load it with "
                f"`bin/dev airflow-settings`), or deploy without one (connection '{self.spark_conn_id}', extra "
                f"\"{DEPLOY_EXTRA}\": \"{IN_PROCESS}\" or \"{SPARK_SUBMIT}\").")
        return url_of(conn.host, conn.port, conn.schema, self.sluice_conn_id)

    def get_conn(self):
        """A ``RestClusterClient`` of the JobManager (synchronous: a trigger calls it in a thread)."""
        from runtime.jobmanager.rest_client import RestClusterClient
        conn = self._sluice_connection()
        url = self.jobmanager_url()
        return RestClusterClient(url, token=conn.password or None)

    async def aget_conn(self):
        """``get_conn`` for a trigger, whose event loop must not block on reading the connection."""
        from runtime.jobmanager.rest_client import RestClusterClient
        conn = await self.aget_connection(self.sluice_conn_id)
        return RestClusterClient(url_of(conn.host, conn.port, conn.schema, self.sluice_conn_id),
                                 token=conn.password or None)

    # ---- Spark -------------------------------------------------------------------------------

    def _spark_connection(self):
        return self._connection(self.spark_conn_id)

    def spark_master(self) -> str:
        return master_of(self._spark_connection())

    def deploy_mode(self) -> str:
        """How a run deploys (the module's doc): ``sluice-deploy`` of the Spark connection, else
        the JobManager when its connection exists, else by the master."""
        conn = self._spark_connection()
        mode = (conn.extra_dejson if conn is not None else {}).get(DEPLOY_EXTRA)
        if mode is None:
            if self._sluice_connection() is not None:
                return JOBMANAGER
            return IN_PROCESS if self.spark_master().startswith("local") else SPARK_SUBMIT
        if mode not in DEPLOY_MODES:
            raise AirflowFailException(f"Connection {self.spark_conn_id}: extra {DEPLOY_EXTRA}={mode!r}; use one of "
                                       f"{', '.join(repr(m) for m in DEPLOY_MODES)}.")
        if mode == JOBMANAGER:
            self.jobmanager_url()       # says which connection is missing
        return mode


def master_of(conn) -> str:
    """The master of a Spark connection as the Spark provider reads it: the host when it holds a
    URL (``spark://h``, ``local[*]``, ``k8s://https://h``) or has no port, else ``<type>://host``;
    then ``:port`` when there is one. ``yarn`` without a connection (None)."""
    if conn is None or not conn.host:
        return NO_SPARK_CONNECTION_MASTER
    whole = conn.conn_type == "spark" and ("://" in conn.host or not conn.port)
    master = conn.host if whole else f"{conn.conn_type}://{conn.host}"
    return f"{master}:{conn.port}" if conn.port else master


def url_of(host: Optional[str], port: Optional[int], schema: Optional[str], conn_id: str) -> str:
    """The JobManager's base URL from a connection's fields: a host holding a URL is taken whole
    (with the port added when it has none)."""
    if not host:
        raise AirflowFailException(f"Connection {conn_id} names no host: set it to the JobManager's address "
                                   f"(e.g. 127.0.0.1, port {DEFAULT_PORT}).")
    if "://" in host:
        base = host.rstrip("/")
        rest = base.split("://", 1)[1]
        return f"{base}:{port}" if port and ":" not in rest else base
    scheme = schema or "http"
    if scheme not in ("http", "https"):
        raise AirflowFailException(f"Connection {conn_id}: schema {scheme!r}; use http or https (or leave it empty).")
    return f"{scheme}://{host}:{port or DEFAULT_PORT}"


def submission_key(dag_id: str, run_id: str) -> str:
    """The JobManager's idempotency key of a DAG run's job: one job per DAG run, whatever its tries."""
    return f"{dag_id}/{run_id}"
