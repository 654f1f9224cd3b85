"""Plans as JSON in the shapes Flink's tools read.

``streaming_plan_as_json``: ``getStreamingPlanAsJSON`` / ``getExecutionPlan``, the input of
Flink's plan visualizer. ``job_graph_as_json``: the JobGraph plan the Flink web UI draws.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # the StreamGraph calls this module (get_streaming_plan_as_json)
    from runtime.graph.stream_graph import StreamGraph

_PACT = {"source": "Data Source", "sink": "Data Sink", "operator": "Operator"}


def streaming_plan_as_json(graph: StreamGraph) -> str:
    nodes = [(n.id, n.operator_name, _PACT[n.kind], n.parallelism) for n in graph.nodes]
    nodes += [(n.id, n.operator_name, "Operator", n.parallelism) for n in graph.shown_nodes]
    entries = []
    predecessors = _predecessors(graph)
    for node_id, name, pact, parallelism in _in_order(nodes, predecessors):
        entry = {"id": node_id, "type": name, "pact": pact, "contents": name, "parallelism": parallelism}
        if predecessors[node_id]:
            # Flink's JSONGenerator adds the input before testing the list size, so every
            # predecessor is marked "second"; kept for byte-compatible plans.
            entry["predecessors"] = [{"id": source, "ship_strategy": strategy, "side": "second"}
                                     for source, strategy in predecessors[node_id].items()]
        entries.append(entry)
    return json.dumps({"nodes": entries}, indent=2)


def _predecessors(graph: StreamGraph) -> dict[int, dict[int, str]]:
    """Each node's inputs (node -> ship strategy), in the order of the graph's edges; an edge drawn
    through the shown nodes it passed."""
    predecessors = {n.id: {} for n in graph.nodes + graph.shown_nodes}
    for e in graph.edges:
        source = e.source_id
        for node_id, partitioner in e.shown_through:
            predecessors[node_id].setdefault(source, partitioner.ship_strategy)
            source = node_id
        partitioner = e.shown_partitioner if e.shown_through else e.partitioner
        predecessors[e.target_id].setdefault(source, partitioner.ship_strategy)
    return predecessors


def _in_order(nodes: list, predecessors: dict) -> list:
    """The nodes each after all its inputs, ties by id (StreamGraph.topological_order, which
    refused a cycle already)."""
    waiting = {node[0]: set(predecessors[node[0]]) for node in nodes}
    by_id = {node[0]: node for node in nodes}
    order = []
    while waiting:
        ready = min(i for i, inputs in waiting.items() if not inputs)
        order.append(by_id[ready])
        del waiting[ready]
        for inputs in waiting.values():
            inputs.discard(ready)
    return order


def job_graph_as_json(job_graph) -> str:
    nodes = []
    for v in job_graph.vertices:
        nodes.append({
            "id": v.vertex_id,
            "parallelism": v.parallelism,
            "operator": "",
            "operator_strategy": "",
            "description": v.name,
            "inputs": [
                {"num": i, "id": job_graph.vertex(e.source_vertex).vertex_id,
                 "ship_strategy": e.ship_strategy, "exchange": "pipelined_bounded"}
                for i, e in enumerate(job_graph.inputs_of(v.id))],
            "optimizer_properties": {},
        })
    return json.dumps({"jid": job_graph.job_id, "name": job_graph.job_name, "nodes": nodes}, indent=2)
