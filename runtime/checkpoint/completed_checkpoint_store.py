"""The job's checkpoints table, ``<job>/checkpoints/`` (Flink's CompletedCheckpointStore): one row
per checkpoint event (COMPLETED, FAILED, DISCARDED, INVALID, a savepoint taken), append-only, the
state of a checkpoint its last row.

Its own lock: the coordinator records and discards checkpoints on its background thread while
the driver and the web view read them, and a Delta table handle is not shared between threads.
"""
from __future__ import annotations

import threading
from typing import Optional

import pyarrow as pa

from runtime.checkpoint.checkpoint_record import CHECKPOINT, CHECKPOINTS_SCHEMA, COMPLETED, SAVEPOINT, CheckpointRecord
from runtime.storage.delta_files import AppendOnlyTable, DeltaTables, append, arrow_table
from runtime.storage.filesystems import join
from runtime.storage.maintenance import (COMPACT_AFTER_FILES, LOG_RETENTION_S, clean_log,
                                         compact_and_vacuum, own_table_properties)

# Checkpoints a compacted checkpoints table still lists besides the completed ones, savepoints
# and those whose state is still in use (Flink's web.checkpoints.history, for the web view).
CHECKPOINT_HISTORY = 100


class CompletedCheckpointStore:
    def __init__(self, job_dir: str, compact_after: int = COMPACT_AFTER_FILES,
                 log_retention_s: float = LOG_RETENTION_S):
        self.path = join(job_dir, "checkpoints")
        self.compact_after = compact_after      # files the table has before it is compacted
        self.log_retention_s = log_retention_s  # age of Delta log entries a Delta checkpoint covers, deleted
        self.table_properties = own_table_properties(log_retention_s)
        self._tables = DeltaTables(self.table_properties)
        self._table = AppendOnlyTable(self.path)     # read at every checkpoint
        self._latest: dict = {}     # (checkpoint id, kind, external path) -> (recorded_at, record)
        self._lock = threading.RLock()

    def history(self) -> list[CheckpointRecord]:
        """Every checkpoint in its latest state, by id (savepoints as separate entries). Only the
        rows committed since the last call are parsed."""
        with self._lock:
            new, restarted = self._table.read_new()
            if restarted:
                self._latest = {}
            for row in ([] if new is None else new.to_pylist()):
                key = (row["checkpoint_id"], row["kind"], row["external_path"])
                known = self._latest.get(key)
                if known is None or row["recorded_at"] >= known[0]:
                    self._latest[key] = (row["recorded_at"], CheckpointRecord.from_row(row))
            return sorted((record for _, record in self._latest.values()),
                          key=lambda r: (r.checkpoint_id, r.kind))

    def completed(self) -> list[CheckpointRecord]:
        return [r for r in self.history() if r.status == COMPLETED and r.kind == CHECKPOINT]

    def lineage(self, first_checkpoint_id: Optional[int]) -> list[CheckpointRecord]:
        """The completed checkpoints ``latest`` may restore: those since the job's latest fresh
        start (its first checkpoint id, the epoch log's ``lineage_start``)."""
        return [r for r in self.completed() if r.checkpoint_id >= (first_checkpoint_id or 0)]

    def record(self, records: list[CheckpointRecord], before_commit=None) -> None:
        """Append checkpoint rows in one commit; ``before_commit`` runs once the file is staged."""
        with self._lock:
            append(self.path, arrow_table(CHECKPOINTS_SCHEMA, [r.to_row() for r in records]),
                   before_commit=before_commit, tables=self._tables, lock=self._lock)

    def compact(self, in_use: set, epoch: int = -1) -> Optional[list]:
        """Rewrite the table as the latest row of each checkpoint it must still list (completed
        ones, savepoints, those whose state files ``in_use`` by a retained chain or not yet
        deleted, and the last CHECKPOINT_HISTORY others), once it has more than ``compact_after``
        files; the files deleted, None when it did not."""
        with self._lock:
            clean_log(self.path, epoch, self.log_retention_s)
            dt = self._tables.get(self.path)
            if dt is None or len(dt.file_uris()) <= self.compact_after:
                return None
            records = self.history()
            others = [r for r in records
                      if not (r.status == COMPLETED or r.kind == SAVEPOINT or r.checkpoint_id in in_use)]
            dropped = {id(r) for r in others[:-CHECKPOINT_HISTORY]}
            rows = [self._latest_row(r) for r in records if id(r) not in dropped]
            return compact_and_vacuum(dt, arrow_table(pa.schema(dt.schema().to_arrow()), rows), epoch)

    def _latest_row(self, record: CheckpointRecord) -> dict:
        recorded_at, _ = self._latest[(record.checkpoint_id, record.kind, record.external_path)]
        return {**record.to_row(), "recorded_at": recorded_at}
