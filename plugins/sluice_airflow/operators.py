"""Operators of the job DAGs, one per step, each a call into ``runtime.jobmaster.steps``:
SluiceCompileOperator, SluiceExecutionGraphOperator, SluiceAllocateSlotsOperator,
SluiceDeployOperator, SluiceJobOperator (the run), SluiceFinishOperator, and the control DAGs'
SluiceCheckRestorePointOperator, SluiceSavepointOperator, SluiceMaintainOperator.

SluiceJobOperator runs the job where its deploy step decided (``SluiceHook.deploy_mode``):
- ``jobmanager``: it submits the run to the Sluice JobManager (idempotently: the submission key is
  the DAG run's) and defers to SluiceJobTrigger, which follows the job in the triggerer: no worker
  slot is held while the job runs, and the task ends when the job does. The JobManager applies the
  job's restart strategy; a retried task reattaches to the job its run submitted.
- ``in-process`` (``dag.test()``, the tests) and ``spark-submit``: the driver runs in the task (or
  its spark-submit), restarting its attempts in its session; an Airflow retry only starts a new
  driver when the old one's JVM died with an attempt (the restart strategy's decision says so),
  giving up means the task fails without retrying, so the DAG run fails.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any, Optional, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

# A parse of the DAG files imports this module (Airflow's DAG processor, once per file, within
# dagbag_import_timeout), and runs only the operators' constructors: the engine (Spark, Delta) is
# imported where a task runs it.
from runtime.jobmaster import JobSpec, discover_jobs, find_job
from runtime.jobmaster.dag_profiles import slots_for
from sluice_airflow import SLOTS_POOL, warehouse_root
from sluice_airflow.hooks import IN_PROCESS, JOBMANAGER, SluiceHook, submission_key
from sluice_airflow.policy import RESERVATION_KEY

# Airflow's count of retries only caps the restarts; the job's restart strategy decides.
RESTART_RETRY_CAP = 100
ALL_JOBS = "all"        # the maintenance DAG's job parameter: every job
JOBID_KEY = "sluice_jobid"      # the task state store's key of the JobManager job a run submitted
POLL_INTERVAL_S = 2.0


def compiled_plan(context) -> str:
    """The folder of the plan this run's compile step stored (every later step reads it)."""
    return context["ti"].xcom_pull(task_ids="compile")["plan"]


def run_request(context, spec) -> RunRequest:
    """The run's parameters: the manual-run form (params), else the job's deployment defaults. A
    parameter the form left empty is null (Epochs: until stopped); one the DAG lacks is the default."""
    from runtime.jobmaster.steps import RUN_PARAMETERS, RunRequest, RunRequestError
    params = context.get("params") or {}
    try:
        return RunRequest.from_conf({k: params[k] for k in RUN_PARAMETERS if k in params}, spec)
    except RunRequestError as e:
        raise AirflowFailException(str(e)) from None


def with_rendered_args(operator: BaseOperator, spec: JobSpec, context) -> JobSpec:
    """The job with its deployment's arguments rendered as Airflow templates, so an argument can
    come from a connection or a variable where a user changes it in Airflow's UI, e.g.
    ``{{ conn.kafka_default.extra_dejson['bootstrap.servers'] }}``. The runtime never sees Airflow:
    the job script gets the values."""
    args = []
    for arg in spec.args:
        if "{{" not in arg and "{%" not in arg:     # as it is (a native-object DAG would turn "2" into 2)
            args.append(arg)
            continue
        try:
            value = operator.render_template(arg, context)
        except Exception as e:      # a missing connection, variable or key: say which argument, and the fix
            raise AirflowFailException(
                f"Job {spec.name}: its DEPLOYMENT argument {arg!r} does not render: {type(e).__name__}: {e}. "
                f"Define what it names in Airflow (Admin > Connections or Variables; or in "
                f"airflow_settings.yaml, then `bin/dev airflow-settings`).") from None
        if not str(value).strip():
            raise AirflowFailException(f"Job {spec.name}: its DEPLOYMENT argument {arg!r} renders empty: set "
                                       f"the value it names in Airflow (Admin > Connections or Variables).")
        args.append(str(value))
    return replace(spec, deployment=replace(spec.deployment, args=tuple(args)))


class SluiceStepOperator(BaseOperator):
    """Base of the step operators: ``job`` is the job's name or its path; a subclass's ``step``
    does its one step."""

    template_fields: Sequence[str] = ("job",)
    ui_color = "#d6eaf8"

    def __init__(self, *, job: str, **kwargs):
        super().__init__(**kwargs)
        self.job = job

    def execute(self, context) -> Any:
        spec = job_spec(self, self.job, context)
        return self.step(context, spec, run_request(context, spec))

    def step(self, context, spec: JobSpec, request) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not say its step")


class SluiceCompileOperator(SluiceStepOperator):
    """StreamGraph -> JobGraph: the plan, stored once for the run (every later step reads it)."""

    def step(self, context, spec, request) -> dict:
        from runtime.jobmaster.steps import compile_step
        compiled = compile_step(spec, request, warehouse_root(), context["run_id"])
        self.log.info("Compiled %s (%s) at default parallelism %s; restart strategy: %s", spec.name,
                      compiled["job_name"], compiled["default_parallelism"], compiled["restart_strategy"])
        report_parallelism(self.log, compiled)
        return compiled


class SluiceExecutionGraphOperator(SluiceStepOperator):
    """The ExecutionGraph of the run's plan: subtasks, key groups, pipelined regions."""

    def step(self, context, spec, request) -> dict:
        from runtime.jobmaster.errors import CheckpointException
        from runtime.jobmaster.steps import execution_graph_step
        try:
            return execution_graph_step(compiled_plan(context), request, warehouse_root())
        except CheckpointException as e:
            raise AirflowFailException(f"Cannot restore job {spec.name}: {e}") from None


class SluiceAllocateSlotsOperator(SluiceStepOperator):
    """The slot plan over the run task's reservation. The reservation policy sized it for this
    run and recorded the pool's size: a job needing more slots than the pool has fails here,
    with Flink's message, instead of waiting for slots forever."""

    def step(self, context, spec, request) -> dict:
        from runtime.jobmaster.errors import NoResourceAvailableException
        from runtime.jobmaster.steps import allocate_slots_step
        run_task = context["dag"].get_task("run")
        reservation = (context["dag_run"].conf or {}).get(RESERVATION_KEY)
        if reservation is None:
            self.log.warning("No slot reservation recorded for this run: the reservation policy "
                             "(plugins/airflow_local_settings.py) is not installed; using the DAG's "
                             "default of %s slot(s) in pool %s.", run_task.pool_slots, run_task.pool)
            reservation = {"pool": run_task.pool, "pool_slots": run_task.pool_slots, "pool_size": None}
        pool, size = reservation["pool"], reservation["pool_size"]
        try:
            plan = allocate_slots_step(compiled_plan(context), pool,
                                       size if size is not None else reservation["pool_slots"])
        except NoResourceAvailableException as e:
            raise AirflowFailException(f"{e} The Airflow pool '{pool}' stands for the cluster's slots and has "
                                       f"{size}: raise its slots (airflow_settings.yaml, then "
                                       f"`bin/dev airflow-settings`) if the cluster has more.") from None
        plan["pool"], plan["pool_slots"] = pool, reservation["pool_slots"]
        self.log.info("Reserved %s of the %s slot(s) of pool %s; the job needs %s:",
                      reservation["pool_slots"], size, pool, plan["slots_required"])
        report_parallelism(self.log, context["ti"].xcom_pull(task_ids="compile"))
        if reservation["pool_slots"] != plan["slots_required"]:
            self.log.warning("The reservation (%s) differs from the slots the compiled job needs (%s): the "
                             "DAG's slot profile is older than the job script; the next parse of the DAG file "
                             "reads the new one.", reservation["pool_slots"], plan["slots_required"])
        return plan


class SluiceCheckRestorePointOperator(SluiceStepOperator):
    """The restore point of a restart (the restart DAG, which has no compile step), checked against
    the job compiled at the asked parallelism; its ``conf`` is the run parameters to trigger with."""

    def step(self, context, spec, request) -> dict:
        return check_restore_point(self.log, spec, request)


class SluiceDeployOperator(SluiceStepOperator):
    """The run deploys: its restore point checked against the run's plan, the plan promoted to the
    job's, and where it runs decided (``SluiceHook.deploy_mode``): the JobManager of
    ``sluice_conn_id``, this process, or spark-submit to the master of ``spark_conn_id``."""

    template_fields: Sequence[str] = ("job", "spark_conn_id", "sluice_conn_id")

    def __init__(self, *, spark_conn_id: str = "spark_default", sluice_conn_id: str = SluiceHook.default_conn_name,
                 **kwargs):
        super().__init__(**kwargs)
        self.spark_conn_id, self.sluice_conn_id = spark_conn_id, sluice_conn_id

    def step(self, context, spec, request) -> dict:
        from runtime.jobmaster.plans import load_plan
        from runtime.jobmaster.steps import deploy_step
        hook = SluiceHook(sluice_conn_id=self.sluice_conn_id, spark_conn_id=self.spark_conn_id)
        mode, master = hook.deploy_mode(), hook.spark_master()
        plan = compiled_plan(context)
        deployed = {**check_restore_point(self.log, spec, request, load_plan(plan)), "master": master,
                    "mode": mode, "plan": plan}
        if mode == JOBMANAGER:
            deployed["jobmanager"] = self._check_jobmanager(hook, context)
        deploy_step(spec, plan, warehouse_root())
        self.log.info("Deploying %s %s.", spec.name,
                      f"to the Sluice JobManager at {deployed['jobmanager']}" if mode == JOBMANAGER else
                      f"in this process on Spark {master}" if mode == IN_PROCESS else
                      f"with spark-submit to Spark {master}")
        return deployed

    def _check_jobmanager(self, hook: SluiceHook, context) -> str:
        """The JobManager answers (a run fails here, before its slots are taken, when it does not),
        and the run task's pool counts deferred tasks: the pool stands for the cluster's slots,
        which a deferred run still holds."""
        from runtime.jobmanager.rest_client import JobManagerError
        url = hook.jobmanager_url()
        try:
            hook.get_conn().overview()
        except JobManagerError as e:
            raise AirflowFailException(f"Cannot deploy job {self.job}: {e}") from None
        reservation = (context["dag_run"].conf or {}).get(RESERVATION_KEY) or {}
        if reservation.get("include_deferred") is False:
            self.log.warning("Pool %s does not count deferred tasks (include_deferred): a run deferred to the "
                             "JobManager holds its cluster slots but not the pool's, so more runs start than "
                             "the cluster has slots for. Set it (pool_include_deferred: true in "
                             "airflow_settings.yaml, or the pool's page in Airflow).", reservation.get("pool"))
        return url


class SluiceSavepointOperator(SluiceStepOperator):
    """A self-contained savepoint of a completed checkpoint (``checkpoint``: its id, empty for
    the latest) in ``target`` (empty: the job's savepoints folder)."""

    template_fields: Sequence[str] = ("job", "checkpoint", "target")

    def __init__(self, *, checkpoint: Optional[str] = None, target: Optional[str] = None, **kwargs):
        super().__init__(**kwargs)
        self.checkpoint, self.target = checkpoint, target

    def step(self, context, spec, request) -> str:
        from runtime.jobmaster.errors import CheckpointException
        from runtime.jobmaster.steps import savepoint_step
        checkpoint = str(self.checkpoint or "").strip()
        if checkpoint in ("None", ""):
            checkpoint = None
        elif not checkpoint.isdigit():
            raise AirflowFailException(f"checkpoint={self.checkpoint!r}: give a checkpoint id (or none for the latest).")
        target = None if str(self.target or "").strip() in ("", "None") else str(self.target).strip()
        try:
            path = savepoint_step(spec, warehouse_root(), int(checkpoint) if checkpoint else None, target)
        except CheckpointException as e:
            raise AirflowFailException(f"Cannot take a savepoint of job {spec.name}: {e}") from None
        self.log.info("Savepoint completed. Path: %s (restore it with restore_from=%s)", path, path)
        return path


class SluiceFinishOperator(SluiceStepOperator):
    """The run's outcome: its last checkpoint (and where the checkpoints are), its sinks' tables."""

    def step(self, context, spec, request) -> dict:
        from runtime.jobmaster.steps import finish_step
        result = finish_step(warehouse_root(), context["ti"].xcom_pull(task_ids="run"))
        self.log.info("Job %s %s: %s epoch(s), %s record(s) in; latest checkpoint %s in %s; sinks: %s",
                      result["job"], result["state"], result["epochs"], result["records_in"],
                      result["checkpoint_id"], result["checkpoints"], ", ".join(result["sinks"]) or "none")
        return result


class SluiceMaintainOperator(SluiceStepOperator):
    """A job's sinks compacted and vacuumed as their policies say, its own tables when it is
    stopped (``job``: a job, or ``all``); the log says what was removed, the return value is the report."""

    def execute(self, context) -> Any:
        if self.job == ALL_JOBS:
            return {spec.name: self.step(context, with_rendered_args(self, spec, context), None)
                    for spec in discover_jobs(errors=[])}
        return self.step(context, job_spec(self, self.job, context), None)

    def step(self, context, spec, request) -> dict:
        from runtime.jobmaster.maintenance import maintain_job
        report = maintain_job(spec, warehouse_root())
        for line in report.lines():
            self.log.info("%s", line)
        return report.to_json()


def job_spec(operator: BaseOperator, job: str, context) -> JobSpec:
    """The job ``job`` names, its deployment's arguments rendered (``with_rendered_args``)."""
    try:
        return with_rendered_args(operator, find_job(job), context)
    except FileNotFoundError as e:
        raise AirflowFailException(str(e)) from None


def report_parallelism(log, compiled: dict) -> None:
    from runtime.jobmaster.steps import parallelism_report
    for line in parallelism_report(compiled):
        if line.startswith("WARNING: "):
            log.warning("%s", line[len("WARNING: "):])
        else:
            log.info("  %s", line)


def check_restore_point(log, spec: JobSpec, request, job=None) -> dict:
    """The restore point, checked against the run's compiled plan (the job DAG) or, in the
    restart DAG, which has no compile step, against the job compiled at the asked parallelism."""
    from runtime.jobmaster.errors import CheckpointException
    from runtime.jobmaster.steps import compile_run, request_json, resolve_restore_point
    warehouse = warehouse_root()
    try:
        checked = resolve_restore_point(job or compile_run(spec, request, warehouse), request, warehouse)
    except CheckpointException as e:
        raise AirflowFailException(f"Cannot restore job {spec.name}: {e}") from None
    point = checked["restore_point"]
    checked["conf"] = {**request_json(request), "restore_from": str(request.restore_from)}
    log.info("Job %s starts %s.", spec.name,
             f"from {'checkpoint' if isinstance(point, int) else 'savepoint'} {point}"
             if point is not None else "without state (nothing to restore)")
    return checked


class SluiceJobOperator(SparkSubmitOperator):
    """Deploy and run a job's epochs where the deploy step decided (the module's doc)."""

    template_fields = (*SparkSubmitOperator.template_fields, "job", "slot_profile", "sluice_conn_id")
    ui_color = "#aed6f1"

    def __init__(self, *, job: str, slot_profile: list, conn_id: str = "spark_default",
                 sluice_conn_id: str = SluiceHook.default_conn_name, poll_interval: float = POLL_INTERVAL_S,
                 **kwargs):
        kwargs.setdefault("pool", SLOTS_POOL)
        kwargs.setdefault("pool_slots", max(1, slots_for(slot_profile, None)))
        kwargs.setdefault("retries", RESTART_RETRY_CAP)
        kwargs.setdefault("retry_delay", timedelta(0))     # the strategy's backoff is waited in execute()
        super().__init__(application=importlib.util.find_spec("runtime.cli").origin, conn_id=conn_id, name="sluice",
                         **kwargs)
        self.job, self.sluice_conn_id, self.poll_interval = job, sluice_conn_id, poll_interval
        self.slot_profile = slot_profile        # read by the reservation policy (policy.py)

    def execute(self, context) -> dict:
        from runtime.jobmaster.steps import driver_restart_decision, next_attempt, restart_backoff_remaining, run_step
        spec = find_job(self.job)
        deployed = context["ti"].xcom_pull(task_ids="deploy")
        request = run_request(context, spec)
        if deployed["restore_point"] is not None:      # what the deploy step resolved "latest" to
            request = replace(request, restore_from=str(deployed["restore_point"]))
        if deployed["mode"] == JOBMANAGER:
            return self._deploy_to_jobmanager(context, spec, request, deployed)
        warehouse, master, job_name = warehouse_root(), deployed["master"], deployed["job_name"]
        dag_run_id = context["run_id"]
        first = next_attempt(warehouse, job_name, dag_run_id)     # the driver's attempts start here
        wait = restart_backoff_remaining(warehouse, job_name, dag_run_id)
        if wait > 0:
            self.log.info("Restart attempt %s: waiting %.1f s, the restart strategy's backoff.", first, wait)
            time.sleep(wait)
        if deployed["mode"] == IN_PROCESS:
            self._in_process = True
            try:
                return run_step(deployed["plan"], request, warehouse, master, dag_run_id)
            except Exception as e:      # the driver restarted its attempts in its session: this is final
                self._give_up_or_retry(e, False, driver_restart_decision(warehouse, job_name, dag_run_id, first)[1])
        return self._submit(context, spec, request, deployed["plan"], warehouse, master, dag_run_id, first,
                            job_name)

    # ---- deployed to the JobManager: submit (or reattach), then defer ----------------------------

    def _deploy_to_jobmanager(self, context, spec, request, deployed) -> None:
        """Submit the run's plan to the JobManager, or find the job this run submitted already (the
        task state store keeps its id across tries, as ResumableJobMixin does; the submission key
        makes the submit itself idempotent, for a try that died between the two), then defer."""
        from airflow.sdk import NEVER_EXPIRE
        from runtime.jobmanager.rest_client import JobManagerError
        client = SluiceHook(sluice_conn_id=self.sluice_conn_id).get_conn()
        store = context.get("task_state_store")
        key = submission_key(context["dag"].dag_id, context["run_id"])
        jobid = store.get(JOBID_KEY) if store is not None else None
        job = self._known_job(client, jobid) if jobid else None
        if job is not None and job["state"] not in ("CANCELED", "FAILED"):
            self.log.info("Reattaching to job %s (%s), which this DAG run submitted: it is %s.", jobid,
                          job.get("name"), job["state"])
        else:
            if job is not None:     # a clear of a run whose job was canceled or failed: a new job, from the latest checkpoint
                self.log.info("Job %s of this DAG run ended %s: this try submits the job again, from its latest "
                              "checkpoint.", jobid, job["state"])
                key, request = f"{key}#{context['ti'].try_number}", replace(request, restore_from="latest")
            try:
                submitted = client.submit_job(plan=deployed["plan"], max_epochs=request.max_epochs,
                                              restore_from=request.restore_from,
                                              allow_non_restored_state=request.allow_non_restored_state,
                                              submission_key=key, dag_run_id=context["run_id"])
            except JobManagerError as e:
                raise AirflowFailException(f"The Sluice JobManager refused job {spec.name}: {e}") from None
            jobid = submitted["jobid"]
            self.log.info("%s job %s to the Sluice JobManager at %s (submission key %s).",
                          "Reattaching to" if submitted.get("existing") else "Submitted", jobid,
                          deployed.get("jobmanager"), key)
            if store is not None:
                store.set(JOBID_KEY, jobid, retention=NEVER_EXPIRE)
        from sluice_airflow.triggers import SluiceJobTrigger
        self.defer(trigger=SluiceJobTrigger(jobid=jobid, sluice_conn_id=self.sluice_conn_id,
                                            poll_interval=self.poll_interval),
                   method_name="execute_complete")

    def _known_job(self, client, jobid: str) -> Optional[dict]:
        from runtime.jobmanager.rest_client import JobManagerError
        try:
            return client.job_details(jobid)
        except JobManagerError as e:
            if getattr(e, "status", None) == 404:
                self.log.warning("The JobManager has no job %s, which this DAG run submitted: submitting it again.",
                                 jobid)
                return None
            raise AirflowFailException(f"Cannot reach the job {jobid} this DAG run submitted: {e} The job runs on "
                                       f"without Airflow: clear this task once the JobManager answers, and it "
                                       f"follows the job again.") from None

    def execute_complete(self, context, event: dict) -> dict:
        """The trigger's event: the job ended (or the JobManager lost it). FINISHED (a stop with a
        savepoint too) completes the task with the run's outcome; CANCELED and FAILED fail it
        without a retry: the JobManager applied the restart strategy already."""
        from runtime.jobmaster.steps import outcome
        deployed = context["ti"].xcom_pull(task_ids="deploy")
        state, jobid, name = event.get("state"), event.get("jobid"), event.get("name") or deployed["job_name"]
        if state == "FINISHED":
            if event.get("savepoint"):
                self.log.info("Job %s (%s) stopped with a savepoint. Path: %s", name, jobid, event["savepoint"])
            self.log.info("Job %s (%s) FINISHED.", name, jobid)
            return {**outcome(warehouse_root(), deployed["job_name"], dag_run_id=context["run_id"]), "jobid": jobid}
        if state == "CANCELED":
            raise AirflowFailException(f"Job {name} ({jobid}) was canceled in the Sluice JobManager.")
        cause = event.get("failure") or "the JobManager gave no cause"
        decision = event.get("restart") or ""
        raise AirflowFailException(f"Job {name} ({jobid}) {state}: {cause}" + (f"\n{decision}" if decision else ""))

    def on_kill(self) -> None:
        """Airflow stops the running task (the run was failed or canceled, by hand or from the Sluice
        web view): Flink's Cancel. In this process: cancel the Spark jobs and interrupt the run, which
        records itself CANCELED; with spark-submit: the provider kills the submission. (A run deferred
        to the JobManager is canceled by its trigger's on_kill.)"""
        if getattr(self, "_in_process", False):
            from runtime.jobmaster.steps import cancel_spark_jobs
            cancel_spark_jobs()
            raise KeyboardInterrupt("canceled: Airflow stopped the task")
        super().on_kill()

    def _submit(self, context, spec, request, plan, warehouse, master, dag_run_id, first, job_name) -> dict:
        # The driver runs the plan the compile step stored, with the same options run_step would use;
        # it restarts its attempts itself, and fails here with a restart still to do only when its
        # JVM died with the attempt: an Airflow retry submits a new driver.
        from runtime.jobmaster.control_plane import driver_jars, spark_submit_arguments
        from runtime.jobmaster.plans import load_plan
        from runtime.jobmaster.steps import driver_restart_decision, outcome, run_options
        options = run_options(load_plan(plan), request, warehouse, master, dag_run_id)
        self.application_args = spark_submit_arguments(spec.path, plan, options)
        self.env_vars = {**(self.env_vars or {}), "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
        # delta-spark's jars (.jars/delta, SLUICE_JARS) go on the driver's class path with --jars:
        # the driver's session cannot add them to the JVM spark-submit started.
        delta = ",".join(driver_jars())
        if delta and delta not in (self.jars or ""):
            self.jars = ",".join(j for j in (self.jars, delta) if j)
        if shutil.which("spark-submit") is None:     # the project's environment has it next to python
            os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
        self.log.info("Submitting %s to %s with spark-submit (attempt %s)", spec.name, master, first)
        try:
            super().execute(context)
        except Exception as e:
            self._give_up_or_retry(e, *driver_restart_decision(warehouse, job_name, dag_run_id, first))
        return outcome(warehouse, job_name, dag_run_id=dag_run_id)

    @staticmethod
    def _give_up_or_retry(error: Exception, restart: bool, decision: str) -> None:
        """An Airflow retry when the restart strategy restarts, a failure without retry otherwise. The
        message says the cause, then the decision, then the task's traceback."""
        from runtime.jobmaster.errors import RunRequestError
        cause, _, trace = str(error).partition("\n")
        message = f"{cause}\n{decision}" + (f"\n{trace}" if trace else "")
        if restart and not isinstance(error, (AirflowFailException, RunRequestError)):
            raise AirflowException(message) from error
        raise AirflowFailException(message) from error


class SluiceTriggerRunOperator(TriggerDagRunOperator):
    """Airflow's TriggerDagRunOperator with its ``note`` rendered as a template too (the run note
    of a restart names the restore point it was asked for)."""

    template_fields = (*TriggerDagRunOperator.template_fields, "note")
