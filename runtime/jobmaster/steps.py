"""The steps of a job run, as the control plane's tasks call them (Flink's Dispatcher and
JobMaster, one function per step). Each takes and returns small JSON-able values, so an
orchestrator can pass them between tasks; data never travels through them.

    compile_step        StreamGraph -> JobGraph: the plan, stored once for the run (plans.py)
    execution_graph_step the ExecutionGraph: subtasks, key groups, pipelined regions
    allocate_slots_step the slot plan against the slots reserved for the run
    run_step            epochs on Spark, each ending in a checkpoint; restarts restore the latest
    finish_step         the run's outcome: checkpoints, sinks
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from typing import Optional

from runtime.client import CompiledJob, compile_job
from runtime.checkpoint.coordinator import checkpointing_enabled
from runtime.checkpoint.sink_committers import committed_sinks
from runtime.execution.executor import execute_stream_graph
from runtime.execution.failure_handler import attempt_overrides, restart_configuration
from runtime.execution.history import FAILED, ExecutionHistory, ExecutionRecord
from runtime.execution.options import ExecutionOptions
from runtime.execution.preflight import check_job_folder, claim_job_folder
from runtime.jobmaster.assets import source_tables
from runtime.jobmaster.dag_profiles import DagProfile, read_profile, store_profile
from runtime.jobmaster.deployment import CONTROL_PLANE_CONFIGURATION, ON_INPUTS, JobSpec, resolve_args, script_sha256
from runtime.jobmaster.plans import latest_plan, load_plan, promote_plan, store_plan, store_slot_plan
from runtime.scheduler.failover import FAILOVER_STRATEGY_KEY, REGION, pipelined_regions
from runtime.scheduler.slots import TaskManager, compute_slot_plan
from runtime.storage.filesystems import is_uri, join
from runtime.storage.layout import job_dir


RUN_PARAMETERS = ("restore_from", "parallelism", "max_epochs", "allow_non_restored_state")


class RunRequestError(ValueError):
    """A run's parameters are wrong; the message names the parameter and the fix."""


@dataclass(frozen=True)
class RunRequest:
    """What one run of a job asks for: the manual-run form's parameters, or the defaults."""
    restore_from: str = "latest"        # "latest", "none", a checkpoint id, or a savepoint path
    parallelism: Optional[int] = None   # default parallelism of operators the job leaves unset
    max_epochs: Optional[int] = None    # stop an unbounded job after this many epochs
    allow_non_restored_state: bool = False   # skip checkpointed state no operator claims (by uid)

    @staticmethod
    def from_conf(conf: Optional[dict], spec: JobSpec) -> "RunRequest":
        conf = dict(conf or {})
        unknown = set(conf) - set(RUN_PARAMETERS)
        if unknown:
            raise RunRequestError(f"Unknown run parameter(s) {sorted(unknown)} for job {spec.name}: "
                                  f"use {', '.join(RUN_PARAMETERS)}.")
        restore = conf.get("restore_from")
        restore = "latest" if restore in (None, "") else str(restore).strip()
        if not (restore in ("latest", "none") or restore.isdigit() or os.path.isabs(restore)
                or is_uri(restore)):
            raise RunRequestError(f"restore_from={restore!r} for job {spec.name}: use 'latest', 'none' (a fresh "
                                  "start), a checkpoint id (see its checkpoints), or the absolute path or URI of a savepoint.")
        # max_epochs null (the trigger form's Epochs left empty): until stopped; absent: the deployment's.
        epochs = (None if "max_epochs" in conf and conf["max_epochs"] is None else
                  _positive(conf.get("max_epochs"), "max_epochs", spec.deployment.max_epochs))
        return RunRequest(restore, _positive(conf.get("parallelism"), "parallelism", spec.deployment.parallelism),
                          epochs,
                          _flag(conf.get("allow_non_restored_state"), "allow_non_restored_state"))


def _positive(value, name: str, default: Optional[int]) -> Optional[int]:
    if value in (None, ""):
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1 or str(number) != str(value).strip():
        raise RunRequestError(f"{name}={value!r}: must be a whole number of at least 1 (or empty for the default).")
    return number


def _flag(value, name: str) -> bool:
    if value in (None, "", False, "false", "False", 0):
        return False
    if value in (True, "true", "True", 1):
        return True
    raise RunRequestError(f"{name}={value!r}: must be true or false.")


def compile_run(spec: JobSpec, request: RunRequest, warehouse: Optional[str] = None) -> CompiledJob:
    """Run the job script with the run's arguments ({warehouse} is the run's warehouse)."""
    return compile_job(spec.path, resolve_args(spec.args, warehouse), request.parallelism, CONTROL_PLANE_CONFIGURATION)


# ---- compile -----------------------------------------------------------------------------

def compile_step(spec: JobSpec, request: RunRequest, warehouse: str, run: str) -> dict:
    """Run the job script once and store the plan for the run's later steps; returns its
    summary with ``plan``, the folder every later step of the run reads. A job whose folder is
    another script's, or that reads or writes in a job folder, is refused here (``preflight``);
    the DAG's profile (``dag_profiles``) is stored for the next parse of the DAG files."""
    job = compile_run(spec, request, warehouse)
    folder = job_dir(warehouse, job.job_graph.job_name)
    check_job_folder(job.job_graph, warehouse, folder)
    claim_job_folder(job.job_graph, folder)
    profile = dag_profile_of(job, spec, warehouse)
    if spec.deployment.schedule == ON_INPUTS and not profile.input_tables:
        raise ValueError(f"Job {spec.name} ({spec.path}) is scheduled on its inputs (schedule={ON_INPUTS!r}) but "
                         f"reads no Delta table: read one with DeltaSource, or give it another schedule")
    stored = read_profile(warehouse, spec)
    if request.parallelism == spec.deployment.parallelism or stored is None or not stored.current:
        store_profile(warehouse, spec.name, profile)    # the slots of a default run (a rescale's are its own)
    settings = job.stream_graph.settings
    conf = dict(settings.configuration)
    checkpointing = dict(settings.checkpoint_config)
    summary = {
        "job_name": job.job_graph.job_name,
        "job_id": job.job_graph.job_id,
        "script": spec.path,
        "args": resolve_args(spec.args, warehouse),
        "default_parallelism": settings.default_parallelism,
        "requested_parallelism": request.parallelism,
        "vertices": [{"id": v.id, "name": v.name, "parallelism": v.parallelism,
                      "max_parallelism": v.max_parallelism, "slot_sharing_group": v.slot_sharing_group,
                      "parallelism_from": parallelism_from(job, v),
                      "operators": [n.operator_name for n in v.operators]} for v in job.job_graph.vertices],
        "edges": [{"source": e.source_vertex, "target": e.target_vertex, "ship_strategy": e.ship_strategy}
                  for v in job.job_graph.vertices for e in job.job_graph.outputs_of(v.id)],
        "checkpointing": checkpointing,
        "restart_strategy": restart_strategy_of(job),
        "failover_strategy": conf.get(FAILOVER_STRATEGY_KEY, REGION),
    }
    pointer = {"script_sha256": script_sha256(spec.path), "slot_profile": slot_profile_of(job),
               "restart_strategy": summary["restart_strategy"], "give_up": give_up_of(job)}
    plan = store_plan(job, warehouse, run, summary, pointer)
    return {**summary, "plan": plan, "job_dir": job_dir(warehouse, job.job_graph.job_name)}


# Who set a vertex's parallelism: one of its operators (set_parallelism), the job's code for all
# its operators (env.set_parallelism, which overrides the run's, as in Flink), or the run (the
# trigger form's parallelism, the deployment's, else Flink's default of 1): Flink's -p.
OPERATOR, JOB, RUN = "operator", "job", "run"


def parallelism_from(job: CompiledJob, vertex) -> str:
    if any(n.parallelism_configured for n in vertex.operators):
        return OPERATOR
    return JOB if job.stream_graph.settings.default_parallelism_set_by_job else RUN


def parallelism_report(summary: dict) -> list[str]:
    """Which operators run at what, and why: a line per vertex, and a warning when the run asked
    for a parallelism that no operator takes."""
    why = {OPERATOR: "set by the operator", JOB: "the job's default, set in its code (env.set_parallelism)",
           RUN: "the run's parallelism"}
    lines = [f"{v['name']}: parallelism {v['parallelism']} ({why[v['parallelism_from']]}), max {v['max_parallelism']}"
             for v in summary["vertices"]]
    asked = summary.get("requested_parallelism")
    if asked is not None and not any(v["parallelism_from"] == RUN for v in summary["vertices"]):
        lines.append(f"WARNING: the run asked for parallelism {asked}, which no operator takes: each sets its own"
                     + (" or the job sets its default in code" if any(v["parallelism_from"] == JOB
                                                                      for v in summary["vertices"]) else "")
                     + "; the job runs as listed above.")
    return lines


def restart_configuration_of(job: CompiledJob):
    """The restart strategy the job runs under (its own, its configuration's, or the default)."""
    settings = job.stream_graph.settings
    return restart_configuration(settings, checkpointing_enabled(dict(settings.checkpoint_config)))


def restart_strategy_of(job: CompiledJob) -> str:
    """The restart strategy the job runs under, in words."""
    return str(restart_configuration_of(job))


@dataclass(frozen=True)
class GiveUpTime:
    """How long a run whose every attempt fails takes until its restart strategy gives up: the
    attempts, the strategy's delays between them and an attempt's duration as measured."""
    attempts: Optional[int]             # attempts until the strategy gives up; None: it never does
    delays_s: float                     # the strategy's delays between them, summed (jitter's mean: 0)
    attempt_s: Optional[float] = None   # an attempt until it fails (and its restart), as measured

    @property
    def total_s(self) -> Optional[float]:
        if self.attempts is None or self.attempt_s is None:
            return None
        return self.delays_s + self.attempts * self.attempt_s

    def describe(self) -> str:
        if self.attempts is None:
            return "The restart strategy never gives up: a failing run restarts until it is canceled."
        text = f"The restart strategy gives up after {self.attempts} attempt(s) with {self.delays_s:.1f} s of delays"
        if self.attempt_s is None:
            return text + " between them, plus the attempts' own time (not measured yet)."
        return (text + f" and about {self.attempt_s:.1f} s per attempt as measured: a run that keeps failing "
                f"fails for good after about {self.total_s:.0f} s.")


def give_up_time(strategy, attempt_s: Optional[float] = None, limit: int = 1000) -> GiveUpTime:
    """``GiveUpTime`` of a restart strategy (a RestartStrategyConfiguration) for attempts that each
    fail after ``attempt_s`` seconds (None: unknown, counted as 0 for a failure-rate window). The
    strategy itself decides (``decide``), as the driver asks it; more than ``limit`` attempts is never."""
    from runtime.scheduler.restart import decide
    times, now, delays = [], 0.0, 0.0
    for attempt in range(1, limit + 1):
        now += attempt_s or 0.0
        times.append(int(now * 1000))
        decision = decide(strategy, times)
        if not decision.restart:
            return GiveUpTime(attempt, delays, attempt_s)
        delays += decision.backoff_ms / 1000
        now += decision.backoff_ms / 1000
    return GiveUpTime(None, delays, attempt_s)


def measured_attempt_s(warehouse: str, job_name: str, last: int = 20) -> Optional[float]:
    """An attempt's duration as the job's history measured it (``attempt_seconds``)."""
    return attempt_seconds(ExecutionHistory(job_dir(warehouse, job_name)).executions(), last)


def attempt_seconds(records: list[ExecutionRecord], last: int = 20) -> Optional[float]:
    """The median, over the last ``last`` failed attempts in ``records``, of the time from the
    attempt's start (or, for a restart, from the failure before it, less the strategy's delay:
    the restart's own cost) to its failure. None: no failed attempt yet."""
    records = sorted(records, key=lambda r: r.started_at or 0)
    previous: dict = {}
    spans = []
    for r in records:
        before = previous.get(r.dag_run_id) if r.dag_run_id else None
        if r.state == FAILED and r.ended_at and r.started_at:
            start = r.started_at
            if before is not None and before.ended_at and r.attempt == before.attempt + 1:
                start = min(start, before.ended_at + (before.backoff_ms or 0) / 1000)
            spans.append(r.ended_at - start)
        previous[r.dag_run_id] = r
    spans = sorted(spans[-last:])
    return spans[len(spans) // 2] if spans else None


def dag_profile_of(job: CompiledJob, spec: JobSpec, warehouse: str) -> DagProfile:
    """What the job's DAG needs of the compiled job (``dag_profiles``): the slot profile, the restart
    strategy in words, how long a run that keeps failing takes to give up (with the attempts'
    duration the history measured), and the Delta tables it reads."""
    measured = measured_attempt_s(warehouse, job.job_graph.job_name)
    return DagProfile(script_sha256(spec.path), job.job_graph.job_name, slot_profile_of(job), restart_strategy_of(job),
                      GiveUpTime(**give_up_of(job), attempt_s=measured).describe(), source_tables(job))


def refresh_profiles(specs, warehouse: str) -> list[tuple[str, str]]:
    """Compile each job whose DAG profile is not current and store it (outside any parse of the
    DAG files); (path, error) of those that do not compile: their compile step says the same."""
    errors = []
    for spec in specs:
        profile = read_profile(warehouse, spec)
        if profile is not None and profile.current:
            continue
        try:
            job = compile_run(spec, RunRequest(parallelism=spec.deployment.parallelism), warehouse)
            store_profile(warehouse, spec.name, dag_profile_of(job, spec, warehouse))
        except Exception as e:      # the job script's own error
            errors.append((spec.path, f"{type(e).__name__}: {e}"))
    return errors


def give_up_of(job: CompiledJob) -> dict:
    """The job's ``GiveUpTime`` without a measured attempt (stored with its plan): attempts, delays."""
    time_ = give_up_time(restart_configuration_of(job))
    return {"attempts": time_.attempts, "delays_s": time_.delays_s}


# ---- the execution graph -----------------------------------------------------------------

def execution_graph_step(plan: str, request: Optional[RunRequest] = None, warehouse: Optional[str] = None) -> dict:
    """The ExecutionGraph; with the run's request, also the restore point checked against it, as
    Flink's scheduler restores state when it builds the ExecutionGraph, before asking for slots:
    a parallelism above the restored state's max parallelism fails here with Flink's message."""
    job = load_plan(plan)
    graph = job.execution_graph
    restore_point = resolve_restore_point(job, request, warehouse)["restore_point"] if request else None
    names = {(ev.job_vertex_id, ev.subtask_index): ev.task_name_with_subtask_index
             for ev in graph.all_execution_vertices}
    return {
        "restore_point": restore_point,
        "subtasks": len(names),
        "vertices": [{"name": v.name, "parallelism": v.parallelism,
                      "key_groups": [[ev.key_group_range.start_key_group, ev.key_group_range.end_key_group]
                                     for ev in v.task_vertices if ev.key_group_range]}
                     for v in graph.job_vertices],
        "pipelined_regions": [sorted(names[s] for s in region) for region in pipelined_regions(graph)],
    }


# ---- slots -------------------------------------------------------------------------------

def slot_profile_of(job: CompiledJob) -> list:
    """Per slot sharing group: [group, the highest parallelism set on its operators, whether
    some operator takes the default parallelism, the default]. Enough to tell the slots a run
    needs at any default parallelism (the reservation policy uses it)."""
    groups: dict = {}
    pinned = job.stream_graph.settings.default_parallelism_set_by_job     # the run's parallelism is not used
    for node in job.stream_graph.nodes:
        fixed, uses_default = groups.get(node.slot_sharing_group, (0, False))
        if node.parallelism_configured or pinned:
            groups[node.slot_sharing_group] = (max(fixed, node.parallelism), uses_default)
        else:
            groups[node.slot_sharing_group] = (fixed, True)
    default = job.stream_graph.settings.default_parallelism
    return [[g, fixed, uses_default, default] for g, (fixed, uses_default) in groups.items()]


def allocate_slots_step(plan: str, pool: str, pool_slots: int) -> dict:
    """The slot plan over the ``pool_slots`` slots reserved for this run in ``pool``, stored with
    the plan; fails with Flink's NoResourceAvailableException (slots required vs allocated)
    when they are too few."""
    graph = load_plan(plan).execution_graph
    slots = json.loads(compute_slot_plan(graph, (TaskManager(f"pool:{pool}", "airflow", pool_slots),)).to_json())
    store_slot_plan(plan, slots)
    return slots


# ---- deploy --------------------------------------------------------------------------------

def resolve_restore_point(job: CompiledJob, request: RunRequest, warehouse: str) -> dict:
    """The restore point the run will start from, checked now against the job (uids, max
    parallelism), so a wrong checkpoint id or savepoint fails before anything is deployed, as
    a Flink submission does, instead of becoming a restart."""
    from runtime.checkpoint.restore import NoUsableCheckpointException, check_compatibility, choose
    from runtime.checkpoint.checkpoint_record import SAVEPOINT
    from runtime.checkpoint.storage import CheckpointStorage
    directory = job_dir(warehouse, job.job_graph.job_name)
    point = None
    if request.restore_from != "none":
        try:
            chosen = choose(CheckpointStorage(directory), request.restore_from)
        except NoUsableCheckpointException as e:     # the same refusal as sluice run's
            raise e.naming(job.job_graph.job_name, committed_sinks(job.job_graph)) from None
        if chosen is not None:
            check_compatibility(chosen, job.job_graph, request.allow_non_restored_state)
            point = chosen.root if chosen.record.kind == SAVEPOINT else chosen.record.checkpoint_id
    return {"job_name": job.job_graph.job_name, "job_dir": directory, "restore_from": request.restore_from,
            "restore_point": point}


def deploy_step(spec: JobSpec, plan: str, warehouse: str) -> None:
    """The run deploys: its plan becomes the job's (the web view's, the next default run's slot
    reservation). Earlier steps that refused the run left the job's plan as it was."""
    promote_plan(warehouse, spec.name, plan)


def savepoint_step(spec: JobSpec, warehouse: str, checkpoint: Optional[int], target: Optional[str]) -> str:
    """A self-contained savepoint of a completed checkpoint (default: the latest)."""
    from runtime.checkpoint.savepoint import take_savepoint
    from runtime.checkpoint.storage import CheckpointStorage
    stored = latest_plan(warehouse, spec.name)
    job_name = (stored["job_name"] if stored else
                compile_run(spec, RunRequest(parallelism=spec.deployment.parallelism), warehouse).job_graph.job_name)
    return take_savepoint(CheckpointStorage(job_dir(warehouse, job_name)), target, checkpoint)


# ---- run -----------------------------------------------------------------------------------

def restart_backoff_remaining(warehouse: str, job_name: str, dag_run_id: str) -> float:
    """Seconds still to wait before this run's next attempt, by the restart strategy's last decision."""
    attempts = ExecutionHistory(job_dir(warehouse, job_name)).attempts(dag_run_id)
    if not attempts or attempts[-1].state != FAILED or not attempts[-1].backoff_ms:
        return 0.0
    last = attempts[-1]
    return max(0.0, (last.ended_at or last.recorded_at or 0) + last.backoff_ms / 1000 - time.time())


def run_options(job: CompiledJob, request: RunRequest, warehouse: str, master: str, dag_run_id: str) -> dict:
    """ExecutionOptions overrides of the run's next attempt (``failure_handler.attempt_overrides``): the
    first restores what the run asked for, a restart the latest completed checkpoint. The driver
    restarts its own attempts; this is where a driver starts (the first attempt, or a new driver
    after one whose JVM died)."""
    attempt = attempt_overrides(job.execution_graph, dict(job.stream_graph.settings.configuration), warehouse,
                                job.job_graph.job_name, dag_run_id, request.restore_from)
    return {"warehouse": warehouse, "master": master, "max_epochs": request.max_epochs,
            "restore_from": attempt["restore_from"], "dag_run_id": dag_run_id, "attempt": attempt["attempt"],
            "allow_non_restored_state": request.allow_non_restored_state or None,
            "subtask_attempts": attempt["subtask_attempts"]}


def run_step(plan: str, request: RunRequest, warehouse: str, master: str, dag_run_id: str) -> dict:
    """Run the stored plan in this process on Spark (``master``), its restart attempts in the same
    Spark session. A failure the strategy gives up on raises; the history keeps every attempt with
    the restart strategy's decision (``restart_decision``)."""
    job = load_plan(plan)
    options = ExecutionOptions.from_configuration(dict(job.stream_graph.settings.configuration))
    overrides = run_options(job, request, warehouse, master, dag_run_id)
    result = execute_stream_graph(job.stream_graph, options.with_overrides(**overrides))
    return outcome(warehouse, result.job_name, result.run_id)


def cancel_spark_jobs() -> None:
    """Cancel the Spark jobs of a run in this process (a cancel; the run then records CANCELED)."""
    from runtime.execution.spark import cancel_all_jobs
    cancel_all_jobs()


def outcome(warehouse: str, job_name: str, run_id: Optional[str] = None, dag_run_id: Optional[str] = None) -> dict:
    """A run's record in the history (by run id, or the last of an Airflow run) as JSON."""
    history = ExecutionHistory(job_dir(warehouse, job_name))
    records = [r for r in history.executions()
               if (run_id and r.run_id == run_id) or (dag_run_id and r.dag_run_id == dag_run_id)]
    if not records:
        return {}
    return {**records[0].to_json(), "job_dir": job_dir(warehouse, job_name)}


def next_attempt(warehouse: str, job_name: str, dag_run_id: str) -> int:
    """The number of the run's next attempt: one after the attempts in the history."""
    return max((r.attempt for r in ExecutionHistory(job_dir(warehouse, job_name)).attempts(dag_run_id)), default=0) + 1


def last_attempt(warehouse: str, job_name: str, dag_run_id: str, attempt: int) -> Optional[ExecutionRecord]:
    found = [r for r in ExecutionHistory(job_dir(warehouse, job_name)).attempts(dag_run_id) if r.attempt == attempt]
    return found[-1] if found else None


def restart_decision(warehouse: str, job_name: str, dag_run_id: str, attempt: int) -> tuple[bool, str]:
    """Whether a failed attempt restarts, and why: the restart strategy's decision, a field of the
    attempt's execution record. An attempt with no record failed before it started; one whose
    record holds no decision died without asking the strategy (killed, out of memory)."""
    record = last_attempt(warehouse, job_name, dag_run_id, attempt)
    if record is None:
        return False, "the job failed before it started, so there is nothing to restart"
    if record.restarting is None:
        return False, (f"not restarting: attempt {attempt} ended while it was {record.state} in the execution "
                       f"history, before the restart strategy was asked")
    return record.restarting, record.restart


def driver_restart_decision(warehouse: str, job_name: str, dag_run_id: str, first: int) -> tuple[bool, str]:
    """``restart_decision`` on the last attempt of a driver whose attempts started at ``first``: a
    driver restarts its attempts itself and leaves a restart to the control plane only when its
    session died with it (spark-submit)."""
    return restart_decision(warehouse, job_name, dag_run_id, max(first, next_attempt(warehouse, job_name, dag_run_id) - 1))


# ---- finish --------------------------------------------------------------------------------

def finish_step(warehouse: str, run: dict) -> dict:
    """What the run left: its last checkpoint (and where the checkpoints are), its sinks' tables."""
    from runtime.checkpoint.completed_checkpoint_store import CompletedCheckpointStore
    directory = run["job_dir"]
    completed = CompletedCheckpointStore(directory).completed()
    latest = completed[-1] if completed else None
    return {"job": run["job_name"], "state": run["state"], "run_id": run["run_id"], "epochs": run["epochs"],
            "records_in": run["records_in"], "restored_from": run["restored_from"],
            "checkpoint_id": latest.checkpoint_id if latest else None,
            "checkpoints": join(directory, "checkpoints"),
            "sinks": sorted(latest.sink_versions(directory) if latest else ())}


def request_json(request: RunRequest) -> dict:
    return asdict(request)
