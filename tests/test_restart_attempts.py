"""A run's restart attempts in its driver (runtime/execution/restarts.py), started as a control
plane starts them (a dag_run_id) without Airflow: a restart attempt whose preflight fails is a
failed attempt of the run, with its row and the restart strategy's decision, as Flink restarts a
job whose tasks failed to deploy. Real Spark (the shared session) and Delta tables."""
import logging
import os
import sys

import pytest

from checkpoint_harness import expected_running, expected_windows, table_rows, write_input
from runtime.common.restart_strategy import RestartStrategies
from runtime.execution.history import FAILED, FINISHED, ExecutionHistory
from runtime.storage.layout import job_dir
from runtime_env import job_env

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs"))
import checkpointed_counts as cc  # noqa: E402

DAG_RUN = "manual__preflight"


class InputAway(logging.Handler):
    """Moves the job's input folder away when attempt 1's failure is logged, and back (``comes_back``)
    when attempt 2's is: in the driver, before the strategy's delay, so no timing is involved."""

    def __init__(self, folder, comes_back: bool):
        super().__init__()
        self.folder, self.comes_back, self.said = str(folder), comes_back, []

    def emit(self, record):
        message = record.getMessage()
        if " failed: " not in message:
            return
        self.said.append(message)
        if "attempt 1 failed" in message:
            os.rename(self.folder, self.folder + ".away")
        elif "attempt 2 failed" in message and self.comes_back:
            os.rename(self.folder + ".away", self.folder)


@pytest.mark.parametrize("comes_back", [True, False], ids=["input-comes-back", "strategy-gives-up"])
def test_a_restart_attempts_failed_preflight_is_a_failed_attempt_the_strategy_decides_on(spark, tmp_path, comes_back):
    folder = tmp_path / "in"
    events = write_input(folder, seed=7)
    env = job_env(tmp_path, 1, airflow__dag_run_id=DAG_RUN, epoch__max_records_per_split=40)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2 if comes_back else 1, 0))
    cc.build(env, str(folder), str(tmp_path / "windows"), str(tmp_path / "running"), 2,
             fail=cc.FailAt(25_000, str(tmp_path / "failed-once")))
    away = InputAway(folder, comes_back)
    executor_log = logging.getLogger("runtime.execution.executor")
    executor_log.addHandler(away)
    try:
        if comes_back:
            result = env.execute("preflight restarts")
        else:
            with pytest.raises(FileNotFoundError, match=f"File source: {folder} does not exist"):
                env.execute("preflight restarts")
    finally:
        executor_log.removeHandler(away)

    attempts = ExecutionHistory(job_dir(str(tmp_path / "warehouse"), "preflight restarts")).attempts(DAG_RUN)
    first, second = attempts[:2]
    assert "injected failure" in first.failure and (first.state, first.restarting) == (FAILED, True)
    # The restart attempt's preflight: its row, its failure's text, the strategy's decision.
    assert (second.attempt, second.state, second.epochs, second.failed_tasks) == (2, FAILED, 0, ())
    assert second.failure.startswith(f"FileNotFoundError: File source: {folder} does not exist")
    assert second.application_id == first.application_id        # in the same Spark session
    assert away.said[1].startswith(f"[preflight restarts] attempt 2 failed: File source: {folder}")
    if not comes_back:
        assert len(attempts) == 2 and second.restarting is False
        assert "not restarting after failure 2: the restart strategy gave up" in second.restart
        return
    assert second.restarting is True and second.restart.startswith("restarting in 0 ms after failure 2")
    [third] = attempts[2:]
    assert (third.attempt, third.state, third.restored_from) == (3, FINISHED, first.last_checkpoint)
    assert result.restored_from == first.last_checkpoint is not None
    assert table_rows(tmp_path / "running") == expected_running(events)
    assert table_rows(tmp_path / "windows") == expected_windows(events)
