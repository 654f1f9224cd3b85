"""The input side of a task whose head reads from the network (Flink's StreamInputProcessor):
the channels of its input gates, one gate per input of the head (the edges of a union share
one), each with a watermark valve (watermarks and idleness per channel), read round-robin an
event per channel at a time; the broadcast side of a broadcast operator first; in BATCH mode
through the sorting input. Its own module: how a task reads its channels is apart from running
the chain.
"""
from __future__ import annotations

from typing import Iterable

from runtime.datastream.operators import BroadcastProcessSpec
from runtime.graph.execution_graph import consumed_partitions
from runtime.graph.job_graph import JobGraph
from runtime.task.channel_events import PreAggregatedPanes, RecordBatch, Watermark
from runtime.task.deployment import TaskDeploymentDescriptor
from runtime.task.record_writer import channel_events
from runtime.task.sorting_input import SortingDataInput, sorts_input
from runtime.task.watermarks import GateWatermarks


class StreamInputProcessor:
    """One epoch of the network inputs of a subtask's head."""

    def __init__(self, job_graph: JobGraph, tdd: TaskDeploymentDescriptor, head, batch: bool):
        self.job_graph = job_graph
        self.vertex = job_graph.vertex(tdd.job_vertex_id)
        self.tdd = tdd
        self.head = head
        self.batch = batch      # BATCH execution mode
        self.gates: dict = {}   # input index -> StatusWatermarkValve, for the acknowledgement

    def process(self, inputs: Iterable) -> int:
        """Reads every input channel of this epoch to its end: the number of records read."""
        received: dict[tuple, list] = {}
        for _, (edge_key, producer, number, payload) in inputs:
            received.setdefault((edge_key, producer), []).append((number, payload))
        head = self.head
        records = 0
        # One gate per input of the head (two for a two-input operator); the edges of a union
        # share a gate. A channel is (data set, producer subtask).
        gates: dict[int, list] = {}
        for je in self.job_graph.inputs_of(self.vertex.id):
            producer_p = self.job_graph.vertex(je.source_vertex).parallelism
            for p in consumed_partitions(je, producer_p, self.vertex.parallelism, self.tdd.subtask_index):
                channel = (je.data_set, p)
                gates.setdefault(je.stream_edge.type_number, []).append(
                    (channel, channel_events(received.pop(channel, []))))
        restored = self.tdd.watermarks.gates if self.tdd.watermarks is not None else {}
        self.gates = {idx: restored.get(idx, GateWatermarks()).valve([c for c, _ in chans])
                      for idx, chans in gates.items()}
        merged = {idx: (self.gates[idx], chans) for idx, chans in gates.items()}
        # BATCH mode sorts a keyed input by key before the operator sees it, as Flink does.
        reader = SortingDataInput(head) if self.batch and sorts_input(head) else head
        for group in _input_order(head, merged):
            records += self._drain(reader, {idx: merged[idx] for idx in group})
        if reader is not head:
            reader.end_input()
        return records

    def _drain(self, head, merged: dict) -> int:
        """Read the gates of ``merged`` round-robin, an event per channel at a time, to their end."""
        records = 0
        cursors = {idx: [(c, iter(ev)) for c, ev in chans] for idx, (_, chans) in merged.items()}
        while cursors:
            for input_index in list(cursors):
                valve = merged[input_index][0]
                live = []
                for channel, it in cursors[input_index]:
                    event = next(it, None)
                    if event is None:
                        continue
                    live.append((channel, it))
                    kind = type(event)
                    if kind is RecordBatch:
                        records += len(event.values)
                        head.process_batch(event.values, event.timestamps, input_index)
                    elif kind is PreAggregatedPanes:
                        records += event.record_count
                        head.process_panes(event)
                    elif kind is Watermark:
                        wm = valve.on_watermark(channel, event.timestamp)
                        if wm is not None:
                            head.process_watermark(wm, input_index)
                    else:
                        wm = valve.on_idle(channel)
                        if wm is not None:
                            head.process_watermark(wm, input_index)
                        elif valve.all_idle:
                            head.process_idle(input_index)
                if live:
                    cursors[input_index] = live
                else:
                    del cursors[input_index]
        return records


def _input_order(head, gates: dict) -> list[list[int]]:
    """Groups of input indexes, read one group after the other. The broadcast side of a broadcast
    operator comes first: within an epoch, every record of the other side sees the broadcast
    state as the epoch's broadcast records left it (Flink's batch mode orders them so; in
    streaming Flink gives no order, here the order is the same on every run and replay)."""
    if isinstance(head.spec, BroadcastProcessSpec):
        return [[i] for i in (2, 1) if i in gates]
    return [list(gates)]
