"""What an orchestrator outside ``runtime`` needs of the engine besides the steps, so that
``runtime.jobmaster`` stays its one entry (the Airflow plugin may import only it and the
JobManager's REST client; tests/test_layers.py checks it): the warehouse's location, a spark-submitted driver's command line, a JobGraph drawn as SVG."""
from __future__ import annotations

import os
from typing import Optional

from runtime.execution.options import DEFAULT_WAREHOUSE, ExecutionOptions
from runtime.jobmaster.deployment import PROJECT_ROOT
from runtime.storage.filesystems import is_uri


def warehouse_location(value: Optional[str]) -> str:
    """The warehouse an orchestrator names (a variable's value): an object-store URI as it is, a
    path relative to the project; None: $SLUICE_WAREHOUSE, else the project's ./warehouse."""
    value = value or os.environ.get("SLUICE_WAREHOUSE") or DEFAULT_WAREHOUSE
    return value if is_uri(value) else os.path.join(PROJECT_ROOT, value)


def spark_submit_arguments(script: str, plan: str, overrides: dict) -> list[str]:
    """``sluice run``'s arguments for a driver spark-submit starts: the stored plan, and the run's
    ExecutionOptions overrides (``steps.run_options``) as ``-D key=value``."""
    return ["run", script, "--plan", plan, *ExecutionOptions.to_properties(overrides)]


def driver_jars() -> list[str]:
    """delta-spark's jars, for a spark-submitted driver's ``--jars`` (its session cannot add them to
    the JVM spark-submit started)."""
    from runtime.execution.spark import delta_jars
    return delta_jars()


def job_graph_svg(job_graph) -> str:
    """The JobGraph drawn as SVG (names escaped inside)."""
    from runtime.graph.plan_svg import job_graph_svg as draw
    return draw(job_graph)
