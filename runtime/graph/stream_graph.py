"""StreamGraph: one node per operator, edges carrying their partitioner.

``generate_stream_graph`` is Flink's StreamGraphGenerator as a pure function: virtual
transformations (partitioning, union, side outputs, a keyed stream's values) become no node,
only edge properties; an edge with no partitioner gets FORWARD when the parallelism matches and
REBALANCE otherwise; FORWARD across a parallelism change is refused.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Optional

from runtime.datastream import partitioner as part
from runtime.datastream.connectors.base import Boundedness
from runtime.datastream.operators import ChainingStrategy, OperatorSpec, SinkSpec, SourceSpec
from runtime.datastream.pipeline import Pipeline, PipelineSettings
from runtime.datastream.transformations import (
    VIRTUAL, KeyedStreamValuesTransformation, OneInputTransformation, PartitionTransformation,
    SideOutputTransformation, SinkTransformation, SourceTransformation, Transformation,
    TwoInputTransformation, UnionTransformation)
from runtime.graph.plan_json import streaming_plan_as_json
from runtime.state.key_groups import compute_default_max_parallelism

DEFAULT_SLOT_SHARING_GROUP = "default"


class StreamGraphError(ValueError):
    """A job that cannot be compiled; the message names the operator and the fix."""


@dataclass(frozen=True)
class StreamNode:
    id: int
    operator_name: str
    kind: str                       # "source", "operator" or "sink"
    parallelism: int
    max_parallelism: int
    slot_sharing_group: str
    chaining_strategy: ChainingStrategy
    operator_id: str                # stable id that state is matched by (from uid, or generated)
    uid: Optional[str] = None
    # Whether the parallelism was set on the operator (kept on restore at another default).
    parallelism_configured: bool = False
    output_type: Any = field(default=None, compare=False)
    operator: OperatorSpec = field(default=None, compare=False, repr=False)
    state_key_selectors: tuple = field(default=(), compare=False, repr=False)

    @property
    def is_keyed(self) -> bool:
        return any(k is not None for k in self.state_key_selectors)

    def __str__(self) -> str:
        return f"{self.operator_name}-{self.id}"


@dataclass(frozen=True)
class ShownNode:
    """A node the plan JSON shows that runs as no operator: PyFlink's ``_keyed_stream_values_operator``
    (a KeyedStreamValuesTransformation), so that a plan has the nodes PyFlink's has, at the
    parallelism PyFlink's map has (the default)."""

    id: int
    operator_name: str
    parallelism: int


@dataclass(frozen=True)
class StreamEdge:
    source_id: int
    target_id: int
    type_number: int                # 0: one-input; 1 or 2: input of a two-input operator
    partitioner: part.StreamPartitioner
    output_tag: Any = None          # side output this edge carries, None for the main output
    # The shown nodes the plan draws this edge through, in order, each with the partitioner into
    # it; and the partitioner from the last of them to the target.
    shown_through: tuple = field(default=(), compare=False)
    shown_partitioner: Optional[part.StreamPartitioner] = field(default=None, compare=False)

    @property
    def edge_id(self) -> str:
        tag = f"_{self.output_tag.tag_id}" if self.output_tag is not None else ""
        return f"{self.source_id}_{self.target_id}_{self.type_number}{tag}_{self.partitioner}"


@dataclass(frozen=True)
class StreamGraph:
    settings: PipelineSettings
    nodes: tuple[StreamNode, ...]
    edges: tuple[StreamEdge, ...]
    # The SlotSharingGroups that declare resources, one per name (Flink's slotSharingGroupResource).
    slot_sharing_groups: tuple = ()
    shown_nodes: tuple[ShownNode, ...] = ()     # nodes of the plan JSON only

    @property
    def job_name(self) -> str:
        return self.settings.job_name

    def slot_sharing_group(self, name: str):
        """The group's declared resources (a SlotSharingGroup), or None when it declares none."""
        return next((g for g in self.slot_sharing_groups if g.get_name() == name), None)

    @cached_property
    def _by_id(self) -> dict[int, StreamNode]:
        return {n.id: n for n in self.nodes}

    def node(self, node_id: int) -> StreamNode:
        return self._by_id[node_id]

    def in_edges(self, node_id: int) -> tuple[StreamEdge, ...]:
        return tuple(e for e in self.edges if e.target_id == node_id)

    def out_edges(self, node_id: int) -> tuple[StreamEdge, ...]:
        return tuple(e for e in self.edges if e.source_id == node_id)

    def edge_type(self, edge: StreamEdge):
        """The declared type of the records on ``edge``: a side output's is its tag's."""
        tag = edge.output_tag
        return tag.type_info if tag is not None else self.node(edge.source_id).output_type

    @property
    def source_ids(self) -> tuple[int, ...]:
        return tuple(n.id for n in self.nodes if n.kind == "source")

    @property
    def sink_ids(self) -> tuple[int, ...]:
        return tuple(n.id for n in self.nodes if n.kind == "sink")

    def topological_order(self) -> tuple[StreamNode, ...]:
        """Nodes ordered so each comes after all its inputs (ties by id); refuses cycles."""
        indegree = {n.id: 0 for n in self.nodes}
        for e in self.edges:
            indegree[e.target_id] += 1
        ready = sorted(i for i, d in indegree.items() if d == 0)
        order: list[int] = []
        while ready:
            current = ready.pop(0)
            order.append(current)
            for e in self.out_edges(current):
                indegree[e.target_id] -= 1
                if indegree[e.target_id] == 0:
                    ready.append(e.target_id)
                    ready.sort()
        if len(order) != len(self.nodes):
            stuck = ", ".join(f"'{self.node(i).operator_name}'" for i in sorted(set(indegree) - set(order)))
            raise StreamGraphError(
                f"The job graph has a cycle through {stuck}; streams must flow from sources to sinks "
                "without loops.")
        return tuple(self.node(i) for i in order)

    def get_streaming_plan_as_json(self) -> str:
        return streaming_plan_as_json(self)


# ---- generation ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Output:
    """A logical output of a transformation: the node it comes from, and how it is routed."""

    node_id: int
    partitioner: Optional[part.StreamPartitioner] = None
    output_tag: Any = None
    # The shown nodes it passed ((node, partitioner into it), ...) and the partitioner set since
    # the last of them (or since the node it comes from).
    through: tuple = ()
    partitioner_since: Optional[part.StreamPartitioner] = None


def generate_stream_graph(pipeline: Pipeline) -> StreamGraph:
    """Compile the job's transformations into its StreamGraph (Flink's StreamGraphGenerator)."""
    transformations, settings = pipeline.transformations, pipeline.settings
    if not any(not isinstance(t, VIRTUAL) for t in transformations):
        raise StreamGraphError(
            "No operators defined in streaming topology. Cannot execute. Add a sink such as print().")
    gen = _Generator(settings)
    for t in transformations:
        gen.transform(t)
    nodes = tuple(sorted(gen.nodes.values(), key=lambda n: n.id))
    settings = replace(settings, runtime_mode=resolve_runtime_mode(settings.runtime_mode, nodes))
    graph = StreamGraph(settings, nodes, tuple(gen.edges), tuple(gen.slot_sharing_groups.values()),
                        tuple(gen.shown_nodes.values()))
    order = graph.topological_order()
    return replace(graph, nodes=_with_operator_ids(graph, order))


def resolve_runtime_mode(mode: str, nodes: tuple[StreamNode, ...]) -> str:
    """STREAMING or BATCH: AUTOMATIC is BATCH when every source is bounded; BATCH refuses an
    unbounded source (Flink's message, then which source)."""
    unbounded = [n.operator_name for n in nodes if n.kind == "source"
                 and n.operator.source.boundedness != Boundedness.BOUNDED]
    if mode == "AUTOMATIC":
        return "STREAMING" if unbounded else "BATCH"
    if mode == "BATCH" and unbounded:
        raise StreamGraphError(
            "Detected an UNBOUNDED source with the 'execution.runtime-mode' set to 'BATCH'. This "
            "combination is not allowed, please set the 'execution.runtime-mode' to STREAMING or "
            f"AUTOMATIC: {unbounded[0]} is unbounded (a socket, a monitored folder, a "
            "continuous Delta table or a generator without a count). Run the job in STREAMING "
            "mode, or read a bounded input.")
    return mode


class _Generator:
    def __init__(self, settings: PipelineSettings):
        self.settings = settings
        self.nodes: dict[int, StreamNode] = {}
        self.edges: list[StreamEdge] = []
        self.done: dict[int, tuple[_Output, ...]] = {}
        self.slot_sharing_groups = {g.get_name(): g for g in settings.slot_sharing_groups}
        self.shown_nodes: dict[int, ShownNode] = {}

    def transform(self, t: Transformation) -> tuple[_Output, ...]:
        if t.id in self.done:
            return self.done[t.id]
        if isinstance(t, PartitionTransformation):
            out = tuple(replace(o, partitioner=t.partitioner, partitioner_since=t.partitioner)
                        for o in self.transform(t.input))
        elif isinstance(t, KeyedStreamValuesTransformation):
            # The records keep their route (by key, to the next operator); the plan shows the node.
            shown = self.shown_nodes[t.id] = ShownNode(t.id, t.name, self.settings.default_parallelism)
            out = tuple(replace(o, through=o.through + ((shown, self._shown_partitioner(o, shown.parallelism)),),
                                partitioner_since=None)
                        for o in self.transform(t.input))
        elif isinstance(t, SideOutputTransformation):
            out = tuple(replace(o, output_tag=t.output_tag) for o in self.transform(t.input))
        elif isinstance(t, UnionTransformation):
            out = tuple(o for i in t.union_inputs for o in self.transform(i))
        elif isinstance(t, SourceTransformation):
            self._add_node(t, "source", (), ())
            out = (_Output(t.id),)
        elif isinstance(t, (OneInputTransformation, SinkTransformation)):
            inputs = self.transform(t.input)
            keys = (getattr(t, "state_key_selector", None),)
            self._add_node(t, "sink" if isinstance(t, SinkTransformation) else "operator", inputs, keys)
            for o in inputs:
                self._add_edge(o, t.id, 0)
            out = (_Output(t.id),)
        elif isinstance(t, TwoInputTransformation):
            in1, in2 = self.transform(t.input1), self.transform(t.input2)
            self._add_node(t, "operator", in1 + in2, (t.state_key_selector1, t.state_key_selector2))
            for o in in1:
                self._add_edge(o, t.id, 1)
            for o in in2:
                self._add_edge(o, t.id, 2)
            out = (_Output(t.id),)
        else:
            raise StreamGraphError(f"Unknown transformation {type(t).__name__} '{t.name}'")
        self.done[t.id] = out
        return out

    def _slot_sharing_group(self, t: Transformation, inputs) -> str:
        group = t.slot_sharing_group
        if group is not None:
            name = group.get_name()
            declared = self.slot_sharing_groups.setdefault(name, group) if group.has_resources() else None
            if declared is not None and declared != group:    # SlotSharingGroups compare by resources
                raise StreamGraphError(
                    f"The slot sharing group {name} has been configured with two different resource spec. "
                    f"Operator '{t.name}' declares {group!r}, another operator or "
                    f"register_slot_sharing_group() {declared!r}: declare one SlotSharingGroup per name.")
            return name
        groups = {self.nodes[o.node_id].slot_sharing_group for o in inputs}
        return groups.pop() if len(groups) == 1 else DEFAULT_SLOT_SHARING_GROUP

    def _add_node(self, t: Transformation, kind: str, inputs, key_selectors) -> None:
        s = self.settings
        parallelism = t.parallelism or _collect_parallelism(t, [self.nodes[o.node_id] for o in inputs]) \
            or s.default_parallelism
        if t.max_parallelism is not None:
            max_parallelism = t.max_parallelism
        elif s.default_max_parallelism > 0:
            max_parallelism = s.default_max_parallelism
        else:
            max_parallelism = compute_default_max_parallelism(parallelism)
        prefix = {"source": "Source: ", "sink": "Sink: "}.get(kind, "")
        name = prefix + t.name
        if parallelism > max_parallelism:
            raise StreamGraphError(
                f"The maximum parallelism ({max_parallelism}) of the stream node {name} is smaller "
                f"than the parallelism ({parallelism}). Increase the maximum parallelism or decrease "
                f"the parallelism of this operator.")
        operator = t.operator
        self.nodes[t.id] = StreamNode(
            id=t.id, operator_name=name, kind=kind, parallelism=parallelism,
            max_parallelism=max_parallelism, slot_sharing_group=self._slot_sharing_group(t, inputs),
            chaining_strategy=t.chaining_strategy or operator.chaining_strategy,
            operator_id="", uid=t.uid, parallelism_configured=t.parallelism is not None,
            output_type=t.output_type, operator=operator,
            state_key_selectors=tuple(key_selectors) if any(k is not None for k in key_selectors) else ())

    def _shown_partitioner(self, upstream: _Output, parallelism: int) -> part.StreamPartitioner:
        """How the plan draws ``upstream`` into a node of ``parallelism`` from the last shown node
        it passed (or its own node)."""
        last = upstream.through[-1][0] if upstream.through else self.nodes[upstream.node_id]
        return upstream.partitioner_since or _default_partitioner(last.parallelism, parallelism)

    def _add_edge(self, upstream: _Output, target_id: int, type_number: int) -> None:
        source, target = self.nodes[upstream.node_id], self.nodes[target_id]
        p = upstream.partitioner or _default_partitioner(source.parallelism, target.parallelism)
        if isinstance(p, part.ForwardPartitioner) and source.parallelism != target.parallelism:
            raise StreamGraphError(
                "Forward partitioning does not allow change of parallelism. Upstream operation: "
                f"{source} parallelism: {source.parallelism}, downstream operation: {target} "
                f"parallelism: {target.parallelism} You must use another partitioning strategy, "
                "such as broadcast, rebalance, shuffle or global.")
        if isinstance(p, part.KeyGroupStreamPartitioner):
            # The producer routes by the consumer's key groups.
            p = replace(p, max_parallelism=target.max_parallelism)
        shown = self._shown_partitioner(upstream, target.parallelism) if upstream.through else None
        self.edges.append(StreamEdge(source.id, target.id, type_number, p, upstream.output_tag,
                                     tuple((n.id, into) for n, into in upstream.through), shown))


def _default_partitioner(source_parallelism: int, target_parallelism: int) -> part.StreamPartitioner:
    """An edge without a partitioner: FORWARD when the parallelism matches, else REBALANCE."""
    if source_parallelism == target_parallelism:
        return part.ForwardPartitioner()
    return part.RebalancePartitioner()


def _collect_parallelism(t: Transformation, inputs: list[StreamNode]) -> Optional[int]:
    """execute_and_collect's sink runs at the parallelism of the stream it collects, chained to it.

    Flink's collect sink has parallelism 1: it gathers the stream in one subtask. Sluice's hands
    each subtask's records to the driver, which appends them subtask after subtask, so the
    records come back as Flink's would without a shuffle into one task: a parallelism-1 stream
    (from_collection at any default parallelism) in its order, a parallel one a subtask at a time.
    """
    if not (isinstance(t.operator, SinkSpec) and t.operator.kind == "collect"):
        return None
    parallelisms = {n.parallelism for n in inputs}
    return parallelisms.pop() if len(parallelisms) == 1 else None


def _with_operator_ids(graph: StreamGraph, order: tuple[StreamNode, ...]) -> tuple[StreamNode, ...]:
    """Give each node its OperatorID: from its uid, or from its place in the graph.

    As Flink's StreamGraphHasherV2, a generated id depends on the node's position (its
    inputs' ids and its index among them), not on its name, so renaming an operator keeps
    its state; duplicate uids are refused.
    """
    ids: dict[int, str] = {}
    seen_uids: dict[str, StreamNode] = {}
    for index, node in enumerate(order):
        if node.uid is not None:
            if node.uid in seen_uids:
                raise StreamGraphError(
                    f'Hash collision on user-specified ID "{node.uid}" ({seen_uids[node.uid].operator_name} '
                    f'and {node.operator_name}). Most likely cause is a non-unique ID. Please check '
                    'that all IDs specified via uid(String) are unique.')
            seen_uids[node.uid] = node
            seed = "uid:" + node.uid
        else:
            inputs = sorted(ids[e.source_id] for e in graph.in_edges(node.id))
            seed = f"auto:{index}:{node.kind}:{','.join(inputs)}"
        ids[node.id] = hashlib.md5(seed.encode()).hexdigest()
    return tuple(replace(n, operator_id=ids[n.id]) for n in graph.nodes)
