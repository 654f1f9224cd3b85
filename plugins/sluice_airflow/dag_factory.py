"""DAGs of the control plane, built from the job modules' deployments.

    <job>                          compile -> execution_graph -> allocate_slots -> deploy -> run -> finish
                                   -> sink_assets (Asset events of the sink tables the run committed to)
    sluice_restart_from_checkpoint any job: check the restore point, then trigger the job's DAG with it
    sluice_savepoint               any job: copy a completed checkpoint into a self-contained savepoint
    sluice_maintenance             daily, a job or all: compact and vacuum sinks and stopped jobs' own tables
"""
from __future__ import annotations

import logging
from datetime import datetime, timezone

from airflow.sdk import DAG, Param, chain

from runtime.jobmaster import JobSpec, discover_jobs
from runtime.jobmaster.steps import dag_profile
from sluice_airflow import warehouse_root
from sluice_airflow.assets import SinkAssetsOperator, dag_schedule
from sluice_airflow.operators import ALL_JOBS, SluiceJobOperator, SluiceStepOperator, SluiceTriggerRunOperator

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


def job_dag(spec: JobSpec) -> DAG:
    d, warehouse = spec.deployment, warehouse_root()
    profile = dag_profile(spec, warehouse)
    doc = (f"{spec.doc}\n\n**Restarts:** {profile['restart_strategy']} {profile['give_up_time']} Restarts run in "
           f"the run task's own Spark session: every attempt is in its one Airflow try and log. Set another "
           f"strategy with `env.set_restart_strategy(...)` or the `restart-strategy.*` configuration keys.")
    with DAG(dag_id=spec.name, schedule=dag_schedule(spec, warehouse), start_date=START, catchup=False,
             max_active_runs=1, description=d.description or (spec.doc.splitlines() or [""])[0], doc_md=doc,
             tags=["sluice", *d.tags], params=run_params(spec), default_args={"owner": d.owner}) as dag:
        steps = [SluiceStepOperator(task_id=step, step=step, job=spec.path)
                 for step in ("compile", "execution_graph", "allocate_slots", "deploy")]
        run = SluiceJobOperator(task_id="run", job=spec.path, slot_profile=profile["slot_profile"])
        finish = SluiceStepOperator(task_id="finish", step="finish", job=spec.path)
        chain(*steps, run, finish, SinkAssetsOperator(task_id="sink_assets", dag_id=spec.name))
    return dag


def job_dags(specs=None) -> dict[str, DAG]:
    """A DAG per job module; a module that does not import, or whose job does not compile when
    its DAG is built, is logged and left out (the others stay)."""
    errors: list = []
    specs = discover_jobs(errors=errors) if specs is None else specs
    dags = {}
    for spec in specs:
        try:
            dags[spec.name] = job_dag(spec)
        except Exception as e:      # the job script's own error, as it would fail its compile task
            errors.append((spec.path, f"its job does not compile: {type(e).__name__}: {e}"))
    for path, message in errors:
        log.error("Job module %s is left out of the DAGs: %s", path, message)
    return dags


def _job_param(specs) -> Param:
    names = [spec.name for spec in specs]
    return Param(names[0] if names else None, type="string", enum=names or None, title="Job",
                 description="The job (its DAG id)")


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
        check = SluiceStepOperator(task_id="check_restore_point", step="check_restore_point", job="{{ params.job }}")
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
        SluiceStepOperator(task_id="savepoint", step="savepoint", job="{{ params.job }}")
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
        SluiceStepOperator(task_id="maintain", step="maintain", job="{{ params.job }}")
    return dag
