"""Failover strategies: which subtasks a failure restarts (Flink's FailoverStrategy).

  full    restart-all: every subtask (RestartAllFailoverStrategy)
  region  pipelined-region: the subtasks of the failed subtask's region, a region being the
          subtasks connected by pipelined edges (every edge of a streaming job is pipelined,
          so an all-to-all edge joins everything it connects; a job of pointwise pipelines
          splits into one region per pipeline) (RestartPipelinedRegionFailoverStrategy)

An epoch commits as one unit, so whatever the strategy, the job goes back to the latest
completed checkpoint; the strategy decides which subtasks get a new attempt (their attempt
number increases, the others keep theirs) and is reported with the restart.
"""
from __future__ import annotations

from typing import Iterable

from runtime.graph.execution_graph import ExecutionGraph, consumed_partitions

FULL, REGION = "full", "region"
FAILOVER_STRATEGY_KEY = "jobmanager.execution.failover-strategy"

Subtask = tuple[int, int]       # (job vertex id, subtask index)


def pipelined_regions(graph: ExecutionGraph) -> tuple[frozenset[Subtask], ...]:
    """The pipelined regions of the graph (union-find over consumed partitions), in vertex order."""
    parent: dict[Subtask, Subtask] = {}

    def find(x: Subtask) -> Subtask:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for ev in graph.all_execution_vertices:
        parent[(ev.job_vertex_id, ev.subtask_index)] = (ev.job_vertex_id, ev.subtask_index)
    job_graph = graph.job_graph
    for v in job_graph.vertices:
        for edge in job_graph.inputs_of(v.id):
            producer = job_graph.vertex(edge.source_vertex)
            for c in range(v.parallelism):
                for p in consumed_partitions(edge, producer.parallelism, v.parallelism, c):
                    a, b = find((v.id, c)), find((producer.id, p))
                    if a != b:
                        parent[a] = b
    regions: dict[Subtask, set[Subtask]] = {}
    for s in parent:
        regions.setdefault(find(s), set()).add(s)
    return tuple(sorted((frozenset(r) for r in regions.values()), key=min))


def tasks_to_restart(graph: ExecutionGraph, strategy: str, failed: Iterable[Subtask]) -> frozenset[Subtask]:
    """The subtasks a failure of ``failed`` restarts under ``strategy`` (all when none is known)."""
    everything = frozenset((ev.job_vertex_id, ev.subtask_index) for ev in graph.all_execution_vertices)
    failed = set(failed)
    if strategy == FULL or not failed:
        return everything
    if strategy != REGION:
        raise ValueError(f"Unknown {FAILOVER_STRATEGY_KEY} '{strategy}': use 'full' (restart all) or "
                         "'region' (pipelined region), Flink's values.")
    return frozenset(s for region in pipelined_regions(graph) if region & failed for s in region)
