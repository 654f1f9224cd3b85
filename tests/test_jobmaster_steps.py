"""The JobMaster steps' pure parts and job deployments: run parameters, slots, subtask attempts
under the failover strategies, JobDeployment, argument paths, job discovery. No Spark, no Airflow."""
import os

import pytest

from runtime.jobmaster.deployment import (
    JOBS_FOLDER_ENV, PROJECT_ROOT, JobDeployment, JobSpec, discover_jobs, find_job, load_job_spec, resolve_args)
from runtime.execution.history import FAILED, FINISHED, ExecutionRecord
from runtime.execution.failure_handler import subtask_attempts
from runtime.jobmaster.dag_profiles import slots_for
from runtime.jobmaster.steps import RunRequest, RunRequestError

from seed import ROOT

SPEC = JobSpec("counts", "/jobs/counts.py", JobDeployment(parallelism=3, max_epochs=5))


# ---- run parameters -------------------------------------------------------------------------

@pytest.mark.parametrize("conf, spec, expected", [
    (None, SPEC, RunRequest("latest", 3, 5, False)),                       # the deployment's defaults
    ({}, JobSpec("bare", "/jobs/bare.py"), RunRequest("latest", None, None, False)),
    ({"restore_from": "", "parallelism": "", "max_epochs": ""}, SPEC, RunRequest("latest", 3, 5, False)),
    ({"max_epochs": None}, SPEC, RunRequest("latest", 3, None, False)),     # the form's Epochs empty: until stopped
    ({"restore_from": " 12 ", "parallelism": "4", "max_epochs": 2, "allow_non_restored_state": True}, SPEC,
     RunRequest("12", 4, 2, True)),
    ({"restore_from": "none", "parallelism": " 7 "}, SPEC, RunRequest("none", 7, 5, False)),
    ({"restore_from": "/savepoints/savepoint-1"}, SPEC, RunRequest("/savepoints/savepoint-1", 3, 5, False)),
])
def test_run_request_from_conf(conf, spec, expected):
    assert RunRequest.from_conf(conf, spec) == expected


@pytest.mark.parametrize("conf, message", [
    ({"restore_from": "checkpoints/7"},
     "restore_from='checkpoints/7' for job counts: use 'latest', 'none' (a fresh start), a checkpoint id "
     "(see its checkpoints), or the absolute path or URI of a savepoint."),
    ({"restore_from": "-1"}, "restore_from='-1' for job counts"),
    ({"restore_from": "Latest"}, "restore_from='Latest' for job counts"),
    ({"parallelism": 0}, "parallelism=0: must be a whole number of at least 1 (or empty for the default)."),
    ({"parallelism": "two"}, "parallelism='two': must be a whole number"),
    ({"parallelism": 2.5}, "parallelism=2.5: must be a whole number"),
    ({"parallelism": "2.0"}, "parallelism='2.0': must be a whole number"),
    ({"parallelism": True}, "parallelism=True: must be a whole number"),
    ({"max_epochs": -3}, "max_epochs=-3: must be a whole number of at least 1"),
    ({"parallelism": 2, "foo": 1, "bar": 2},
     "Unknown run parameter(s) ['bar', 'foo'] for job counts: use restore_from, parallelism, max_epochs, "
     "allow_non_restored_state."),
])
def test_bad_run_parameters_name_the_parameter(conf, message):
    with pytest.raises(RunRequestError) as err:
        RunRequest.from_conf(conf, SPEC)
    assert message in str(err.value)
    assert isinstance(err.value, ValueError)


# ---- slots ----------------------------------------------------------------------------------

# [slot sharing group, highest parallelism set on its operators, some operator takes the default,
#  the job's default parallelism]
@pytest.mark.parametrize("profile, parallelism, slots", [
    ([["default", 0, True, 2], ["heavy", 4, False, 2]], None, 2 + 4),
    ([["default", 0, True, 2], ["heavy", 4, False, 2]], 3, 3 + 4),
    ([["default", 0, True, 2], ["heavy", 4, False, 2]], 1, 1 + 4),
    ([["default", 5, True, 2]], 3, 5),          # an operator set to 5 needs 5 slots in its group
    ([["default", 5, True, 2]], 8, 8),
    ([["default", 5, False, 2]], 8, 5),         # nothing takes the default
    ([], 4, 0),
])
def test_slots_for(profile, parallelism, slots):
    assert slots_for(profile, parallelism) == slots


# ---- subtask attempts under the failover strategies -------------------------------------------

@pytest.fixture(scope="module")
def forward_graph():
    """Source: nums (vertex 1) -> Map (2) -> Sink (3), forward at parallelism 2: two regions,
    {1/0, 2/0, 3/0} and {1/1, 2/1, 3/1}."""
    from runtime.common import WatermarkStrategy
    from runtime.datastream import StreamExecutionEnvironment
    from runtime.datastream.connectors.number_seq import NumberSequenceSource
    from runtime.graph.execution_graph import build_execution_graph
    from runtime.graph.job_graph import create_job_graph
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_source(NumberSequenceSource(1, 10), WatermarkStrategy.no_watermarks(), "nums") \
        .map(lambda x: x).disable_chaining().print()
    graph = build_execution_graph(create_job_graph(env.get_stream_graph()))
    assert [(v.job_vertex.id, v.name) for v in graph.job_vertices] == [
        (1, "Source: nums"), (2, "Map"), (3, "Sink: Print to Std. Out")]
    return graph


def attempt(n, state=FAILED, failed=()):
    return ExecutionRecord(f"run-{n}", "counts", state, float(n), dag_run_id="manual", attempt=n,
                           failed_tasks=tuple(failed))


EVERYTHING = ("1/0", "2/0", "3/0", "1/1", "2/1", "3/1")


@pytest.mark.parametrize("strategy, attempts, expected", [
    ("region", [], {}),
    ("region", [attempt(1, FINISHED)], {}),
    ("region", [attempt(1, failed=["Map (1/2)"]), attempt(2, failed=["Map (1/2)"]), attempt(3, FINISHED)],
     {"1/0": 2, "2/0": 2, "3/0": 2}),
    ("full", [attempt(1, failed=["Map (1/2)"]), attempt(2, failed=["Map (1/2)"]), attempt(3, FINISHED)],
     dict.fromkeys(EVERYTHING, 2)),
    ("region", [attempt(1, failed=["Sink: Print to Std. Out (2/2)"]), attempt(2, failed=["Map (1/2)"])],
     dict.fromkeys(EVERYTHING, 1)),
    ("region", [attempt(1, failed=["Source: nums (2/2)"])], {"1/1": 1, "2/1": 1, "3/1": 1}),
    ("region", [attempt(1, failed=[])], dict.fromkeys(EVERYTHING, 1)),            # unknown: all restart
    ("region", [attempt(1, failed=["Gone (1/1)"])], dict.fromkeys(EVERYTHING, 1)),
])
def test_subtask_attempts(forward_graph, strategy, attempts, expected):
    assert subtask_attempts(forward_graph, strategy, attempts) == expected


# ---- JobDeployment and arguments -------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    ({"parallelism": 0}, "JobDeployment.parallelism must be at least 1, got 0"),
    ({"max_epochs": 0}, "JobDeployment.max_epochs must be at least 1, got 0"),
    ({"max_epochs": -2}, "JobDeployment.max_epochs must be at least 1, got -2"),
])
def test_job_deployment_validation(kwargs, message):
    with pytest.raises(ValueError) as err:
        JobDeployment(**kwargs)
    assert str(err.value) == message


def test_job_deployment_normalises_args_and_tags():
    d = JobDeployment(args=["--port", 9000], tags=["a", "b"])
    assert (d.args, d.tags, d.schedule, d.owner) == (("--port", "9000"), ("a", "b"), None, "sluice")


def test_resolve_args_makes_relative_paths_project_relative():
    assert PROJECT_ROOT == ROOT
    args = ("--input", "include/data", "/abs/in", "s3://bucket/in", "-o=out/dir", "plain", "./rel/x")
    assert resolve_args(args) == ["--input", os.path.join(ROOT, "include/data"), "/abs/in", "s3://bucket/in",
                                  "-o=out/dir", "plain", os.path.join(ROOT, "./rel/x")]


# ---- job modules ------------------------------------------------------------------------------

JOB = '''"""Counts things."""
from runtime.jobmaster import JobDeployment
DEPLOYMENT = JobDeployment(schedule="@hourly", args=("--in", "data/x"), parallelism=2)
if __name__ == "__main__":
    raise SystemExit("a job module is imported, never run")
'''


def write(folder, name, text):
    path = folder / name
    path.write_text(text)
    return str(path)


def test_load_job_spec_reads_deployment_name_and_doc(tmp_path):
    path = write(tmp_path, "my-job.py", JOB)
    assert load_job_spec(path) == JobSpec(
        "my_job", path, JobDeployment(schedule="@hourly", args=("--in", "data/x"), parallelism=2), "Counts things.")


def test_a_module_without_deployment_gets_the_default(tmp_path):
    path = write(tmp_path, "plain.py", "x = 1\n")
    assert load_job_spec(path) == JobSpec("plain", path, JobDeployment(), "")


def test_a_deployment_of_the_wrong_type_is_a_type_error(tmp_path):
    path = write(tmp_path, "wrong.py", "DEPLOYMENT = {'schedule': '@daily'}\n")
    with pytest.raises(TypeError) as err:
        load_job_spec(path)
    assert str(err.value) == f"{path}: DEPLOYMENT must be a runtime.jobmaster.JobDeployment, got dict"


def test_discover_and_find_jobs_in_the_jobs_folder(tmp_path, monkeypatch):
    b = write(tmp_path, "b.py", JOB)
    write(tmp_path, "a.py", "")
    write(tmp_path, "_helpers.py", "raise RuntimeError('helpers are not jobs')\n")
    write(tmp_path, "notes.txt", "not a job")
    assert [s.name for s in discover_jobs(str(tmp_path))] == ["a", "b"]
    assert discover_jobs(str(tmp_path / "missing")) == ()

    monkeypatch.setenv(JOBS_FOLDER_ENV, str(tmp_path))
    assert [s.name for s in discover_jobs()] == ["a", "b"]
    assert find_job("b") == load_job_spec(b)
    assert find_job(b).deployment.parallelism == 2            # by path
    with pytest.raises(FileNotFoundError) as err:
        find_job("missing")
    assert str(err.value) == f"No job 'missing' in {tmp_path} (jobs: a, b)."

    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(JOBS_FOLDER_ENV, str(empty))
    with pytest.raises(FileNotFoundError, match=r"\(jobs: none\)"):
        find_job("b")


# ---- the restart decision, a field of the execution record -----------------------------------

def test_an_executions_table_from_before_the_restarting_column_stays_readable(tmp_path):
    """The decision is the record's ``restarting`` field; a table written before that column existed
    reads its rows with ``restarting`` None, and its next append adds the column (schema evolution)."""
    import time
    import pyarrow as pa
    from runtime.execution.history import EXECUTIONS_SCHEMA, ExecutionHistory
    from runtime.jobmaster.steps import restart_decision
    from runtime.storage.delta_files import append, arrow_table
    old_schema = pa.schema([f for f in EXECUTIONS_SCHEMA if f.name != "restarting"])
    now = int(time.time() * 1_000_000)
    append(str(tmp_path / "job" / "executions"), arrow_table(old_schema, [{
        "run_id": "old", "job_name": "job", "dag_run_id": "r", "attempt": 1, "state": FAILED, "started_at": now,
        "ended_at": now, "restart": "restarting in 10 ms after failure 1 (old)", "backoff_ms": 10,
        "recorded_at": now}]))
    history = ExecutionHistory(str(tmp_path / "job"))
    [old] = history.executions()
    assert (old.run_id, old.restart, old.restarting) == ("old", "restarting in 10 ms after failure 1 (old)", None)
    # No decision recorded: the words alone do not restart a run.
    assert restart_decision(str(tmp_path), "job", "r", 1)[0] is False
    history.record(ExecutionRecord("new", "job", FAILED, time.time(), "r", 2, ended_at=time.time(),
                                   restart="not restarting after failure 2 (new)", backoff_ms=0, restarting=False))
    history.record(ExecutionRecord("new3", "job", FAILED, time.time() + 1, "r", 3, ended_at=time.time(),
                                   restart="restarting in 5 ms after failure 3 (new)", backoff_ms=5, restarting=True))
    assert [(r.run_id, r.restarting) for r in history.attempts("r")] == [("old", None), ("new", False), ("new3", True)]
    assert restart_decision(str(tmp_path), "job", "r", 3) == (True, "restarting in 5 ms after failure 3 (new)")
    assert restart_decision(str(tmp_path), "job", "r", 2) == (False, "not restarting after failure 2 (new)")
    assert restart_decision(str(tmp_path), "job", "r", 9)[1] == \
        "the job failed before it started, so there is nothing to restart"


COUNTING = '''"""Counts numbers."""
from runtime.common import Types
from runtime.datastream import StreamExecutionEnvironment
from runtime.jobmaster import JobDeployment
DEPLOYMENT = JobDeployment()
if __name__ == "__main__":
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1, 2, 3], type_info=Types.INT()).key_by(lambda x: x % 2).reduce(lambda a, b: a + b).print()
    env.execute("counting")
'''


def test_a_runs_plan_becomes_the_jobs_plan_only_when_it_deploys(tmp_path):
    """A run refused after its compile step (a parallelism above the max parallelism, too few
    slots) leaves the job's plan, which the web view draws and a default run reserves slots by."""
    from runtime.jobmaster.plans import latest_plan
    from runtime.jobmaster.steps import compile_step, deploy_step
    spec = load_job_spec(write(tmp_path, "counting.py", COUNTING))
    warehouse = str(tmp_path / "warehouse")
    first = compile_step(spec, RunRequest(parallelism=2), warehouse, "run-1")
    assert latest_plan(warehouse, "counting") is None       # compiled, not deployed yet
    deploy_step(spec, first["plan"], warehouse)
    deployed = latest_plan(warehouse, "counting")
    assert deployed["plan"] == first["plan"] and deployed["job_name"] == "counting"
    refused = compile_step(spec, RunRequest(parallelism=200), warehouse, "run-2")
    assert latest_plan(warehouse, "counting") == deployed   # the refused run changed nothing
    deploy_step(spec, refused["plan"], warehouse)
    assert latest_plan(warehouse, "counting")["plan"] == refused["plan"]
