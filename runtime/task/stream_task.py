"""One subtask of one epoch (Flink's StreamTask): runs its operator chain.

The task builds its operator chain (runtime.task.operator_chain), has its state restored
(runtime.task.task_state_manager), reads its input (a source's splits: runtime.task.source_reader,
or the channels of its input gates: runtime.task.input_processor) through the chain, has its state
snapshotted, hands over the records its writers hold (runtime.task.record_writer), and returns an
acknowledgement (runtime.task.deployment). A failure in user code is returned as a failed
acknowledgement naming operator, subtask and record, so Spark does not retry a deterministic error.
"""
from __future__ import annotations

import gc
import time
import traceback
from typing import Iterable, Iterator

from runtime.common.faults import fault_point
from runtime.common.pickling import dumps
from runtime.common.throwables import is_unrecoverable
from runtime.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from runtime.graph.job_graph import JobGraph
from runtime.state.backend import heap_compact_after, state_backend_type
from runtime.state.key_groups import compute_key_group_range_for_operator_index
from runtime.task.deployment import ACK, Acknowledgement, RestoredState, SplitRead, TaskDeploymentDescriptor
from runtime.task.input_processor import StreamInputProcessor
from runtime.task.operator_chain import OperatorChain
from runtime.task.operators import UserCodeException
from runtime.task.source_reader import SourceInput
from runtime.task.task_context import TaskContext
from runtime.task.task_info import TaskInfo
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
        info = TaskInfo(v.name, tdd.subtask_index, v.parallelism, v.max_parallelism, tdd.attempt_number)
        self.ctx = TaskContext(info, tdd.processing_time, job_parameters, key_group_range=kgr, epoch=tdd.epoch,
                               sink_writers=tdd.sink_writers,
                               state_backend=state_backend_type(dict(job_graph.settings.configuration)),
                               heap_compact_after=heap_compact_after(dict(job_graph.settings.configuration)),
                               state_dir=local_state_dir(job_graph.job_id, tdd),
                               barrier=tdd.barrier, end_of_input=tdd.end_of_input,
                               metric_counts=tdd.metric_counts, batch_size=tdd.batch_size)
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
                source = SourceInput(self.head, self.tdd, self.ctx, self.batch)
                ack.records_in, ack.split_states = source.run()
                ack.record_times = source.record_times or None
            else:
                processor = StreamInputProcessor(self.job_graph, self.tdd, self.head, self.batch)
                ack.records_in = processor.process(inputs)
                self.gates = processor.gates
            if self.tdd.end_of_input:
                # Bounded input ended: fire every processing-time timer as Flink's batch mode does.
                for op in self.chain.all_operators:
                    op.advance_processing_time(MAX_WATERMARK)
            for op in self.chain.all_operators:
                op.close()
            ack.metrics = self.ctx.metrics.report()     # after close(): what it counts counts too
            # The records' timestamps as first known: the source's, else those a chained assigner gave.
            ack.record_times = ack.record_times or next(
                (op.record_times for op in self.chain.all_operators if getattr(op, "record_times", None)), None)
            fault_point("mid-epoch", self.tdd.epoch)
            self.state.snapshot(self.chain.all_operators, ack)
            self._finish_sinks(ack)
        except Exception as e:
            ack.failure = str(e) if isinstance(e, UserCodeException) else (
                f"{self.vertex.name} {self.ctx.subtask_label} failed: {type(e).__name__}: {e}\n"
                f"--- original traceback ---\n{traceback.format_exc()}")
            ack.unrecoverable = is_unrecoverable(e)
        if ack.failure is None:
            for writer in self.chain.writers:
                yield from writer.rows()
            ack.records_out = sum(w.records_out for w in self.chain.writers)
            operators = self.chain.all_operators
            ack.watermark = max((op.current_watermark for op in operators), default=MIN_WATERMARK)
            ack.task_watermarks = TaskWatermarks(
                {i: GateWatermarks.of(valve) for i, valve in self.gates.items()},
                {op.node.operator_id: (op.current_watermark, *op.input_watermarks) for op in operators})
            for op in operators:
                ack.late_records_dropped += getattr(op, "num_late_records_dropped", 0)
        ack.duration_ms = (time.time() - started) * 1000
        yield ACK, dumps(ack)     # with the collected records

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


def run_task(job_graph: JobGraph, tdd: TaskDeploymentDescriptor, job_parameters: dict,
             inputs: Iterable) -> Iterator[tuple]:
    return StreamTask(job_graph, tdd, job_parameters).run(inputs)
