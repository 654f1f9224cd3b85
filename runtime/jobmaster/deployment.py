"""How a job is deployed: declared in the job module next to its pipeline.

    from runtime.jobmaster import JobDeployment
    DEPLOYMENT = JobDeployment(schedule="@hourly", args=("--input", "include/data"))

The control plane builds one Airflow DAG per job module from this (``dags/sluice_jobs.py``);
the module is imported, never run as ``__main__``, so declaring it costs nothing.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Optional, Union

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOBS_FOLDER = os.path.join(PROJECT_ROOT, "include", "jobs")
JOBS_FOLDER_ENV = "SLUICE_JOBS_FOLDER"      # another folder of job modules (tests, other projects)
ON_INPUTS = "on-inputs"     # JobDeployment.schedule: when a Delta table the job reads changes (jobmaster.assets)


# The control plane's configuration, under each job's own (as flink-conf.yaml is under a job's
# Configuration). Flink's default restart strategy with checkpointing, exponential delay, never
# gives up: a deterministic failure would retry for as long as the run lives, holding its slots.
# Deployed by the control plane, it gives up after 3 restarts (1 s, 1.5 s, 2.25 s apart, +/- 10%)
# unless the job has run an hour since its last restart; a job that sets its own strategy, or
# this key, keeps its own.
CONTROL_PLANE_CONFIGURATION = {"restart-strategy.exponential-delay.attempts-before-reset-backoff": "3"}


def jobs_folder() -> str:
    return os.environ.get(JOBS_FOLDER_ENV) or JOBS_FOLDER


@dataclass(frozen=True)
class JobDeployment:
    # cron, preset ("@hourly"), timedelta, None (manual only), "on-inputs" (when a Delta table the job
    # reads changes: runtime.jobmaster.assets), or a list of Delta tables (paths or URIs) to run on
    schedule: Union[str, timedelta, None, tuple] = None
    args: tuple = ()                                 # the job script's arguments (paths relative to the project)
    parallelism: Optional[int] = None                # default parallelism of operators the job leaves unset
    max_epochs: Optional[int] = None                 # an unbounded job stops after this many epochs per run
    description: str = ""
    tags: tuple = ()
    owner: str = "sluice"

    def __post_init__(self):
        if self.parallelism is not None and self.parallelism < 1:
            raise ValueError(f"JobDeployment.parallelism must be at least 1, got {self.parallelism}")
        if self.max_epochs is not None and self.max_epochs < 1:
            raise ValueError(f"JobDeployment.max_epochs must be at least 1, got {self.max_epochs}")
        object.__setattr__(self, "args", tuple(str(a) for a in self.args))
        if isinstance(self.schedule, (list, tuple)):
            bad = [t for t in self.schedule if not isinstance(t, str) or not t.strip()]
            if bad or not self.schedule:
                raise ValueError(f"JobDeployment.schedule={self.schedule!r}: a list of tables to run on names "
                                 f"Delta tables by path or URI (at least one), e.g. ['{{warehouse}}/orders']; "
                                 f"or use 'on-inputs' for the tables the job reads")
            object.__setattr__(self, "schedule", tuple(self.schedule))
        object.__setattr__(self, "tags", tuple(self.tags))


@dataclass(frozen=True)
class JobSpec:
    name: str                       # the DAG id: the module's file name
    path: str                       # the job script
    deployment: JobDeployment = field(default_factory=JobDeployment)
    doc: str = ""                   # the module's docstring

    @property
    def args(self) -> tuple:
        return self.deployment.args


def script_sha256(path: str) -> str:
    """Which version of a job script a stored plan or DAG profile was compiled from."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def dag_id_of(path: str) -> str:
    """A job module's DAG id: its file's name."""
    return re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])


def load_job_spec(path: str) -> JobSpec:
    """Import a job module (not as ``__main__``) and read its DEPLOYMENT."""
    path = os.path.abspath(path)
    name = dag_id_of(path)
    digest = hashlib.sha1(path.encode()).hexdigest()[:8]
    spec = importlib.util.spec_from_file_location(f"sluice_job_{name}_{digest}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python job module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    deployment = getattr(module, "DEPLOYMENT", JobDeployment())
    if not isinstance(deployment, JobDeployment):
        raise TypeError(f"{path}: DEPLOYMENT must be a runtime.jobmaster.JobDeployment, "
                        f"got {type(deployment).__name__}")
    return JobSpec(name, path, deployment, (module.__doc__ or "").strip())


def discover_jobs(folder: Optional[str] = None, errors: Optional[list] = None) -> tuple[JobSpec, ...]:
    """Every job module in ``folder`` (default: SLUICE_JOBS_FOLDER, else include/jobs; files
    starting with ``_`` are helpers, not jobs). A module that fails to import raises, unless
    ``errors`` is given: then it is skipped and (path, message) is added to ``errors``, so one
    broken job does not take the others down."""
    folder = folder or jobs_folder()
    if not os.path.isdir(folder):
        return ()
    specs = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py") or name.startswith("_"):
            continue
        path = os.path.join(folder, name)
        try:
            specs.append(load_job_spec(path))
        except Exception as e:
            if errors is None:
                raise
            errors.append((path, f"{type(e).__name__}: {e}"))
    return tuple(specs)


def find_job(name_or_path: str) -> JobSpec:
    """A job by its DAG id (the module's name in the jobs folder) or by its path."""
    if name_or_path.endswith(".py"):
        return load_job_spec(name_or_path)
    path = os.path.join(jobs_folder(), f"{name_or_path}.py")
    if not os.path.isfile(path):
        known = ", ".join(s.name for s in discover_jobs()) or "none"
        raise FileNotFoundError(f"No job '{name_or_path}' in {jobs_folder()} (jobs: {known}).")
    return load_job_spec(path)


def resolve_args(args: tuple, warehouse: Optional[str] = None) -> list[str]:
    """A deployment's arguments as the job script gets them: ``{warehouse}`` is the warehouse
    the run uses (so outputs live with the job's checkpoints), and relative paths (a value with
    a "/" that is not an option) are relative to the project, not to wherever the worker runs."""
    from runtime.execution.options import DEFAULT_WAREHOUSE
    args = [a.replace("{warehouse}", warehouse or os.environ.get("SLUICE_WAREHOUSE") or DEFAULT_WAREHOUSE)
            for a in args]
    return [os.path.join(PROJECT_ROOT, a) if "/" in a and not os.path.isabs(a) and not a.startswith("-")
            and "://" not in a else a for a in args]
