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
    nodes = []
    for node in graph.topological_order():
        entry = {
            "id": node.id,
            "type": node.operator_name,
            "pact": _PACT[node.kind],
            "contents": node.operator_name,
            "parallelism": node.parallelism,
        }
        in_edges = graph.in_edges(node.id)
        if in_edges:
            # Flink's JSONGenerator adds the input before testing the list size, so every
            # predecessor is marked "second"; kept for byte-compatible plans.
            entry["predecessors"] = [
                {"id": e.source_id, "ship_strategy": e.partitioner.ship_strategy, "side": "second"}
                for e in in_edges]
        nodes.append(entry)
    return json.dumps({"nodes": nodes}, indent=2)


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
