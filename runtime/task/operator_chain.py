"""Flink's OperatorChain: the operators of one job vertex, chained, and where their records go.

It creates the vertex's operators, gives each the declared type of its input, connects chained
operators' outputs to the next operator and the outputs leaving the vertex to a RecordWriter per
JobEdge (pre-aggregating for a vectorizable window downstream). Its own module: how a chain is
wired is apart from how the task runs it.
"""
from __future__ import annotations

from runtime.datastream.partitioner import KeyGroupStreamPartitioner
from runtime.graph.job_graph import JobGraph, JobVertex
from runtime.task.deployment import TaskDeploymentDescriptor
from runtime.task.operator_factory import create_operator
from runtime.task.record_writer import RecordWriter, ShippingWriter
from runtime.task.window_aggregation import PreAggregatingRecordWriter, is_vectorizable


class OperatorChain:
    def __init__(self, job_graph: JobGraph, tdd: TaskDeploymentDescriptor, ctx):
        self.job_graph = job_graph
        self.vertex: JobVertex = job_graph.vertex(tdd.job_vertex_id)
        v = self.vertex
        self.operators = {n.id: create_operator(n, ctx) for n in v.operators}
        stream_graph = job_graph.stream_graph
        for n in v.operators:
            edges = stream_graph.in_edges(n.id)
            if edges:
                self.operators[n.id].input_type = stream_graph.edge_type(edges[0])
        self.all_operators = [self.operators[n.id] for n in v.operators]     # head first
        self.head = self.operators[v.head.id]
        self.writers: list[RecordWriter] = []
        self._wire(tdd)

    def _wire(self, tdd: TaskDeploymentDescriptor) -> None:
        v = self.vertex
        for e in v.chained_edges:
            tag = e.output_tag.tag_id if e.output_tag is not None else None
            self.operators[e.source_id].output.add(self.operators[e.target_id], e.type_number, tag)
        for i, je in enumerate(self.job_graph.outputs_of(v.id)):
            se = je.stream_edge
            consumer = self.job_graph.vertex(je.target_vertex)
            writer = RecordWriter(je, je.data_set, tdd.subtask_index, v.parallelism, consumer.parallelism,
                                  seed=hash((tdd.epoch, tdd.subtask_index, i)) & 0xFFFFFFFF)
            target = self.job_graph.stream_graph.node(se.target_id).operator
            if isinstance(se.partitioner, KeyGroupStreamPartitioner) and is_vectorizable(target):
                writer = PreAggregatingRecordWriter(writer, target, tdd.processing_time,
                                                    self.operators[se.source_id].fail)
            tag = se.output_tag.tag_id if se.output_tag is not None else None
            self.writers.append(writer)
            shipping = ShippingWriter(writer, self.job_graph.stream_graph.edge_type(se))
            self.operators[se.source_id].output.add(shipping, se.type_number, tag)

    def dispose(self) -> None:
        for op in self.all_operators:
            op.dispose()

