"""The job's state tables, ``<job>/state/<table>/``: one Delta table per stateful operator,
partitioned by checkpoint_id, where tasks write a checkpoint's snapshot files and the coordinator
commits and discards them.

A lock per table: the coordinator commits and discards on its background threads, a Delta table
handle is not shared between threads, and a checkpoint commits its tables at once.

The run that holds the job's lease is its state tables' only writer: each table's handle is read
from the log once, then moved on by this writer's own commits alone (``update_incremental`` after
each), never listed again before a commit. A checkpoint's state commits and its retention's
discards listed every table's log twice more each (4 log listings a checkpoint for a job with
two stateful operators, bench/epoch_floor.py). A commit returns as soon as it is in the log, its
version the one after the handle's (no other writer, the table's lock held); the handle catches
up with it later (``DeltaTables.catch_up_later``).
"""
from __future__ import annotations

import json
import threading
import time

import pyarrow as pa

from runtime.checkpoint.checkpoint_record import CheckpointException
from runtime.checkpoint.incremental import partition_of
from runtime.state.snapshot_reader import recorded_schema
from runtime.state.snapshot_writer import StateFile
from runtime.storage.delta_files import DeltaTables
from runtime.storage.filesystems import join, relative, rmtree
from runtime.storage.maintenance import LOG_RETENTION_S, clean_log, own_table_properties


class StateTables:
    def __init__(self, job_dir: str, log_retention_s: float = LOG_RETENTION_S):
        self.root = join(job_dir, "state")
        self.log_retention_s = log_retention_s
        self._tables = DeltaTables(own_table_properties(log_retention_s))
        self._lock = threading.Lock()      # guards _locks
        self._locks: dict = {}              # table path -> its lock

    def _lock_of(self, path: str) -> threading.RLock:
        with self._lock:
            return self._locks.setdefault(path, threading.RLock())

    def table_path(self, table: str) -> str:
        return join(self.root, table)

    def checkpoint_dir(self, checkpoint_id: int) -> str:
        """Where tasks write a checkpoint's state files: ``{table}`` is filled per operator."""
        return join(self.root, "{table}", f"checkpoint_id={checkpoint_id}")

    def commit(self, table: str, files_by_checkpoint: dict) -> None:
        """Commit checkpoints' state files of one operator (``{checkpoint id: its files}``), one
        Delta commit for them all.

        Files of an earlier attempt at the same checkpoint id (a run of an older Sluice killed
        between this commit and its record) are removed first, so the partition holds exactly this
        checkpoint's files.
        """
        from deltalake.transaction import AddAction
        path = self.table_path(table)
        files = [f for fs in files_by_checkpoint.values() for f in fs]
        schema = merged_schema([f.schema for f in files])
        now = int(time.time() * 1000)
        actions = [AddAction(relative(f.path, path), f.size, {"checkpoint_id": str(cid)}, now, True, f.stats)
                   for cid, fs in files_by_checkpoint.items() for f in fs]
        with self._lock_of(path):
            dt = self._tables.get(path, refresh=False)
            if dt is None:
                self._tables.create(path, schema, actions, partition_by=["checkpoint_id"])
                return
            _evolve(dt, schema, f"state table {path}")
            ids = {str(cid) for cid in files_by_checkpoint}
            again = sorted(int(p["checkpoint_id"]) for p in dt.partitions() if p.get("checkpoint_id") in ids)
            if again:
                dt.delete(" OR ".join(f"checkpoint_id = {cid}" for cid in again))
            dt.create_write_transaction(actions, "append", _table_schema(dt), partition_by=["checkpoint_id"])
            self._tables.catch_up_later(path, self._lock_of(path))

    def catch_up(self, records: list) -> list[tuple[str, int]]:
        """Commit the partitions that completed checkpoints' (``records``) files are in and their
        state tables lack: a checkpoint's state commits follow its record, off the epoch's path,
        so a run killed in between (or a failed commit) leaves them out, and an incremental
        checkpoint also reads files of the earlier checkpoints its chains started in. The record
        lists every file with its size and rows; each file's footer gives its columns. Returns
        the (table, checkpoint id) committed."""
        wanted: dict = {}       # table -> checkpoint id -> path -> (operator id, the listed file)
        for r in records:
            for op in r.operators:
                for f in op.get("files", ()):
                    cid = partition_of(f["path"])
                    if cid is not None:
                        cid = int(cid)
                        wanted.setdefault(op["table"], {}).setdefault(cid, {})[f["path"]] = (op["operator_id"], f)
        done = []
        for table, by_id in sorted(wanted.items()):
            path = self.table_path(table)
            with self._lock_of(path):
                dt = self._tables.get(path, refresh=False)
                have = {p.get("checkpoint_id") for p in dt.partitions()} if dt is not None else set()
            missing = {cid: [_listed_file(path, op_id, f) for op_id, f in files.values()]
                       for cid, files in sorted(by_id.items()) if str(cid) not in have}
            if missing:
                self.commit(table, missing)
                done += [(table, cid) for cid in missing]
        return done

    def discard(self, table: str, checkpoint_ids: list[int]) -> None:
        """Remove checkpoints' partitions from a state table (one commit of remove actions, no
        scan), then their folders."""
        from deltalake.transaction import RemoveAction
        path = self.table_path(table)
        with self._lock_of(path):
            dt = self._tables.get(path, refresh=False) if checkpoint_ids else None
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

    def clean_logs(self, tables: list[str], epoch: int = -1) -> None:
        """Log entries of the state tables that their latest Delta checkpoints cover (maintenance)."""
        for table in tables:
            clean_log(self.table_path(table), epoch, self.log_retention_s)


def _listed_file(table_path: str, operator_id: str, f: dict) -> StateFile:
    """A file as its checkpoint's record lists it, as the task that wrote it acknowledged it."""
    path = join(table_path, f["path"])
    return StateFile(operator_id, f.get("subtask") or 0, path, f["size"], f["rows"], f.get("key_group_min"),
                     f.get("key_group_max"), recorded_schema(path), json.dumps({"numRecords": f["rows"]}),
                     f.get("checksum") or "", bool(f.get("increment")))


def merged_schema(schemas: list) -> pa.Schema:
    """A state table's columns for files of ``schemas``: each column once, nullable, and the
    partition column; a column two files type otherwise is refused."""
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
        dt.update_incremental()     # the handle at the new schema's version, for the commit after


def _compatible(stored: pa.DataType, written: pa.DataType) -> bool:
    norm = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary(), pa.string_view(): pa.string(),
            pa.binary_view(): pa.binary()}
    return norm.get(stored, stored) == norm.get(written, written) or str(stored) == str(written)
