"""Sluice's Airflow integration, laid out as a provider package: operators, the DAG factory,
the slot-reservation policy, the settings loader and the web view. It imports ``runtime``;
``runtime`` never imports it."""
from __future__ import annotations

import os

WAREHOUSE_VARIABLE = "sluice_warehouse"
SLOTS_POOL = "spark_slots"


def warehouse_root() -> str:
    """The warehouse: the ``sluice_warehouse`` Airflow variable (a relative path is relative to
    the project), else SLUICE_WAREHOUSE, else the project's ./warehouse."""
    from airflow.sdk import Variable
    from runtime.execution.options import DEFAULT_WAREHOUSE
    from runtime.jobmaster.deployment import PROJECT_ROOT
    default = os.environ.get("SLUICE_WAREHOUSE") or DEFAULT_WAREHOUSE
    try:
        value = Variable.get(WAREHOUSE_VARIABLE, default=default)
    except Exception:       # no metadata database reachable (e.g. parsing outside Airflow)
        value = default
    return os.path.join(PROJECT_ROOT, value)
