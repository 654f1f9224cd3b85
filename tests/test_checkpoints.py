"""Checkpoints in Delta: restore, rescale, exactly-once sinks, retention, savepoints, bad state.

Every test runs tests/jobs/checkpointed_counts.py on the shared Spark session and checks the
sink tables against answers computed here from the input.
"""
import collections
import os
import re
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from checkpoint_harness import (
    JOB, LINES_PER_EPOCH, expected_running, expected_windows, first_lines, job_args, sink_checkpoints, table_rows,
    write_input)
from runtime.checkpoint.incremental import FULL_EVERY, FULL_RATIO, INCREMENTAL, partition_of
from runtime.checkpoint.savepoint import read_state, take_savepoint
from runtime.checkpoint.checkpoint_record import COMPLETED, DISCARDED, CheckpointException
from runtime.checkpoint.job_lease import JobAlreadyRunningException
from runtime.checkpoint.completed_checkpoint_store import CompletedCheckpointStore
from runtime.checkpoint.epoch_log import EpochLog
from runtime.checkpoint.state_tables import StateTables
from runtime.checkpoint.storage import CheckpointStorage
from runtime.client import run_job


def run(tmp_path, *extra, **options):
    options.setdefault("max_records_per_split", LINES_PER_EPOCH)
    return run_job(JOB, job_args(tmp_path, *extra), warehouse=str(tmp_path / "warehouse"),
                   master="local[2]", quiet=True, **options)


# Full snapshots: each checkpoint's partition of a state table holds the whole state (the default
# writes increments; tests/test_local_state.py reads their chains).
FULL_SNAPSHOTS = {INCREMENTAL: "false"}


def storage(tmp_path) -> CheckpointStorage:
    return CheckpointStorage(str(tmp_path / "warehouse" / "checkpointed-counts"))


def assert_exactly_once(tmp_path, events):
    assert table_rows(tmp_path / "windows") == expected_windows(events)
    assert table_rows(tmp_path / "running") == expected_running(events)


@pytest.mark.parametrize("before, after", [(2, 3), (2, 1)])
def test_a_stopped_job_restores_its_latest_checkpoint_at_another_parallelism(spark, tmp_path, before, after):
    events = write_input(tmp_path / "in", seed=before * 10 + after)
    first = run(tmp_path, "--parallelism", str(before), max_epochs=2)
    assert [e.checkpoint_id for e in first.epochs] == [1, 2]
    store = storage(tmp_path)
    assert [(r.checkpoint_id, r.epoch, r.status) for r in store.checkpoints.completed()] == [(1, 0, COMPLETED), (2, 1, COMPLETED)]
    # The sinks hold exactly what the checkpoints committed so far: nothing of epoch 2 onwards.
    assert table_rows(tmp_path / "running") == expected_running(first_lines(tmp_path / "in", 2 * LINES_PER_EPOCH))
    second = run(tmp_path, "--parallelism", str(after), restore_from="latest")
    assert second.restored_from == 2
    assert second.epochs[0].epoch == 2 and second.epochs[0].checkpoint_id == 3
    assert_exactly_once(tmp_path, events)
    record = store.checkpoints.completed()[-1]
    by_table = {op["table"]: op for op in record.operators}
    assert by_table["running-count"]["parallelism"] == after
    assert by_table["window-counts"]["max_parallelism"] == 128



def test_state_tables_are_plain_delta_tables_with_typed_values(spark, tmp_path):
    events = write_input(tmp_path / "in", seed=7)
    run(tmp_path, max_epochs=2, configuration=FULL_SNAPSHOTS)  # a partition is then the whole state
    state = tmp_path / "warehouse" / "checkpointed-counts" / "state"
    running = DeltaTable(str(state / "running-count")).to_pyarrow_table()
    assert running.schema.field("value_count").type == "int64"       # ValueStateDescriptor(..., LONG)
    assert running.schema.field("key").type == "string"
    latest = running.filter(running.column("checkpoint_id").to_numpy() == 2)
    counts = {r["key"]: r["value_count"] for r in latest.to_pylist() if r["state_name"] == "count"}
    seen = first_lines(tmp_path / "in", 2 * LINES_PER_EPOCH)
    assert counts == dict(collections.Counter(w for w, _ in seen))
    windows = DeltaTable(str(state / "window-counts")).to_pyarrow_table().to_pylist()
    contents = [r for r in windows if r["state_name"] == "window-contents" and r["checkpoint_id"] == 2]
    assert contents and all(r["value_window_contents"]["word"] == r["key"] for r in contents)
    assert all(r["namespace"].startswith("TimeWindow(") for r in contents)
    timers = [r for r in windows if r["state_name"] == "_timer_state/event" and r["checkpoint_id"] == 2]
    assert {(r["key"], r["timestamp"]) for r in timers} == \
        {(r["key"], int(r["namespace"].split(", ")[1][:-1]) - 1) for r in contents}
    # The state processor reads the same, decoded.
    rows = read_state(storage(tmp_path), "running-count")
    assert {r["key"]: r["value"] for r in rows if r["state"] == "count"} == counts
    assert events


def test_retention_keeps_the_last_checkpoints_and_their_files_only(spark, tmp_path):
    write_input(tmp_path / "in", seed=3)
    run(tmp_path)
    store = storage(tmp_path)
    history = store.checkpoints.history()
    completed = [r.checkpoint_id for r in history if r.status == COMPLETED]
    assert len(history) == 5 and completed == [3, 4, 5]
    assert [r.checkpoint_id for r in history if r.status == DISCARDED] == [1, 2]
    table = tmp_path / "warehouse" / "checkpointed-counts" / "state" / "running-count"
    assert sorted(p["checkpoint_id"] for p in DeltaTable(str(table)).partitions()) == ["3", "4", "5"]
    assert sorted(d for d in os.listdir(table) if d.startswith("checkpoint_id=")) == \
        ["checkpoint_id=3", "checkpoint_id=4", "checkpoint_id=5"]
    # The state tables commit checkpoints' files after their records (several at once): each
    # checkpoint's partition was in the table, in checkpoint order; a record names its sinks' versions only.
    added = [{int(p["checkpoint_id"]) for p in DeltaTable(str(table), version=v).partitions()}
             for v in range(DeltaTable(str(table)).version() + 1)]
    assert set().union(*added) == {1, 2, 3, 4, 5}
    newest = [max(ps) for ps in added if ps]
    assert newest == sorted(newest) and newest[-1] == 5
    assert all(not any(t.startswith("state/") for t in r.table_versions) for r in history)
    # The checkpointed tables keep their logs short (a Delta checkpoint every 10 commits).
    for path in (table, tmp_path / "warehouse" / "checkpointed-counts" / "checkpoints"):
        assert DeltaTable(str(path)).metadata().configuration["delta.checkpointInterval"] == "10"


def test_a_failed_retention_is_logged_and_the_next_one_finishes_it(spark, tmp_path, caplog, monkeypatch):
    """Retention runs in the background after each checkpoint; its failure does not fail the job."""
    write_input(tmp_path / "in", seed=3)
    discard = StateTables.discard
    calls = []

    def failing_once(self, table, ids):
        calls.append(list(ids))
        if len(calls) == 1:
            raise OSError("the disk hiccuped")
        return discard(self, table, ids)

    monkeypatch.setattr(StateTables, "discard", failing_once)
    run(tmp_path, configuration=FULL_SNAPSHOTS)     # each checkpoint's partitions alone: one retention each
    assert "discarding subsumed checkpoints failed (the next retention finishes it): OSError: the disk hiccuped" \
        in caplog.text
    history = storage(tmp_path).checkpoints.history()
    assert [r.checkpoint_id for r in history if r.status == COMPLETED] == [3, 4, 5]
    table = tmp_path / "warehouse" / "checkpointed-counts" / "state" / "running-count"
    assert sorted(d for d in os.listdir(table) if d.startswith("checkpoint_id=")) == \
        ["checkpoint_id=3", "checkpoint_id=4", "checkpoint_id=5"]


def _slow_or_failing_record(monkeypatch, checkpoint_id, action):
    """CompletedCheckpointStore.record, with ``action()`` run before checkpoint ``checkpoint_id``'s
    COMPLETED row is committed; returns the times each COMPLETED row was committed."""
    record = CompletedCheckpointStore.record
    committed = {}

    def patched(self, records, before_commit=None):
        for r in records:
            if r.status == COMPLETED and r.kind == "CHECKPOINT" and r.checkpoint_id == checkpoint_id:
                action()
        record(self, records, before_commit=before_commit)
        committed.update({r.checkpoint_id: time.time() for r in records if r.status == COMPLETED})
    monkeypatch.setattr(CompletedCheckpointStore, "record", patched)
    return committed


def test_a_checkpoint_completes_while_the_next_epoch_runs(spark, tmp_path, monkeypatch):
    """As in Flink, a checkpoint's commits (state, sinks, record) run in the background: the next
    epoch starts before the checkpoint's record is committed, and every epoch still ends up in
    its checkpoint, exactly once."""
    events = write_input(tmp_path / "in", seed=23)
    committed = _slow_or_failing_record(monkeypatch, 2, lambda: time.sleep(1.5))
    result = run(tmp_path)
    assert [e.checkpoint_id for e in result.epochs] == list(range(1, len(result.epochs) + 1))
    second, third = result.epochs[1], result.epochs[2]
    assert second.checkpoint_id == 2
    assert third.started_at < committed[2] - 1.0, "the epoch after checkpoint 2 waited for its commit"
    assert second.checkpoint_ms >= 1400
    assert_exactly_once(tmp_path, events)


def test_a_checkpoint_failing_in_the_background_fails_the_run_and_the_restart_is_exactly_once(
        spark, tmp_path, monkeypatch):
    """A completion that fails after the next epoch started fails that epoch: the failed checkpoint
    is recorded FAILED, never restored, and the restart replays from the checkpoint before it (the
    sink commit the failed checkpoint made is a no-op when its epoch is replayed)."""
    from runtime.execution.job_execution_result import JobExecutionException
    events = write_input(tmp_path / "in", seed=29)

    def fail():
        raise OSError("the record's disk is full")
    _slow_or_failing_record(monkeypatch, 2, fail)
    with pytest.raises(JobExecutionException, match=r"Checkpoint 2 failed: OSError: the record's disk is full "
                                                    r"\(epoch 1 of job 'checkpointed counts'\)"):
        run(tmp_path, configuration={"restart-strategy.type": "none"})     # else Flink's default restarts it
    store = storage(tmp_path)
    assert [r.checkpoint_id for r in store.checkpoints.completed()] == [1]
    assert [r.checkpoint_id for r in store.checkpoints.history() if r.status == "FAILED"] == [2]
    monkeypatch.undo()
    result = run(tmp_path, restore_from="latest")
    assert result.restored_from == 1 and result.epochs[0].epoch == 1
    assert_exactly_once(tmp_path, events)


def test_a_state_table_commit_failing_after_its_record_is_caught_up_by_the_next_checkpoint(
        spark, tmp_path, caplog, monkeypatch):
    """A checkpoint's state tables commit its files after its record, off the epoch's path:
    the commit of checkpoint 4's files fails, the checkpoint stays complete and the run goes on;
    the next housekeeping (at the latest the run's end) commits them. A table that lacks a
    completed checkpoint's partition (a run killed after the record) gets it from the files the
    record lists when a run or table maintenance catches up, with the rows those files hold."""
    events = write_input(tmp_path / "in", seed=54)
    commit = StateTables.commit
    failed = []

    def failing(self, table, files_by_checkpoint):
        if 4 in files_by_checkpoint and not failed:
            failed.append(table)
            raise OSError("the state table's disk is full")
        return commit(self, table, files_by_checkpoint)
    monkeypatch.setattr(StateTables, "commit", failing)
    run(tmp_path, configuration=FULL_SNAPSHOTS)
    assert failed and re.search(r"the state table commits of checkpoint\(s\) [0-9, ]*4[0-9, ]* failed \(the next ones "
                                r"commit them\): OSError: the state table's disk is full", caplog.text)
    store = storage(tmp_path)
    assert [r.checkpoint_id for r in store.checkpoints.completed()] == [3, 4, 5]
    assert_exactly_once(tmp_path, events)
    table = str(tmp_path / "warehouse" / "checkpointed-counts" / "state" / "running-count")
    assert sorted(p["checkpoint_id"] for p in DeltaTable(table).partitions()) == ["3", "4", "5"]
    before = DeltaTable(table).to_pyarrow_table(filters=[("checkpoint_id", "=", 5)]).sort_by("key_group")

    DeltaTable(table).delete("checkpoint_id = 5")       # the record's files stay, the table lacks them
    assert store.state.catch_up(store.checkpoints.completed()) == [("running-count", 5)]
    assert sorted(p["checkpoint_id"] for p in DeltaTable(table).partitions()) == ["3", "4", "5"]
    after = DeltaTable(table).to_pyarrow_table(filters=[("checkpoint_id", "=", 5)]).sort_by("key_group")
    assert after.num_rows == before.num_rows > 0
    assert sorted(map(str, after.to_pylist())) == sorted(map(str, before.select(after.column_names).to_pylist()))
    assert store.state.catch_up(store.checkpoints.completed()) == []     # nothing left to commit


def test_catching_up_commits_the_earlier_partitions_an_incremental_checkpoint_reads(spark, tmp_path):
    """Increments (the default) read files of the checkpoints their chains started in, discarded
    ones too: a state table that lacks such a partition gets it back from the completed
    records' listings (table maintenance then vacuums no file a checkpoint reads)."""
    write_input(tmp_path / "in", seed=8)
    run(tmp_path, configuration={FULL_EVERY: "100", FULL_RATIO: "100"})     # chains from the first checkpoint
    store = storage(tmp_path)
    completed = store.checkpoints.completed()
    own = {r.checkpoint_id for r in completed}
    read = {(op["table"], int(partition_of(f["path"]))): f["path"]
            for r in completed for op in r.operators for f in op["files"]}
    earlier = sorted(k for k in read if k[1] not in own)
    assert earlier, read        # a chain reads a partition of a discarded checkpoint
    table, cid = earlier[0]
    path = str(tmp_path / "warehouse" / "checkpointed-counts" / "state" / table)
    DeltaTable(path).delete(f"checkpoint_id = {cid}")
    assert (table, cid) in store.state.catch_up(completed)
    back = {a["path"] for a in pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
            if str(a["partition.checkpoint_id"]) == str(cid)}
    assert read[(table, cid)] in back


def test_a_failed_run_restarts_in_its_process_as_its_strategy_says(spark, tmp_path, monkeypatch):
    """The job's restart strategy applies to a run a program starts in its own process, as Flink's
    applies however a job was submitted: the failed attempt is recorded, the next restores the
    latest completed checkpoint in the same Spark session, and the output is exactly once."""
    from runtime.execution.history import FAILED, FINISHED, ExecutionHistory
    events = write_input(tmp_path / "in", seed=29)
    failures = []

    def fail_once():
        if not failures:
            failures.append("checkpoint 2")
            raise OSError("the record's disk is full")
    _slow_or_failing_record(monkeypatch, 2, fail_once)
    result = run(tmp_path, configuration={"restart-strategy.type": "fixed-delay",
                                          "restart-strategy.fixed-delay.attempts": "1",
                                          "restart-strategy.fixed-delay.delay": "0 ms"})
    first, second = sorted(ExecutionHistory(str(tmp_path / "warehouse" / "checkpointed-counts")).executions(),
                           key=lambda r: r.attempt)
    assert (first.state, first.restarting) == (FAILED, True) and "the record's disk is full" in first.failure
    assert (second.attempt, second.state, second.restored_from) == (2, FINISHED, 1)
    assert second.application_id == first.application_id       # in the same Spark session
    assert result.restored_from == 1
    assert_exactly_once(tmp_path, events)


def test_a_corrupt_state_file_falls_back_to_the_previous_checkpoint(spark, tmp_path, caplog):
    events = write_input(tmp_path / "in", seed=11)
    run(tmp_path, max_epochs=3)
    store = storage(tmp_path)
    latest = store.checkpoints.completed()[-1]
    victim = next(f for op in latest.operators if op["table"] == "running-count" for f in op["files"])
    path = tmp_path / "warehouse" / "checkpointed-counts" / "state" / "running-count" / victim["path"]
    path.write_bytes(b"not parquet")
    result = run(tmp_path, restore_from="latest")
    err = caplog.text       # logged as warnings
    assert f"checkpoint {latest.checkpoint_id}: state file {path} is corrupt" in err
    assert f"falling back to checkpoint {latest.checkpoint_id - 1}" in err
    assert result.restored_from == latest.checkpoint_id - 1
    # The epoch after the fallback checkpoint replays from its logged plan, with its old
    # checkpoint id: its sink commit is a no-op, so nothing is written twice.
    assert_exactly_once(tmp_path, events)


def test_a_run_stopped_by_max_epochs_ends_in_a_checkpoint_and_the_next_run_resumes_there(spark, tmp_path):
    events = write_input(tmp_path / "in", seed=21)
    hourly = ("--checkpoint-interval-ms", str(3_600_000))
    first = run(tmp_path, *hourly, max_epochs=2)
    # An hour never passes: only the run's last epoch checkpoints, so the next run need not replay.
    assert [e.checkpoint_id for e in first.epochs] == [None, 1]
    second = run(tmp_path, *hourly, restore_from="latest")
    assert second.restored_from == 1 and second.epochs[0].epoch == 2
    assert second.epochs[-1].checkpoint_id == 2
    assert_exactly_once(tmp_path, events)


def test_a_missing_checkpoint_id_or_failed_checkpoint_is_a_clear_error(spark, tmp_path):
    write_input(tmp_path / "in", seed=5)
    run(tmp_path, max_epochs=1)
    with pytest.raises(CheckpointException, match=r"there is no checkpoint 9 \(completed: 1\)"):
        run(tmp_path, restore_from="9")


def test_state_of_a_removed_operator_fails_the_restore_unless_allowed(spark, tmp_path):
    events = write_input(tmp_path / "in", seed=13)
    run(tmp_path, max_epochs=2)
    with pytest.raises(CheckpointException, match="Cannot map checkpoint/savepoint state for operator window-counts"):
        run(tmp_path, "--window-uid", "renamed", restore_from="latest")
    result = run(tmp_path, "--window-uid", "renamed", restore_from="latest", allow_non_restored_state=True)
    assert result.restored_from == 2
    # The running count kept its state; the renamed window started empty.
    assert table_rows(tmp_path / "running") == expected_running(events)


def test_a_changed_max_parallelism_is_refused(spark, tmp_path):
    write_input(tmp_path / "in", seed=17)
    run(tmp_path, max_epochs=1)
    with pytest.raises(CheckpointException, match=r"maximum parallelism \(128\).*\(64\) differ"):
        run(tmp_path, "--max-parallelism", "64", restore_from="latest")


def test_a_savepoint_outlives_retention_and_restores_anywhere(spark, tmp_path):
    events = write_input(tmp_path / "in", seed=19)
    run(tmp_path, max_epochs=2)
    store = storage(tmp_path)
    savepoint = take_savepoint(store, str(tmp_path / "savepoint"))
    assert os.path.isfile(os.path.join(savepoint, "_metadata.json"))
    assert DeltaTable(os.path.join(savepoint, "state", "running-count")).version() == 0
    # Later checkpoints discard checkpoint 2; the savepoint keeps its own copy.
    run(tmp_path, restore_from="latest")
    assert 2 not in [r.checkpoint_id for r in store.checkpoints.completed()]
    # A new job folder (another warehouse) restores from the savepoint path.
    other = tmp_path / "other"
    args = ["--input", str(tmp_path / "in"), "--windows", str(other / "windows"), "--running", str(other / "running")]
    result = run_job(JOB, args, warehouse=str(other / "warehouse"), master="local[2]", quiet=True,
                     max_records_per_split=LINES_PER_EPOCH, restore_from=savepoint)
    assert result.restored_from == 2 and result.epochs[0].epoch == 2
    # Its sinks only hold what came after the savepoint.
    after = first_lines(tmp_path / "in", 10 ** 6)
    assert sum(table_rows(other / "running").values()) == len(after) - 2 * 2 * LINES_PER_EPOCH
    assert events


def test_a_second_run_of_a_running_job_is_refused(spark, tmp_path):
    write_input(tmp_path / "in", seed=23)
    store = storage(tmp_path)
    store.lease.claim("other-run", lease_timeout_s=600)        # alive: this very process
    with pytest.raises(JobAlreadyRunningException, match="already running: run other-run"):
        run(tmp_path)
    assert not os.path.exists(tmp_path / "windows")
    store.lease.release("other-run", "FINISHED")
    result = run(tmp_path)
    assert result.epochs[-1].watermark > 0


def test_a_run_taken_over_mid_run_commits_nothing_of_the_epoch_it_could_not_log(spark, tmp_path, monkeypatch):
    """An epoch's plan is committed while its tasks run; a run whose log commit loses to another
    writer (fenced: the job was taken over) fails before that epoch's output or checkpoint is
    committed: the sinks hold the two epochs before it, exactly."""
    from runtime.storage.delta_files import append, arrow_table
    from runtime.checkpoint.epoch_log import EPOCH_LOG_SCHEMA
    write_input(tmp_path / "in", seed=31)
    log_epoch = EpochLog.log_epoch

    def taken_over_at_epoch_2(self, run_id, epoch, *args):
        if epoch == 2:      # another run claims the job first: this commit loses the version
            append(self.path, arrow_table(EPOCH_LOG_SCHEMA, [
                {"run_id": "other-run", "kind": "run", "status": "RUNNING"}]))
        return log_epoch(self, run_id, epoch, *args)
    monkeypatch.setattr(EpochLog, "log_epoch", taken_over_at_epoch_2)
    with pytest.raises(JobAlreadyRunningException):
        run(tmp_path)
    assert [r.checkpoint_id for r in storage(tmp_path).checkpoints.completed()] == [1, 2]
    assert table_rows(tmp_path / "running") == expected_running(first_lines(tmp_path / "in", 2 * LINES_PER_EPOCH))


def test_a_run_on_another_host_holds_the_job_until_its_lease_expires(spark, tmp_path):
    import socket
    write_input(tmp_path / "in", seed=29)
    store = storage(tmp_path)
    store.lease.claim("remote", lease_timeout_s=600)
    # Pretend the claim came from another host: liveness is then judged by the lease.
    real = socket.gethostname
    socket.gethostname = lambda: "elsewhere"
    try:
        with pytest.raises(JobAlreadyRunningException):
            run(tmp_path, lease_timeout_s=600)
        time.sleep(0.2)
        result = run(tmp_path, lease_timeout_s=0.1)
    finally:
        socket.gethostname = real
    assert result.epochs
