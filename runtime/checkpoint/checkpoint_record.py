"""A checkpoint's row in the job's checkpoints table, and the words its rows use: a value every
part of the checkpointing shares (the store writes it, restores and the web view read it)."""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Optional

import pyarrow as pa

from runtime.storage.filesystems import join

COMPLETED, FAILED, DISCARDED, INVALID = "COMPLETED", "FAILED", "DISCARDED", "INVALID"
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
