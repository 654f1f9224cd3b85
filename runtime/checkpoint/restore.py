"""Restoring a job from a checkpoint or savepoint, at the same or another parallelism.

Choosing the checkpoint (the latest completed one, a given id, or a savepoint path; a
damaged one is marked INVALID and falls back to the previous with a warning), checking it
fits the job (state mapped to operators by uid, max parallelism unchanged), and assigning its
files to the new subtasks: keyed state by key-group range, operator state to every subtask.

A state file is trusted when it is the file its checkpoint recorded. Before anything runs,
cheap checks (it exists, has the recorded size, ends in a Parquet footer) find missing and
truncated files; its bytes are verified against the recorded SHA-256 where a restore reads
them anyway (the tasks, the driver for source positions), so nothing is read twice. Either
way the checkpoint becomes INVALID (kept on disk, never restored, never retained) and the
restore falls back to the previous retained one, never past the oldest into a fresh start.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass
from typing import Optional, Union

import pyarrow.parquet as pq
from pyarrow.fs import FileType

from runtime.state.snapshot_format import SOURCE_STATE
from runtime.state.key_regrouping import KeyRegrouping, KeyTypeMismatchException, key_type_name
from runtime.state.snapshot_reader import DeferredPart, read_state_file, read_state_parts, table_to_snapshot
from runtime.checkpoint.checkpoint_record import (
    CHECKPOINT, COMPLETED, DISCARDED, INVALID, SAVEPOINT, CheckpointException, CheckpointRecord)
from runtime.checkpoint.completed_checkpoint_store import CompletedCheckpointStore
from runtime.checkpoint.storage import CheckpointStorage
from runtime.datastream.operators import BroadcastProcessSpec
from runtime.graph.job_graph import JobGraph
from runtime.state.key_groups import KEY_HASHING, compute_key_group_range_for_operator_index, key_type_of
from runtime.storage.filesystems import absolute, basename, filesystem, info, isfile, join, read_bytes
from runtime.task.deployment import RestoredState

METADATA = "_metadata.json"


@dataclass(frozen=True)
class RestorePoint:
    record: CheckpointRecord
    root: str                   # the folder holding state/<uid>/ (the job's, or a savepoint's)

    def files(self) -> list[dict]:
        """Every state file of the checkpoint, with its operator id, absolute path and, for keyed
        state, the key type its keys were hashed with when recorded (``key_type``)."""
        return [{**f, "operator_id": op["operator_id"], "path": join(self.root, "state", op["table"], f["path"]),
                 **({"key_type": f.get("key_type") or op["key_type"]} if op.get("key_type") else {})}
                for op in self.record.operators for f in op.get("files", ())]


def load_savepoint(path: str) -> RestorePoint:
    meta = join(path, METADATA)
    if not isfile(meta):
        raise CheckpointException(f"{path} is not a savepoint: it has no {METADATA}. Pass the folder "
                                  f"`sluice savepoint` printed.")
    return RestorePoint(CheckpointRecord(**json.loads(read_bytes(meta))), path)


class NoUsableCheckpointException(CheckpointException):
    """Every retained checkpoint is damaged: starting without state would write again what the
    sinks already hold, so the run refuses. ``damage`` says what is wrong, per checkpoint;
    ``sinks`` (added by who knows the job's sinks) hold its committed output."""

    def __init__(self, job: str, damage: list[str], sinks: Optional[list[str]] = None):
        self.job, self.damage, self.sinks = job, damage, sinks
        if sinks:
            held = (f" These sinks hold the job's committed output and would receive everything again: "
                    f"{', '.join(sinks)}.")
        else:       # no Delta sink (or not known here): the checkpoints still say work was committed
            held = " The epoch log holds committed epochs of the job." if sinks is not None else ""
        super().__init__(
            f"Cannot restore job {job}: every retained checkpoint is damaged ({'; '.join(damage)}).{held} "
            f"To start over deliberately, run with --restore-from none (Airflow: restore_from=none); to resume "
            f"from a savepoint, pass its path.")

    def naming(self, job: str, sinks: list[str]) -> "NoUsableCheckpointException":
        """The same refusal with the job's name and the sinks holding its committed output."""
        return NoUsableCheckpointException(job, self.damage, sinks)


def damage(point: RestorePoint) -> list[str]:
    """What cheap checks find wrong with the point's files: missing, another size than
    recorded (cut short or overwritten), or no Parquet footer. Bytes changed in place are
    found by the checksum when the file is read (read_state_file)."""
    found = []
    for f in point.files():
        path = f["path"]
        found_file = info(path)
        if found_file.type != FileType.File:
            found.append(f"state file {path} is missing")
        elif f.get("size") is not None and found_file.size != f["size"]:
            found.append(f"state file {path} is corrupt ({found_file.size} bytes, the checkpoint "
                         f"wrote {f['size']})")
        else:
            try:
                fs, inside = filesystem(path)
                pq.read_metadata(inside, filesystem=fs)
            except Exception as e:
                found.append(f"state file {path} is corrupt ({e})")
    return found


def _what(point: RestorePoint) -> str:
    return (f"savepoint {point.root}" if point.record.kind == SAVEPOINT
            else f"checkpoint {point.record.checkpoint_id}")


def validate(point: RestorePoint) -> None:
    """Every file the point refers to exists and is the file the checkpoint wrote."""
    found = damage(point)
    if found:
        raise CheckpointException(f"{_what(point)}: " + "; ".join(found))


def choose(storage: CheckpointStorage, restore_from: Union[str, int], warn=None) -> Optional[RestorePoint]:
    """The restore point for ``restore_from``: "latest", a checkpoint id, or a savepoint path.

    A checkpoint the cheap checks find damaged (``damage``) is marked INVALID, never deleted,
    and ``latest`` falls back to the previous one; if every retained checkpoint is damaged,
    NoUsableCheckpointException. None when there is no checkpoint. An explicit id restores
    that checkpoint or fails: it is never swapped for another.
    """
    warn = warn or print_warning
    if isinstance(restore_from, str) and restore_from not in ("latest",) and not restore_from.isdigit():
        point = load_savepoint(restore_from)
        validate(point)
        return point
    if restore_from != "latest":
        wanted = int(restore_from)
        known = {r.checkpoint_id: r for r in storage.checkpoints.history() if r.kind != SAVEPOINT}
        if wanted not in known:
            ids = ", ".join(str(r.checkpoint_id) for r in storage.checkpoints.completed()) or "none"
            raise CheckpointException(f"{storage.job_dir}: there is no checkpoint {wanted} (completed: {ids})")
        if known[wanted].status != COMPLETED:
            raise CheckpointException(
                f"checkpoint {wanted} is {known[wanted].status}"
                + (f" ({known[wanted].failure})" if known[wanted].failure else "")
                + ": only completed checkpoints can be restored")
        point = RestorePoint(known[wanted], storage.job_dir)
        found = damage(point)
        if found:
            invalidate(storage, point.record, found)
            raise CheckpointException(f"checkpoint {wanted} is damaged, now marked INVALID: " + "; ".join(found))
        return point
    # "latest" is the newest checkpoint since the job last started over (restore_from=none).
    for record in reversed(storage.latest_lineage()):
        point = RestorePoint(record, storage.job_dir)
        found = damage(point)
        if not found:
            return point
        invalidate(storage, record, found, warn)
    # Damaged retained checkpoints (found now or by an earlier run; retention discarded the older
    # ones) and no usable one: a fresh start would write again what they had committed.
    first = storage.epoch_log.lineage_start() or 0
    history = [r for r in storage.checkpoints.history() if r.kind == CHECKPOINT and r.checkpoint_id >= first]
    oldest = max((r.checkpoint_id for r in history if r.status == DISCARDED), default=-1)
    damaged = [f"checkpoint {r.checkpoint_id}: {r.failure}" for r in history
               if r.status == INVALID and r.checkpoint_id > oldest]
    if damaged:
        raise NoUsableCheckpointException(basename(storage.job_dir), damaged)
    return None


def print_warning(message: str) -> None:
    logging.getLogger(__name__).warning("%s", message)


def invalidate(storage: CheckpointStorage, record: CheckpointRecord, found: list[str], warn=None) -> None:
    """Mark a damaged checkpoint INVALID: kept for inspection, never restored, never retained.
    ``warn`` is told which checkpoint ``latest`` falls back to, if there is one."""
    storage.checkpoints.record([dataclasses.replace(record, status=INVALID, failure="; ".join(found))])
    earlier = [r.checkpoint_id for r in storage.latest_lineage() if r.checkpoint_id < record.checkpoint_id]
    if warn and earlier:
        warn(f"checkpoint {record.checkpoint_id}: {'; '.join(found)}; marked INVALID, "
             f"falling back to checkpoint {earlier[-1]}")


def damaged_checkpoints(checkpoints: CompletedCheckpointStore, job_dir: str, damaged_files: dict) -> list[tuple]:
    """(record, what is wrong) of each completed checkpoint holding one of ``damaged_files``
    (path -> message), as a restore or a running job found them."""
    if not damaged_files:
        return []
    wrong = {absolute(p): what for p, what in damaged_files.items()}
    out = []
    for record in checkpoints.completed():
        paths = [absolute(f["path"]) for f in RestorePoint(record, job_dir).files()]
        found = [wrong[p] for p in paths if p in wrong]
        if found:
            out.append((record, found))
    return out


def check_compatibility(point: RestorePoint, job_graph: JobGraph, allow_non_restored_state: bool) -> None:
    nodes = job_graph.by_operator_id
    what = _what(point)
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
        v, n = found
        if (op.get("keyed") and op.get("files") and op.get("key_hashing") != KEY_HASHING
                and any(key_type_of(k) is not None for k in n.state_key_selectors)):
            # Written before keys were hashed as PyFlink does: its key groups are not those
            # the records of the same keys now reach.
            raise CheckpointException(
                f"Failed to rollback to {what}: the state of {v.name} (uid {op['uid'] or op['operator_id']}) was "
                f"checkpointed when key_by(selector) hashed keys as their Java values; keys are now hashed "
                f"as PyFlink does (the pickled key, or the key as key_type), so that state would sit on "
                f"subtasks its keys no longer reach. Key the stream by a field instead (key_by(0) or "
                f"key_by('name'), hashed as before), or start the job without this checkpoint.")
        _check_key_types(point, op, v, n)
        if op.get("keyed") and v.parallelism > op["max_parallelism"]:
            # Flink's StateAssignmentOperation.checkParallelismPreconditions, word for word.
            raise CheckpointException(
                f"The state for the operator {op['uid'] or op['operator_id']} can not be restored. The maximum "
                f"parallelism ({op['max_parallelism']}) of the restored state is lower than the configured "
                f"parallelism ({v.parallelism}). Please reduce the parallelism of the task to be lower or equal "
                f"to the maximum parallelism.")
        if op.get("keyed") and op["max_parallelism"] != v.max_parallelism:
            raise CheckpointException(
                f"Failed to rollback to {what}: the maximum parallelism ({op['max_parallelism']}) with which "
                f"the state of {v.name} (uid {op['uid'] or op['operator_id']}) was checkpointed and its current maximum "
                f"parallelism ({v.max_parallelism}) differ. Key groups cannot be re-split: set "
                f"max parallelism back to {op['max_parallelism']} (set_max_parallelism).")


def _check_key_types(point: RestorePoint, op: dict, v, n) -> None:
    """Refuse now, before the first epoch, a keyed state whose keys were hashed with another key
    type than the job's and do not hash as the job's (the first row group of its first such file
    tried; the subtasks try every key as they restore)."""
    for f in point.files():
        regrouping = _regrouping(f, v, n) if f["operator_id"] == op["operator_id"] else None
        if regrouping is None:
            continue
        try:
            # Not verified against its checksum here (a whole read): the subtasks verify it.
            part = next(iter(read_state_parts(f["path"], None, None, regrouping)), None)
            if isinstance(part, DeferredPart):
                part.load()
        except KeyTypeMismatchException as e:
            raise CheckpointException(f"Failed to rollback to {_what(point)}: {e}") from e
        return      # one file tried: the refusal is early, the subtasks check every key


def _regrouping(f: dict, v, n) -> Optional[KeyRegrouping]:
    """How a subtask recomputes the key groups of file ``f`` of node ``n``: None when its keys
    were hashed as the job hashes them (or the checkpoint did not record how)."""
    written = f.get("key_type")
    if written is None or not n.is_keyed:
        return None
    key_type = key_type_of(n.state_key_selectors[0])
    if written == key_type_name(key_type):
        return None
    return KeyRegrouping(f"{n.operator_name} (uid {n.uid})" if n.uid else n.operator_name, written, key_type,
                         v.max_parallelism)


def assign_state(files: list[dict], parallelism: dict, job_graph: JobGraph) -> dict:
    """RestoredState per (vertex id, subtask): the files overlapping each subtask's key groups.

    ``files`` are dicts with operator_id, path, key_group_min/max and the checksum the file was
    recorded with (verified as the task reads it); ``parallelism`` maps an operator id to the
    parallelism its state was written at.
    """
    checksums = {f["path"]: f["checksum"] for f in files if f.get("checksum")}
    by_operator: dict[str, list] = {}
    for f in files:
        by_operator.setdefault(f["operator_id"], []).append(f)
    broadcasting = {n.operator_id for v in job_graph.vertices for n in v.operators
                    if isinstance(n.operator, BroadcastProcessSpec)}
    nodes = job_graph.by_operator_id
    # Keys hashed with another key type than the job's: in any key group, read by every subtask.
    regrouping = {f["path"]: r for f in files if f["operator_id"] in nodes
                  for r in [_regrouping(f, *nodes[f["operator_id"]])] if r is not None}
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
                # After a rescale a subtask takes a copy of the broadcast state (rows without a key
                # group) from an old subtask whose keys it may not share: it sees every file.
                copies = uid in broadcasting and parallelism.get(uid) != v.parallelism
                for f in by_operator[uid]:
                    lo, hi = f.get("key_group_min"), f.get("key_group_max")
                    if (kgr is not None and lo is not None and not copies and f["path"] not in regrouping
                            and (hi < kgr.start_key_group or lo > kgr.end_key_group)):
                        continue
                    if kgr is None and parallelism.get(uid) == v.parallelism and f.get("subtask") not in (s, None):
                        continue    # same parallelism, no key groups: each subtask takes its own
                    paths.append(f["path"])
                chosen[uid] = tuple(paths)
            out[(v.id, s)] = RestoredState(chosen, {uid: parallelism.get(uid) for uid in ids},
                                           {p: checksums[p] for paths in chosen.values() for p in paths
                                            if p in checksums},
                                           {p: regrouping[p] for paths in chosen.values() for p in paths
                                            if p in regrouping})
    return out


def source_positions(point: RestorePoint) -> dict:
    """Source uid -> split positions, from the sources' SourceReaderState list state."""
    out: dict = {}
    for f in point.files():
        if not f.get("source_state"):
            continue
        table = read_state_file(f["path"], checksum=f.get("checksum"))
        state = table_to_snapshot([table])["operator_state"].get(SOURCE_STATE, [])
        out.setdefault(f["operator_id"], {}).update(dict(v for _, v in state))
    return out
