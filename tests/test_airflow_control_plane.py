"""The Airflow control plane end to end: real Airflow (metadata DB, DagBag, ``dag.test()``),
real Spark (the run's one session, local[2]) and real Delta tables.

Each test writes a job module into its own jobs folder (SLUICE_JOBS_FOLDER), so the project's
dags/ builds a DAG for it; the sinks are checked against answers computed from the input.
"""
from __future__ import annotations

import collections
import os

import pytest

from checkpoint_harness import expected_running, expected_windows, table_rows, write_input

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_JOBS = os.path.join(ROOT, "tests", "jobs")

JOB_TEMPLATE = '''
"""{doc}"""
import sys
sys.path.insert(0, {test_jobs!r})
import checkpointed_counts as cc
from runtime.common import Configuration, RestartStrategies
from runtime.datastream import StreamExecutionEnvironment
from runtime.jobmaster import JobDeployment

DEPLOYMENT = JobDeployment(args=("--input", {input!r}))


def main():
    conf = Configuration()
    conf.set_string("sluice.epoch.max-records-per-split", "40")     # 4 epochs of the input
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    env.set_restart_strategy({strategy})
    cc.build(env, sys.argv[2], {windows!r}, {running!r}, 2, fail={fail})
    env.execute({name!r})


if __name__ == "__main__":
    main()
'''


@pytest.fixture
def control_plane(airflow_db, spark, tmp_path, monkeypatch):
    """A warehouse and jobs folder of this test's own; Airflow's spark_default and pool."""
    from airflow.models import Connection, Pool, Variable
    from airflow.utils.session import create_session
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    monkeypatch.setenv("SLUICE_JOBS_FOLDER", str(jobs))
    # Tasks read the variable; this process's parses and profile compiles (no Airflow task around
    # them reads variables) the environment, which says the same.
    monkeypatch.setenv("SLUICE_WAREHOUSE", str(tmp_path / "warehouse"))
    Variable.set("sluice_warehouse", str(tmp_path / "warehouse"))
    Pool.create_or_update_pool("spark_slots", 4, "Spark slots (tests)", include_deferred=False)
    with create_session() as session:
        session.query(Connection).filter(Connection.conn_id == "spark_default").delete()
        # In this process (dag.test()), whether or not the database has a JobManager's connection.
        session.add(Connection(conn_id="spark_default", conn_type="spark", host="local[2]",
                               extra='{"sluice-deploy": "in-process"}'))
    yield tmp_path
    Variable.delete("sluice_warehouse")


def write_job(tmp_path, name, strategy="RestartStrategies.no_restart()", fail="None") -> dict:
    events = write_input(tmp_path / "in", seed=7)
    paths = {"input": str(tmp_path / "in"), "windows": str(tmp_path / "windows"),
             "running": str(tmp_path / "running")}
    (tmp_path / "jobs" / f"{name}.py").write_text(JOB_TEMPLATE.format(
        doc=f"{name}: counts for the control-plane tests", test_jobs=TEST_JOBS, strategy=strategy,
        fail=fail, name=name, **paths))
    return {"events": events, **paths}


def dag_test(dag_id: str, conf=None, refresh: bool = True):
    """``dag.test()`` of a job's DAG as the DAG processor parses it; ``refresh``: once the jobs'
    DAG profiles are compiled, as ``bin/dev airflow`` does at start (a parse never compiles)."""
    from airflow.dag_processing.dagbag import DagBag
    from sluice_airflow.dag_factory import main as refresh_profiles
    if refresh:
        refresh_profiles()
    bag = DagBag(dag_folder=os.path.join(ROOT, "dags"))
    assert not bag.import_errors, bag.import_errors
    run = bag.dags[dag_id].test(run_conf=conf)
    return run, {ti.task_id: ti for ti in run.get_task_instances()}


def xcom(run, task_id: str, key: str = "return_value"):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id,
                                                 key=key)).first()
        return None if row is None else XComModel.deserialize_value(row)


def executions(tmp_path, job_name):
    from runtime.execution.history import ExecutionHistory
    from runtime.storage.layout import job_dir
    return ExecutionHistory(job_dir(str(tmp_path / "warehouse"), job_name)).executions()


def checkpoints(tmp_path, job_name):
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.storage.layout import job_dir
    return CheckpointStorage(job_dir(str(tmp_path / "warehouse"), job_name)).checkpoints.completed()


def test_dagbag_imports_a_dag_per_job_and_the_control_dags(control_plane):
    from airflow.dag_processing.dagbag import DagBag
    from sluice_airflow.dag_factory import main as refresh_profiles
    write_job(control_plane, "counts_a")
    # A job whose script fails when it compiles: a parse never runs it, so its DAG is there (its
    # compile task fails with the cause); the others stay.
    (control_plane / "jobs" / "broken_compile.py").write_text(
        "def main():\n    open('/nonexistent/settings.json')\n\n\nif __name__ == '__main__':\n    main()\n")
    bag = DagBag(dag_folder=os.path.join(ROOT, "dags"))
    assert bag.import_errors == {}
    assert {"counts_a", "broken_compile", "sluice_restart_from_checkpoint", "sluice_savepoint"} <= set(bag.dags)
    # Never compiled: the run reserves its deployment's parallelism (the machine's cores by
    # default), and the DAG's doc says why.
    cores = os.cpu_count() or 1
    assert bag.dags["counts_a"].get_task("run").slot_profile == [["default", 0, True, cores]]
    assert "Not compiled since" in bag.dags["counts_a"].doc_md
    # Compiled outside the parse (as bin/dev airflow does at start, and each run's compile step).
    assert refresh_profiles() == 0
    bag = DagBag(dag_folder=os.path.join(ROOT, "dags"))
    dag = bag.dags["counts_a"]
    assert [t.task_id for t in dag.topological_sort()] == [
        "compile", "execution_graph", "allocate_slots", "deploy", "run", "finish", "sink_assets"]
    # The docs say the strategy and the time a run that keeps failing takes to give up.
    assert "gives up after" in dag.doc_md and "the Sluice JobManager's" in dag.doc_md
    run = dag.get_task("run")
    # The source chain (the default parallelism: PyFlink's, the machine's cores) and the keyed
    # operators (2) share the default group: the larger of the two.
    assert (run.pool, run.pool_slots, run.slot_profile) == ("spark_slots", max(2, cores), [["default", 2, True, cores]])
    schema = dag.params.dump()
    assert schema["restore_from"] == "latest" and schema["parallelism"] is None
    assert dag.params.get_param("parallelism").schema["minimum"] == 1


def test_wordcount_dag_runs_end_to_end(control_plane):
    from airflow.utils.state import DagRunState
    from runtime.jobmaster.deployment import JOBS_FOLDER
    os.environ["SLUICE_JOBS_FOLDER"] = JOBS_FOLDER          # the project's jobs (monkeypatch restores)
    run, tis = dag_test("wordcount")
    assert run.state == DagRunState.SUCCESS
    assert all(ti.state == "success" for ti in tis.values())
    finish = xcom(run, "finish")
    assert finish["state"] == "FINISHED" and finish["checkpoint_id"] == 1
    text = open(os.path.join(ROOT, "include", "data", "hamlet.txt")).read()
    assert finish["records_in"] == len(text.splitlines())
    assert finish["checkpoints"].startswith(str(control_plane / "warehouse"))
    # One processing-time window holds the whole (one-epoch) input: the counts are the text's.
    [results] = finish["sinks"]
    assert results == str(control_plane / "warehouse" / "wordcount-results")
    assert table_rows(results) == collections.Counter(collections.Counter(text.split()).items())
    plan = xcom(run, "allocate_slots")
    assert plan["slots_required"] == 3 and plan["pool_slots"] == 3
    [record] = executions(control_plane, "Socket Window WordCount")
    assert (record.state, record.dag_run_id, record.attempt, record.last_checkpoint) == (
        "FINISHED", run.run_id, 1, 1)


def test_the_runs_parallelism_rescales_the_shipped_wordcount_and_the_reservation_follows(control_plane, caplog):
    """The form's parallelism is the job's default (Flink's -p): the shipped wordcount's windows run
    at it, the reader keeps its own 1, the run reserves what the compiled job needs, and the run's
    log says which operator runs at what. Above the restored state's max parallelism: Flink's
    message, before slots are reserved or anything runs."""
    import logging
    from airflow.utils.state import DagRunState
    from runtime.jobmaster.deployment import JOBS_FOLDER
    os.environ["SLUICE_JOBS_FOLDER"] = JOBS_FOLDER          # the project's jobs (monkeypatch restores)
    caplog.set_level(logging.INFO)
    run, tis = dag_test("wordcount", {"parallelism": 2, "restore_from": "none"})
    assert run.state == DagRunState.SUCCESS
    vertices = {v["name"].split("(")[0]: v for v in xcom(run, "compile")["vertices"]}
    assert (vertices["Window"]["parallelism"], vertices["Window"]["parallelism_from"]) == (2, "run")
    assert (vertices["Source: Custom File Source -> Flat Map -> Map"]["parallelism"],
            vertices["Source: Custom File Source -> Flat Map -> Map"]["parallelism_from"]) == (1, "operator")
    assert xcom(run, "allocate_slots")["slots_required"] == 2 and tis["run"].pool_slots == 2
    [record] = executions(control_plane, "Socket Window WordCount")
    assert sorted(record.parallelism.values()) == [1, 1, 2]
    # What the compile and allocate_slots tasks log, from the compiled summary.
    from runtime.jobmaster.steps import parallelism_report
    assert parallelism_report(xcom(run, "compile")) == [
        "Source: Custom File Source -> Flat Map -> Map: parallelism 1 (set by the operator), max 128",
        "Window(TumblingProcessingTimeWindows(5000), ProcessingTimeTrigger, SumAggregator, "
        "PassThroughWindowFunction) -> Sink: Delta Sink: parallelism 2 (the run's parallelism), max 128",
        "Sink: Print to Std. Out: parallelism 1 (set by the operator), max 128"]

    caplog.clear()
    run, tis = dag_test("wordcount", {"parallelism": 200})
    assert run.state == DagRunState.FAILED
    assert (tis["execution_graph"].state, tis["allocate_slots"].state, tis["run"].state) == (
        "failed", "upstream_failed", "upstream_failed")
    # What the execution_graph task failed with (dag.test() keeps no task's exception message).
    from runtime.checkpoint.checkpoint_record import CheckpointException
    from runtime.jobmaster.steps import RunRequest, execution_graph_step
    with pytest.raises(CheckpointException) as refused:
        execution_graph_step(xcom(run, "compile")["plan"], RunRequest(parallelism=200),
                             str(control_plane / "warehouse"))
    assert ("The maximum parallelism (128) of the restored state is lower than the configured parallelism "
            "(200). Please reduce the parallelism of the task to be lower or equal to the maximum parallelism."
            ) in str(refused.value)


def test_restart_from_checkpoint_resumes_and_each_result_is_written_once(control_plane):
    from airflow.models import DagRun
    from airflow.utils.state import DagRunState
    job = write_job(control_plane, "counts_resume")
    first, _ = dag_test("counts_resume")
    assert first.state == DagRunState.SUCCESS
    last = checkpoints(control_plane, "counts_resume")[-1]
    more = write_input(control_plane / "more", seed=8, files=1)
    os.rename(control_plane / "more" / "part-0.txt", control_plane / "in" / "part-9.txt")

    conf = {"job": "counts_resume", "restore_from": str(last.checkpoint_id)}
    restart, tis = dag_test("sluice_restart_from_checkpoint", conf)
    assert restart.state == DagRunState.SUCCESS
    assert xcom(restart, "check_restore_point")["restore_point"] == last.checkpoint_id
    [triggered] = DagRun.find(dag_id="counts_resume", run_id=xcom(restart, "restart", "trigger_run_id"))
    assert triggered.conf["restore_from"] == str(last.checkpoint_id) and triggered.conf["parallelism"] is None
    from airflow.utils.session import create_session
    with create_session() as session:     # the run note, rendered
        note = session.query(DagRun).filter(DagRun.run_id == triggered.run_id).one().note
    assert note == f"Restart from {last.checkpoint_id} (sluice_restart_from_checkpoint)"

    resumed, _ = dag_test("counts_resume", {k: v for k, v in triggered.conf.items() if k != "slot_reservation"})
    assert resumed.state == DagRunState.SUCCESS
    history = executions(control_plane, "counts_resume")
    assert history[0].restored_from == last.checkpoint_id and history[0].records_in == len(more)
    # The running counts continue from the checkpoint: every count once over both inputs.
    assert table_rows(job["running"]) == expected_running(job["events"] + more)
    # The first run's bounded input ended with the final watermark: the new events are late.
    assert table_rows(job["windows"]) == expected_windows(job["events"])


def recover_from_one_failure(plane, name: str):
    """Run a job that fails once mid-input under fixed-delay(2, 200 ms) through its DAG; check the
    second attempt restored the first's latest checkpoint in the same Spark application, within the
    run task's one Airflow try, and each result is in the sinks once."""
    from airflow.utils.state import DagRunState
    job = write_job(plane, name, "RestartStrategies.fixed_delay_restart(2, 200)",
                    f"cc.FailAt(25_000, {str(plane / 'failed-once')!r})")
    run, tis = dag_test(name)
    assert run.state == DagRunState.SUCCESS
    assert tis["run"].try_number == 1 and tis["finish"].state == "success"
    second, first = executions(plane, name)
    assert first.application_id is not None and second.application_id == first.application_id
    assert (first.state, first.attempt, first.dag_run_id) == ("FAILED", 1, run.run_id)
    assert (second.state, second.attempt, second.dag_run_id) == ("FINISHED", 2, run.run_id)
    assert "injected failure" in first.failure and first.failed_tasks
    assert first.restarting is True and first.restart.startswith("restarting in 200 ms after failure 1")
    assert first.last_checkpoint is not None and second.restored_from == first.last_checkpoint
    # What the failed attempt staged after its checkpoint was never committed.
    assert table_rows(job["running"]) == expected_running(job["events"])
    assert table_rows(job["windows"]) == expected_windows(job["events"])
    return run, first, second


def test_fixed_delay_restart_recovers_from_the_latest_checkpoint(control_plane):
    recover_from_one_failure(control_plane, "counts_flaky")


def test_failure_rate_gives_up_and_the_dag_run_fails(control_plane):
    from airflow.utils.state import DagRunState
    write_job(control_plane, "counts_broken", "RestartStrategies.failure_rate_restart(1, 60_000, 0)",
              "cc.FailAt(25_000)")
    run, tis = dag_test("counts_broken")
    assert run.state == DagRunState.FAILED
    assert (tis["run"].state, tis["run"].try_number, tis["finish"].state) == ("failed", 1, "upstream_failed")
    second, first = executions(control_plane, "counts_broken")
    assert first.restarting is True and first.attempt == 1
    assert second.state == "FAILED" and second.attempt == 2 and second.restarting is False
    assert "the restart strategy gave up" in second.restart
    assert "maximum of 1 failures within interval 60000 ms" in second.restart


@pytest.mark.slow
def test_a_failure_no_restart_can_cure_fails_the_run_at_its_first_attempt(control_plane):
    """Under a strategy that would restart three times, an error the runtime classifies as
    non-recoverable (as a restored state whose type cannot migrate) fails the run at once: one
    attempt, the decision says why, and the run task fails in its one Airflow try."""
    from airflow.utils.state import DagRunState
    write_job(control_plane, "counts_unrecoverable", "RestartStrategies.fixed_delay_restart(3, 200)",
              "cc.FailAt(25_000, unrecoverable=True)")
    run, tis = dag_test("counts_unrecoverable")
    assert run.state == DagRunState.FAILED
    assert (tis["run"].state, tis["run"].try_number, tis["finish"].state) == ("failed", 1, "upstream_failed")
    [only] = executions(control_plane, "counts_unrecoverable")
    assert (only.state, only.attempt, only.restarting, only.backoff_ms) == ("FAILED", 1, False, 0)
    assert "InjectedUnrecoverableError: injected failure" in only.failure
    assert "a restart would fail alike" in only.restart, only.restart


def test_a_deterministic_failure_stops_within_the_default_strategys_bound(control_plane, caplog):
    """A job that sets no restart strategy, with checkpointing: the control plane's default gives up
    after 3 restarts (1 s, 1.5 s, 2.25 s apart), and each attempt's failure and the decision on it
    are logged as the attempt fails."""
    import logging
    from airflow.utils.state import DagRunState
    write_job(control_plane, "counts_always_failing", "RestartStrategies.fall_back_restart()", "cc.FailAt(25_000)")
    caplog.set_level(logging.INFO, logger="runtime")
    run, tis = dag_test("counts_always_failing")
    # The attempts run in the run task's one try (the driver restarts them), bounded by the strategy's
    # attempts, not by a clock.
    assert run.state == DagRunState.FAILED and (tis["run"].state, tis["run"].try_number) == ("failed", 1)
    history = list(reversed(executions(control_plane, "counts_always_failing")))
    assert [(r.attempt, r.state, r.restarting) for r in history] == [
        (1, "FAILED", True), (2, "FAILED", True), (3, "FAILED", True), (4, "FAILED", False)]
    assert [r.backoff_ms is not None and 900 <= r.backoff_ms <= 2475 for r in history[:3]] == [True] * 3
    assert "At most 3 restart attempts" in history[-1].restart and "gave up" in history[-1].restart
    said = [r.getMessage() for r in caplog.records if r.name == "runtime.execution.executor"]
    assert [m for m in said if "attempt" in m and "failed" in m and "injected failure" in m][:4] == [
        m for m in said if "failed:" in m][:4] and len([m for m in said if "failed:" in m]) == 4
    assert sum("restarting in" in m for m in said) == 3 and sum("gave up" in m for m in said) == 1


def test_run_reserves_its_slots_and_too_many_slots_fail_at_allocation(control_plane):
    from airflow.utils.state import DagRunState
    write_job(control_plane, "counts_slots")
    run, tis = dag_test("counts_slots", {"parallelism": 3, "max_epochs": 1})
    assert run.state == DagRunState.SUCCESS
    assert tis["run"].pool_slots == 3 and run.conf["slot_reservation"]["pool_size"] == 4
    assert xcom(run, "allocate_slots")["slots_required"] == 3

    run, tis = dag_test("counts_slots", {"parallelism": 6, "restore_from": "none"})
    assert run.state == DagRunState.FAILED
    assert tis["allocate_slots"].state == "failed" and tis["run"].state == "upstream_failed"
    assert tis["run"].pool_slots == 4          # capped at the pool: it could never wait forever
    assert run.conf["slot_reservation"] == {"pool": "spark_slots", "pool_size": 4, "pool_slots": 4,
                                            "slots_required": 6, "include_deferred": False}


def test_bad_run_parameters_and_unknown_checkpoints_fail_without_restarting(control_plane):
    from airflow.utils.state import DagRunState
    write_job(control_plane, "counts_bad", "RestartStrategies.fixed_delay_restart(3, 0)")
    run, tis = dag_test("counts_bad", {"restore_from": "42"})
    # The restore point is checked with the ExecutionGraph, before slots are reserved (Flink's order).
    assert run.state == DagRunState.FAILED and tis["execution_graph"].state == "failed"
    assert tis["execution_graph"].try_number == 1 and tis["run"].state == "upstream_failed"


def test_savepoint_dag_takes_a_savepoint_a_run_can_start_from(control_plane):
    from airflow.utils.state import DagRunState
    job = write_job(control_plane, "counts_savepoint")
    first, _ = dag_test("counts_savepoint")
    last = checkpoints(control_plane, "counts_savepoint")[-1]
    target = str(control_plane / "savepoints" / "before-more")
    taken, _ = dag_test("sluice_savepoint", {"job": "counts_savepoint", "checkpoint": None, "target": target})
    assert (first.state, taken.state) == (DagRunState.SUCCESS, DagRunState.SUCCESS)
    assert xcom(taken, "savepoint") == target and os.path.isfile(os.path.join(target, "_metadata.json"))

    more = write_input(control_plane / "more", seed=9, files=1)
    os.rename(control_plane / "more" / "part-0.txt", control_plane / "in" / "part-9.txt")
    resumed, tis = dag_test("counts_savepoint", {"restore_from": target})
    assert resumed.state == DagRunState.SUCCESS
    assert xcom(resumed, "deploy")["restore_point"] == target
    latest = executions(control_plane, "counts_savepoint")[0]
    assert latest.restored_from == last.checkpoint_id and latest.records_in == len(more)
    assert table_rows(job["running"]) == expected_running(job["events"] + more)


def test_the_dag_resumes_by_default_and_starts_over_only_when_asked(control_plane, caplog):
    """As the CLI: a run without restore_from resumes (nothing twice); restore_from=none writes
    everything again into the sinks, and the run's log names them, as a warning."""
    import logging
    from airflow.utils.state import DagRunState
    job = write_job(control_plane, "counts_start_over")
    windows, running = expected_windows(job["events"]), expected_running(job["events"])
    for conf in (None, None):
        run, _ = dag_test("counts_start_over", conf)
        assert run.state == DagRunState.SUCCESS
    assert table_rows(job["windows"]) == windows and table_rows(job["running"]) == running
    caplog.clear()
    run, tis = dag_test("counts_start_over", {"restore_from": "none"})
    assert run.state == DagRunState.SUCCESS
    [warning] = [r for r in caplog.records if "starting over" in r.getMessage()]
    out = warning.getMessage()
    assert warning.levelno == logging.WARNING and job["windows"] in out and job["running"] in out
    assert xcom(run, "finish")["restored_from"] is None
    assert table_rows(job["windows"]) == collections.Counter({k: 2 * n for k, n in windows.items()})
    assert table_rows(job["running"]) == collections.Counter({k: 2 * n for k, n in running.items()})


def test_a_run_runs_the_job_script_once_and_later_readers_use_its_stored_plan(control_plane, monkeypatch):
    """Flink compiles a job once, on the client: here the compile step runs the script and the
    later steps, the run, the next DAG-file parse and the web view read the plan it stored."""
    # Airflow's DAG processor reads the sluice_warehouse variable at parse time; a bare DagBag
    # in this process cannot, so the parse finds the warehouse where the environment says.
    monkeypatch.setenv("SLUICE_WAREHOUSE", str(control_plane / "warehouse"))
    from airflow.dag_processing.dagbag import DagBag
    from airflow.utils.state import DagRunState
    from runtime.jobmaster.overview import find_job
    job = write_job(control_plane, "counts_once")
    script = control_plane / "jobs" / "counts_once.py"
    runs = control_plane / "script-runs.log"
    # Each run of the script's main() logs who ran it: a DAG-file parse or a step of the run.
    script.write_text(script.read_text().replace("def main():\n", (
        "def main():\n    import traceback\n"
        "    names = {f.name for f in traceback.extract_stack()}\n"
        f"    open({str(runs)!r}, 'a').write(('parse' if 'job_dag' in names else\n"
        "        'compile' if 'compile_step' in names else 'other') + '\\n')\n")))

    def script_runs() -> list:
        return runs.read_text().splitlines() if runs.exists() else []

    run, tis = dag_test("counts_once", refresh=False)
    assert run.state == DagRunState.SUCCESS
    # A parse never runs the script: the compile step, once.
    assert script_runs() == ["compile"]
    compiled = xcom(run, "compile")
    assert os.path.dirname(compiled["plan"]) == str(control_plane / "warehouse" / "counts_once" / "plans")
    assert sorted(os.listdir(compiled["plan"])) == [
        "compiled.json", "job_graph.json", "pointer.json", "slots.json", "stream_graph.json", "stream_graph.pickle"]
    assert xcom(run, "deploy")["plan"] == compiled["plan"]
    assert table_rows(job["running"]) == expected_running(job["events"])
    before = len(script_runs())

    bag = DagBag(dag_folder=os.path.join(ROOT, "dags"))
    assert bag.dags["counts_once"].get_task("run").slot_profile == [["default", 2, True, os.cpu_count() or 1]]
    overview = find_job("counts_once", str(control_plane / "warehouse"))
    assert overview.job_name == "counts_once" and overview.checkpoints
    assert len(script_runs()) == before      # neither a parse nor the web view ran the script again

    script.write_text(script.read_text() + "\n# a new version of the job\n")
    changed = DagBag(dag_folder=os.path.join(ROOT, "dags")).dags["counts_once"]
    assert len(script_runs()) == before and "Not compiled since" in changed.doc_md      # not compiled yet
    assert changed.get_task("run").slot_profile == [["default", 2, True, os.cpu_count() or 1]]    # its last compile's


MAINTAINED_JOB = '''
"""maintained_sink: a sink with a maintenance policy"""
from runtime.common import Types
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import DeltaSink, TableMaintenance


def main():
    env = StreamExecutionEnvironment.get_execution_environment()
    (env.from_collection([1, 2, 3], type_info=Types.INT())
     .sink_to(DeltaSink.for_row_data({table!r}).with_maintenance(TableMaintenance(compact_min_files=3))))
    env.execute("maintained sink")


if __name__ == "__main__":
    main()
'''


def test_maintenance_dag_compacts_a_jobs_sink_and_says_what_it_removed(control_plane):
    """The task logs report.lines() (what `sluice maintain` prints, tests/test_table_maintenance.py)."""
    import pyarrow as pa
    from deltalake import write_deltalake
    table = str(control_plane / "maintained")
    for i in range(5):
        write_deltalake(table, pa.table({"f0": [i]}), mode="append")
    (control_plane / "jobs" / "maintained_sink.py").write_text(MAINTAINED_JOB.format(table=table))
    from airflow.dag_processing.dagbag import DagBag
    dag = DagBag(dag_folder=os.path.join(ROOT, "dags")).dags["sluice_maintenance"]
    assert dag.schedule == "@daily" or str(dag.timetable.summary) == "@daily"
    run, tis = dag_test("sluice_maintenance", {"job": "maintained_sink"})
    assert tis["maintain"].state == "success"
    report = xcom(run, "maintain")
    (sink,) = report["tables"]
    assert (sink["table"], sink["files_before"], sink["files_after"]) == (table, 5, 1)
    assert "compacted 5 file(s) into 1" in sink["done"]
    assert report["own_tables"] == "none yet (the job has not run)"
    assert sink["files_deleted"] == 0      # the policy's default retention: a week
