"""An epoch's plan: what every subtask reads, at which processing time, where it snapshots, and
whether the epoch ends in a checkpoint; written ahead to the epoch log.

The plan is committed to the epoch log before anything the epoch produced is (its write runs
while the tasks do), so a replay after a failure reads the same input at the same time and
takes the same checkpoint id: a replayed epoch takes its logged plan instead of a new one.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from runtime.connectors import reader_class, writer_class
from runtime.execution.job_context import JobContext
from runtime.execution.job_execution_result import JobExecutionException
from runtime.execution.recovery import StartingPoint
from runtime.graph.execution_graph import ExecutionGraph
from runtime.metrics.aggregation import RunMetrics
from runtime.storage.filesystems import join
from runtime.task.deployment import TaskDeploymentDescriptor


@dataclass(frozen=True)
class EpochPlan:
    epoch: int
    descriptors: dict               # (vertex id, subtask) -> TaskDeploymentDescriptor
    end_of_input: bool
    checkpoint_id: Optional[int]
    processing_time: int
    incremental: frozenset          # operators whose snapshots this epoch are increments
    next_state_version: Optional[str]
    logged: object                  # the future of its epoch-log record


class EpochPlanner:
    def __init__(self, context: JobContext):
        self.job_graph = context.job_graph
        self.options = context.options
        self.epoch_log = context.storage.epoch_log     # where each plan is written ahead
        self.state = context.storage.state             # where a checkpoint's snapshots go
        self.coordinator = context.coordinator
        self.sources = context.sources
        self.states = context.states
        self.run_id = context.run_id
        self.run_dir = context.run_dir
        self.batch = context.batch
        self.stopping = False       # a stop with savepoint: the next planned epoch is the last

    def last_epoch(self, epoch: int, start: StartingPoint) -> bool:
        """Whether ``epoch`` is the last this run may take (max_epochs, or a stop with savepoint was
        asked for before it was planned)."""
        return self.stopping or (self.options.max_epochs is not None
                                 and epoch - start.first_epoch + 1 >= self.options.max_epochs)

    def processing_time(self, epoch: int) -> int:
        if self.options.clock_start_ms is not None:
            return self.options.clock_start_ms + epoch * self.options.clock_step_ms
        return int(time.time() * 1000)

    def plan(self, epoch: int, start: StartingPoint, watermark: int, execution_graph: ExecutionGraph,
             metrics: RunMetrics) -> EpochPlan:
        """The epoch's plan, its epoch-log record written in the background; a replay takes the
        next logged plan of ``start``."""
        if start.replay:
            logged = start.replay.pop(0)
            processing_time, end_of_input = logged["processing_time"], logged["end_of_input"]
            source_plans = self.sources.replayed_plan(logged)
            checkpoint_id = (self.coordinator.take_id(logged["checkpoint_id"])
                             if logged["checkpoint_id"] is not None else None)
        else:
            processing_time = self.processing_time(epoch)
            source_plans, end_of_input = self.sources.plan_epoch(epoch)
            if self.batch and not end_of_input:
                raise JobExecutionException(
                    f"Job '{self.job_graph.job_name}' runs in BATCH mode but its input cannot be read in one "
                    "epoch (a rate-limited generator?): run it in STREAMING mode.")
            # The last epoch a run may take (max_epochs) ends in a checkpoint too, so the next run
            # (a scheduled one) starts where this one stopped instead of replaying.
            final = end_of_input or self.last_epoch(epoch, start)
            checkpoint_id = self.coordinator.take_id() if self.coordinator.should_trigger(epoch, final) else None
        # The write-ahead record of the epoch: what it reads, at which processing time.
        logged = self.epoch_log.log_epoch_async(self.run_id, epoch, checkpoint_id, processing_time,
                                              watermark, end_of_input, self.sources.logged_plan(source_plans))
        snapshot_dir = self._snapshot_dir(epoch, checkpoint_id, end_of_input)
        incremental = self.states.chains.incremental()
        next_version = self.states.next_version(epoch) if snapshot_dir else None
        descriptors = {}
        for v in self.job_graph.vertices:
            for s in range(v.parallelism):
                descriptors[(v.id, s)] = TaskDeploymentDescriptor(
                    job_vertex_id=v.id, subtask_index=s,
                    attempt_number=execution_graph.vertex(v.id, s).current_execution.attempt_number,
                    epoch=epoch, processing_time=processing_time, end_of_input=end_of_input,
                    splits=tuple(source_plans.get(v.id, {}).get(s, ())),
                    restored_state=self.states.restored.get((v.id, s)),
                    snapshot_dir=snapshot_dir, batch_size=self.options.batch_size,
                    watermarks=self.states.watermarks.get((v.id, s)),
                    state_version=self.states.version, next_state_version=next_version,
                    state_dir=self.options.state_local_dir, incremental=incremental,
                    barrier=checkpoint_id is not None or not self.coordinator.enabled,
                    metric_counts=metrics.counts_of(v.id, s),
                    source_reader=reader_class(v.head.operator.source) if v.is_input_vertex else None,
                    sink_writers={n.id: writer_class(n.operator.sink) for n in v.operators if n.kind == "sink"})
        return EpochPlan(epoch, descriptors, end_of_input, checkpoint_id, processing_time, incremental,
                         next_version, logged)

    def _snapshot_dir(self, epoch: int, checkpoint_id: Optional[int], end_of_input: bool) -> Optional[str]:
        """Where the epoch's tasks write their snapshots (``{table}`` is each state table's name)."""
        if checkpoint_id is not None:
            return self.state.checkpoint_dir(checkpoint_id)
        if self.coordinator.enabled and not end_of_input:
            # Into the next checkpoint's partition: an increment of this epoch is part of the
            # chain that checkpoint lists, and is committed with it where it lies.
            return self.state.checkpoint_dir(self.coordinator.next_id)
        if not end_of_input:
            return join(self.run_dir, "state", f"epoch-{epoch:06d}", "{table}")
        return None     # the last epoch of a bounded job: its state is not needed
