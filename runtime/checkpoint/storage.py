"""A job's checkpoint storage: Delta tables under ``<warehouse>/<job>/``, one part per table.

    checkpoints/        the completed-checkpoint store: one row per checkpoint event
                        (COMPLETED, FAILED, DISCARDED, ...)             completed_checkpoint_store
    epoch_log/          the plan of every epoch, written before it runs; runs' claims and ends
                        (the job lease) and epochs' metrics               epoch_log, job_lease
    state/<uid>/        one table per stateful operator, partitioned by checkpoint_id   state_tables
    savepoints/<name>/  self-contained copies: _metadata.json and state/<uid>/          savepoint
    sources/            write-ahead logs of sources that need one (socket)
    runs/<run>/         per-run scratch: snapshots of epochs that end without a checkpoint

The checkpoints and epoch-log tables are append-only: the state of a checkpoint is its last row.
Every table is a plain Delta table (delta-rs writes the log, pyarrow the files). A caller takes
the parts it uses (the web view: the store and the epoch log); this holds the four of one job
for those that use several (a restore chooses among the store's checkpoints by the log's lineage).
"""
from __future__ import annotations

from runtime.checkpoint.checkpoint_record import CheckpointRecord
from runtime.checkpoint.completed_checkpoint_store import CompletedCheckpointStore
from runtime.checkpoint.epoch_log import EpochLog
from runtime.checkpoint.job_lease import JobLease
from runtime.checkpoint.state_tables import StateTables
from runtime.storage.maintenance import COMPACT_AFTER_FILES, LOG_RETENTION_S


class CheckpointStorage:
    def __init__(self, job_dir: str, compact_after: int = COMPACT_AFTER_FILES,
                 log_retention_s: float = LOG_RETENTION_S):
        """``compact_after``: files an append-only table has before it is compacted;
        ``log_retention_s``: age of Delta log entries a Delta checkpoint covers, deleted."""
        self.job_dir = job_dir
        self.checkpoints = CompletedCheckpointStore(job_dir, compact_after, log_retention_s)
        self.epoch_log = EpochLog(job_dir, compact_after, log_retention_s, self.checkpoints)
        self.lease = JobLease(self.epoch_log, job_dir)
        self.state = StateTables(job_dir, log_retention_s)

    def latest_lineage(self) -> list[CheckpointRecord]:
        """The completed checkpoints ``latest`` may restore: those since the last fresh start."""
        return self.checkpoints.lineage(self.epoch_log.lineage_start())

    def max_checkpoint_id(self) -> int:
        """The highest checkpoint id recorded or planned (0: none)."""
        return max([self.epoch_log.max_checkpoint_id(), *(r.checkpoint_id for r in self.checkpoints.history())])
