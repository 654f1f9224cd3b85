"""``SavepointWriter``: a new savepoint from an existing one or from nothing (Flink's State
Processor API): operators' state bootstrapped from data (``runtime.state_processor.bootstrap``),
removed, or replaced, and the job's max parallelism changed (each key moved to its key group).

The result is a savepoint as ``runtime.checkpoint.savepoint`` writes one (``_metadata.json`` and a
Delta table per operator under ``state/``), self-contained: the base savepoint's files are copied,
and its source positions kept.
"""
from __future__ import annotations

import dataclasses
import hashlib
import time
from typing import Optional

from runtime.checkpoint.restore import METADATA, RestorePoint, load_savepoint
from runtime.checkpoint.savepoint import commit_state_table, copy_operator_state, write_savepoint_metadata
from runtime.checkpoint.state_tables import merged_schema
from runtime.checkpoint.checkpoint_record import COMPLETED, SAVEPOINT, CheckpointException, CheckpointRecord
from runtime.state.key_groups import KEY_HASHING
from runtime.state.key_regrouping import KeyRegrouping, key_type_name
from runtime.state.snapshot_format import state_table_name
from runtime.state.snapshot_reader import read_state_file
from runtime.state.snapshot_writer import write_state_file
from runtime.state_processor.bootstrap import StateBootstrapTransformation
from runtime.storage.filesystems import absolute, check_writable, exists, join, relative


def operator_id_of(uid: str) -> str:
    """The OperatorID a job gives the operator of ``uid`` (runtime.graph.stream_graph)."""
    return hashlib.md5(("uid:" + uid).encode()).hexdigest()


class _Uid:
    """What state_table_name needs of a node."""

    def __init__(self, uid: str):
        self.uid, self.operator_id = uid, operator_id_of(uid)


class SavepointWriter:
    """``SavepointWriter.from_existing_savepoint(path)`` or ``new_savepoint(max_parallelism)``,
    then ``with_operator(uid, transformation)``, ``remove_operator(uid)``,
    ``change_max_parallelism(n)``, and ``write(path)``."""

    def __init__(self, base: Optional[RestorePoint], max_parallelism: int):
        self.base = base
        self.max_parallelism = max_parallelism
        self.bootstrapped: dict[str, StateBootstrapTransformation] = {}
        self.removed: set[str] = set()
        self.key_types: dict = {}

    @staticmethod
    def from_existing_savepoint(path: str) -> "SavepointWriter":
        point = load_savepoint(path)
        keyed = {op["max_parallelism"] for op in point.record.operators if op.get("keyed")}
        return SavepointWriter(point, max(keyed) if keyed else 128)

    @staticmethod
    def new_savepoint(max_parallelism: int = 128) -> "SavepointWriter":
        if not 0 < max_parallelism <= 32768:
            raise ValueError(f"max_parallelism must be in 1..32768, got {max_parallelism}")
        return SavepointWriter(None, max_parallelism)

    def with_operator(self, uid: str, transformation: StateBootstrapTransformation) -> "SavepointWriter":
        """The state of ``uid`` is the bootstrapped one (replacing the base's state of ``uid``)."""
        if not isinstance(transformation, StateBootstrapTransformation):
            raise TypeError("with_operator takes OperatorTransformation.bootstrap_with(data).key_by(...)"
                            ".transform(function)")
        self.bootstrapped[uid] = transformation
        return self

    def remove_operator(self, uid: str) -> "SavepointWriter":
        if self.base is None or not self._base_operator(uid):
            raise CheckpointException(f"the savepoint has no operator {uid!r} to remove; its operators: "
                                      f"{', '.join(self._uids()) or 'none'}")
        self.removed.add(uid)
        return self

    def change_max_parallelism(self, max_parallelism: int, key_types: Optional[dict] = None) -> "SavepointWriter":
        """Move every keyed state to the key groups of ``max_parallelism``. ``key_types`` (uid ->
        the key type the job's ``key_by`` declares) hashes keys as the job will."""
        self.max_parallelism = max_parallelism
        self.key_types = dict(key_types or {})
        return self

    def _uids(self) -> list[str]:
        return [op.get("uid") or op["table"] for op in (self.base.record.operators if self.base else ())]

    def _base_operator(self, uid: str) -> Optional[dict]:
        return next((op for op in (self.base.record.operators if self.base else ())
                     if uid in (op.get("uid"), op["table"], op["operator_id"])), None)

    def write(self, path: str) -> str:
        """Write the savepoint to ``path`` (a new folder); returns its absolute path."""
        target = absolute(path)
        check_writable(target, "the savepoint's path")
        if exists(join(target, METADATA)):
            raise CheckpointException(f"{target} already holds a savepoint: write the new one elsewhere")
        base = self.base.record if self.base else CheckpointRecord(0, -1, SAVEPOINT, COMPLETED, "savepoint-writer")
        checkpoint_id = base.checkpoint_id
        operators = []
        replaced = {self._base_operator(uid)["operator_id"] for uid in self.bootstrapped if self._base_operator(uid)}
        removed = {self._base_operator(uid)["operator_id"] for uid in self.removed}
        for op in base.operators:
            if op["operator_id"] in removed or op["operator_id"] in replaced:
                continue
            op = dict(op)
            if op.get("files"):
                source = join(self.base.root, "state", op["table"])
                if op.get("keyed") and op["max_parallelism"] != self.max_parallelism:
                    op["files"] = self._rescaled(op, source, target, checkpoint_id)
                    # Every key hashed anew, as key_types says (a field key when not given).
                    op["key_type"] = key_type_name(self.key_types.get(op.get("uid") or op["table"]))
                else:
                    copy_operator_state(source, op, target, checkpoint_id)
            if op.get("keyed"):
                op["max_parallelism"] = self.max_parallelism
            operators.append(op)
        for uid, transformation in self.bootstrapped.items():
            node = _Uid(uid)
            table = state_table_name(node)
            table_dir = join(target, "state", table)
            files = transformation.write(join(table_dir, f"checkpoint_id={checkpoint_id}"), node.operator_id, uid,
                                         self.max_parallelism)
            operators.append(self._entry(uid, table, table_dir, files, checkpoint_id, transformation))
        record = dataclasses.replace(
            base, kind=SAVEPOINT, status=COMPLETED, external_path=target, operators=operators,
            state_rows=sum(f["rows"] for op in operators for f in op.get("files", ())),
            state_bytes=sum(f["size"] for op in operators for f in op.get("files", ())),
            source_offsets={k: v for k, v in base.source_offsets.items()
                            if k not in {op["table"] for op in base.operators if op["operator_id"] in removed}},
            completed_at=time.time())
        write_savepoint_metadata(target, record)
        return target

    def _entry(self, uid, table, table_dir, files, checkpoint_id, transformation) -> dict:
        if files:
            schema = merged_schema([f.pop("schema") for f in files])
            for f in files:
                f["path"] = relative(f["path"], table_dir)
            commit_state_table(table_dir, schema, files, checkpoint_id)
        return {"operator_id": operator_id_of(uid), "uid": uid, "table": table, "name": uid, "vertex": uid,
                "parallelism": min(transformation.parallelism or 4, self.max_parallelism),
                "max_parallelism": self.max_parallelism, "keyed": True, "key_hashing": KEY_HASHING,
                "key_type": key_type_name(transformation.key_type), "files": files}

    def _rescaled(self, op: dict, source: str, target: str, checkpoint_id: int) -> list[dict]:
        """The operator's files with each keyed row's key group recomputed for the new max
        parallelism (an increment chain is copied file by file: rows keep their order)."""
        key_type = self.key_types.get(op.get("uid") or op["table"])
        regrouping = KeyRegrouping(op.get("name") or op["table"], op.get("key_type") or key_type_name(key_type),
                                   key_type, self.max_parallelism)
        table_dir = join(target, "state", op["table"])
        out = []
        for f in op["files"]:
            table = regrouping.regrouped(read_state_file(join(source, f["path"]), checksum=f.get("checksum")))
            written = write_state_file(table, join(table_dir, f"checkpoint_id={checkpoint_id}"), op["operator_id"],
                                       f.get("subtask") or 0, bool(f.get("increment")))
            out.append({**{k: v for k, v in f.items() if k != "key_type"},
                        "path": relative(written.path, table_dir), "size": written.size,
                        "checksum": written.checksum, "key_group_min": written.key_group_min,
                        "key_group_max": written.key_group_max, "schema": written.schema})
        schema = merged_schema([f.pop("schema") for f in out])
        commit_state_table(table_dir, schema, out, checkpoint_id)
        return out
