"""One subtask of one epoch (Flink's StreamTask with its input processor).

The task builds its operator chain (runtime.task.operator_chain), has its state restored
(runtime.task.task_state_manager), reads its input (a source's splits: runtime.task.source_reader,
or the channels of its input gates, merged with a watermark valve per gate), pushes batches through
the chain, has its state snapshotted, hands over the records its writers hold
(runtime.task.record_writer), and returns an acknowledgement (runtime.task.deployment). A failure
in user code is returned as a failed acknowledgement naming operator, subtask and record, so Spark
does not retry a deterministic error.
"""
from __future__ import annotations

import gc
import pickle
import time
import traceback
from typing import Iterable, Iterator

from runtime.common.faults import fault_point
from runtime.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from runtime.datastream.operators import BroadcastProcessSpec
from runtime.graph.execution_graph import consumed_partitions
from runtime.graph.job_graph import JobGraph
from runtime.state.backend import state_backend_type
from runtime.state.key_groups import compute_key_group_range_for_operator_index
from runtime.task.channel_events import PreAggregatedPanes, RecordBatch, Watermark
from runtime.task.deployment import ACK, Acknowledgement, RestoredState, SplitRead, TaskDeploymentDescriptor
from runtime.task.operator_chain import OperatorChain
from runtime.task.operators import UserCodeException
from runtime.task.record_writer import channel_events
from runtime.task.sorting_input import SortingDataInput, sorts_input
from runtime.task.source_reader import SourceInput
from runtime.task.task_context import TaskContext
from runtime.task.task_state_manager import TaskStateManager, local_state_dir
from runtime.task.watermarks import GateWatermarks, TaskWatermarks

# The messages between driver and task are importable from here too, as before this module was split.
__all__ = ["ACK", "Acknowledgement", "RestoredState", "SplitRead", "StreamTask", "TaskDeploymentDescriptor",
           "run_task"]


class StreamTask:
    def __init__(self, job_graph: JobGraph, tdd: TaskDeploymentDescriptor, job_parameters: dict):
        self.job_graph = job_graph
        self.tdd = tdd
        self.vertex = v = job_graph.vertex(tdd.job_vertex_id)
        kgr = None
        if v.is_keyed:
            kgr = compute_key_group_range_for_operator_index(v.max_parallelism, v.parallelism, tdd.subtask_index)
        self.ctx = TaskContext(v.name, tdd.subtask_index, v.parallelism, v.max_parallelism,
                               tdd.attempt_number, tdd.processing_time, job_parameters, kgr, tdd.epoch,
                               tdd.sink_writers,
                               state_backend=state_backend_type(dict(job_graph.settings.configuration)),
                               state_dir=local_state_dir(job_graph.job_id, tdd),
                               barrier=tdd.barrier, end_of_input=tdd.end_of_input,
                               metric_counts=tdd.metric_counts)
        self.ctx.batch = self.batch = job_graph.settings.runtime_mode == "BATCH"
        self.chain = OperatorChain(job_graph, tdd, self.ctx)
        self.operators = self.chain.operators       # node id -> operator
        self.head = self.chain.head
        self.state = TaskStateManager(tdd, self.ctx)
        self.gates: dict = {}       # input index -> StatusWatermarkValve, for the acknowledgement

    # ---- running -----------------------------------------------------------------------

    def run(self, inputs: Iterable) -> Iterator[tuple]:
        # Records are short-lived tuples without cycles: the cyclic collector would only scan
        # them over and over. It runs again once the task is done.
        collecting = gc.isenabled()
        gc.disable()
        try:
            yield from self._run(inputs)
        finally:
            self.chain.dispose()
            if collecting:
                gc.enable()

    def _run(self, inputs: Iterable) -> Iterator[tuple]:
        started = time.time()
        ack = Acknowledgement(self.tdd.job_vertex_id, self.tdd.subtask_index, started_at=started)
        try:
            self.state.restore(self.chain.all_operators, ack)
            self._restore_watermarks()
            for op in reversed(self.chain.all_operators):
                op.open()
            for op in self.chain.all_operators:
                op.advance_processing_time(self.tdd.processing_time)
            if self.vertex.is_input_vertex:
                ack.records_in, ack.split_states = SourceInput(self.head, self.tdd, self.ctx, self.batch).run()
            else:
                ack.records_in = self._run_inputs(inputs)
            if self.tdd.end_of_input:
                # Bounded input ended: fire every processing-time timer as Flink's batch mode does.
                for op in self.chain.all_operators:
                    op.advance_processing_time(MAX_WATERMARK)
            for op in self.chain.all_operators:
                op.close()
            ack.metrics = self.ctx.metrics.report()     # after close(): what it counts counts too
            fault_point("mid-epoch", self.tdd.epoch)
            self.state.snapshot(self.chain.all_operators, ack)
            self._finish_sinks(ack)
        except UserCodeException as e:
            ack.failure = str(e)
        except Exception as e:
            ack.failure = (f"{self.vertex.name} {self.ctx.subtask_label} failed: {type(e).__name__}: {e}\n"
                           f"--- original traceback ---\n{traceback.format_exc()}")
        if ack.failure is None:
            for writer in self.chain.writers:
                yield from writer.rows()
            ack.records_out = sum(w.records_out for w in self.chain.writers)
            ack.watermark = max((op.current_watermark for op in self.chain.all_operators), default=MIN_WATERMARK)
            ack.task_watermarks = TaskWatermarks(
                {i: GateWatermarks.of(valve) for i, valve in self.gates.items()},
                {op.node.operator_id: (op.current_watermark, *op.input_watermarks) for op in self.chain.all_operators})
            for op in self.chain.all_operators:
                ack.late_records_dropped += getattr(op, "num_late_records_dropped", 0)
        ack.duration_ms = (time.time() - started) * 1000
        yield ACK, pickle.dumps(ack, protocol=5)

    def _finish_sinks(self, ack: Acknowledgement) -> None:
        """Each sink's committable of the epoch, for the driver to commit (the deployment names
        the subtask's sinks with their writer classes)."""
        for node_id in self.tdd.sink_writers:
            sink = self.operators[node_id]
            ack.records_written += sink.records_in
            ack.committables[node_id] = sink.committable()

    def _restore_watermarks(self) -> None:
        restored = self.tdd.watermarks
        if restored is None:
            return
        for op in self.chain.all_operators:
            marks = restored.operators.get(op.node.operator_id)
            if marks is not None:
                op.current_watermark, *inputs = marks
                op.input_watermarks = list(inputs)

    # ---- network inputs ----------------------------------------------------------------

    def _run_inputs(self, inputs: Iterable) -> int:
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


def run_task(job_graph: JobGraph, tdd: TaskDeploymentDescriptor, job_parameters: dict,
             inputs: Iterable) -> Iterator[tuple]:
    return StreamTask(job_graph, tdd, job_parameters).run(inputs)
