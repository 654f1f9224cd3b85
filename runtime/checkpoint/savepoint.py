"""Savepoints and reading state (Flink's savepoints and State Processor API).

A savepoint is a self-contained copy of a completed checkpoint: ``_metadata.json`` (the
checkpoint record) and ``state/<table>/``, each a Delta table of its own, so it survives
checkpoint retention and can be moved, read or restored anywhere. Reading a checkpoint's
state gives its rows with keys, namespaces and values decoded.
"""
from __future__ import annotations

import dataclasses
import json
import time
from typing import Optional

import pyarrow.compute as pc

from runtime.checkpoint.restore import METADATA, RestorePoint, choose, load_savepoint
from runtime.state.snapshot_format import OPERATOR_PREFIX, TIMER_PREFIX, decode_keys, decode_values, state_types
from runtime.state.snapshot_reader import read_state_file, recorded_schema
from runtime.checkpoint.checkpoint_record import SAVEPOINT, CheckpointException
from runtime.checkpoint.state_tables import merged_schema
from runtime.checkpoint.storage import CheckpointStorage
from runtime.storage.filesystems import absolute, check_writable, copy_file, exists, join, size, write_bytes


def take_savepoint(storage: CheckpointStorage, target: Optional[str] = None,
                   checkpoint: Optional[int] = None) -> str:
    """Copy a completed checkpoint (the latest, or ``checkpoint``) into ``target``; returns it."""
    point = choose(storage, checkpoint if checkpoint is not None else "latest")
    if point is None:
        raise CheckpointException(f"{storage.job_dir}: no completed checkpoint to take a savepoint from; "
                                  f"run the job with checkpointing enabled first")
    record = point.record
    target = absolute(target or join(storage.job_dir, "savepoints",
                                     f"savepoint-{record.checkpoint_id}-{time.strftime('%Y%m%dT%H%M%S')}"))
    check_writable(target, "the savepoint's target (--target)")
    if exists(join(target, METADATA)):
        raise CheckpointException(f"{target} already holds a savepoint: choose another --target")
    for op in (op for op in record.operators if op["files"]):
        copy_operator_state(storage.state.table_path(op["table"]), op, target, record.checkpoint_id)
    saved = dataclasses.replace(record, kind=SAVEPOINT, external_path=target)
    write_savepoint_metadata(target, saved)
    storage.checkpoints.record([saved])
    return target


def copy_operator_state(source_table: str, op: dict, target: str, checkpoint_id: int) -> None:
    """Copy an operator's state files (``op["files"]``, relative to ``source_table``) into the
    savepoint ``target``'s state table of the operator."""
    table_dir = join(target, "state", op["table"])
    for f in op["files"]:
        copy_file(join(source_table, f["path"]), join(table_dir, f["path"]))
    # The files' own columns, not the source table's: its commits follow the checkpoint's record.
    schema = merged_schema([recorded_schema(join(table_dir, f["path"])) for f in op["files"]])
    commit_state_table(table_dir, schema, op["files"], checkpoint_id)


def commit_state_table(table_dir: str, schema, files: list[dict], checkpoint_id: int) -> None:
    """Make ``table_dir`` the Delta table of the state files ``files`` (in it, relative paths),
    one partition ``checkpoint_id``."""
    from deltalake import Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions
    actions = [AddAction(f["path"], size(join(table_dir, f["path"])), {"checkpoint_id": str(checkpoint_id)},
                         int(time.time() * 1000), True, json.dumps({"numRecords": f["rows"]})) for f in files]
    create_table_with_add_actions(table_dir, Schema.from_arrow(schema), actions, mode="error",
                                  partition_by=["checkpoint_id"])


def write_savepoint_metadata(target: str, record) -> None:
    """Written last and whole: a folder without it is no savepoint."""
    write_bytes(join(target, METADATA), json.dumps(dataclasses.asdict(record), indent=1, default=str).encode())


def read_state(storage: CheckpointStorage, operator: str, checkpoint: Optional[str] = None) -> list[dict]:
    """The rows of one operator's state in a checkpoint (latest by default) or savepoint path.

    ``operator`` is the operator's uid (or its state table's name, or its operator id).
    """
    point: RestorePoint = (load_savepoint(checkpoint) if checkpoint and not str(checkpoint).isdigit()
                           else choose(storage, checkpoint or "latest"))
    if point is None:
        raise CheckpointException(f"{storage.job_dir}: no completed checkpoint")
    ops = [op for op in point.record.operators if operator in (op.get("uid"), op["table"], op["operator_id"])]
    if not ops:
        known = ", ".join(sorted(op.get("uid") or op["table"] for op in point.record.operators if op["files"]))
        raise CheckpointException(f"checkpoint {point.record.checkpoint_id} has no state of operator "
                                  f"{operator!r}; operators with state: {known}")
    # The files are the operator's chain: a full snapshot, then increments whose rows replace
    # (or, deleted, remove) an entry of an earlier file; the result is the state as it stands.
    rows: dict = {}
    for f in (f for f in point.files() if f["operator_id"] == ops[0]["operator_id"]):
        table = read_state_file(f["path"], checksum=f.get("checksum"))
        types = state_types(table)
        keys = decode_keys(table)
        values = _values(table, types)
        deleted = (table.column("deleted").fill_null(False).to_pylist() if "deleted" in table.column_names
                   else [False] * table.num_rows)
        for i, r in enumerate(table.select(["subtask", "key_group", "state_name", "namespace", "timestamp"])
                              .to_pylist()):
            name = r["state_name"]
            kind = ("timer" if name.startswith(TIMER_PREFIX) else
                    "operator" if r["key_group"] is None else "keyed")
            if name.startswith(OPERATOR_PREFIX):
                name = name[len(OPERATOR_PREFIX):]
            entry = (kind, name, r["namespace"], _hashable(keys[i]),
                     r["timestamp"] if kind == "timer" else r["subtask"] if kind == "operator" else None, i)
            if kind != "operator":
                entry = entry[:-1]      # keyed entries and timers are unique; operator rows are lists
            if deleted[i]:
                rows.pop(entry, None)
            else:
                rows[entry] = {"kind": kind, "state": name, "key_group": r["key_group"], "key": keys[i],
                               "namespace": r["namespace"],
                               "value": r["timestamp"] if kind == "timer" else values[i],
                               "subtask": r["subtask"]}
    return list(rows.values())


def _hashable(key):
    try:
        hash(key)
        return key
    except TypeError:
        return repr(key)


def _values(table, types: dict) -> list:
    """Each row's value, in row order (rows of different states interleave in a file)."""
    out = [None] * table.num_rows
    names = table.column("state_name")
    for name in names.unique().to_pylist():
        idx = pc.indices_nonzero(pc.equal(names, name))
        for i, v in zip(idx.to_pylist(), decode_values(table.take(idx), name, types)):
            out[i] = v
    return out
