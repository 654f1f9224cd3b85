"""The job's epoch log, ``<job>/epoch_log/``: the plan of every epoch, written ahead before
anything it produced is committed (a replay reads the same input at the same time and takes the
same checkpoint id), the fresh starts that begin a lineage, the runs' claims and ends (the job
lease, ``job_lease``), and each epoch's metrics once it ran. Append-only.

The run that holds the job appends at exactly the version after what it read (Delta's
optimistic concurrency without retries): a run that was taken over is fenced off at its next
append. Its lock: the epoch's plan is written on a thread of its own while the epoch runs.
"""
from __future__ import annotations

import json
import os
import pickle
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Optional

import pyarrow as pa

from runtime.checkpoint.completed_checkpoint_store import CompletedCheckpointStore
from runtime.storage.delta_files import DeltaTables, add_new_columns, append, arrow_table, read_table
from runtime.storage.filesystems import join
from runtime.storage.maintenance import COMPACT_AFTER_FILES, LOG_RETENTION_S, clean_log, compact_and_vacuum

# Epochs whose metrics a compacted epoch log keeps (the web view's and `sluice` tools' history).
METRICS_HISTORY = 1000
RUNS_HISTORY = 100      # runs whose start and end a compacted epoch log keeps

_TS = pa.timestamp("us", tz="UTC")

EPOCH_LOG_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("kind", pa.string()),          # "run", "start" (a fresh start), "epoch" or "metrics"
    ("status", pa.string()),                                 # runs: RUNNING / FINISHED / FAILED / CANCELED
    ("epoch", pa.int64()), ("checkpoint_id", pa.int64()),    # the checkpoint the epoch ends in, if any
    ("processing_time", pa.int64()), ("input_watermark", pa.int64()), ("end_of_input", pa.bool_()),
    ("splits", pa.string()),                                 # readable: source uid -> [split, start, end]
    ("plan", pa.binary()),                                   # the exact plan, for a replay
    ("host", pa.string()), ("pid", pa.int64()), ("logged_at", _TS),
    ("metrics", pa.string()),       # JSON, "metrics" rows: an epoch's built-in and user metrics once it ran
])



class JobAlreadyRunningException(RuntimeError):
    """Another run of the job holds it (its epoch log says so)."""


class Fenced(JobAlreadyRunningException):
    """Another run appended to the epoch log at the version this run's append expected: it
    holds the job now."""


class EpochLog:
    def __init__(self, job_dir: str, compact_after: int = COMPACT_AFTER_FILES,
                 log_retention_s: float = LOG_RETENTION_S, checkpoints: Optional[CompletedCheckpointStore] = None):
        """``checkpoints``: the job's store, whose completed checkpoints' plans a compaction
        keeps (a reader of the log alone need not pass it)."""
        self.path = join(job_dir, "epoch_log")
        self.checkpoints = checkpoints or CompletedCheckpointStore(job_dir, compact_after, log_retention_s)
        self.compact_after = compact_after
        self.log_retention_s = log_retention_s
        self.table_properties = self.checkpoints.table_properties
        self._table = None          # the DeltaTable this run appends to (fencing, see open())
        self._pending_rows: list = []   # rows waiting for the next commit (metrics)
        self._lock = threading.Lock()   # the log is written while the epoch runs (log_epoch_async)
        self._writer: Optional[ThreadPoolExecutor] = None
        self._commits = 0       # commits since its last compaction check

    # ---- appending, by the run that holds the job --------------------------------------

    def open(self) -> None:
        """Create the log if there is none and take the handle this run's appends commit on, at
        the version it reads now (``JobLease.claim``)."""
        from deltalake import DeltaTable
        own = DeltaTables(self.table_properties)
        if not DeltaTable.is_deltatable(self.path):
            try:
                append(self.path, arrow_table(EPOCH_LOG_SCHEMA, []), create_only=True, tables=own)
            except Exception:
                if not DeltaTable.is_deltatable(self.path):
                    raise
        self._table = own.get(self.path)
        add_new_columns(self._table, EPOCH_LOG_SCHEMA)     # a log older than its metrics column

    @property
    def is_open(self) -> bool:
        return self._table is not None

    def close(self, last_rows: list[dict]) -> None:
        """The run ends: the epoch's plan being written goes first, then ``last_rows`` (not when
        another run took the job over meanwhile); later appends are refused."""
        if self._writer is not None:
            self._writer.shutdown()
            self._writer = None
        if self._table is not None:
            try:
                self.append(last_rows)
            except Fenced:
                pass
            self._table = None

    def append(self, rows: list[dict]) -> None:
        """Commit ``rows`` (and the metrics waiting) at the version after the one this run last
        saw; Fenced when another run committed in between."""
        from deltalake import CommitProperties, write_deltalake
        host, pid = socket.gethostname(), os.getpid()
        with self._lock:
            rows, self._pending_rows = self._pending_rows + rows, []
            table = arrow_table(EPOCH_LOG_SCHEMA, [{**r, "host": host, "pid": pid, "logged_at": int(time.time() * 1e6)}
                                                   for r in rows])
            try:
                write_deltalake(self._table, table, mode="append",
                                commit_properties=CommitProperties(max_commit_retries=0))
            except Exception as e:
                if type(e).__name__ == "CommitFailedError":     # another writer took the version
                    raise Fenced(str(e)) from e
                raise

    def log_epoch(self, run_id: str, epoch: int, checkpoint_id: Optional[int], processing_time: int,
                  input_watermark: int, end_of_input: bool, plan: dict) -> None:
        readable = {uid: [[r.split_id, r.start, r.end] for r in reads] for uid, reads in plan.items()}
        self.append([{"run_id": run_id, "kind": "epoch", "epoch": epoch, "checkpoint_id": checkpoint_id,
                      "processing_time": processing_time, "input_watermark": input_watermark,
                      "end_of_input": end_of_input, "splits": json.dumps(readable, default=str),
                      "plan": pickle.dumps(plan, protocol=5)}])
        self._commits += 1
        if self._commits >= self.compact_after:
            self._commits = 0
            self.compact(epoch)

    def log_epoch_async(self, *args) -> Future:
        """``log_epoch`` on a thread of its own, while the epoch's tasks run: the write-ahead
        record must be committed before anything the epoch produced is (its sinks' output, its
        checkpoint), not before its tasks start. Its future raises what the commit raised (a run
        that was taken over is fenced off here)."""
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="sluice-epoch-log")
        return self._writer.submit(self.log_epoch, *args)

    def log_metrics(self, run_id: str, epoch: int, checkpoint_id: Optional[int], metrics: dict) -> None:
        """What the epoch measured, once it ran (its plan was logged before): EpochSummary's fields.
        Logged with the next row this run logs (the next epoch's plan, or the run's end), not in a
        commit of its own: a commit per epoch less, and metrics are not needed for a restore."""
        with self._lock:
            self._pending_rows.append({"run_id": run_id, "kind": "metrics", "epoch": epoch,
                                       "checkpoint_id": checkpoint_id, "metrics": json.dumps(metrics, default=str)})

    def log_start(self, run_id: str, first_checkpoint_id: int) -> None:
        """A fresh start (the job's first run, or ``--restore-from none``), logged before its first
        epoch: its epochs replay from here until it completes a checkpoint, and ``latest`` no
        longer restores checkpoints before ``first_checkpoint_id`` (an earlier lineage)."""
        self.append([{"run_id": run_id, "kind": "start", "epoch": 0, "checkpoint_id": first_checkpoint_id}])

    def compact(self, epoch: int = -1) -> Optional[list]:
        """Rewrite the log as the rows its readers need (``epoch_log_rows_to_keep``), by the run
        that holds the job, at exactly the version it read (a run taken over meanwhile changes
        nothing), after cleaning its Delta log; the files deleted, None when it did not."""
        with self._lock:
            if self._table is None:
                return None
            clean_log(self.path, epoch, self.log_retention_s)
            self._table.update_incremental()
            log = read_table(self.path)
            if log is None:
                return None
            rows = log.sort_by([("logged_at", "ascending")]).to_pylist()
            kept = epoch_log_rows_to_keep(rows, self.checkpoints.completed())
            if len(kept) == len(rows) and len(self._table.file_uris()) <= 1:
                return None
            return compact_and_vacuum(self._table, arrow_table(log.schema, kept), epoch)

    # ---- reading ---------------------------------------------------------------------------

    def rows(self) -> list[dict]:
        """Every row, oldest first."""
        log = read_table(self.path)
        return [] if log is None else log.sort_by([("logged_at", "ascending")]).to_pylist()

    def epoch_metrics(self, run_id: Optional[str] = None, every_run: bool = False) -> list[dict]:
        """The logged metrics of a run's epochs (by default the latest run that logged any; with
        ``every_run``, of every run the log keeps), oldest first."""
        log = read_table(self.path)
        if log is None or "metrics" not in log.column_names:
            return []
        rows = [r for r in log.sort_by([("logged_at", "ascending")]).to_pylist() if r["kind"] == "metrics"]
        if run_id is None and rows:
            run_id = rows[-1]["run_id"]
        return [{"run_id": r["run_id"], **json.loads(r["metrics"])} for r in rows if every_run or r["run_id"] == run_id]

    def lineage_start(self) -> Optional[int]:
        """The first checkpoint id of the job's latest fresh start (None: never logged one)."""
        starts = [r for r in self.rows() if r["kind"] == "start"]
        return starts[-1]["checkpoint_id"] if starts else None

    def max_checkpoint_id(self) -> int:
        """The highest checkpoint id an epoch was planned with (0: none): a new checkpoint's id
        is above it even when that epoch's checkpoint never completed."""
        log = read_table(self.path)
        ids = [] if log is None else [i for i in log.column("checkpoint_id").to_pylist() if i is not None]
        return max(ids, default=0)

    def logged_epochs(self, after_epoch: int, checkpoint_id: Optional[int]) -> list[dict]:
        """Logged plans of the epochs that followed checkpoint ``checkpoint_id`` (at ``after_epoch``),
        or with ``checkpoint_id`` None those of the latest fresh start (from epoch 0).

        Only entries logged after the epoch that took the checkpoint (or the start) count: its
        lineage; of an epoch planned several times the latest plan wins, and a gap ends the replay.
        """
        rows = self.rows()
        if checkpoint_id is None:
            start = max((i for i, r in enumerate(rows) if r["kind"] == "start"), default=None)
        else:
            start = max((i for i, r in enumerate(rows) if r["kind"] == "epoch" and r["epoch"] == after_epoch
                         and r["checkpoint_id"] == checkpoint_id), default=None)
        if start is None:
            return []
        latest: dict = {}
        for row in rows[start + 1:]:
            if row["kind"] == "epoch" and row["epoch"] > after_epoch:
                latest[row["epoch"]] = row
        out = []
        for e in sorted(latest):
            if e != after_epoch + 1 + len(out):
                break
            out.append({**latest[e], "plan": pickle.loads(latest[e]["plan"])})
        return out


def epoch_log_rows_to_keep(rows: list[dict], completed: list) -> list[dict]:
    """Of the epoch log's rows (oldest first), those its readers need: every row from the plan
    of the epoch that took the oldest completed checkpoint on (a restore of any of them replays
    the epochs logged after it), or from the latest fresh start when no checkpoint completed; the
    latest fresh start; each of the last RUNS_HISTORY runs' latest row (a running run's claim
    among them); the last METRICS_HISTORY epochs' metrics."""
    anchor = max((i for i, r in enumerate(rows) if r["kind"] == "start"), default=0)
    if completed:
        oldest = min(completed, key=lambda r: r.checkpoint_id)
        anchor = min((i for i, r in enumerate(rows) if r["kind"] == "epoch" and r["epoch"] == oldest.epoch
                      and r["checkpoint_id"] == oldest.checkpoint_id), default=0)
    runs: dict = {}
    for i, r in enumerate(rows):
        if r["kind"] == "run":
            runs.pop(r["run_id"], None)
            runs[r["run_id"]] = i
    keep = set(list(runs.values())[-RUNS_HISTORY:])
    keep.update([i for i, r in enumerate(rows) if r["kind"] == "metrics"][-METRICS_HISTORY:])
    keep.update(i for i, r in enumerate(rows) if i >= anchor and r["kind"] in ("epoch", "start"))
    last_start = max((i for i, r in enumerate(rows) if r["kind"] == "start"), default=None)
    if last_start is not None:
        keep.add(last_start)
    return [rows[i] for i in sorted(keep)]
