"""Long-running tasks (``sluice.epoch.tasks: long-running``): a run's tasks deployed once, as one
barrier Spark job, and sent each epoch's descriptors, with records between the slots over their
own sockets (runtime/execution/long_running_tasks.py, runtime/task/task_executor.py). The same
job gives the same exactly-once tables as with a Spark job per epoch, and its checkpoints restore
either way and at another parallelism; a failing user function is named as before; a task that
dies fails the run, whose restart restores exactly once; a run its tasks cannot deploy is refused
before its first epoch. Real Spark (the shared session) and Delta tables."""
import os
import sys
import threading
import time

import pytest

from checkpoint_harness import (JOB, LINES_PER_EPOCH, expected_running, expected_windows, job_args, kill_at,
                                table_rows, write_input)
from runtime.checkpoint.epoch_log import EpochLog
from runtime.client import run_job
from runtime.common import Types, WatermarkStrategy
from runtime.datastream.connectors import DataGeneratorSource, RateLimiterStrategy
from runtime.datastream.job_client import JobStatus
from runtime.execution import long_running_tasks
from runtime.common.restart_strategy import RestartStrategies
from runtime.datastream.connectors.delta import DeltaSink
from runtime.execution.history import ExecutionHistory
from runtime.execution.job_execution_result import JobExecutionException
from runtime.storage.layout import job_dir
from test_checkpoint_faults import schedule
from runtime_env import job_env
from waiting import wait_until

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs"))
import checkpointed_counts as cc  # noqa: E402

LONG_RUNNING = "long-running"


def run(tmp_path, parallelism: int, tasks: str, **options):
    return run_job(JOB, job_args(tmp_path, "--parallelism", str(parallelism)), warehouse=str(tmp_path / "warehouse"),
                   master="local[2]", quiet=True, max_records_per_split=LINES_PER_EPOCH, epoch_tasks=tasks, **options)


def test_long_running_tasks_write_the_same_tables_and_restore_across_modes_and_parallelisms(spark, tmp_path):
    events = write_input(tmp_path / "in", seed=54)
    first = run(tmp_path, 2, "per-epoch", max_epochs=2)
    second = run(tmp_path, 1, LONG_RUNNING, max_epochs=1, restore_from="latest")     # down to one slot
    third = run(tmp_path, 2, LONG_RUNNING, restore_from="latest")                     # and back up to two
    assert [e.checkpoint_id for e in first.epochs] == [1, 2]
    assert second.restored_from == 2 and [e.checkpoint_id for e in second.epochs] == [3]
    assert third.restored_from == 3 and [e.epoch for e in third.epochs] == [3, 4]
    assert table_rows(tmp_path / "windows") == expected_windows(events)
    assert table_rows(tmp_path / "running") == expected_running(events)
    # The keyed state stayed with the slots' tasks between epochs (the local stores kept open).
    assert third.epochs[-1].local_stores == 2 and third.epochs[-1].local_store_hits == 2


def test_killed_long_running_runs_restore_to_the_same_sinks_and_state(spark, tmp_path):
    """tests/test_checkpoint_faults.py's chain with long-running tasks: a driver of its own killed
    at every fault point in turn (mid-epoch: in a slot's task), each run restoring the last;
    RocksDB stores kept in the slots, checkpointed incrementally."""
    events = write_input(tmp_path / "in", seed=154)
    extra = ("--master", "local[2]", "-D", f"sluice.epoch.tasks={LONG_RUNNING}", "-D", "state.backend.type=rocksdb")
    outcomes = [f"{point}@{epoch}: {kill_at(tmp_path, point, epoch, i > 0, *extra)}"
                for i, (point, epoch) in enumerate(schedule(1))]
    assert all("killed" in o for o in outcomes), outcomes
    result = run(tmp_path, 2, LONG_RUNNING, restore_from="latest", configuration={"state.backend.type": "rocksdb"})
    assert result.epochs[-1].watermark > 10 ** 12          # ran to the end of the input
    assert table_rows(tmp_path / "windows") == expected_windows(events), outcomes
    assert table_rows(tmp_path / "running") == expected_running(events), outcomes


def _env(tmp_path, fail, restarts: int = 0):
    env = job_env(tmp_path, 2, epoch__max_records_per_split=LINES_PER_EPOCH, epoch__tasks=LONG_RUNNING)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(restarts, 0) if restarts
                             else RestartStrategies.no_restart())
    cc.build(env, str(tmp_path / "in"), str(tmp_path / "windows"), str(tmp_path / "running"), 2, fail=fail)
    return env


def test_a_failing_user_function_is_named_with_its_record(spark, tmp_path):
    write_input(tmp_path / "in", seed=3)
    with pytest.raises(JobExecutionException, match=r"(?s)injected failure at event Row\(word=.*in epoch 2 of job 'fails'"):
        _env(tmp_path, cc.FailAt(25_000)).execute("fails")


def test_a_task_that_dies_fails_the_run_and_its_restart_restores_exactly_once(spark, tmp_path):
    events = write_input(tmp_path / "in", seed=5)
    result = _env(tmp_path, cc.FailAt(25_000, str(tmp_path / "killed-once"), kill=True), restarts=1).execute("dies")
    assert os.path.exists(tmp_path / "killed-once")
    assert result.restored_from == 2        # epochs 0 and 1 checkpointed before the kill in epoch 2
    assert table_rows(tmp_path / "windows") == expected_windows(events)
    assert table_rows(tmp_path / "running") == expected_running(events)
    [failed] = [a for a in ExecutionHistory(job_dir(str(tmp_path / "warehouse"), "dies")).executions() if a.failure]
    assert "long-running task" in failed.failure and "ended in epoch 2" in failed.failure


def test_a_run_its_tasks_cannot_deploy_is_refused_before_its_first_epoch(spark, tmp_path):
    write_input(tmp_path / "in", seed=1)
    with pytest.raises(ValueError, match=r"long-running needs a Spark task slot per subtask: .* has parallelism 3, "
                                         r"the Spark session has 2 slot\(s\)"):
        run(tmp_path, 3, LONG_RUNNING)
    # A sink that commits with Spark jobs of its own needs a slot beside the tasks.
    env = job_env(tmp_path, 2, epoch__tasks=LONG_RUNNING)
    env.from_collection([("a", 1)], type_info=Types.ROW_NAMED(["k", "n"], [Types.STRING(), Types.LONG()])) \
        .sink_to(DeltaSink.for_row_data(str(tmp_path / "table")).with_writer("delta-spark"))
    with pytest.raises(ValueError, match=r"holds 2 of the Spark session.s 2 task slot\(s\), and Sink: Delta Sink commit\(s\) with Spark jobs "
                                         r"\(delta-spark\) that need one more. Lower the job's parallelism to 1"):
        env.execute("delta-spark sink")
    assert not os.path.exists(tmp_path / "table")


def _numbers(tmp_path, name: str, tasks: str = LONG_RUNNING):
    env = job_env(tmp_path / name, 2, epoch__interval=100, epoch__tasks=tasks)
    source = DataGeneratorSource(lambda i: i, rate_limiter=RateLimiterStrategy.per_second(100), type_info=Types.LONG())
    env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").print()
    return env


def test_runs_that_would_wait_for_slots_another_runs_tasks_hold_are_refused(spark, tmp_path):
    """A running job's long-running tasks hold both slots of the session: another job of the
    process is refused before it asks Spark for anything, with long-running tasks or a Spark job
    per epoch; the first, canceled, gives back its slots and ends as canceled, every record once."""
    first = _numbers(tmp_path, "first").execute_async("first")
    try:
        epoch_log = EpochLog(job_dir(str(tmp_path / "first" / "warehouse"), "first"))
        wait_until(lambda: len(epoch_log.logged_epochs(0, None)) >= 3 or first.get_job_status().result().is_globally_terminal_state(),
                   120, "the first job's epochs", interval=0.1)
        assert long_running_tasks.slots_held() == 2
        with pytest.raises(ValueError, match=r"slot per subtask: '.*' has parallelism 2, the Spark session has 2 slot\(s\), 2 of "
                                             r"them held by other runs' long-running tasks in this process"):
            _numbers(tmp_path, "second").execute("second")
        with pytest.raises(ValueError, match=r"job 'third' cannot run: the Spark session's 2 task slot\(s\) are all "
                                             r"held by other runs' long-running tasks"):
            _numbers(tmp_path, "third", "per-epoch").execute("third")
    finally:
        first.cancel()
    result = first.get_job_execution_result().result(timeout=120)
    assert first.get_job_status().result() is JobStatus.CANCELED
    assert long_running_tasks.slots_held() == 0
    printed = sorted(int(line.rpartition("> ")[2]) for line in result.printed)
    assert printed == list(range(len(printed))) and printed


def test_tasks_that_find_no_free_slots_fail_the_run_after_the_deploy_timeout(spark, tmp_path, monkeypatch):
    """Slots a Spark job of the session's own holds (not Sluice's to know of): the tasks cannot
    all start, and the run fails after the deploy timeout, saying why."""
    monkeypatch.setattr(long_running_tasks, "DEPLOY_TIMEOUT_S", 1.0)
    holding = threading.Thread(target=lambda: spark.sparkContext.parallelize(range(2), 2)
                               .foreach(lambda _: time.sleep(4)))
    holding.start()
    try:
        time.sleep(1)
        with pytest.raises(RuntimeError, match=r"long-running tasks of job 'starved' did not all start within 1 s: "
                                               r"0 of 2 have a Spark task slot"):
            _numbers(tmp_path, "starved").execute("starved")
    finally:
        holding.join()
    assert long_running_tasks.slots_held() == 0
