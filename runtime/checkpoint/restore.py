"""Restoring a job from a checkpoint or savepoint, at the same or another parallelism.

Choosing the checkpoint (the latest completed one, a given id, or a savepoint path; an
unreadable one falls back to the previous with a warning), checking it fits the job (state
mapped to operators by uid, max parallelism unchanged), and assigning its files to the new
subtasks: keyed state by key-group range, operator state to every subtask.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Optional, Union

import pyarrow.parquet as pq

from runtime.checkpoint.state_table import SOURCE_STATE, read_state_file, table_to_snapshot
from runtime.checkpoint.storage import COMPLETED, SAVEPOINT, CheckpointException, CheckpointRecord, CheckpointStorage
from runtime.graph.job_graph import JobGraph
from runtime.state.key_groups import compute_key_group_range_for_operator_index
from runtime.task.stream_task import RestoredState

METADATA = "_metadata.json"


@dataclass(frozen=True)
class RestorePoint:
    record: CheckpointRecord
    root: str                   # the folder holding state/<uid>/ (the job's, or a savepoint's)

    def files(self) -> list[dict]:
        """Every state file of the checkpoint, with its operator id and absolute path."""
        return [{**f, "operator_id": op["operator_id"], "path": os.path.join(self.root, "state", op["table"], f["path"])}
                for op in self.record.operators for f in op.get("files", ())]


def load_savepoint(path: str) -> RestorePoint:
    meta = os.path.join(path, METADATA)
    if not os.path.isfile(meta):
        raise CheckpointException(f"{path} is not a savepoint: it has no {METADATA}. Pass the folder "
                                  f"`sluice savepoint` printed.")
    with open(meta) as f:
        row = json.load(f)
    return RestorePoint(CheckpointRecord(**row), path)


def validate(point: RestorePoint) -> None:
    """Every file the checkpoint refers to exists and is readable Parquet."""
    what = (f"savepoint {point.root}" if point.record.kind == SAVEPOINT
            else f"checkpoint {point.record.checkpoint_id}")
    for f in point.files():
        try:
            pq.read_metadata(f["path"])
        except FileNotFoundError:
            raise CheckpointException(f"{what}: state file {f['path']} is missing") from None
        except Exception as e:
            raise CheckpointException(f"{what}: state file {f['path']} is corrupt ({e})") from None


def choose(storage: CheckpointStorage, restore_from: Union[str, int], warn=None) -> Optional[RestorePoint]:
    """The restore point for ``restore_from``: "latest", a checkpoint id, or a savepoint path.

    A checkpoint with a missing or corrupt file is reported and skipped for the previous
    complete one, so nothing has to be deleted by hand. None when there is no checkpoint.
    """
    warn = warn or (lambda msg: print(f"WARNING: {msg}", file=sys.stderr, flush=True))
    if isinstance(restore_from, str) and restore_from not in ("latest",) and not restore_from.isdigit():
        point = load_savepoint(restore_from)
        validate(point)
        return point
    # "latest" is the newest checkpoint since the job last started over (restore_from=none).
    completed = storage.latest_lineage() if restore_from == "latest" else storage.completed()
    if restore_from != "latest":
        wanted = int(restore_from)
        known = {r.checkpoint_id: r for r in storage.history() if r.kind != SAVEPOINT}
        if wanted not in known:
            ids = ", ".join(str(r.checkpoint_id) for r in completed) or "none"
            raise CheckpointException(f"{storage.job_dir}: there is no checkpoint {wanted} (completed: {ids})")
        if known[wanted].status != COMPLETED:
            raise CheckpointException(
                f"checkpoint {wanted} is {known[wanted].status}"
                + (f" ({known[wanted].failure})" if known[wanted].failure else "")
                + ": only completed checkpoints can be restored")
        completed = [r for r in completed if r.checkpoint_id <= wanted]
    for record in reversed(completed):
        point = RestorePoint(record, storage.job_dir)
        try:
            validate(point)
            return point
        except CheckpointException as e:
            earlier = [r.checkpoint_id for r in completed if r.checkpoint_id < record.checkpoint_id]
            warn(f"{e}; " + (f"falling back to checkpoint {earlier[-1]}" if earlier else
                             "no earlier complete checkpoint, starting without state"))
    return None


def check_compatibility(point: RestorePoint, job_graph: JobGraph, allow_non_restored_state: bool) -> None:
    nodes = {n.operator_id: (v, n) for v in job_graph.vertices for n in v.operators}
    what = (f"savepoint {point.root}" if point.record.kind == SAVEPOINT
            else f"checkpoint {point.record.checkpoint_id}")
    for op in point.record.operators:
        found = nodes.get(op["operator_id"])
        if found is None:
            if allow_non_restored_state or not op.get("files"):   # Flink skips operators without state
                continue
            raise CheckpointException(
                f"Failed to rollback to {what}. Cannot map checkpoint/savepoint state for operator "
                f"{op['uid'] or op['operator_id']} ({op.get('name')}) to the new program, because the operator is not available "
                f"in the new program. Give the operator its old uid, or set allow_non_restored_state "
                f"(sluice restore --allow-non-restored-state) to skip this state.")
        v, _ = found
        if op.get("keyed") and op["max_parallelism"] != v.max_parallelism:
            raise CheckpointException(
                f"Failed to rollback to {what}: the maximum parallelism ({op['max_parallelism']}) with which "
                f"the state of {v.name} (uid {op['uid'] or op['operator_id']}) was checkpointed and its current maximum "
                f"parallelism ({v.max_parallelism}) differ. Key groups cannot be re-split: set "
                f"max parallelism back to {op['max_parallelism']} (set_max_parallelism).")


def assign_state(files: list[dict], parallelism: dict, job_graph: JobGraph) -> dict:
    """RestoredState per (vertex id, subtask): the files overlapping each subtask's key groups.

    ``files`` are dicts with operator_id, path, key_group_min/max; ``parallelism`` maps an
    operator id to the parallelism its state was written at.
    """
    by_operator: dict[str, list] = {}
    for f in files:
        by_operator.setdefault(f["operator_id"], []).append(f)
    out = {}
    for v in job_graph.vertices:
        ids = [n.operator_id for n in v.operators if n.operator_id in by_operator]
        if not ids:
            continue
        for s in range(v.parallelism):
            kgr = (compute_key_group_range_for_operator_index(v.max_parallelism, v.parallelism, s)
                   if v.is_keyed else None)
            chosen = {}
            for uid in ids:
                paths = []
                for f in by_operator[uid]:
                    lo, hi = f.get("key_group_min"), f.get("key_group_max")
                    if kgr is not None and lo is not None and (hi < kgr.start_key_group or lo > kgr.end_key_group):
                        continue
                    if kgr is None and parallelism.get(uid) == v.parallelism and f.get("subtask") not in (s, None):
                        continue    # same parallelism, no key groups: each subtask takes its own
                    paths.append(f["path"])
                chosen[uid] = tuple(paths)
            out[(v.id, s)] = RestoredState(chosen, {uid: parallelism.get(uid) for uid in ids})
    return out


def source_positions(point: RestorePoint) -> dict:
    """Source uid -> split positions, from the sources' SourceReaderState list state."""
    out: dict = {}
    for f in point.files():
        if not f.get("source_state"):
            continue
        state = table_to_snapshot([read_state_file(f["path"])])["operator_state"].get(SOURCE_STATE, [])
        out.setdefault(f["operator_id"], {}).update(dict(v for _, v in state))
    return out
