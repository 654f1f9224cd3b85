"""Incremental checkpoints: which files hold an operator's state, and when to write it whole.

The state of a keyed operator at a checkpoint is a chain of snapshot files, read in order: its
last full snapshot, then the changes of each later epoch (changed entries; deletions as
tombstones). A checkpoint lists its whole chain, so a restore, ``sluice state`` and a savepoint
read it like a full snapshot, and retention keeps every partition a retained checkpoint's chain
points into (Flink's shared state registry, by reference rather than by count).

A full snapshot is taken again (Flink's RocksDB compaction, done here per checkpoint) after
``full_every`` increments, or once the increments' bytes outgrow ``full_ratio`` of the last full
snapshot: a restore never reads much more than the state, and old partitions can go.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Iterable, Optional

INCREMENTAL = "execution.checkpointing.incremental"                 # Flink's switch
FULL_EVERY = "sluice.checkpointing.incremental.full-every"
FULL_RATIO = "sluice.checkpointing.incremental.full-ratio"

_PARTITION = re.compile(r"(?:^|/)checkpoint_id=(\d+)/")


@dataclass(frozen=True)
class IncrementalPolicy:
    enabled: bool = True
    full_every: int = 10            # increments after a full snapshot before the next full one
    full_ratio: float = 0.5         # ... or when their bytes exceed this share of the full one

    @staticmethod
    def from_config(config: dict) -> "IncrementalPolicy":
        enabled = str(config.get(INCREMENTAL, True)).lower()
        if enabled not in ("true", "false"):
            raise ValueError(f"'{INCREMENTAL}' must be true or false, got {config[INCREMENTAL]!r}")
        policy = IncrementalPolicy(
            enabled=enabled == "true",
            full_every=int(config.get(FULL_EVERY, 10)),
            full_ratio=float(config.get(FULL_RATIO, 0.5)))
        if policy.full_every < 1 or policy.full_ratio <= 0:
            raise ValueError(f"'{FULL_EVERY}' must be at least 1 and '{FULL_RATIO}' positive, got "
                             f"{policy.full_every} and {policy.full_ratio}")
        return policy


@dataclass(frozen=True)
class StateChain:
    """One operator's snapshot files in the order a restore applies them (all subtasks'
    files of a snapshot together; each file covers its own key groups)."""

    full: tuple = ()                # file dicts of the last full snapshot
    increments: tuple = ()          # per later snapshot, its file dicts
    full_bytes: int = 0

    def files(self) -> list[dict]:
        return [*self.full, *(f for step in self.increments for f in step)]

    def then(self, files: Iterable[dict], full: bool) -> "StateChain":
        files = tuple(files)
        if full:
            return StateChain(files, (), sum(f.get("size", 0) for f in files))
        return replace(self, increments=(*self.increments, files))

    def wants_full(self, policy: IncrementalPolicy) -> bool:
        """Whether the next snapshot of this operator is taken whole."""
        if not policy.enabled or not self.full:
            return True
        written = sum(f.get("size", 0) for step in self.increments for f in step)
        return len(self.increments) >= policy.full_every or written > policy.full_ratio * max(self.full_bytes, 1)

    @staticmethod
    def of_files(files: list[dict]) -> "StateChain":
        """A restored checkpoint's chain, from the files its record lists (``increment`` marks
        the files of increments; consecutive files of one partition are one snapshot)."""
        full = tuple(f for f in files if not f.get("increment"))
        steps: list[list] = []
        last: Optional[str] = None
        for f in files:
            if not f.get("increment"):
                continue
            part = partition_of(f["path"])
            if not steps or part != last:
                steps.append([])
            steps[-1].append(f)
            last = part
        return StateChain(full, tuple(tuple(s) for s in steps), sum(f.get("size", 0) for f in full))


def partition_of(path: str) -> Optional[str]:
    """The checkpoint id of the state-table partition a file lies in (None: not in one)."""
    m = _PARTITION.search(path.replace("\\", "/"))
    return m.group(1) if m else None


def referenced_partitions(records: Iterable) -> set[int]:
    """The checkpoint partitions that the chains of ``records`` (checkpoint records) read."""
    out: set[int] = set()
    for record in records:
        for op in record.operators:
            for f in op.get("files", ()):
                part = partition_of(f["path"])
                if part is not None:
                    out.add(int(part))
    return out
