"""Restarts that must not write anything twice: before the first checkpoint, without a restore
option, after starting over; and misuse refused before anything is written.

The job (tests/jobs/checkpointed_counts.py) writes per-word window counts and every running
count into two Delta sinks, with a checkpoint per epoch; the answers are computed from the
input (checkpoint_harness). A running count written twice shows up as a duplicate row.
"""
import collections
import shutil

import pytest
from deltalake import DeltaTable

from checkpoint_harness import (
    JOB, LINES_PER_EPOCH, expected_running, expected_windows, job_args, kill_at, table_rows, write_input)
from runtime.checkpoint.checkpoint_record import CheckpointException
from runtime.checkpoint.job_lease import JobAlreadyRunningException
from runtime.checkpoint.storage import CheckpointStorage
from runtime.client import run_job

JOB_DIR = "checkpointed-counts"


def finish(folder, **options):
    return run_job(JOB, job_args(folder), warehouse=str(folder / "warehouse"), master="local[2]", quiet=True,
                   max_records_per_split=LINES_PER_EPOCH, **options)


def assert_exactly_once(folder, events, times: int = 1):
    windows, running = expected_windows(events), expected_running(events)
    assert table_rows(folder / "windows") == collections.Counter({k: n * times for k, n in windows.items()})
    assert table_rows(folder / "running") == collections.Counter({k: n * times for k, n in running.items()})


def test_a_kill_after_the_first_sink_commit_replays_the_logged_first_epoch(spark, tmp_path):
    """Killed after the sinks committed epoch 0 and before checkpoint 1's record: no checkpoint
    is complete, but the first epoch's plan and checkpoint id were logged before it ran, so the
    restart replays it (the sinks' commits are no-ops) instead of starting fresh: with
    restore_from=latest, and with no restore option, each from the same killed state."""
    events = write_input(tmp_path / "in", seed=7)
    assert kill_at(tmp_path, "after-sink-commit", 0, False) == "killed"
    assert CheckpointStorage(str(tmp_path / "warehouse" / JOB_DIR)).checkpoints.completed() == []
    assert DeltaTable(str(tmp_path / "running")).version() >= 0        # the sink holds epoch 0
    written = [name for name in ("warehouse", "windows", "running") if (tmp_path / name).exists()]
    for name in written:
        shutil.copytree(tmp_path / name, tmp_path / "killed" / name)
    for restart in ({"restore_from": "latest"}, {}):
        for name in ("warehouse", "windows", "running"):        # back to what the kill left
            shutil.rmtree(tmp_path / name, ignore_errors=True)
            if name in written:
                shutil.copytree(tmp_path / "killed" / name, tmp_path / name)
        result = finish(tmp_path, **restart)
        assert result.restored_from is None, restart
        assert_exactly_once(tmp_path, events)


def test_a_rerun_without_a_restore_option_resumes_from_the_latest_checkpoint(spark, tmp_path):
    events = write_input(tmp_path / "in", seed=8)
    assert kill_at(tmp_path, "mid-epoch", 2, False) == "killed"
    # Checkpoint 1 completed before epoch 2; checkpoint 2 (epoch 1's) completes in the background
    # while epoch 2 runs, so the kill may come before it does. The rerun resumes from the latest.
    completed = [r.checkpoint_id for r in CheckpointStorage(str(tmp_path / "warehouse" / JOB_DIR)).checkpoints.completed()]
    assert completed in ([1], [1, 2])
    result = finish(tmp_path)
    assert result.restored_from == completed[-1]
    assert_exactly_once(tmp_path, events)


def test_starting_over_names_the_sinks_and_latest_stays_in_the_new_start(spark, tmp_path, capfd):
    """restore_from=none writes everything again, and says where. A kill of that run before its
    first checkpoint is then replayed within the new start: "latest" must not go back to the
    first start's final checkpoint (its sources are at the end: the rest would be lost)."""
    events = write_input(tmp_path / "in", seed=9)
    finish(tmp_path)
    capfd.readouterr()
    assert kill_at(tmp_path, "after-sink-commit", 0, False, "--restore-from", "none") == "killed"
    log = (tmp_path / "log-after-sink-commit-0.txt").read_text()
    assert "starting over" in log
    assert str(tmp_path / "windows") in log and str(tmp_path / "running") in log
    result = finish(tmp_path)
    assert result.restored_from is None
    assert_exactly_once(tmp_path, events, times=2)


# ---- misuse is refused before anything is written -------------------------------------------

def log_rows(folder) -> int:
    path = folder / "warehouse" / JOB_DIR / "epoch_log"
    return DeltaTable(str(path)).to_pyarrow_table().num_rows if DeltaTable.is_deltatable(str(path)) else 0


def test_a_missing_input_fails_before_anything_is_written(spark, tmp_path):
    with pytest.raises(FileNotFoundError, match="does-not-exist"):
        run_job(JOB, ["--input", str(tmp_path / "does-not-exist"), "--windows", str(tmp_path / "w"),
                      "--running", str(tmp_path / "r")], warehouse=str(tmp_path / "warehouse"), quiet=True)
    assert not (tmp_path / "warehouse").exists()


def test_an_unknown_checkpoint_fails_before_anything_is_written(spark, tmp_path):
    write_input(tmp_path / "in", seed=10)
    finish(tmp_path)
    before = log_rows(tmp_path)
    with pytest.raises(CheckpointException, match="there is no checkpoint 999"):
        finish(tmp_path, restore_from="999")
    assert log_rows(tmp_path) == before


def test_a_second_run_of_a_running_job_is_refused_before_anything_is_written(spark, tmp_path):
    write_input(tmp_path / "in", seed=11)
    storage = CheckpointStorage(str(tmp_path / "warehouse" / JOB_DIR))
    storage.lease.claim("the-first-run", lease_timeout_s=600)     # held by this (live) process
    before = log_rows(tmp_path)
    with pytest.raises(JobAlreadyRunningException, match="the-first-run"):
        finish(tmp_path)
    assert log_rows(tmp_path) == before
    assert not (tmp_path / "running").exists()
    storage.lease.release("the-first-run", "CANCELED")
