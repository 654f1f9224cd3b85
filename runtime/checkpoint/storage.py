"""A job's checkpoint storage: Delta tables under ``<warehouse>/<job>/``.

    epoch_log/          the plan of every epoch, written before it runs; runs' start and end
    checkpoints/        one row per checkpoint event: COMPLETED, FAILED, DISCARDED, ...
    state/<uid>/        one table per stateful operator, partitioned by checkpoint_id
    savepoints/<name>/  self-contained copies: _metadata.json and state/<uid>/
    sources/            write-ahead logs of sources that need one (socket)
    runs/<run>/         per-run scratch: snapshots of epochs that end without a checkpoint

The checkpoints and epoch-log tables are append-only: the state of a checkpoint is its
last row. Every table is a plain Delta table (delta-rs writes the log, pyarrow the files).
"""
from __future__ import annotations

import json
import os
import pickle
import functools
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Optional

import pyarrow as pa

from runtime.storage.delta_files import AppendOnlyTable, DeltaTables, add_new_columns, append, arrow_table, read_table
from runtime.storage.filesystems import join, relative, rmtree
from runtime.storage.maintenance import (COMPACT_AFTER_FILES, LOG_RETENTION_S, clean_log,
                                         compact_and_vacuum, own_table_properties)

COMPLETED, FAILED, DISCARDED, INVALID = "COMPLETED", "FAILED", "DISCARDED", "INVALID"
# Checkpoints a compacted checkpoints table still lists besides the completed ones, savepoints
# and those whose state is still in use (Flink's web.checkpoints.history, for the web view).
CHECKPOINT_HISTORY = 100
# Epochs whose metrics a compacted epoch log keeps (the web view's and `sluice` tools' history).
METRICS_HISTORY = 1000
RUNS_HISTORY = 100      # runs whose start and end a compacted epoch log keeps
CHECKPOINT, SAVEPOINT = "CHECKPOINT", "SAVEPOINT"

_TS = pa.timestamp("us", tz="UTC")

CHECKPOINTS_SCHEMA = pa.schema([
    ("checkpoint_id", pa.int64()), ("epoch", pa.int64()), ("kind", pa.string()), ("status", pa.string()),
    ("run_id", pa.string()), ("started_at", _TS), ("completed_at", _TS), ("duration_ms", pa.int64()),
    ("state_bytes", pa.int64()), ("state_rows", pa.int64()),
    ("source_offsets", pa.string()),       # JSON: source uid -> split -> position
    ("watermarks", pa.string()),           # JSON: operator uid -> watermark
    ("operators", pa.string()),            # JSON: [{uid, name, parallelism, max_parallelism, files}]
    ("table_versions", pa.string()),       # JSON: table path -> Delta version after the commit
    ("failure", pa.string()), ("external_path", pa.string()), ("recorded_at", _TS),
])

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


class CheckpointException(RuntimeError):
    """A checkpoint could not be read or restored; names the checkpoint and the file."""


@dataclass(frozen=True)
class CheckpointRecord:
    checkpoint_id: int
    epoch: int
    kind: str
    status: str
    run_id: str
    duration_ms: int = 0
    state_bytes: int = 0
    state_rows: int = 0
    source_offsets: dict = field(default_factory=dict)
    watermarks: dict = field(default_factory=dict)
    operators: list = field(default_factory=list)
    table_versions: dict = field(default_factory=dict)
    failure: Optional[str] = None
    external_path: Optional[str] = None
    started_at: Optional[float] = None
    completed_at: Optional[float] = None

    def sink_versions(self, job_dir: str) -> dict:
        """The Delta versions its commit left in the job's sink tables: the paths and URIs
        outside the job's own folder ``job_dir`` (its state tables)."""
        own = join(job_dir, "")
        return {t: v for t, v in self.table_versions.items()
                if (os.path.isabs(t) or "://" in t) and not t.startswith(own)}

    @staticmethod
    def from_row(row: dict) -> "CheckpointRecord":
        loads = lambda v, d: json.loads(v) if v else d  # noqa: E731
        ts = lambda v: v.timestamp() if v is not None else None  # noqa: E731
        return CheckpointRecord(
            row["checkpoint_id"], row["epoch"], row["kind"], row["status"], row["run_id"],
            row["duration_ms"] or 0, row["state_bytes"] or 0, row["state_rows"] or 0,
            loads(row["source_offsets"], {}), loads(row["watermarks"], {}), loads(row["operators"], []),
            loads(row["table_versions"], {}), row["failure"], row["external_path"],
            ts(row["started_at"]), ts(row["completed_at"]))

    def to_row(self) -> dict:
        ts = lambda v: None if v is None else int(v * 1_000_000)  # noqa: E731
        return {"checkpoint_id": self.checkpoint_id, "epoch": self.epoch, "kind": self.kind,
                "status": self.status, "run_id": self.run_id, "started_at": ts(self.started_at),
                "completed_at": ts(self.completed_at), "duration_ms": int(self.duration_ms),
                "state_bytes": self.state_bytes, "state_rows": self.state_rows,
                "source_offsets": json.dumps(self.source_offsets, default=str),
                "watermarks": json.dumps(self.watermarks), "operators": json.dumps(self.operators),
                "table_versions": json.dumps(self.table_versions), "failure": self.failure,
                "external_path": self.external_path, "recorded_at": int(time.time() * 1_000_000)}

    def files(self) -> list[str]:
        return [f["path"] for op in self.operators for f in op.get("files", ())]


def _serialized(method):
    """One thread at a time in the storage's tables: the coordinator discards subsumed
    checkpoints in the background while the job goes on, and table handles are not shared."""
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return locked


class CheckpointStorage:
    def __init__(self, job_dir: str, compact_after: int = COMPACT_AFTER_FILES,
                 log_retention_s: float = LOG_RETENTION_S):
        self.job_dir = job_dir
        self.compact_after = compact_after     # files an append-only table has before it is compacted
        self.log_retention_s = log_retention_s  # age of Delta log entries a Delta checkpoint covers, deleted
        self.epoch_log_path = join(job_dir, "epoch_log")
        self.checkpoints_path = join(job_dir, "checkpoints")
        self._epoch_log = None      # the DeltaTable this run appends to (fencing, see claim())
        self._pending_rows: list = []   # epoch log rows waiting for the next commit (metrics)
        self._log_lock = threading.Lock()   # the epoch log is written while the epoch runs (log_epoch_async)
        self._log_writer: Optional[ThreadPoolExecutor] = None
        self._checkpoints = AppendOnlyTable(self.checkpoints_path)     # read at every checkpoint
        self._latest: dict = {}     # (checkpoint id, kind, external path) -> (recorded_at, record)
        self.table_properties = own_table_properties(log_retention_s)
        self._tables = DeltaTables(self.table_properties)     # the checkpoints and state tables
        self._log_commits = 0       # epoch-log commits since its last compaction check
        self._lock = threading.RLock()

    def state_table_path(self, table: str) -> str:
        return join(self.job_dir, "state", table)

    def checkpoint_dir(self, checkpoint_id: int) -> str:
        """Where tasks write a checkpoint's state files: ``{table}`` is filled per operator."""
        return join(self.job_dir, "state", "{table}", f"checkpoint_id={checkpoint_id}")

    # ---- the checkpoints table ----------------------------------------------------------

    @_serialized
    def history(self) -> list[CheckpointRecord]:
        """Every checkpoint in its latest state, by id (savepoints as separate entries). Only the
        rows committed since the last call are parsed."""
        new, restarted = self._checkpoints.read_new()
        if restarted:
            self._latest = {}
        for row in ([] if new is None else new.to_pylist()):
            key = (row["checkpoint_id"], row["kind"], row["external_path"])
            known = self._latest.get(key)
            if known is None or row["recorded_at"] >= known[0]:
                self._latest[key] = (row["recorded_at"], CheckpointRecord.from_row(row))
        return sorted((record for _, record in self._latest.values()), key=lambda r: (r.checkpoint_id, r.kind))

    def completed(self) -> list[CheckpointRecord]:
        return [r for r in self.history() if r.status == COMPLETED and r.kind == CHECKPOINT]

    @_serialized
    def record(self, records: list[CheckpointRecord], before_commit=None) -> None:
        """Append checkpoint rows in one commit; ``before_commit`` runs once the file is staged."""
        append(self.checkpoints_path, arrow_table(CHECKPOINTS_SCHEMA, [r.to_row() for r in records]),
               before_commit=before_commit, tables=self._tables)

    @_serialized
    def compact_checkpoints(self, in_use: set, epoch: int = -1) -> Optional[list]:
        """Rewrite the checkpoints table as the latest row of each checkpoint it must still list
        (completed ones, savepoints, those whose state files ``in_use`` by a retained chain or
        not yet deleted, and the last CHECKPOINT_HISTORY others), once it has more than
        COMPACT_AFTER_FILES files; the files deleted, None when it did not."""
        clean_log(self.checkpoints_path, epoch, self.log_retention_s)
        dt = self._tables.get(self.checkpoints_path)
        if dt is None or len(dt.file_uris()) <= self.compact_after:
            return None
        records = self.history()
        others = [r for r in records if not (r.status == COMPLETED or r.kind == SAVEPOINT or r.checkpoint_id in in_use)]
        dropped = {id(r) for r in others[:-CHECKPOINT_HISTORY]}
        rows = [self._latest_row(r) for r in records if id(r) not in dropped]
        return compact_and_vacuum(dt, arrow_table(_table_schema(dt), rows), epoch)

    def _latest_row(self, record: "CheckpointRecord") -> dict:
        recorded_at, _ = self._latest[(record.checkpoint_id, record.kind, record.external_path)]
        return {**record.to_row(), "recorded_at": recorded_at}

    def max_checkpoint_id(self) -> int:
        ids = [r.checkpoint_id for r in self.history()]
        log = read_table(self.epoch_log_path)
        if log is not None:
            ids.extend(i for i in log.column("checkpoint_id").to_pylist() if i is not None)
        return max(ids, default=0)

    # ---- state tables -------------------------------------------------------------------

    @_serialized
    def commit_state(self, table: str, checkpoint_id: int, files: list) -> int:
        """Commit a checkpoint's state files of one operator; returns the table version.

        Files of an earlier attempt at the same checkpoint id (a crash before its record) are
        removed first, so the partition holds exactly this checkpoint's files.
        """
        from deltalake import DeltaTable
        from deltalake.transaction import AddAction
        path = self.state_table_path(table)
        schema = _merged_schema([f.schema for f in files])
        actions = [AddAction(relative(f.path, path), f.size, {"checkpoint_id": str(checkpoint_id)},
                             int(time.time() * 1000), True, f.stats) for f in files]
        dt = self._tables.get(path)
        if dt is None:
            self._tables.create(path, schema, actions, partition_by=["checkpoint_id"])
            return DeltaTable(path).version()
        _evolve(dt, schema, f"state table {path}")
        if any(p.get("checkpoint_id") == str(checkpoint_id) for p in dt.partitions()):
            dt.delete(f"checkpoint_id = {int(checkpoint_id)}")
        dt.create_write_transaction(actions, "append", _table_schema(dt), partition_by=["checkpoint_id"])
        dt.update_incremental()     # the transaction does not move the handle to its version
        return dt.version()

    @_serialized
    def discard_state(self, table: str, checkpoint_ids: list[int]) -> None:
        """Remove checkpoints' partitions from a state table (one commit of remove actions, no
        scan), then their folders."""
        from deltalake.transaction import RemoveAction
        path = self.state_table_path(table)
        dt = self._tables.get(path) if checkpoint_ids else None
        if dt is None:
            return
        doomed = {str(int(i)) for i in checkpoint_ids}
        now = int(time.time() * 1000)
        removes = [RemoveAction(a["path"], True, now, a["size_bytes"],
                                {"checkpoint_id": str(a["partition.checkpoint_id"])})
                   for a in pa.table(dt.get_add_actions(flatten=True)).to_pylist()
                   if str(a["partition.checkpoint_id"]) in doomed]
        if removes:
            dt.create_write_transaction(removes, "append", _table_schema(dt), partition_by=["checkpoint_id"])
            dt.update_incremental()
        for i in checkpoint_ids:
            rmtree(join(path, f"checkpoint_id={i}"))

    def clean_state_logs(self, tables: list[str], epoch: int = -1) -> None:
        """Log entries of the state tables that their latest Delta checkpoints cover (maintenance)."""
        for table in tables:
            clean_log(self.state_table_path(table), epoch, self.log_retention_s)

    # ---- the epoch log ------------------------------------------------------------------

    def claim(self, run_id: str, lease_timeout_s: float) -> None:
        """Register this run as the job's only writer, or refuse if another run holds the job.

        The run's row is committed at the exact version after what it read (Delta's optimistic
        concurrency without retries), so of two runs starting together one wins; every later
        append of this run commits the same way, so a run that was taken over stops.
        """
        from deltalake import DeltaTable
        for _ in range(3):
            holder = self.running_holder(lease_timeout_s)
            if holder is not None:
                raise JobAlreadyRunningException(already_running(self.job_dir, holder))
            own = DeltaTables(self.table_properties)
            if not DeltaTable.is_deltatable(self.epoch_log_path):
                try:
                    append(self.epoch_log_path, arrow_table(EPOCH_LOG_SCHEMA, []), create_only=True, tables=own)
                except Exception:
                    if not DeltaTable.is_deltatable(self.epoch_log_path):
                        raise
            self._epoch_log = own.get(self.epoch_log_path)
            add_new_columns(self._epoch_log, EPOCH_LOG_SCHEMA)     # a log older than its metrics column
            try:
                self._log([{"run_id": run_id, "kind": "run", "status": "RUNNING"}])
                return
            except _Fenced:
                continue
        raise JobAlreadyRunningException(f"{self.job_dir}: another run claimed the job while this one started")

    def running_holder(self, lease_timeout_s: float) -> Optional[dict]:
        log = read_table(self.epoch_log_path)
        if log is None:
            return None
        runs: dict = {}
        last_activity: dict = {}
        for row in log.sort_by([("logged_at", "ascending")]).to_pylist():
            last_activity[row["run_id"]] = row["logged_at"]
            if row["kind"] == "run":
                runs[row["run_id"]] = row
        for run_id, row in runs.items():
            if row["status"] != "RUNNING":
                continue
            if row["host"] == socket.gethostname():
                if _pid_alive(row["pid"]):
                    return {**row, "last_activity": last_activity[run_id]}
            elif time.time() - last_activity[run_id].timestamp() < lease_timeout_s:
                return {**row, "last_activity": last_activity[run_id]}
        return None

    def log_epoch(self, run_id: str, epoch: int, checkpoint_id: Optional[int], processing_time: int,
                  input_watermark: int, end_of_input: bool, plan: dict) -> None:
        readable = {uid: [[r.split_id, r.start, r.end] for r in reads] for uid, reads in plan.items()}
        self._log([{"run_id": run_id, "kind": "epoch", "epoch": epoch, "checkpoint_id": checkpoint_id,
                    "processing_time": processing_time, "input_watermark": input_watermark,
                    "end_of_input": end_of_input, "splits": json.dumps(readable, default=str),
                    "plan": pickle.dumps(plan, protocol=5)}])
        self._log_commits += 1
        if self._log_commits >= self.compact_after:
            self._log_commits = 0
            self.compact_epoch_log(epoch)

    def compact_epoch_log(self, epoch: int = -1) -> Optional[list]:
        """Rewrite the epoch log as the rows its readers need (``epoch_log_rows_to_keep``), by
        the run that holds the job, at exactly the version it read (a run taken over meanwhile
        changes nothing), after cleaning its Delta log; the files deleted, None when it did not."""
        with self._log_lock:
            if self._epoch_log is None:
                return None
            clean_log(self.epoch_log_path, epoch, self.log_retention_s)
            self._epoch_log.update_incremental()
            log = read_table(self.epoch_log_path)
            if log is None:
                return None
            rows = log.sort_by([("logged_at", "ascending")]).to_pylist()
            kept = epoch_log_rows_to_keep(rows, self.completed())
            if len(kept) == len(rows) and len(self._epoch_log.file_uris()) <= 1:
                return None
            return compact_and_vacuum(self._epoch_log, arrow_table(log.schema, kept), epoch)

    def log_epoch_async(self, *args) -> Future:
        """``log_epoch`` on a thread of its own, while the epoch's tasks run: the write-ahead
        record must be committed before anything the epoch produced is (its sinks' output, its
        checkpoint), not before its tasks start. Its future raises what the commit raised (a run
        that was taken over is fenced off here)."""
        if self._log_writer is None:
            self._log_writer = ThreadPoolExecutor(1, thread_name_prefix="sluice-epoch-log")
        return self._log_writer.submit(self.log_epoch, *args)

    def log_metrics(self, run_id: str, epoch: int, checkpoint_id: Optional[int], metrics: dict) -> None:
        """What the epoch measured, once it ran (its plan was logged before): EpochSummary's fields.
        Logged with the next row this run logs (the next epoch's plan, or the run's end), not in a
        commit of its own: a commit per epoch less, and metrics are not needed for a restore."""
        with self._log_lock:
            self._pending_rows.append({"run_id": run_id, "kind": "metrics", "epoch": epoch,
                                       "checkpoint_id": checkpoint_id, "metrics": json.dumps(metrics, default=str)})

    def epoch_metrics(self, run_id: Optional[str] = None, every_run: bool = False) -> list[dict]:
        """The logged metrics of a run's epochs (by default the latest run that logged any; with
        ``every_run``, of every run the log keeps), oldest first."""
        log = read_table(self.epoch_log_path)
        if log is None or "metrics" not in log.column_names:
            return []
        rows = [r for r in log.sort_by([("logged_at", "ascending")]).to_pylist() if r["kind"] == "metrics"]
        if run_id is None and rows:
            run_id = rows[-1]["run_id"]
        return [{"run_id": r["run_id"], **json.loads(r["metrics"])} for r in rows if every_run or r["run_id"] == run_id]

    def release(self, run_id: str, status: str) -> None:
        if self._log_writer is not None:
            self._log_writer.shutdown()     # an epoch's log being written goes first
            self._log_writer = None
        if self._epoch_log is not None:
            try:
                self._log([{"run_id": run_id, "kind": "run", "status": status}])
            except _Fenced:
                pass
            self._epoch_log = None

    def log_start(self, run_id: str, first_checkpoint_id: int) -> None:
        """A fresh start (the job's first run, or ``--restore-from none``), logged before its first
        epoch: its epochs replay from here until it completes a checkpoint, and ``latest`` no
        longer restores checkpoints before ``first_checkpoint_id`` (an earlier lineage)."""
        self._log([{"run_id": run_id, "kind": "start", "epoch": 0, "checkpoint_id": first_checkpoint_id}])

    def lineage_start(self) -> Optional[int]:
        """The first checkpoint id of the job's latest fresh start (None: never logged one)."""
        log = read_table(self.epoch_log_path)
        if log is None:
            return None
        starts = [r for r in log.sort_by([("logged_at", "ascending")]).to_pylist() if r["kind"] == "start"]
        return starts[-1]["checkpoint_id"] if starts else None

    def latest_lineage(self) -> list[CheckpointRecord]:
        """The completed checkpoints ``latest`` may restore: those since the last fresh start."""
        first = self.lineage_start() or 0
        return [r for r in self.completed() if r.checkpoint_id >= first]

    def logged_epochs(self, after_epoch: int, checkpoint_id: Optional[int]) -> list[dict]:
        """Logged plans of the epochs that followed checkpoint ``checkpoint_id`` (at ``after_epoch``),
        or with ``checkpoint_id`` None those of the latest fresh start (from epoch 0).

        Only entries logged after the epoch that took the checkpoint (or the start) count: its
        lineage; of an epoch planned several times the latest plan wins, and a gap ends the replay.
        """
        log = read_table(self.epoch_log_path)
        if log is None:
            return []
        rows = log.sort_by([("logged_at", "ascending")]).to_pylist()
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

    def _log(self, rows: list[dict]) -> None:
        from deltalake import CommitProperties, write_deltalake
        host, pid = socket.gethostname(), os.getpid()
        with self._log_lock:
            rows, self._pending_rows = self._pending_rows + rows, []
            table = arrow_table(EPOCH_LOG_SCHEMA, [{**r, "host": host, "pid": pid, "logged_at": int(time.time() * 1e6)}
                                                   for r in rows])
            try:
                write_deltalake(self._epoch_log, table, mode="append",
                                commit_properties=CommitProperties(max_commit_retries=0))
            except Exception as e:
                if type(e).__name__ == "CommitFailedError":     # another writer took the version
                    raise _Fenced(str(e)) from e
                raise


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


class _Fenced(JobAlreadyRunningException):
    pass


def already_running(job_dir: str, holder: dict) -> str:
    return (f"Job at {job_dir} is already running: run {holder['run_id']} (pid {holder['pid']} on "
            f"{holder['host']}, last active {holder['last_activity']}). Two runs of one job would "
            f"write the same checkpoints and sinks, so this one is refused. Stop the other run first "
            f"(Ctrl-C, or kill {holder['pid']}); a crashed run on this host is detected at once, "
            f"one on another host after the lease timeout (sluice.lease-timeout).")


def _pid_alive(pid) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:    # a killed process not yet reaped by its parent is gone for our purpose
        with open(f"/proc/{int(pid)}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return True



def _merged_schema(schemas: list) -> pa.Schema:
    fields: dict = {}
    for s in schemas:
        for f in s:
            if f.name in fields and not fields[f.name].type.equals(f.type):
                raise CheckpointException(
                    f"state column {f.name} has type {fields[f.name].type} in one snapshot file and {f.type} "
                    f"in another: give the state a declared type (or a new name) that all subtasks agree on")
            fields.setdefault(f.name, f.with_nullable(True))
    return pa.schema(list(fields.values()) + [pa.field("checkpoint_id", pa.int64())])


def _table_schema(dt) -> pa.Schema:
    return pa.schema(dt.schema().to_arrow())


def _evolve(dt, schema: pa.Schema, what: str) -> None:
    """Add the columns a new state brings; a state whose stored type changed is refused."""
    from deltalake import Schema
    current = _table_schema(dt)
    missing = []
    for f in schema:
        if f.name not in current.names:
            missing.append(f)
        elif not _compatible(current.field(f.name).type, f.type):
            raise CheckpointException(
                f"{what}: column {f.name} is stored as {current.field(f.name).type}, now written as "
                f"{f.type}. A state's type cannot change in place (Flink's StateMigrationException): "
                f"keep the declared type, or give the state a new name.")
    if missing:
        dt.alter.add_columns(list(Schema.from_arrow(pa.schema(missing)).fields))


def _compatible(stored: pa.DataType, written: pa.DataType) -> bool:
    norm = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary(), pa.string_view(): pa.string(),
            pa.binary_view(): pa.binary()}
    return norm.get(stored, stored) == norm.get(written, written) or str(stored) == str(written)
