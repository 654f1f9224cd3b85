"""A run's compiled plan, stored once under the job's folder: ``<job>/plans/<run>/``.

Flink compiles a job once, on the client, and submits the JobGraph; the JobMaster never runs
the user's ``main()`` again. The same here: the compile step runs the job script once and
stores what it built; the later steps, the run (also a spark-submitted one: ``sluice run
--plan``) and the web view read it.

    stream_graph.pickle   the StreamGraph with the job's functions (cloudpickle, as Spark ships them)
    stream_graph.json     Flink's plan-visualizer JSON
    job_graph.json        the chained JobGraph
    compiled.json         the compile step's summary
    slots.json            the slot plan, once the allocate-slots step made it

``<warehouse>/plans/<dag id>.json`` points at the plan of the DAG's latest run that deployed,
so a reader that knows the DAG but not the job's name (which only the script's ``execute()``
says) finds it. A run's plan becomes the job's plan only when that run deploys
(``promote_plan``): a run refused later (a parallelism above the max parallelism, too few
slots) changes neither what the web view shows nor what the next default run reserves.
"""
from __future__ import annotations

import json
import pickle
import re
from typing import Optional

from runtime.client import CompiledJob
from runtime.execution.dependencies import dumps_by_value
from runtime.graph.execution_graph import build_execution_graph
from runtime.graph.job_graph import create_job_graph
from runtime.jobmaster.deployment import script_sha256  # noqa: F401 (read with a plan: overview.py)
from runtime.storage.filesystems import isdir, isfile, join, read_bytes, rmtree, write_bytes
from runtime.storage.layout import job_dir

STREAM_GRAPH = "stream_graph.pickle"
POINTER = "pointer.json"        # what the DAG's pointer says once the run deploys
SLOTS = "slots.json"


class PlanNotFoundError(FileNotFoundError):
    pass


def store_plan(job: CompiledJob, warehouse: str, run: str, summary: dict, pointer: Optional[dict] = None) -> str:
    """Write the plan of ``run`` (e.g. the Airflow run id) whole or not at all; returns its folder."""
    folder = join(job_dir(warehouse, job.job_graph.job_name), "plans", _safe(run))
    rmtree(folder)      # a retried compile step replaces its own plan
    _write_json(join(folder, "stream_graph.json"), json.loads(job.stream_graph.get_streaming_plan_as_json()))
    _write_json(join(folder, "job_graph.json"), json.loads(job.job_graph.get_job_graph_as_json()))
    _write_json(join(folder, "compiled.json"), summary)
    # Last: a folder without it is no plan (load_plan), so it is whole or not at all, also on
    # an object store, which has no folders to rename into place.
    _write_json(join(folder, POINTER), {**(pointer or {}), "plan": folder, "job_name": job.job_graph.job_name})
    write_bytes(join(folder, STREAM_GRAPH), dumps_by_value(job.stream_graph))
    return folder


def promote_plan(warehouse: str, dag_id: str, folder: str) -> None:
    """The run of the plan at ``folder`` deploys: its plan is now the DAG's latest."""
    pointer = _read_json(join(folder, POINTER))
    if pointer is None:
        raise PlanNotFoundError(f"No compiled plan at {folder}: run the job's compile step first")
    _write_json(_pointer(warehouse, dag_id), pointer)


def load_plan(folder: str) -> CompiledJob:
    """The compiled job of a stored plan: its StreamGraph as compiled, the rest derived (pure)."""
    path = join(folder, STREAM_GRAPH)
    if not isfile(path):
        raise PlanNotFoundError(f"No compiled plan at {folder}: run the job's compile step first "
                                f"(or pass the job script instead of --plan)")
    stream_graph = pickle.loads(read_bytes(path))
    job_graph = create_job_graph(stream_graph)
    return CompiledJob(stream_graph, job_graph, build_execution_graph(job_graph))


def read_plan_file(folder: str, name: str) -> Optional[dict]:
    return _read_json(join(folder, name))


def store_slot_plan(folder: str, plan: dict) -> None:
    _write_json(join(folder, SLOTS), plan)


def latest_plan(warehouse: str, dag_id: str) -> Optional[dict]:
    """What the DAG's last compile step stored: {"plan": folder, "job_name", "script_sha256",
    "slot_profile"}, or None."""
    pointer = _read_json(_pointer(warehouse, dag_id))
    return pointer if pointer and isdir(pointer["plan"]) else None


def _pointer(warehouse: str, dag_id: str) -> str:
    return join(warehouse, "plans", f"{_safe(dag_id)}.json")


def _safe(name: str) -> str:
    """A folder name from an Airflow run id (``manual__2026-01-01T00:00:00+00:00``)."""
    return re.sub(r"[^A-Za-z0-9_.=-]", "_", name)


def _read_json(path: str) -> Optional[dict]:
    return json.loads(read_bytes(path)) if isfile(path) else None


def _write_json(path: str, value) -> None:
    write_bytes(path, json.dumps(value, indent=1, default=str).encode())
