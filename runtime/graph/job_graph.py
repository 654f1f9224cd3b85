"""JobGraph: operators chained into JobVertices (Flink's StreamingJobGraphGenerator).

Two operators chain when the downstream has exactly one input, both are in the same
slot sharing group, the downstream may be chained (ALWAYS) and the upstream allows it
(not NEVER), the edge is FORWARD, the parallelism matches and chaining is enabled. A
chain runs as one task; every other edge becomes an IntermediateDataSet and a JobEdge.
"""
from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from runtime.datastream.operators import ChainingStrategy
from runtime.datastream.partitioner import ForwardPartitioner, RebalancePartitioner
from runtime.graph.stream_graph import StreamEdge, StreamGraph, StreamGraphError, StreamNode


class DistributionPattern(enum.Enum):
    POINTWISE = "POINTWISE"     # each consumer reads a subset of producers (forward, rescale)
    ALL_TO_ALL = "ALL_TO_ALL"   # each consumer may read from every producer


@dataclass(frozen=True)
class IntermediateDataSet:
    id: str
    producer: int               # JobVertex id


@dataclass(frozen=True)
class JobEdge:
    source_vertex: int
    target_vertex: int
    data_set: str
    distribution_pattern: DistributionPattern
    stream_edge: StreamEdge

    @property
    def ship_strategy(self) -> str:
        return self.stream_edge.partitioner.ship_strategy

    @property
    def partitioner(self):
        return self.stream_edge.partitioner


@dataclass(frozen=True)
class JobVertex:
    id: int                             # the id of the chain's head StreamNode
    vertex_id: str                      # JobVertexID: the head operator's id
    name: str
    parallelism: int
    max_parallelism: int
    slot_sharing_group: str
    operators: tuple[StreamNode, ...]   # the chain, head first, each after its input
    chained_edges: tuple[StreamEdge, ...] = field(default=(), repr=False)

    @property
    def head(self) -> StreamNode:
        return self.operators[0]

    @property
    def is_input_vertex(self) -> bool:
        return self.head.kind == "source"

    @property
    def operator_ids(self) -> tuple[int, ...]:
        return tuple(n.id for n in self.operators)

    @property
    def is_keyed(self) -> bool:
        return any(n.is_keyed for n in self.operators)


@dataclass(frozen=True)
class JobGraph:
    job_id: str
    job_name: str
    vertices: tuple[JobVertex, ...]     # topologically sorted from the sources
    edges: tuple[JobEdge, ...]
    data_sets: tuple[IntermediateDataSet, ...]
    stream_graph: StreamGraph = field(compare=False, repr=False)

    @cached_property
    def _by_id(self) -> dict[int, JobVertex]:
        return {v.id: v for v in self.vertices}

    def vertex(self, vertex_id: int) -> JobVertex:
        return self._by_id[vertex_id]

    @cached_property
    def by_operator_id(self) -> dict[str, tuple[JobVertex, StreamNode]]:
        """Each operator's (vertex, node), by its operator id (what checkpoints name it by)."""
        return {n.operator_id: (v, n) for v in self.vertices for n in v.operators}

    def vertex_of_operator(self, node_id: int) -> JobVertex:
        return next(v for v in self.vertices if node_id in v.operator_ids)

    def inputs_of(self, vertex_id: int) -> tuple[JobEdge, ...]:
        return tuple(e for e in self.edges if e.target_vertex == vertex_id)

    def outputs_of(self, vertex_id: int) -> tuple[JobEdge, ...]:
        return tuple(e for e in self.edges if e.source_vertex == vertex_id)

    def is_one_pipeline(self) -> bool:
        """One source vertex, and every vertex at most one input and one output: the job's
        stages run one after another, never two at once."""
        return (sum(v.is_input_vertex for v in self.vertices) == 1
                and all(len(self.inputs_of(v.id)) <= 1 and len(self.outputs_of(v.id)) <= 1 for v in self.vertices))

    @property
    def settings(self):
        return self.stream_graph.settings

    def get_job_graph_as_json(self) -> str:
        from runtime.graph.plan_json import job_graph_as_json
        return job_graph_as_json(self)


def is_chainable(edge: StreamEdge, graph: StreamGraph) -> bool:
    up, down = graph.node(edge.source_id), graph.node(edge.target_id)
    return (len(graph.in_edges(down.id)) == 1
            and up.slot_sharing_group == down.slot_sharing_group
            and down.chaining_strategy == ChainingStrategy.ALWAYS
            and up.chaining_strategy != ChainingStrategy.NEVER
            and isinstance(edge.partitioner, ForwardPartitioner)
            and up.parallelism == down.parallelism
            and graph.settings.chaining_enabled)


def rebalances_read_by_consumers(graph: StreamGraph) -> StreamGraph:
    """``graph`` with each rebalance out of a strided non-parallel source (``from_collection``
    into an operator of another parallelism) done by the source's reader: the source runs at its
    consumer's parallelism and chains to it, subtask k reading the records the rebalance would deal
    channel k (every n-th of the epoch's, from its k-th: the round-robin of a producer that starts
    at channel 0, ``runtime.task.partitioning``). The consumer sees the same records in the same
    order, without a one-task stage and a shuffle of every record (bench/README.md, issue 35).
    A source with watermarks of its own keeps its rebalance: they are the whole input's."""
    nodes = {n.id: n for n in graph.nodes}
    edges = list(graph.edges)
    for i, e in enumerate(graph.edges):
        up, down = graph.node(e.source_id), graph.node(e.target_id)
        if (up.kind == "source" and up.operator.source.strided and up.operator.watermark_strategy is None
                and isinstance(e.partitioner, RebalancePartitioner) and e.output_tag is None
                and len(graph.out_edges(up.id)) == 1):
            forward = replace(e, partitioner=ForwardPartitioner())
            spec = replace(up.operator, source=up.operator.source.dealt(down.parallelism))
            fused = replace(up, parallelism=down.parallelism, max_parallelism=down.max_parallelism, operator=spec)
            as_read = replace(graph, nodes=tuple(fused if n.id == up.id else n for n in graph.nodes),
                              edges=tuple(forward if x is e else x for x in graph.edges))
            if is_chainable(forward, as_read):
                nodes[up.id], edges[i] = fused, forward
    return replace(graph, nodes=tuple(nodes[n.id] for n in graph.nodes), edges=tuple(edges))


def create_job_graph(graph: StreamGraph) -> JobGraph:
    """Chain operators and connect the chains (pure: the same StreamGraph gives the same JobGraph)."""
    graph = rebalances_read_by_consumers(graph)
    order = graph.topological_order()     # also refuses cycles
    chained_names: dict[int, str] = {}
    head_of: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    chain_edges: dict[int, list[StreamEdge]] = {}
    boundary: list[StreamEdge] = []

    def build_chain(head: int, current: int) -> None:
        head_of[current] = head
        members.setdefault(head, []).append(current)
        chainable = [e for e in graph.out_edges(current) if is_chainable(e, graph)]
        for e in graph.out_edges(current):
            if e in chainable:
                chain_edges.setdefault(head, []).append(e)
                build_chain(head, e.target_id)
            else:
                boundary.append(e)
        chained_names[current] = _chained_name(graph.node(current).operator_name,
                                               [chained_names[e.target_id] for e in chainable])

    # Heads in topological order, so a chain's inputs exist before it.
    for node in order:
        if node.id not in head_of:
            build_chain(node.id, node.id)

    position = {n.id: i for i, n in enumerate(order)}
    vertices = []
    for head_id in sorted(members, key=position.__getitem__):
        head = graph.node(head_id)
        ops = tuple(graph.node(i) for i in sorted(members[head_id], key=position.__getitem__))
        vertices.append(JobVertex(
            id=head_id, vertex_id=head.operator_id, name=chained_names[head_id],
            parallelism=head.parallelism, max_parallelism=head.max_parallelism,
            slot_sharing_group=head.slot_sharing_group, operators=ops,
            chained_edges=tuple(chain_edges.get(head_id, ()))))

    edges, data_sets = [], []
    count: dict[int, int] = {}
    for e in sorted(boundary, key=lambda e: (position[e.source_id], position[e.target_id], e.type_number)):
        producer = head_of[e.source_id]
        count[producer] = count.get(producer, 0) + 1
        ds = IntermediateDataSet(f"{graph.node(producer).operator_id[:16]}-{count[producer]}", producer)
        data_sets.append(ds)
        pattern = (DistributionPattern.POINTWISE if e.partitioner.is_pointwise
                   else DistributionPattern.ALL_TO_ALL)
        edges.append(JobEdge(producer, e.target_id, ds.id, pattern, e))

    job_id = hashlib.md5((graph.job_name + "|" + ",".join(v.vertex_id for v in vertices)).encode()).hexdigest()
    return JobGraph(job_id, graph.job_name, tuple(vertices), tuple(edges), tuple(data_sets), graph)


def _chained_name(operator_name: str, chained_output_names: list[str]) -> str:
    if len(chained_output_names) > 1:
        return f"{operator_name} -> ({', '.join(chained_output_names)})"
    if len(chained_output_names) == 1:
        return f"{operator_name} -> {chained_output_names[0]}"
    return operator_name
