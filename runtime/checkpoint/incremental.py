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
from dataclasses import dataclass, replace
from typing import Iterable, Optional

from runtime.state.backend import heap_compact_after, state_backend_type

INCREMENTAL = "execution.checkpointing.incremental"                 # Flink's switch
FULL_EVERY = "sluice.checkpointing.incremental.full-every"
FULL_RATIO = "sluice.checkpointing.incremental.full-ratio"

_PARTITION = re.compile(r"(?:^|/)checkpoint_id=(\d+)/")


@dataclass(frozen=True)
class IncrementalPolicy:
    enabled: bool = False
    # Increments after a full snapshot before the next full one. The ratio is what bounds a
    # restore's reads (at most 1 + full_ratio times the state); the count only bounds its files.
    # A full snapshot reads the whole state in its task: at 10,000,000 keys it added 18 s to its
    # epoch, so it comes rarely, as Flink's changelog backend materialises every 10 minutes.
    full_every: int = 100
    full_ratio: float = 0.5         # ... or when their bytes exceed this share of the full one

    @staticmethod
    def from_config(config: dict) -> "IncrementalPolicy":
        # Default: on, for both backends: each keeps its subtask's state between epochs (a heap
        # in its worker, a RocksDB store on its disk), so a snapshot of the changes is what the
        # epoch touched, as Flink's changelog backend writes. ``false`` snapshots whole.
        state_backend_type(config)      # checked: a misspelt backend fails here, named
        heap_compact_after(config)
        enabled = str(config.get(INCREMENTAL, True)).lower()
        if enabled not in ("true", "false"):
            raise ValueError(f"'{INCREMENTAL}' must be true or false, got {config[INCREMENTAL]!r}")
        policy = IncrementalPolicy(
            enabled=enabled == "true",
            full_every=int(config.get(FULL_EVERY, IncrementalPolicy.full_every)),
            full_ratio=float(config.get(FULL_RATIO, IncrementalPolicy.full_ratio)))
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


def file_entry(f) -> dict:
    """A StateFile (``runtime.state.snapshot_writer``) as a chain entry (absolute path)."""
    return {"operator_id": f.operator_id, "path": f.path, "subtask": f.subtask, "size": f.size,
            "rows": f.rows, "key_group_min": f.key_group_min, "key_group_max": f.key_group_max,
            "checksum": f.checksum, "increment": f.increment}


class StateChains:
    """The driver's view of every operator's state between epochs: the chain of files a subtask
    rebuilds it from when its local store is not at the expected version (or it has none)."""

    def __init__(self, policy: IncrementalPolicy, capable: set):
        self.policy = policy
        self.capable = frozenset(capable)       # operator ids whose state is all in their backend
        self.chains: dict[str, StateChain] = {}
        self.fresh: set[str] = set()            # paths this run wrote, read back unverified
        self.uncommitted: dict[str, object] = {}    # path -> StateFile not in a checkpoint yet

    def restored(self, files: list[dict]) -> None:
        """Start from a restore point's files (their record's order is the chain's)."""
        by_operator: dict[str, list] = {}
        for f in files:
            by_operator.setdefault(f["operator_id"], []).append(f)
        self.chains = {op: StateChain.of_files(fs) for op, fs in by_operator.items()}

    def incremental(self) -> frozenset:
        """The operators whose next snapshot holds only what changed."""
        return frozenset(op for op in self.capable if not self.chains.get(op, StateChain()).wants_full(self.policy))

    def after_epoch(self, state_files: list, incremental: frozenset) -> list[str]:
        """Take an epoch's snapshot files (an operator that snapshotted whole and wrote nothing
        has no state now). Returns the uncommitted files no chain reads any more: superseded,
        the caller deletes them (committed ones are retention's)."""
        new: dict[str, list] = {}
        for f in state_files:
            new.setdefault(f.operator_id, []).append(f)
            self.uncommitted[f.path] = f
        for op in set(self.chains) | set(new):
            files = [file_entry(f) for f in new.get(op, ())]
            if op in incremental:
                if files:
                    self.chains[op] = self.chains.get(op, StateChain()).then(files, full=False)
            elif files:
                self.chains[op] = StateChain().then(files, full=True)
            else:
                del self.chains[op]
        live = {f["path"] for c in self.chains.values() for f in c.files()}
        self.fresh = (self.fresh | {f.path for f in state_files}) & live
        gone = [p for p in self.uncommitted if p not in live]
        for p in gone:
            del self.uncommitted[p]
        return gone

    def files(self) -> list[dict]:
        """Every chain's files, for the next epoch's restore; the files this run wrote are read
        without verifying their checksum (every epoch would hash them)."""
        return [{**f, "checksum": None} if f["path"] in self.fresh else f
                for c in self.chains.values() for f in c.files()]

    def listing(self) -> dict[str, list[dict]]:
        """Operator id -> its chain's files, for a checkpoint's record."""
        return {op: c.files() for op, c in self.chains.items()}

    def to_commit(self, checkpoint_id: int) -> list:
        """The StateFiles of the chains that lie in a checkpoint's partition (this epoch's, and
        the increments of the epochs since the last checkpoint), to commit with it."""
        return [self.uncommitted[f["path"]] for c in self.chains.values() for f in c.files()
                if f["path"] in self.uncommitted and partition_of(f["path"]) == str(checkpoint_id)]

    def committed(self, checkpoint_id: int) -> None:
        for f in self.to_commit(checkpoint_id):
            del self.uncommitted[f.path]
