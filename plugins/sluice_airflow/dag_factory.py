"""DAGs of the control plane, built from the job modules' deployments, never by running a job
script: a parse of these DAG files reads each job's DEPLOYMENT and the profile its last compile
stored (runtime/jobmaster/dag_profiles.py), so it stays cheap however the jobs are written.

    <job>                          compile -> execution_graph -> allocate_slots -> deploy -> run -> finish
                                   -> sink_assets (Asset events of the sink tables the run committed to)
    sluice_restart_from_checkpoint any job: check the restore point, then trigger the job's DAG with it
    sluice_savepoint               any job: copy a completed checkpoint into a self-contained savepoint
    sluice_maintenance             daily, a job or all: compact and vacuum sinks and stopped jobs' own tables
"""
from __future__ import annotations

import logging
import sys
from datetime import datetime, timezone
from typing import Optional

from airflow.sdk import DAG, Param, chain

from runtime.jobmaster import JobSpec, discover_jobs
from runtime.jobmaster.dag_profiles import DagProfile, estimated_slot_profile, read_profile
from runtime.jobmaster.deployment import ON_INPUTS, dag_id_of
from sluice_airflow import warehouse_root
from sluice_airflow.assets import SinkAssetsOperator, dag_schedule
from sluice_airflow.operators import (ALL_JOBS, SluiceAllocateSlotsOperator, SluiceCheckRestorePointOperator,
                                     SluiceCompileOperator, SluiceDeployOperator, SluiceExecutionGraphOperator,
                                     SluiceFinishOperator, SluiceJobOperator, SluiceMaintainOperator,
                                     SluiceSavepointOperator, SluiceTriggerRunOperator)

log = logging.getLogger(__name__)
START = datetime(2026, 1, 1, tzinfo=timezone.utc)
RESTORE_HELP = ("'latest' (the latest completed checkpoint; nothing to restore starts fresh), 'none' (start "
                "without state), a checkpoint id, or the absolute path or URI of a savepoint")


def run_params(spec: JobSpec) -> dict:
    """The manual-run form (JSON schema); scheduled runs take the defaults."""
    d = spec.deployment
    return {
        "restore_from": Param("latest", type="string", title="Restore from", description=RESTORE_HELP),
        "parallelism": Param(d.parallelism, type=["null", "integer"], minimum=1, title="Parallelism",
                             description="Default parallelism of operators the job leaves unset "
                                         "(a rescale: keyed state is redistributed by key groups)"),
        "max_epochs": Param(d.max_epochs, type=["null", "integer"], minimum=1, title="Epochs",
                            description="Stop an unbounded job after this many epochs (empty: until stopped)"),
        "allow_non_restored_state": Param(False, type="boolean", title="Allow non-restored state",
                                          description="Skip checkpointed state that no operator claims (by uid)"),
    }


def job_dag(spec: JobSpec, profile: Optional[DagProfile] = None, warehouse: Optional[str] = None,
            error: str = "", namesakes: tuple = ()) -> DAG:
    """The DAG of a job, built from its deployment and the DAG's stored profile (``dag_profiles``):
    nothing here runs the job script. ``error``: the job module does not import; its DAG says so
    and its compile task fails with the cause. ``namesakes``: other job modules whose jobs have
    this one's name (one job folder: only the first to compile may run)."""
    d, warehouse = spec.deployment, warehouse or warehouse_root()
    schedule = dag_schedule(spec, warehouse, profile)
    doc = f"{spec.doc}\n\n" + "\n\n".join(_notes(spec, profile, schedule, error, namesakes))
    description = d.description or (spec.doc.splitlines() or [""])[0]
    with DAG(dag_id=spec.name, schedule=None if error else schedule, start_date=START, catchup=False,
             max_active_runs=1, description=f"BROKEN: {error}"[:200] if error else description, doc_md=doc,
             tags=["sluice", *d.tags], params=run_params(spec), default_args={"owner": d.owner}) as dag:
        steps = [SluiceCompileOperator(task_id="compile", job=spec.path),
                 SluiceExecutionGraphOperator(task_id="execution_graph", job=spec.path),
                 SluiceAllocateSlotsOperator(task_id="allocate_slots", job=spec.path),
                 SluiceDeployOperator(task_id="deploy", job=spec.path)]
        # The slots its last compile found (a changed script's are most likely the same), else an estimate.
        run = SluiceJobOperator(task_id="run", job=spec.path,
                                slot_profile=profile.slot_profile if profile else estimated_slot_profile(spec))
        finish = SluiceFinishOperator(task_id="finish", job=spec.path)
        chain(*steps, run, finish, SinkAssetsOperator(task_id="sink_assets", dag_id=spec.name))
    return dag


def _notes(spec: JobSpec, profile: Optional[DagProfile], schedule, error: str, namesakes: tuple) -> list[str]:
    """The DAG doc's paragraphs on what the DAG knows of its job, and what it does not yet."""
    if error:
        return [f"**The job module does not import:** `{error}`. Fix it; its compile task's log has the traceback."]
    notes = []
    if namesakes:
        notes.append(f"**Its job has the name of the job of {', '.join(namesakes)}** "
                     f"(`env.execute({profile.job_name!r})`): both would share one job folder, so only the first "
                     f"to compile runs and the other's compile step is refused. Give one of them another name in "
                     f"`env.execute(...)`.")
    if profile is None or not profile.current:
        notes.append("**Not compiled since the job script changed** (or never): the run reserves the slots its "
                     "last compile found, or its deployment's parallelism, until its compile step tells what it needs.")
    if profile is not None:
        notes.append(f"**Restarts:** {profile.restart_strategy} {profile.give_up_time} Restarts run in the job's "
                     f"driver: the Sluice JobManager's (a driver that dies is replaced, restoring the latest "
                     f"checkpoint), or in-process in the run task's own Spark session; every attempt is in the "
                     f"job's execution history and the run task's log. Set another "
                     f"strategy with `env.set_restart_strategy(...)` or the `restart-strategy.*` configuration keys.")
    if spec.deployment.schedule == ON_INPUTS and schedule is None:
        notes.append("**Scheduled on its inputs, which are not known yet:** trigger it once (its compile step "
                     "finds the Delta tables it reads), or restart `bin/dev airflow`.")
    return notes


def job_dags(specs=None, warehouse: Optional[str] = None) -> dict[str, DAG]:
    """A DAG per job module, built without running any job script (``job_dag``); a module that
    does not import still has its DAG, which says why and whose compile task fails with the cause.
    Modules whose last compiles gave their jobs one name say so in their DAGs' docs, and the log."""
    errors: list = []
    specs = discover_jobs(errors=errors) if specs is None else specs
    warehouse = warehouse or warehouse_root()
    profiles = {spec.path: read_profile(warehouse, spec) for spec in specs}
    by_name: dict = {}
    for path, profile in profiles.items():
        if profile is not None:
            by_name.setdefault(profile.job_name, []).append(path)
    dags = {}
    for spec in specs:
        profile = profiles[spec.path]
        namesakes = tuple(p for p in by_name.get(profile.job_name, ()) if p != spec.path) if profile else ()
        if namesakes:
            log.error("Job module %s names its job '%s' in env.execute(...), as %s do: one job folder, so only "
                      "the first to compile runs. Give each its own name.", spec.path, profile.job_name,
                      ", ".join(namesakes))
        dags[spec.name] = job_dag(spec, profile, warehouse, namesakes=namesakes)
    for path, message in errors:
        log.error("Job module %s does not import: %s", path, message)
        spec = JobSpec(dag_id_of(path), path)
        dags[spec.name] = job_dag(spec, None, warehouse, error=message)
    return dags


def _job_param(specs) -> Param:
    names = [spec.name for spec in specs]
    if not names:       # no job that imports: any name (an enum must list one)
        return Param(None, type=["null", "string"], title="Job", description="The job (its DAG id)")
    return Param(names[0], type="string", enum=names, title="Job", description="The job (its DAG id)")


def restart_from_checkpoint_dag(specs=None) -> DAG:
    """Restart any job from a checkpoint or savepoint, at any parallelism: check the restore
    point against the job, then trigger the job's own DAG with it (which reserves the slots
    the new parallelism needs)."""
    specs = discover_jobs(errors=[]) if specs is None else specs
    params = {"job": _job_param(specs), **run_params(JobSpec("any", "", doc=""))}
    with DAG(dag_id="sluice_restart_from_checkpoint", schedule=None, start_date=START, catchup=False,
             tags=["sluice"], params=params, doc_md=restart_from_checkpoint_dag.__doc__,
             render_template_as_native_obj=True,     # the conf is the checked parameters, as they are
             description="Restart a job from a checkpoint or a savepoint, at any parallelism") as dag:
        check = SluiceCheckRestorePointOperator(task_id="check_restore_point", job="{{ params.job }}")
        trigger = SluiceTriggerRunOperator(
            task_id="restart", trigger_dag_id="{{ params.job }}",
            conf="{{ ti.xcom_pull(task_ids='check_restore_point')['conf'] }}",
            note="Restart from {{ params.restore_from }} (sluice_restart_from_checkpoint)")
        check >> trigger
    return dag


def savepoint_dag(specs=None) -> DAG:
    """Take a savepoint of any job: a self-contained copy of a completed checkpoint."""
    specs = discover_jobs(errors=[]) if specs is None else specs
    params = {"job": _job_param(specs),
              "checkpoint": Param(None, type=["null", "integer"], minimum=1, title="Checkpoint",
                                  description="The checkpoint id to copy (empty: the latest completed)"),
              "target": Param(None, type=["null", "string"], title="Target folder",
                              description="Where to write it (empty: <warehouse>/<job>/savepoints/...)")}
    with DAG(dag_id="sluice_savepoint", schedule=None, start_date=START, catchup=False, tags=["sluice"],
             params=params, doc_md=savepoint_dag.__doc__, description="Take a savepoint of a job") as dag:
        SluiceSavepointOperator(task_id="savepoint", job="{{ params.job }}", checkpoint="{{ params.checkpoint }}",
                                target="{{ params.target }}")
    return dag


def maintenance_dag(specs=None, schedule: str = "@daily") -> DAG:
    """Maintain a job's tables (or every job's, the default): compact and vacuum its Delta sinks as
    their policies say (`DeltaSink.with_maintenance(TableMaintenance(...))`) and, when no run holds
    the job, Sluice's own tables of it. The `maintain` task's log and return value say what it
    removed."""
    specs = discover_jobs(errors=[]) if specs is None else specs
    names = [spec.name for spec in specs]
    params = {"job": Param(ALL_JOBS, type="string", enum=[ALL_JOBS, *names], title="Job",
                           description=f"The job (its DAG id), or {ALL_JOBS!r} for every job")}
    with DAG(dag_id="sluice_maintenance", schedule=schedule, start_date=START, catchup=False, max_active_runs=1,
             tags=["sluice"], params=params, doc_md=maintenance_dag.__doc__,
             description="Compact and vacuum jobs' tables") as dag:
        SluiceMaintainOperator(task_id="maintain", job="{{ params.job }}")
    return dag


def main() -> int:
    """``python -m sluice_airflow.dag_factory``: compile each job whose DAG profile is not current
    (new or changed since its last compile) and store it, outside Airflow's parse of the DAG files,
    so its DAG is whole at once (``bin/dev airflow`` runs it before Airflow starts). A job that does
    not import or compile is named, with the cause; its DAG and compile task say the same."""
    from runtime.jobmaster.steps import refresh_profiles
    errors: list = []
    specs = discover_jobs(errors=errors)
    errors += refresh_profiles(specs, warehouse_root())
    for path, message in errors:
        print(f"sluice: job module {path}: {message}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
