"""Keyed subtasks scheduled back to where their local state store is (Structured Streaming's
state store locality, with what PySpark offers).

Structured Streaming's StateStoreRDD returns, as each partition's preferred location, the
executor its StateStoreCoordinator saw load that partition's store. PySpark cannot define an
RDD's preferred locations, but Spark's scheduler prefers the place of a partition's cached
blocks: each vertex whose subtasks keep a local store gets an *anchor*, an empty RDD with the
vertex's partitioner, persisted, and unioned with the vertex's shuffled input every epoch. With
equal partitioners the union is Spark's PartitionerAwareUnionRDD, whose partition i prefers the
host of anchor partition i's cached block. Anchor partition i is computed, and cached, by the
task of subtask i in the first epoch: where subtask i built its store. So subtask i runs there
again, within ``spark.locality.wait``. A lost executor takes its anchor blocks with its stores:
they are recomputed wherever the subtask runs next, which rebuilds its store from the checkpoint
there, and later epochs follow it.

The preference is a host (Spark's NODE_LOCAL), as the union reports hosts: with several
executors per host, a subtask may run on the host's other executor and rebuild its store there
(counted as a miss in the epoch's local-state figure), unless ``state.backend.rocksdb.localdir``
names a folder every executor of the host shares.
"""
from __future__ import annotations

from runtime.execution.python_rdds import PythonRDDs


class StateLocality:
    """The anchors of one job run's vertices whose subtasks keep local stores."""

    def __init__(self, rdds: PythonRDDs, vertex_ids) -> None:
        self.rdds = rdds
        self.vertex_ids = frozenset(vertex_ids)
        self.anchors: dict = {}         # vertex id -> (parallelism, anchor RDD)

    def anchored(self, vertex_id, parallelism: int, shuffled):
        """The vertex's ``shuffled`` input (partitioned by ``PythonRDDs.partition_by``), each
        partition preferring where its subtask's local store is (for vertices without local
        stores, just the input)."""
        if vertex_id not in self.vertex_ids:
            return shuffled
        kept = self.anchors.get(vertex_id)
        if kept is None or kept[0] != parallelism:
            anchor = self.rdds.partition_by([self.rdds.source(parallelism)], parallelism)
            kept = self.anchors[vertex_id] = (parallelism, self.rdds.persist(anchor))
        return self.rdds.union([shuffled, kept[1]])

    def release(self) -> None:
        for _, anchor in self.anchors.values():
            anchor.unpersist(False)
        self.anchors.clear()
