"""Flink's TaskStateManager and StreamTaskStateInitializer: a subtask's keyed state.

The one place that creates the operators' keyed state backends (a heap, kept in the subtask's
worker between epochs, or a RocksDB store: a subtask's local store, or a temporary one), restores them from the state files the deployment
names (or uses a local store as it is, when it is at the version the previous epoch of the run
left it at), snapshots them into this epoch's state files (whole, or only what changed) and moves
a local store to the next version; when the task ends, it keeps a local store open for this
process's next task on it (a reused PySpark worker: runtime.state.kept_stores) or closes it. Its
own module: neither the operators nor the task loop touch state files, stores or their versions.
Where a subtask runs (the same worker every epoch) is the driver's side (runtime.execution).
"""
from __future__ import annotations

import logging
import os
import tempfile
import time
from typing import Optional

import pyarrow as pa

from runtime.state import kept_stores
from runtime.state.backend import ROCKSDB, KeyedStateBackend
from runtime.state.heap import HeapKeyedStateBackend
from runtime.state.snapshot_format import OPERATOR_PREFIX, state_table_name
from runtime.state.snapshot_reader import CorruptStateException, read_state_parts, table_to_snapshot
from runtime.state.snapshot_writer import write_snapshot
from runtime.task.deployment import Acknowledgement, TaskDeploymentDescriptor

log = logging.getLogger(__name__)


def create_keyed_state_backend(node, ctx, clock, kept: bool = True) -> KeyedStateBackend:
    """The keyed state backend of an operator, as the task's ``state.backend.type`` says. A heap
    outlives its task (kept in its worker) only for an operator whose state is all in it
    (``kept``): another operator's state is restored from the files every epoch."""
    if ctx.state_backend == ROCKSDB:
        from runtime.state.rocksdb import (
            CorruptStateStoreException, RocksDBKeyedStateBackend, StateStoreInUseException)

        def temporary() -> RocksDBKeyedStateBackend:
            return RocksDBKeyedStateBackend(node.operator_name, ctx.key_group_range, ctx.max_parallelism,
                                            tempfile.mkdtemp(prefix="sluice-state-"), clock=clock, temporary=True)

        def local(path: str) -> RocksDBKeyedStateBackend:
            return _take_kept(path, RocksDBKeyedStateBackend, node, ctx, clock) or RocksDBKeyedStateBackend(
                node.operator_name, ctx.key_group_range, ctx.max_parallelism, path, clock=clock)

        if not ctx.state_dir:
            return temporary()
        path = os.path.join(ctx.state_dir, node.operator_id)
        try:
            return local(path)
        except CorruptStateStoreException as e:
            # Never trusted: removed, and rebuilt from the checkpoint's files (a miss).
            log.warning("%s %s: %s; rebuilding it from the checkpoint", node.operator_name, ctx.subtask_label, e)
            RocksDBKeyedStateBackend.destroy(path)
            return local(path)
        except StateStoreInUseException as e:
            # Another attempt of this subtask holds it (a speculative or orphaned task): this one
            # rebuilds into a store of its own, removed when it ends.
            log.warning("%s %s: %s; using a temporary store", node.operator_name, ctx.subtask_label, e)
            return temporary()
    if not (ctx.state_dir and kept):
        return HeapKeyedStateBackend(node.operator_name, ctx.key_group_range, ctx.max_parallelism, clock=clock,
                                     settle_after=ctx.heap_compact_after)
    path = os.path.abspath(os.path.join(ctx.state_dir, node.operator_id))
    return _take_kept(path, HeapKeyedStateBackend, node, ctx, clock) or HeapKeyedStateBackend(
        node.operator_name, ctx.key_group_range, ctx.max_parallelism, clock=clock, path=path,
        settle_after=ctx.heap_compact_after)


def _take_kept(path: str, backend_class: type, node, ctx, clock) -> Optional[KeyedStateBackend]:
    """The backend this process kept at ``path`` since its last task on it, ready for this task;
    None when there is none of ``backend_class`` for this subtask's key groups (one of the other
    backend, left by a run with another ``state.backend.type``, is closed; one that cannot resume
    closed itself)."""
    kept = kept_stores.take(os.path.abspath(path))
    if kept is None:
        return None
    if not isinstance(kept, backend_class):
        kept.close()
        return None
    return kept if kept.resume(node.operator_name, ctx.key_group_range, ctx.max_parallelism, clock) else None


def release_keyed_state_backend(backend: KeyedStateBackend) -> None:
    """The task is done with ``backend``: a local store at the version its task set stays open
    for this process's next task on it when the process keeps stores (a reused PySpark worker);
    any other backend is disposed (a store closed, a temporary one removed)."""
    if getattr(backend, "keepable", False) and kept_stores.keeps_stores():
        backend.suspend()
        kept_stores.keep(backend)
    else:
        backend.dispose()


def local_state_dir(job_id: str, tdd: TaskDeploymentDescriptor) -> str:
    """Where this subtask's local stores live: the configured root, else the executor's first
    Spark local dir (PySpark gives it to its workers; removed when the application ends)."""
    root = tdd.state_dir or (os.environ.get("SPARK_LOCAL_DIRS") or "").split(",")[0] or tempfile.gettempdir()
    return os.path.join(root, "sluice-state", job_id, f"{tdd.job_vertex_id}-{tdd.subtask_index}")


class TaskStateManager:
    """Restores and snapshots the keyed state of a subtask's operators for one epoch."""

    def __init__(self, tdd: TaskDeploymentDescriptor, ctx):
        self.tdd = tdd
        self.ctx = ctx

    def restore(self, operators: list, ack: Acknowledgement) -> None:
        restored = self.tdd.restored_state
        kgr = self.ctx.key_group_range
        for op in operators:
            if op.backend is not None:
                op.backend.track_changes(self.incremental(op))
            if op.keeps_local_state():
                if self.tdd.state_version is not None and op.backend.version == self.tdd.state_version:
                    ack.store_hits += 1
                    continue
                ack.store_misses += 1
                op.backend.clear()      # stale, or of another epoch: rebuilt from the files
            paths = restored.files.get(op.node.operator_id) if restored is not None else None
            if not paths:
                continue
            # Keyed row groups are decoded as the backend loads them (in op.restore): a damaged
            # file may show there too.
            try:
                snapshot = table_to_snapshot(part for p in paths for part in read_state_parts(
                    p, kgr, restored.checksums.get(p), restored.regrouping.get(p)))
                snapshot["restored_parallelism"] = restored.parallelism.get(op.node.operator_id)
                same_parallelism = snapshot["restored_parallelism"] == self.ctx.parallelism
                for name, entries in list(snapshot["operator_state"].items()):
                    if name.startswith(OPERATOR_PREFIX):
                        del snapshot["operator_state"][name]
                        snapshot[name[len(OPERATOR_PREFIX):]] = _operator_value(
                            entries, self.tdd.subtask_index if same_parallelism else None)
                op.restore(snapshot)    # the other operator state (broadcast state) as the operator lists it
            except CorruptStateException as e:
                ack.damaged_files.update(e.damaged_files)    # the driver marks its checkpoint INVALID
                raise
            del snapshot
            if op.keeps_local_state():
                release_arrow_memory()      # a rebuild: its columns are not needed again

    def incremental(self, op) -> bool:
        """Whether the operator's snapshot of this epoch holds only what changed since the last."""
        return (bool(self.tdd.snapshot_dir) and op.backend is not None and op.state_in_backend
                and op.node.operator_id in self.tdd.incremental)

    def snapshot(self, operators: list, ack: Acknowledgement) -> None:
        if not self.tdd.snapshot_dir:
            return
        started = time.time()
        for op in operators:
            incremental = self.incremental(op)
            snapshot = op.snapshot(incremental=True) if incremental else op.snapshot()
            directory = self.tdd.snapshot_dir.format(table=state_table_name(op.node))
            written = write_snapshot(snapshot, directory, op.node.operator_id, self.tdd.subtask_index,
                                     f"{op.name} {self.ctx.subtask_label}", increment=incremental)
            if written is not None:
                ack.state_files.append(written)
            del snapshot
            if op.keeps_local_state() and not incremental:
                release_arrow_memory()      # a whole kept state's columns: not needed again soon
            if op.backend is not None:
                op.backend.mark_checkpointed()
            if op.keeps_local_state() and self.tdd.next_state_version is not None:
                op.backend.version = self.tdd.next_state_version
        ack.snapshot_ms = (time.time() - started) * 1000


def release_arrow_memory() -> None:
    """Give the memory Arrow freed back to the system. Its allocator keeps it otherwise: the
    columns of a kept state's rebuild or full snapshot (a third of a heap's size again) would stay
    in the worker beside the state for the worker's life. Only then: a bulk epoch that allocates
    again at once would pay the pages' faults again."""
    pa.default_memory_pool().release_unused()


def _operator_value(entries: list, subtask: Optional[int]):
    """A subtask's restored value of per-subtask operator state (its watermark, say): its own at
    the same parallelism; after a rescale the minimum over all, so nothing becomes late."""
    if subtask is not None:
        own = [v for s, v in entries if s == subtask]
        if own:
            return own[0]
    values = [v for _, v in entries if v is not None]
    try:
        return min(values) if values else None
    except TypeError:
        return values[0]
