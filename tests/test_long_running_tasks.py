"""Long-running tasks (``sluice.epoch.tasks: long-running``): a run's tasks deployed once, as one
barrier Spark job, and sent each epoch's descriptors, with records between the slots over their
own sockets (runtime/execution/long_running_tasks.py, runtime/task/task_executor.py). The same
job gives the same exactly-once tables as with a Spark job per epoch, and its checkpoints restore
either way and at another parallelism; a failing user function is named as before; a task that
dies fails the run, whose restart restores exactly once; a run its tasks cannot deploy is refused
before its first epoch. Real Spark (the shared session) and Delta tables."""
import os
import sys

import pytest

from checkpoint_harness import (JOB, LINES_PER_EPOCH, expected_running, expected_windows, job_args, table_rows,
                                write_input)
from runtime.client import run_job
from runtime.common import Types
from runtime.common.restart_strategy import RestartStrategies
from runtime.datastream.connectors.delta import DeltaSink
from runtime.execution.history import ExecutionHistory
from runtime.execution.job_execution_result import JobExecutionException
from runtime.storage.layout import job_dir
from runtime_env import job_env

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
    with pytest.raises(ValueError, match=r"holds all 2 Spark task slot\(s\) .* Delta Sink commit\(s\) with Spark jobs "
                                         r"\(delta-spark\) that need one more. Lower the job's parallelism to 1"):
        env.execute("delta-spark sink")
    assert not os.path.exists(tmp_path / "table")
