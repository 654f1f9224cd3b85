"""Operators of the job DAGs: each step is a call into ``runtime.jobmaster.steps``.

SluiceJobOperator is the deploy-and-run step. It is a SparkSubmitOperator: when the
``spark_default`` connection names a cluster master (or sets ``"sluice-deploy":
"spark-submit"`` in its extra) it submits ``sluice run`` with spark-submit; with a local
master it runs the same runtime code in the worker's process. Either way a failure is
handed to the job's restart strategy, whose decision the execution history records:
restart means an Airflow retry (the task's tries are the job's attempts), giving up means
the task fails without retrying, so the DAG run fails.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseOperator

# A parse of the DAG files imports this module (Airflow's DAG processor, once per file, within
# dagbag_import_timeout), and runs only the operators' constructors: the engine (Spark, Delta) is
# imported where a task runs it.
from runtime.jobmaster import JobSpec, discover_jobs, find_job
from runtime.jobmaster.dag_profiles import slots_for
from sluice_airflow import SLOTS_POOL, warehouse_root
from sluice_airflow.policy import RESERVATION_KEY

# Airflow's count of retries only caps the restarts; the job's restart strategy decides.
RESTART_RETRY_CAP = 100
IN_PROCESS, SPARK_SUBMIT = "in-process", "spark-submit"
ALL_JOBS = "all"        # the maintenance DAG's job parameter: every job


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
                f"airflow_settings.yaml, then `sluice airflow-settings`).") from None
        if not str(value).strip():
            raise AirflowFailException(f"Job {spec.name}: its DEPLOYMENT argument {arg!r} renders empty: set "
                                       f"the value it names in Airflow (Admin > Connections or Variables).")
        args.append(str(value))
    return replace(spec, deployment=replace(spec.deployment, args=tuple(args)))


class SluiceStepOperator(BaseOperator):
    """One control-plane step of a job: compile, execution_graph, allocate_slots, deploy,
    check_restore_point, savepoint or finish. ``job`` is the job's name or its path."""

    template_fields = ("job",)
    ui_color = "#d6eaf8"
    STEPS = ("compile", "execution_graph", "allocate_slots", "deploy", "check_restore_point", "savepoint",
             "finish", "maintain")

    def __init__(self, *, job: str, step: str, conn_id: str = "spark_default", **kwargs):
        if step not in self.STEPS:
            raise ValueError(f"unknown step {step!r}: one of {', '.join(self.STEPS)}")
        super().__init__(**kwargs)
        self.job, self.step, self.conn_id = job, step, conn_id

    def execute(self, context) -> Any:
        if self.step == "maintain" and self.job == ALL_JOBS:
            return {spec.name: self._maintain(context, with_rendered_args(self, spec, context), None)
                    for spec in discover_jobs(errors=[])}
        try:
            spec = with_rendered_args(self, find_job(self.job), context)
        except FileNotFoundError as e:
            raise AirflowFailException(str(e)) from None
        return getattr(self, f"_{self.step}")(context, spec, run_request(context, spec))

    def _compile(self, context, spec, request) -> dict:
        from runtime.jobmaster.steps import compile_step
        compiled = compile_step(spec, request, warehouse_root(), context["run_id"])
        self.log.info("Compiled %s (%s) at default parallelism %s; restart strategy: %s", spec.name,
                      compiled["job_name"], compiled["default_parallelism"], compiled["restart_strategy"])
        self._report_parallelism(compiled)
        return compiled

    def _report_parallelism(self, compiled: dict) -> None:
        from runtime.jobmaster.steps import parallelism_report
        for line in parallelism_report(compiled):
            if line.startswith("WARNING: "):
                self.log.warning("%s", line[len("WARNING: "):])
            else:
                self.log.info("  %s", line)

    def _execution_graph(self, context, spec, request) -> dict:
        from runtime.checkpoint.storage import CheckpointException
        from runtime.jobmaster.steps import execution_graph_step
        try:
            return execution_graph_step(compiled_plan(context), request, warehouse_root())
        except CheckpointException as e:
            raise AirflowFailException(f"Cannot restore job {spec.name}: {e}") from None

    def _allocate_slots(self, context, spec, request) -> dict:
        """The slot plan over the run task's reservation. The reservation policy sized it for this
        run and recorded the pool's size: a job needing more slots than the pool has fails here,
        with Flink's message, instead of waiting for slots forever."""
        from runtime.jobmaster.steps import allocate_slots_step
        from runtime.scheduler.slots import NoResourceAvailableException
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
                                       f"`sluice airflow-settings`) if the cluster has more.") from None
        plan["pool"], plan["pool_slots"] = pool, reservation["pool_slots"]
        self.log.info("Reserved %s of the %s slot(s) of pool %s; the job needs %s:",
                      reservation["pool_slots"], size, pool, plan["slots_required"])
        self._report_parallelism(context["ti"].xcom_pull(task_ids="compile"))
        if reservation["pool_slots"] != plan["slots_required"]:
            self.log.warning("The reservation (%s) differs from the slots the compiled job needs (%s): the "
                             "DAG's slot profile is older than the job script; the next parse of the DAG file "
                             "reads the new one.", reservation["pool_slots"], plan["slots_required"])
        return plan

    def _check_restore_point(self, context, spec, request, job=None) -> dict:
        """The restore point, checked against the run's compiled plan (the job DAG) or, in the
        restart DAG, which has no compile step, against the job compiled at the asked parallelism."""
        from runtime.checkpoint.storage import CheckpointException
        from runtime.jobmaster.steps import compile_run, request_json, resolve_restore_point
        warehouse = warehouse_root()
        try:
            checked = resolve_restore_point(job or compile_run(spec, request, warehouse), request, warehouse)
        except CheckpointException as e:
            raise AirflowFailException(f"Cannot restore job {spec.name}: {e}") from None
        point = checked["restore_point"]
        checked["conf"] = {**request_json(request), "restore_from": str(request.restore_from)}
        self.log.info("Job %s starts %s.", spec.name,
                      f"from {'checkpoint' if isinstance(point, int) else 'savepoint'} {point}"
                      if point is not None else "without state (nothing to restore)")
        return checked

    def _deploy(self, context, spec, request) -> dict:
        from runtime.jobmaster.plans import load_plan
        from runtime.jobmaster.steps import deploy_step
        master, mode = deployment_target(self.conn_id)
        plan = compiled_plan(context)
        deployed = {**self._check_restore_point(context, spec, request, load_plan(plan)), "master": master,
                    "mode": mode, "plan": plan}
        deploy_step(spec, plan, warehouse_root())
        self.log.info("Deploying %s %s on Spark %s.", spec.name,
                      "in this process" if mode == IN_PROCESS else "with spark-submit", master)
        return deployed

    def _savepoint(self, context, spec, request) -> str:
        from runtime.checkpoint.storage import CheckpointException
        from runtime.jobmaster.steps import savepoint_step
        params = context.get("params") or {}
        try:
            path = savepoint_step(spec, warehouse_root(), params.get("checkpoint"), params.get("target") or None)
        except CheckpointException as e:
            raise AirflowFailException(f"Cannot take a savepoint of job {spec.name}: {e}") from None
        self.log.info("Savepoint completed. Path: %s (restore it with restore_from=%s)", path, path)
        return path

    def _finish(self, context, spec, request) -> dict:
        from runtime.jobmaster.steps import finish_step
        result = finish_step(warehouse_root(), context["ti"].xcom_pull(task_ids="run"))
        self.log.info("Job %s %s: %s epoch(s), %s record(s) in; latest checkpoint %s in %s; sinks: %s",
                      result["job"], result["state"], result["epochs"], result["records_in"],
                      result["checkpoint_id"], result["checkpoints"], ", ".join(result["sinks"]) or "none")
        return result


    def _maintain(self, context, spec, request) -> dict:
        """The job's sinks compacted and vacuumed as their policies say, its own tables when it is
        stopped; the log says what was removed, the return value is the report."""
        from runtime.jobmaster.maintenance import maintain_job
        report = maintain_job(spec, warehouse_root())
        for line in report.lines():
            self.log.info("%s", line)
        return report.to_json()


class SluiceJobOperator(SparkSubmitOperator):
    """Deploy and run a job's epochs. The driver restarts a failed attempt in its own Spark session
    as the job's restart strategy says; an Airflow retry only submits a new driver when the old
    one's JVM died with an attempt (spark-submit)."""

    template_fields = (*SparkSubmitOperator.template_fields, "job", "slot_profile")
    ui_color = "#aed6f1"

    def __init__(self, *, job: str, slot_profile: list, conn_id: str = "spark_default", **kwargs):
        kwargs.setdefault("pool", SLOTS_POOL)
        kwargs.setdefault("pool_slots", max(1, slots_for(slot_profile, None)))
        kwargs.setdefault("retries", RESTART_RETRY_CAP)
        kwargs.setdefault("retry_delay", timedelta(0))     # the strategy's backoff is waited in execute()
        super().__init__(application=importlib.util.find_spec("runtime.cli").origin, conn_id=conn_id, name="sluice",
                         **kwargs)
        self.job = job
        self.slot_profile = slot_profile        # read by the reservation policy (policy.py)

    def execute(self, context) -> dict:
        from runtime.jobmaster.steps import driver_restart_decision, next_attempt, restart_backoff_remaining, run_step
        spec = find_job(self.job)
        deployed = context["ti"].xcom_pull(task_ids="deploy")
        request = run_request(context, spec)
        if deployed["restore_point"] is not None:      # what the deploy step resolved "latest" to
            request = replace(request, restore_from=str(deployed["restore_point"]))
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

    def on_kill(self) -> None:
        """Airflow stops the task (the run was failed or canceled, by hand or from the Sluice web
        view): Flink's Cancel. In this process: cancel the Spark jobs and interrupt the run, which
        records itself CANCELED; with spark-submit: the provider kills the submission."""
        if getattr(self, "_in_process", False):
            from runtime.jobmaster.steps import cancel_spark_jobs
            cancel_spark_jobs()
            raise KeyboardInterrupt("canceled: Airflow stopped the task")
        super().on_kill()

    def _submit(self, context, spec, request, plan, warehouse, master, dag_run_id, first, job_name) -> dict:
        # The driver runs the plan the compile step stored, with the same options run_step would use;
        # it restarts its attempts itself, and fails here with a restart still to do only when its
        # JVM died with the attempt: an Airflow retry submits a new driver.
        from runtime.execution.options import ExecutionOptions
        from runtime.execution.spark import delta_jars
        from runtime.jobmaster.plans import load_plan
        from runtime.jobmaster.steps import driver_restart_decision, outcome, run_options
        options = run_options(load_plan(plan), request, warehouse, master, dag_run_id)
        self.application_args = ["run", spec.path, "--plan", plan, *ExecutionOptions.to_properties(options)]
        self.env_vars = {**(self.env_vars or {}), "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
        # delta-spark's jars (.jars/delta, SLUICE_JARS) go on the driver's class path with --jars:
        # the driver's session cannot add them to the JVM spark-submit started.
        delta = ",".join(delta_jars())
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
        from runtime.jobmaster.steps import RunRequestError
        cause, _, trace = str(error).partition("\n")
        message = f"{cause}\n{decision}" + (f"\n{trace}" if trace else "")
        if restart and not isinstance(error, (AirflowFailException, RunRequestError)):
            raise AirflowException(message) from error
        raise AirflowFailException(message) from error


class SluiceTriggerRunOperator(TriggerDagRunOperator):
    """Airflow's TriggerDagRunOperator with its ``note`` rendered as a template too (the run note
    of a restart names the restore point it was asked for)."""

    template_fields = (*TriggerDagRunOperator.template_fields, "note")


def deployment_target(conn_id: str) -> tuple[str, str]:
    """The Spark master named by the connection (resolved as the Spark provider does), and how to
    deploy there: in this process for a local master, spark-submit for a cluster, or as the
    connection's ``sluice-deploy`` extra says."""
    from airflow.sdk import Connection
    master = SparkSubmitHook(conn_id=conn_id)._resolve_connection()["master"]
    extra = Connection.get(conn_id).extra_dejson
    mode = extra.get("sluice-deploy") or (IN_PROCESS if master.startswith("local") else SPARK_SUBMIT)
    if mode not in (IN_PROCESS, SPARK_SUBMIT):
        raise AirflowFailException(f"Connection {conn_id}: extra sluice-deploy={mode!r}; use "
                                   f"'{IN_PROCESS}' or '{SPARK_SUBMIT}'.")
    return master, mode
