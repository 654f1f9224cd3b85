"""What the web view shows of each job, as JSON-able dicts: its deployment, its JobGraph,
its checkpoints, its executions and its metrics over epochs and runs, shaped for charts
(``metrics_history``) (Flink's REST API /jobs/overview, /jobs/:id, /jobs/:id/checkpoints in spirit).

Read-only: job modules are discovered in the jobs folder (``include/jobs``, or
SLUICE_JOBS_FOLDER); a job's plan is the one its last run stored (plans.py), or, for a job not
run since its script changed, compiled here with its deployment's arguments (no Spark); a job's
tables are read under ``<warehouse>/<slug of the name given to env.execute()>/``. Nothing
here imports Airflow.
"""
from __future__ import annotations

import os
import threading
from dataclasses import asdict, dataclass, replace
from functools import cached_property, lru_cache
from typing import Optional

from runtime.checkpoint.restore import METADATA
from runtime.checkpoint.checkpoint_record import CHECKPOINT, COMPLETED, FAILED, SAVEPOINT, CheckpointRecord
from runtime.checkpoint.completed_checkpoint_store import CompletedCheckpointStore
from runtime.checkpoint.epoch_log import EpochLog
from runtime.client import CompiledJob, compile_job
from runtime.execution.history import RUNNING, ExecutionHistory, ExecutionRecord
from runtime.jobmaster import metrics_history
from runtime.jobmaster.deployment import CONTROL_PLANE_CONFIGURATION, JobSpec, discover_jobs, resolve_args
from runtime.jobmaster.plans import latest_plan, load_plan, script_sha256
from runtime.jobmaster.steps import GiveUpTime, attempt_seconds, give_up_of, parallelism_from, restart_strategy_of
from runtime.storage.filesystems import isfile, join
from runtime.storage.layout import job_dir


@dataclass(frozen=True)
class JobOverview:
    spec: JobSpec
    compiled: Optional[CompiledJob]     # None when the job module failed to compile
    job_dir: Optional[str]              # its tables in the warehouse (needs the compiled job name)
    error: Optional[str] = None         # why it did not compile

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def job_name(self) -> Optional[str]:
        return self.compiled.job_graph.job_name if self.compiled else None

    # Read once per JobOverview: an overview lives for one request.
    @cached_property
    def checkpoints(self) -> list[CheckpointRecord]:
        return CompletedCheckpointStore(self.job_dir).history() if self.job_dir else []

    @cached_property
    def lineage_start(self) -> int:
        """The first checkpoint id of the job's latest fresh start (restore_from=none)."""
        return (EpochLog(self.job_dir).lineage_start() or 0) if self.job_dir else 0

    @cached_property
    def executions(self) -> list[ExecutionRecord]:
        """Every run, newest first; a running one with the figures its epochs logged so far."""
        records = ExecutionHistory(self.job_dir).executions() if self.job_dir else []
        if any(r.state == RUNNING for r in records):        # the epoch log is read only then
            records = with_live_figures(records, self.epoch_history)
        return records

    @cached_property
    def epoch_history(self) -> list[dict]:
        """Every run's epochs the epoch log keeps, oldest first: built-in and user metrics."""
        return EpochLog(self.job_dir).epoch_metrics(every_run=True) if self.job_dir else []

    @property
    def epochs(self) -> list[dict]:
        """The latest run's epochs (of the latest run that logged any)."""
        rows = self.epoch_history
        return [r for r in rows if r["run_id"] == rows[-1]["run_id"]] if rows else []


def list_jobs(warehouse: str, folder: Optional[str] = None) -> list[JobOverview]:
    return [_overview(spec, warehouse) for spec in discover_jobs(folder, errors=[])]


def find_job(name: str, warehouse: str, folder: Optional[str] = None) -> Optional[JobOverview]:
    spec = next((s for s in discover_jobs(folder, errors=[]) if s.name == name), None)
    return _overview(spec, warehouse) if spec else None


def _overview(spec: JobSpec, warehouse: str) -> JobOverview:
    """The job as its last run compiled it (the plan its compile step stored) while the script
    is unchanged; else compiled here, once per version of the script."""
    stored = latest_plan(warehouse, spec.name)
    if stored and stored.get("script_sha256") == script_sha256(spec.path):
        compiled, error = _load(stored["plan"]), None
    else:
        compiled, error = _compile(spec.path, os.path.getmtime(spec.path), spec.args, spec.deployment.parallelism)
    directory = job_dir(warehouse, compiled.job_graph.job_name) if compiled else None
    return JobOverview(spec, compiled, directory, error)


@lru_cache(maxsize=64)
def _load(plan: str) -> CompiledJob:
    return load_plan(plan)


_compile_lock = threading.Lock()     # compiling sets sys.argv: one job at a time


@lru_cache(maxsize=64)
def _compile(path: str, mtime: float, args: tuple,
             parallelism: Optional[int]) -> tuple[Optional[CompiledJob], Optional[str]]:
    """The compiled job, or why it does not compile: once per version of the module (``mtime`` is in the key)."""
    with _compile_lock:
        try:
            return compile_job(path, resolve_args(args), parallelism, CONTROL_PLANE_CONFIGURATION), None
        except SystemExit as e:        # argparse exits on bad arguments, having printed why to stderr
            return None, (f"{path} exited with status {e.code} while compiling with arguments {list(args)}: "
                          "check its DEPLOYMENT.args.")
        except Exception as e:
            return None, f"{path} does not compile: {type(e).__name__}: {e}"


# ---- JSON ---------------------------------------------------------------------------------

def is_restorable(record: CheckpointRecord) -> bool:
    """Only completed checkpoints keep their files (savepoints are restored by path, not by id)."""
    return record.status == COMPLETED and record.kind == CHECKPOINT


def checkpoint_json(record: CheckpointRecord) -> dict:
    return {**asdict(record), "restorable": is_restorable(record)}


def savepoint_restorable(record: CheckpointRecord) -> bool:
    """A savepoint is restored by its path: while its folder still holds its metadata."""
    return (record.kind == SAVEPOINT and record.status == COMPLETED and bool(record.external_path)
            and isfile(join(record.external_path, METADATA)))


def savepoint_json(record: CheckpointRecord) -> dict:
    """A savepoint: its path (what a restore takes), the checkpoint it copies, and whether it is there."""
    return {"path": record.external_path, "checkpoint_id": record.checkpoint_id, "epoch": record.epoch,
            "completed_at": record.completed_at, "state_bytes": record.state_bytes, "state_rows": record.state_rows,
            "restorable": savepoint_restorable(record)}


def execution_json(record: ExecutionRecord) -> dict:
    return record.to_json()


def with_live_figures(records: list[ExecutionRecord], rows: list[dict]) -> list[ExecutionRecord]:
    """``records`` with each RUNNING one's epochs and records in counted from the epoch log's
    ``rows``: its record says 0 until it ends (the history gets a row per change of state), while
    the log has a row per epoch it ran."""
    logged: dict = {}
    for row in rows:
        epochs, records_in = logged.get(row["run_id"], (0, 0))
        logged[row["run_id"]] = (epochs + 1, records_in + (row.get("records_in") or 0))
    return [replace(r, epochs=logged[r.run_id][0], records_in=logged[r.run_id][1])
            if r.state == RUNNING and r.run_id in logged else r for r in records]


def restored_execution(job: JobOverview, restore_from: str) -> Optional[ExecutionRecord]:
    """The run that took what ``restore_from`` names ("latest", a checkpoint id, a savepoint's
    path): a restore goes on as that run went (its epochs, its parallelism)."""
    if restore_from == "latest":
        record = latest_completed(job.checkpoints, job.lineage_start)
    elif restore_from.isdigit():
        record = next((r for r in job.checkpoints if r.kind == CHECKPOINT and r.checkpoint_id == int(restore_from)), None)
    else:
        record = next((r for r in job.checkpoints if r.kind == SAVEPOINT and r.external_path == restore_from), None)
    return next((e for e in job.executions if record is not None and e.run_id == record.run_id), None)


def latest_completed(checkpoints: list[CheckpointRecord], since: int = 0) -> Optional[CheckpointRecord]:
    """The checkpoint ``restore_from=latest`` restores: the newest since the job last started over."""
    return next((r for r in reversed(checkpoints) if is_restorable(r) and r.checkpoint_id >= since), None)


def graph_json(job: JobOverview) -> Optional[dict]:
    """The JobGraph: vertices (operator chains) and the edges between them."""
    if job.compiled is None:
        return None
    graph = job.compiled.job_graph
    return {
        "job_id": graph.job_id,
        "job_name": graph.job_name,
        "vertices": [{
            "id": v.vertex_id, "name": v.name, "parallelism": v.parallelism,
            "max_parallelism": v.max_parallelism, "slot_sharing_group": v.slot_sharing_group,
            "parallelism_from": parallelism_from(job.compiled, v),
            "operators": [{"name": op.operator_name, "uid": op.uid, "kind": op.kind} for op in v.operators],
        } for v in graph.vertices],
        "edges": [{
            "source": graph.vertex(e.source_vertex).vertex_id, "target": graph.vertex(e.target_vertex).vertex_id,
            "ship_strategy": e.ship_strategy, "distribution_pattern": e.distribution_pattern.value,
        } for e in graph.edges],
    }


def job_summary(job: JobOverview) -> dict:
    """A row of the jobs list: the job, its latest completed checkpoint and its latest execution."""
    deployment = job.spec.deployment
    latest_checkpoint = latest_completed(job.checkpoints, job.lineage_start)
    return {
        "name": job.name,
        "job_name": job.job_name,
        "path": job.spec.path,
        "doc": job.spec.doc,
        # a timedelta schedule is shown as "1:00:00"
        "deployment": {**asdict(deployment),
                       "schedule": None if deployment.schedule is None else str(deployment.schedule)},
        "job_dir": job.job_dir,
        "error": job.error,
        "restart_strategy": restart_strategy_of(job.compiled) if job.compiled else None,
        # how long a run that keeps failing takes to give up, with the attempts' time as measured
        "give_up_time": GiveUpTime(**give_up_of(job.compiled), attempt_s=attempt_seconds(job.executions)).describe()
        if job.compiled else None,
        "latest_checkpoint": checkpoint_json(latest_checkpoint) if latest_checkpoint else None,
        "latest_execution": execution_json(job.executions[0]) if job.executions else None,
    }


def job_charts(job: JobOverview, checkpoint_id: Optional[int] = None) -> dict:
    """What the charts draw: over epochs and across runs, per checkpoint, and the per-operator
    breakdown of checkpoint ``checkpoint_id`` (by default the latest completed one)."""
    taken = [r for r in job.checkpoints if r.kind == CHECKPOINT and r.status != FAILED]
    if checkpoint_id is None:
        chosen = latest_completed(job.checkpoints) or (taken[-1] if taken else None)
    else:
        chosen = next((r for r in taken if r.checkpoint_id == checkpoint_id), None)
    return {"epochs": metrics_history.epoch_charts(job.epoch_history),
            "checkpoints": metrics_history.checkpoint_charts(job.checkpoints),
            "splits": metrics_history.split_history(job.epoch_history, job.checkpoints,
                                                    {e.run_id: e.restored_from for e in job.executions}),
            "breakdown_of": chosen.checkpoint_id if chosen else None,
            "breakdown": metrics_history.checkpoint_breakdown(chosen, job.epoch_history),
            "runs": len({r["run_id"] for r in job.epoch_history}), "epochs_logged": len(job.epoch_history)}


def charts_json(charts: dict) -> dict:
    """``job_charts`` as JSON: each chart as its fields."""
    return {k: [asdict(c) for c in v] if isinstance(v, list) else v for k, v in charts.items()}


def job_details(job: JobOverview) -> dict:
    return {**job_summary(job), "graph": graph_json(job),
            "checkpoints": [checkpoint_json(r) for r in job.checkpoints],
            "savepoints": [savepoint_json(r) for r in job.checkpoints if r.kind == SAVEPOINT],
            "executions": [execution_json(r) for r in job.executions],
            "epochs": job.epochs}
