"""Sluice's Airflow integration, laid out as a provider package: the hook (``hooks``: the
JobManager's and Spark's connections), an operator per step (``operators``), the trigger that
follows a job in the JobManager (``triggers``), the DAG factory, the slot-reservation policy, Asset
events and the web view. It enters ``runtime`` only through ``runtime.jobmaster`` and the
JobManager's REST client; ``runtime`` never imports it. (The development Airflow's tooling is in
include/local_airflow/.)"""
from __future__ import annotations

import os

WAREHOUSE_VARIABLE = "sluice_warehouse"
SLOTS_POOL = "spark_slots"
STORE_CONNECTION = "aws_default"


def warehouse_root() -> str:
    """The warehouse: the ``sluice_warehouse`` Airflow variable (a relative path is relative to
    the project; an object-store URI as it is), else SLUICE_WAREHOUSE, else the project's
    ./warehouse. Every step reaches the warehouse through here, so the store's credentials of
    the ``aws_default`` connection are put in the environment here too (use_store_connection)."""
    from airflow.sdk import Variable
    from runtime.jobmaster.control_plane import warehouse_location
    try:
        value = Variable.get(WAREHOUSE_VARIABLE, default=None)
    except Exception:       # no metadata database reachable (e.g. parsing outside Airflow)
        value = None
    use_store_connection()
    return warehouse_location(value)


def store_environment(conn_id: str = STORE_CONNECTION) -> dict:
    """The S3 settings of an Airflow AWS connection as the standard variables the runtime, its
    Spark executors (spark.executorEnv) and a spark-submitted driver read: login and password are
    the access key and secret (as the Amazon provider has them), the extra's ``region_name``,
    ``endpoint_url`` and ``aws_session_token``; a plain-HTTP endpoint (MinIO, a test server)
    also sets AWS_ALLOW_HTTP, which delta-rs needs for it. {} when there is no such connection."""
    from airflow.sdk import Connection
    try:
        conn = Connection.get(conn_id)
    except Exception:       # none defined (or no metadata database): the environment as it is
        return {}
    extra = conn.extra_dejson or {}
    endpoint = extra.get("endpoint_url")
    found = {"AWS_ACCESS_KEY_ID": conn.login, "AWS_SECRET_ACCESS_KEY": conn.password,
             "AWS_SESSION_TOKEN": extra.get("aws_session_token"), "AWS_REGION": extra.get("region_name"),
             "AWS_ENDPOINT_URL": endpoint,
             "AWS_ALLOW_HTTP": "true" if endpoint and endpoint.startswith("http://") else None}
    return {k: v for k, v in found.items() if v}


def use_store_connection() -> None:
    """The connection wins over the worker's own variables, as Airflow's AWS hooks have it."""
    os.environ.update(store_environment())
