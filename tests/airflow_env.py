"""A real Airflow for the tests: its own AIRFLOW_HOME (SQLite metadata database), the
project's dags/ and plugins/ folders, migrated once per test run.

Airflow reads its configuration when it is first imported, so ``configure()`` runs from
conftest.py before any test imports airflow.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGINS = os.path.join(ROOT, "plugins")


def configure() -> str:
    """Point Airflow at a fresh home for this test run (idempotent); returns AIRFLOW_HOME."""
    home = os.environ.get("SLUICE_TEST_AIRFLOW_HOME")
    if not home:
        home = tempfile.mkdtemp(prefix="sluice-airflow-")
    worker = os.environ.get("PYTEST_XDIST_WORKER")     # tests/parallel.py: each worker its own database
    if worker and os.path.basename(home) != worker:
        home = os.path.join(home, worker)
        os.makedirs(home, exist_ok=True)
    os.environ["SLUICE_TEST_AIRFLOW_HOME"] = home
    os.environ.update({
        "AIRFLOW_HOME": home,
        "AIRFLOW__CORE__DAGS_FOLDER": os.path.join(ROOT, "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": PLUGINS,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": os.path.join(home, "logs"),
    })
    if PLUGINS not in sys.path:
        sys.path.append(PLUGINS)
    return home


def migrate() -> None:
    """Create the metadata database (``airflow db migrate``), once per AIRFLOW_HOME."""
    home = configure()
    marker = os.path.join(home, ".migrated")
    if os.path.exists(marker):
        return
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "airflow"), "db", "migrate"],
                   check=True, env=os.environ.copy(), stdout=subprocess.DEVNULL)
    open(marker, "w").close()
