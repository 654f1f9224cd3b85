"""The Sluice web view, mounted by the ``sluice`` plugin in Airflow's API server at /sluice:

    GET  /                            the jobs: latest checkpoint, latest execution
    GET  /jobs/{name}[?checkpoint=N]  a job: its JobGraph drawn, checkpoints, executions, metrics charts
                                      (checkpoint N's per-operator breakdown; by default the latest)
    POST /jobs/{name}/cancel          cancel the job of a running DAG run (Flink's Cancel): the run is CANCELED, the DAG run fails
    POST /jobs/{name}/stop            stop the running run with a savepoint (Flink's stop): FINISHED, the DAG run succeeds

A run deployed to the Sluice JobManager (``SluiceHook.deploy_mode``) is canceled and stopped
there, over its REST API (``PATCH /jobs/<jobid>?mode=cancel``, ``POST /jobs/<jobid>/stop``): its
deferred run task ends when the job does. A run in a task's own process is canceled by failing its
DAG run (Airflow stops the task) and stopped through the job's stop request.
    POST /jobs/{name}/restore         trigger the job's DAG with conf {"restore_from": id | "latest" | savepoint path},
                                      and the epochs and parallelism of the run that took it
    GET  /api/jobs[/{name}[/checkpoints|/executions|/graph|/metrics]]    the same as JSON

``name`` is the job module's name, which is also its DAG id; the tables are read from the
warehouse ``sluice_airflow.warehouse_root()`` names (the API server reads the
``sluice_warehouse`` variable from the metadata database). Authentication is Airflow's
own: every route depends on ``GetUserDep``, which reads the JWT from an
``Authorization: Bearer`` header or from the ``_token`` cookie Airflow's UI sets at login.
Without one the JSON API answers 401 and pages redirect to the auth manager's login page,
which comes back here. A user sees the jobs whose DAG they may read, and restores the
jobs whose DAG they may run. The restore form is a cookie-authenticated POST, so a POST
whose Origin is another site is refused (browsers send Origin with every form POST).
"""
from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Optional
from urllib.parse import quote, urlsplit

from fastapi import FastAPI, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup
from starlette.exceptions import HTTPException as StarletteHTTPException

from airflow.api.common.trigger_dag import trigger_dag
from airflow.api_fastapi.app import API_ROOT_PATH, get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.core_api.security import GetUserDep
from airflow.exceptions import DagNotFound, DagRunAlreadyExists
from airflow.utils.types import DagRunTriggeredByType
from runtime.jobmaster import overview
from runtime.jobmaster.control_plane import job_graph_svg
from runtime.jobmaster.deployment import jobs_folder
from sluice_airflow import warehouse_root
from sluice_airflow.hooks import JOBMANAGER, SluiceHook, submission_key
from sluice_airflow.web.charts import bar_chart, breakable, line_chart

LATEST = "latest"
# A restore goes on as the run that took the checkpoint went (Flink keeps a job's configuration
# across a restore): an until-stopped run restores until stopped, at its parallelism.
RESTORE_KEEPS = ("parallelism", "max_epochs")      # of the run parameters (RUN_PARAMETERS)


def _may(user, dag_id: str, method: str = "GET", entity: Optional[DagAccessEntity] = None) -> bool:
    return get_auth_manager().is_authorized_dag(method=method, access_entity=entity,
                                                details=DagDetails(id=dag_id), user=user)


def _jobs(user, warehouse: str) -> list[overview.JobOverview]:
    return [job for job in overview.list_jobs(warehouse) if _may(user, job.name)]


def _job(name: str, user) -> overview.JobOverview:
    job = overview.find_job(name, warehouse_root())
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"No job '{name}': there is no job module {name}.py in {jobs_folder()}.")
    if not _may(user, name):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"User '{user.get_name()}' may not read the DAG '{name}'.")
    return job


# ---- the JSON API -------------------------------------------------------------------------

api = FastAPI(title="Sluice API", description="Sluice jobs, their graphs, checkpoints and executions.")


@api.get("/jobs")
def api_jobs(user: GetUserDep) -> list[dict]:
    return [overview.job_summary(job) for job in _jobs(user, warehouse_root())]


@api.get("/jobs/{name}")
def api_job(name: str, user: GetUserDep) -> dict:
    return overview.job_details(_job(name, user))


@api.get("/jobs/{name}/checkpoints")
def api_checkpoints(name: str, user: GetUserDep) -> list[dict]:
    return [overview.checkpoint_json(r) for r in _job(name, user).checkpoints]


@api.get("/jobs/{name}/executions")
def api_executions(name: str, user: GetUserDep) -> list[dict]:
    return [overview.execution_json(r) for r in _job(name, user).executions]


@api.get("/jobs/{name}/metrics")
def api_metrics(name: str, user: GetUserDep, checkpoint: Optional[int] = None) -> dict:
    return overview.charts_json(overview.job_charts(_job(name, user), checkpoint))


@api.get("/jobs/{name}/graph")
def api_graph(name: str, user: GetUserDep) -> dict:
    job = _job(name, user)
    if job.compiled is None:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_ENTITY, job.error)
    return overview.graph_json(job)


# ---- the pages ----------------------------------------------------------------------------

app = FastAPI(title="Sluice", docs_url=None, redoc_url=None, openapi_url=None)
app.mount("/api", api)      # a sub-app of its own: its errors stay JSON

templates = Jinja2Templates(directory=os.path.join(os.path.dirname(__file__), "templates"))


def _time(seconds: Optional[float]) -> str:
    """UTC, as the column headers say."""
    return "" if seconds is None else datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _duration(ms: Optional[float]) -> str:
    if ms is None:
        return ""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _size(n: Optional[float]) -> str:
    if n is None:
        return ""
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"


def _first_line(text: str, limit: int = 140) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[:limit - 1] + "…"


EPOCH_ROWS = 50     # the latest run's epochs in the table: the charts have them all
templates.env.filters.update(time=_time, duration=_duration, size=_size, basename=os.path.basename,
                             first_line=_first_line, breakable=breakable)
templates.env.globals.update(line_chart=line_chart, bar_chart=bar_chart, epoch_rows=EPOCH_ROWS)


def _airflow_url(*parts: str) -> str:
    """A page of Airflow's own UI, e.g. ("dags", dag_id, "runs", run_id)."""
    return API_ROOT_PATH + "/".join(quote(p, safe="") for p in parts)


def _render(request: Request, template: str, status_code: int = 200, **context) -> HTMLResponse:
    return templates.TemplateResponse(request, template, {
        "base": request.scope.get("root_path", ""), "airflow_url": _airflow_url, **context}, status_code=status_code)


def _here(request: Request) -> str:
    query = f"?{request.url.query}" if request.url.query else ""
    return quote(request.url.path) + query


@app.exception_handler(StarletteHTTPException)
async def _error_page(request: Request, error: StarletteHTTPException):
    if error.status_code == status.HTTP_401_UNAUTHORIZED:       # not logged in: log in, then come back
        next_url = _here(request) if request.method == "GET" else request.scope.get("root_path", "") + "/"
        return RedirectResponse(get_auth_manager().get_url_login(next_url=next_url), status.HTTP_303_SEE_OTHER)
    return _render(request, "error.html", error.status_code, code=error.status_code, message=error.detail,
                   login_url=get_auth_manager().get_url_login(next_url=_here(request)))


@app.get("/", response_class=HTMLResponse)
def jobs_page(request: Request, user: GetUserDep):
    root = warehouse_root()
    return _render(request, "jobs.html", user=user, jobs=[overview.job_summary(job) for job in _jobs(user, root)],
                   jobs_folder=jobs_folder(), warehouse=root)


@app.get("/jobs/{name}", response_class=HTMLResponse)
def job_page(request: Request, name: str, user: GetUserDep, checkpoint: Optional[int] = None):
    job = _job(name, user)
    graph = Markup(job_graph_svg(job.compiled.job_graph)) if job.compiled else None    # names escaped inside
    may_restore = _may(user, name, "POST", DagAccessEntity.RUN)
    return _render(request, "job.html", user=user, job=overview.job_details(job), graph=graph,
                   charts=overview.job_charts(job, checkpoint), may_restore=may_restore,
                   restores=_restores(job) if may_restore else {})


@app.post("/jobs/{name}/restore")
def restore(request: Request, name: str, user: GetUserDep, checkpoint: str = Form(...)):
    """Start a run of the job's DAG that restores ``checkpoint`` (an id, "latest", or a savepoint's path),
    with the run options of the run that took it (``RESTORE_KEEPS``)."""
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc != request.url.netloc:
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"A restore cannot be posted from another site ({origin}).")
    job = _job(name, user)
    restore_from = _restore_point(job, checkpoint)
    if not _may(user, name, "POST", DagAccessEntity.RUN):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"User '{user.get_name()}' may not trigger the DAG '{name}'.")
    conf = {"restore_from": restore_from, **_restore_options(job, restore_from, _run_confs(job, [restore_from]))}
    try:
        run = trigger_dag(name, triggered_by=DagRunTriggeredByType.UI, triggering_user_name=user.get_name(),
                          conf=conf)
    except DagNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, (
            f"Airflow has no DAG '{name}' to run the restore: the DAG processor has not parsed the job's DAG "
            "yet, or its file failed to import. Start it (`airflow dag-processor`, or once: `airflow dags "
            "reserialize`), check Import Errors in Airflow's UI, and restore again.")) from None
    except (DagRunAlreadyExists, ValueError) as e:
        raise HTTPException(status.HTTP_409_CONFLICT, f"The DAG '{name}' cannot be triggered: {e}") from None
    return RedirectResponse(_airflow_url("dags", name, "runs", run.run_id), status.HTTP_303_SEE_OTHER)


@app.post("/jobs/{name}/cancel")
def cancel(request: Request, name: str, user: GetUserDep, dag_run_id: str = Form(...)):
    """Flink's Cancel of the job's running DAG run ``dag_run_id``: through the JobManager when the run
    is deployed there (its deferred task then fails), else by failing the DAG run (Airflow stops its
    running task, whose job cancels its Spark jobs). Either way the run is CANCELED and no retry
    follows. Refused (409) when the run is no longer running (it finished as the Cancel came)."""
    from airflow.api.common.mark_tasks import set_dag_run_state_to_failed
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session
    from runtime.jobmaster.stop import cancel_refusal
    warehouse = warehouse_root()        # before the session: reading a variable closes the thread's session
    deployed = _jobmanager_job(name, dag_run_id)
    with create_session() as session:
        job, run = _running_run(request, name, user, dag_run_id, "cancel", session)
        if deployed is not None:
            client, found = deployed
            _call_jobmanager(client.cancel_job, found["jid"])
            _add_note(run, f"Canceled from the Sluice web view by {user.get_name()} (job {found['jid']} in the "
                           f"Sluice JobManager).")
        else:
            refusal = job.job_name and cancel_refusal(warehouse, job.job_name, dag_run_id)
            if refusal:
                raise HTTPException(status.HTTP_409_CONFLICT, refusal)
            dag = SerializedDagModel.get_dag(name, session=session)
            set_dag_run_state_to_failed(dag=dag, run_id=dag_run_id, commit=True, session=session)
            _add_note(run, f"Canceled from the Sluice web view by {user.get_name()}.")
    return RedirectResponse(_airflow_url("dags", name, "runs", dag_run_id), status.HTTP_303_SEE_OTHER)


@app.post("/jobs/{name}/stop")
def stop(request: Request, name: str, user: GetUserDep, dag_run_id: str = Form(...)):
    """Flink's stop with savepoint: the run ends after its current epoch with a savepoint in the job's
    savepoints, FINISHED; its DAG run succeeds and ``finish`` runs. Through the JobManager when the
    run is deployed there."""
    from airflow.utils.session import create_session
    from runtime.jobmaster.stop import StopRefusedException, request_stop
    warehouse = warehouse_root()        # before the session: reading a variable closes the thread's session
    deployed = _jobmanager_job(name, dag_run_id)
    with create_session() as session:
        job, run = _running_run(request, name, user, dag_run_id, "stop", session)
        if deployed is not None:
            client, found = deployed
            _call_jobmanager(client.stop_with_savepoint, found["jid"])
            _add_note(run, f"Stop with savepoint requested from the Sluice web view by {user.get_name()} (job "
                           f"{found['jid']} in the Sluice JobManager).")
            return RedirectResponse(_airflow_url("dags", name, "runs", dag_run_id), status.HTTP_303_SEE_OTHER)
        if not job.job_name:
            raise HTTPException(status.HTTP_409_CONFLICT, f"Job '{name}' cannot be stopped here: {job.error}")
        try:
            request_stop(warehouse, job.job_name, dag_run_id, requested_by=user.get_name())
        except StopRefusedException as e:
            raise HTTPException(status.HTTP_409_CONFLICT, str(e)) from None
        _add_note(run, f"Stop with savepoint requested from the Sluice web view by {user.get_name()}.")
    return RedirectResponse(_airflow_url("dags", name, "runs", dag_run_id), status.HTTP_303_SEE_OTHER)


def _jobmanager_job(name: str, dag_run_id: str):
    """(client, job) of the JobManager job DAG run ``dag_run_id`` of ``name`` submitted, its running
    one first (a cleared run submits again under its key and try); None when runs deploy elsewhere."""
    from runtime.jobmanager.rest_client import TERMINAL
    hook = SluiceHook()
    if hook.deploy_mode() != JOBMANAGER:
        return None
    client = hook.get_conn()
    key = submission_key(name, dag_run_id)
    jobs = [j for j in _call_jobmanager(client.list_jobs) if (j.get("submission-key") or "").split("#")[0] == key]
    if not jobs:
        raise HTTPException(status.HTTP_409_CONFLICT, f"The DAG run '{dag_run_id}' of '{name}' has no job in the "
                            f"Sluice JobManager at {client.url} yet: its run task has not submitted it.")
    jobs.sort(key=lambda j: (j["state"] not in TERMINAL, j.get("start-time") or 0))
    return client, jobs[-1]


def _call_jobmanager(call, *args):
    from runtime.jobmanager.rest_client import JobManagerError
    try:
        return call(*args)
    except JobManagerError as e:
        code = status.HTTP_409_CONFLICT if 400 <= e.status < 500 else status.HTTP_502_BAD_GATEWAY
        raise HTTPException(code, f"The Sluice JobManager: {e}") from None


def _running_run(request: Request, name: str, user, dag_run_id: str, what: str, session):
    """The job and its running DAG run ``dag_run_id`` (read in ``session``), for a POST ``what``
    (cancel, stop) from this site by a user who may change the DAG's runs."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.state import DagRunState
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc != request.url.netloc:
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"A {what} cannot be posted from another site ({origin}).")
    job = _job(name, user)
    if not _may(user, name, "PUT", DagAccessEntity.RUN):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"User '{user.get_name()}' may not change runs of the DAG '{name}'.")
    run = session.query(DagRun).filter(DagRun.dag_id == name, DagRun.run_id == dag_run_id).one_or_none()
    if run is None or run.state not in (DagRunState.RUNNING, DagRunState.QUEUED):
        raise HTTPException(status.HTTP_409_CONFLICT, f"The DAG '{name}' has no running run '{dag_run_id}' to "
                            f"{what}{'' if run is None else f' (it is {run.state})'}.")
    return job, run


def _add_note(run, line: str) -> None:
    """A run's note keeps what it said (a restart's note, an earlier request) and gains ``line``."""
    run.note = f"{run.note}\n\n{line}" if run.note else line


def _run_confs(job: overview.JobOverview, targets) -> dict:
    """The conf (the trigger form's fields) of each DAG run that took one of ``targets`` (restore
    points): one query."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    runs = {run.dag_run_id for run in (overview.restored_execution(job, t) for t in targets) if run and run.dag_run_id}
    if not runs:
        return {}
    with create_session() as session:
        rows = session.query(DagRun.run_id, DagRun.conf).filter(DagRun.dag_id == job.name, DagRun.run_id.in_(runs))
        return {run_id: conf or {} for run_id, conf in rows}


def _restore_options(job: overview.JobOverview, restore_from: str, confs: dict) -> dict:
    """The run options a restore of ``restore_from`` keeps: those its run was triggered with. A
    scheduled run (or one outside Airflow) ran with the deployment's, which the restore gets too."""
    run = overview.restored_execution(job, restore_from)
    conf = confs.get(run.dag_run_id, {}) if run and run.dag_run_id else {}
    return {k: conf[k] for k in RESTORE_KEEPS if k in conf}


def _restores(job: overview.JobOverview) -> dict:
    """What each Restore button on the job page posts, and how the run it starts will run, in words."""
    targets = ([LATEST] + [str(r.checkpoint_id) for r in job.checkpoints if overview.is_restorable(r)]
               + [r.external_path for r in job.checkpoints if overview.savepoint_restorable(r)])
    confs = _run_confs(job, targets)
    said = {}
    for target in targets:
        options = _restore_options(job, target, confs)
        epochs = options.get("max_epochs", job.spec.deployment.max_epochs)
        parallelism = options.get("parallelism") or job.spec.deployment.parallelism
        said[target] = (f"Runs {'until stopped (or its input ends)' if epochs is None else f'{epochs} epoch(s)'}"
                        + (f" at parallelism {parallelism}" if parallelism else "")
                        + (", as the run that took it did" if options else ", the deployment's defaults"))
    return said


def _restore_point(job: overview.JobOverview, checkpoint: str) -> str:
    """``checkpoint`` if it names a completed checkpoint of the job (or "latest" and there is one),
    or the path of one of its savepoints (only those: the form takes no other path)."""
    restorable = [r.checkpoint_id for r in job.checkpoints if overview.is_restorable(r)]
    if checkpoint.strip().lower() == LATEST and restorable:
        return LATEST
    if checkpoint.strip().isdigit() and int(checkpoint) in restorable:
        return str(int(checkpoint))
    if any(r.external_path == checkpoint for r in job.checkpoints if overview.savepoint_restorable(r)):
        return checkpoint
    raise HTTPException(status.HTTP_400_BAD_REQUEST, (
        f"Job '{job.name}' cannot restore checkpoint '{checkpoint}': its completed checkpoints are "
        f"{', '.join(map(str, restorable))}." if restorable else
        f"Job '{job.name}' has no completed checkpoint to restore."))
