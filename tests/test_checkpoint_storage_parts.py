"""The checkpoint storage's parts on their own, without Spark: the job lease claims, refuses and
releases through the epoch log; a run taken over is fenced at its next append and writes no end;
a reader of the epoch log needs no checkpoint store; ``latest`` restores only the completed
checkpoints since the last fresh start."""
import pytest

from runtime.checkpoint.checkpoint_record import CHECKPOINT, COMPLETED, CheckpointRecord
from runtime.checkpoint.epoch_log import EPOCH_LOG_SCHEMA, EpochLog, Fenced
from runtime.checkpoint.job_lease import JobAlreadyRunningException, JobLease
from runtime.checkpoint.storage import CheckpointStorage
from runtime.storage.delta_files import append, arrow_table


def test_the_lease_refuses_a_second_run_until_the_first_releases_it(tmp_path):
    job = str(tmp_path / "job")
    first = CheckpointStorage(job)
    first.lease.claim("run-1", lease_timeout_s=600)     # this very process: alive
    second = JobLease(EpochLog(job), job)
    with pytest.raises(JobAlreadyRunningException, match="run-1"):
        second.claim("run-2", lease_timeout_s=600)
    first.epoch_log.log_metrics("run-1", 0, None, {"records_in": 7})    # logged with the run's end
    first.lease.release("run-1", "FINISHED")
    assert second.running_holder(600) is None
    assert EpochLog(job).epoch_metrics() == [{"run_id": "run-1", "records_in": 7}]
    second.claim("run-2", lease_timeout_s=600)
    assert second.running_holder(600)["run_id"] == "run-2"
    second.release("run-2", "FINISHED")


def test_a_run_taken_over_is_fenced_at_its_next_append_and_writes_no_end(tmp_path):
    job = str(tmp_path / "job")
    storage = CheckpointStorage(job)
    storage.lease.claim("run-a", lease_timeout_s=600)
    append(storage.epoch_log.path, arrow_table(EPOCH_LOG_SCHEMA, [
        {"run_id": "run-b", "kind": "run", "status": "RUNNING"}]))     # another run took the job
    with pytest.raises(Fenced):
        storage.epoch_log.log_start("run-a", 1)
    storage.lease.release("run-a", "FAILED")
    runs = [(r["run_id"], r["status"]) for r in EpochLog(job).rows() if r["kind"] == "run"]
    assert runs == [("run-a", "RUNNING"), ("run-b", "RUNNING")]


def test_latest_restores_only_the_completed_checkpoints_since_the_last_fresh_start(tmp_path):
    storage = CheckpointStorage(str(tmp_path / "job"))
    storage.lease.claim("run", lease_timeout_s=600)
    storage.checkpoints.record([CheckpointRecord(i, i - 1, CHECKPOINT, COMPLETED, "run") for i in (1, 2)])
    storage.epoch_log.log_start("run", 3)       # restore_from=none: an earlier lineage ends
    storage.epoch_log.log_epoch("run", 0, 3, 0, 0, False, {})
    assert storage.latest_lineage() == [] and storage.max_checkpoint_id() == 3
    storage.checkpoints.record([CheckpointRecord(3, 0, CHECKPOINT, COMPLETED, "run")])
    assert [r.checkpoint_id for r in storage.latest_lineage()] == [3]
    assert [r.checkpoint_id for r in storage.checkpoints.completed()] == [1, 2, 3]
    storage.lease.release("run", "FINISHED")
