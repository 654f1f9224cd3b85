"""An epoch's checkpoint, triggered when its tasks acknowledged and completed while the next
epoch runs.

The tasks' snapshots are the checkpoint's barrier (they end the epoch); the coordinator then
writes the state files' listing, the sources' positions, the watermarks and the sinks' commits
as one checkpoint in the background, and the next epoch waits for that completion before the
state chains move on (Flink's CheckpointCoordinator completing a PendingCheckpoint while the
tasks go on). At most one completes at a time. Without checkpoints, each epoch commits its
sinks' staged output on its own.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Optional

from runtime.checkpoint.coordinator import commit_sink
from runtime.common.phase_timer import NO_TIMER, PhaseTimer
from runtime.execution.job_context import JobContext
from runtime.execution.job_execution_result import EpochSummary, JobExecutionException
from runtime.task.watermarks import checkpointed

log = logging.getLogger("runtime.execution.executor")     # the run's messages: read by that name


@dataclass
class _InFlightCheckpoint:
    summary: EpochSummary       # its epoch's, reported once it completed
    checkpoint_id: int
    handed_at: float
    future: object


class CheckpointCompletion:
    def __init__(self, context: JobContext, report: Callable[[EpochSummary], None]):
        self.job_graph = context.job_graph
        self.coordinator = context.coordinator
        self.sources = context.sources
        self.states = context.states
        self.report = report
        self.in_flight: Optional[_InFlightCheckpoint] = None

    def trigger(self, checkpoint_id: Optional[int], epoch: int, acks: list, timer: PhaseTimer = NO_TIMER):
        """Hand the epoch's checkpoint to the coordinator (the future of its completion, None
        without one); ``timer`` (the epoch's) times the checkpoint's phases."""
        if checkpoint_id is not None:
            watermarks = checkpointed([(a.job_vertex_id, a.subtask_index, a.task_watermarks, a.watermark) for a in acks],
                                      {v.id: v.head.operator_id for v in self.job_graph.vertices})
            # The checkpoint starts when the tasks' snapshots do (their barrier is the epoch's end).
            snapshot_started = time.time() - max((a.snapshot_ms for a in acks), default=0) / 1000
            chains = self.states.chains
            return self.coordinator.complete_async(
                checkpoint_id, epoch, snapshot_started, chains.to_commit(checkpoint_id), self.sources.enumerators,
                watermarks, self.coordinator.staged(), chains=chains.listing(), timer=timer)
        if not self.coordinator.enabled:
            for committer, committables in self.coordinator.staged():
                commit_sink(committer, committables, epoch + 1, timer)
        return None

    def hold(self, summary: EpochSummary, checkpoint_id: int, completion) -> None:
        """``summary``'s epoch is reported when its checkpoint completed (``settle``)."""
        self.in_flight = _InFlightCheckpoint(summary, checkpoint_id, time.time(), completion)

    def holds(self, summary: EpochSummary) -> bool:
        return self.in_flight is not None and self.in_flight.summary is summary

    def settle(self, failing: bool = False) -> None:
        """Wait for the checkpoint completing in the background and take its outcome: its files
        are committed, its epoch is reported. A failed completion fails the epoch that waited
        for it (the run falls back to the checkpoint before, as a crash would), or, when the run
        is failing already, is recorded and logged."""
        pending, self.in_flight = self.in_flight, None
        if pending is None:
            return
        epoch = pending.summary.epoch
        try:
            record, ended = pending.future.result()
        except Exception as e:
            cause = f"{type(e).__name__}: {e}"
            message = (f"Checkpoint {pending.checkpoint_id} failed: {cause} (epoch {epoch} of job "
                       f"'{self.job_graph.job_name}')")
            try:
                self.coordinator.fail(pending.checkpoint_id, epoch, pending.summary.started_at, cause)
            except Exception as recording:
                message += f"; recording it failed too: {recording}"
            if failing:     # the run's own failure is the one to report
                log.error("%s", message)
                return
            raise JobExecutionException(message) from e
        self.states.chains.committed(pending.checkpoint_id)
        self.sources.notify_checkpoint_complete(record)
        pending.summary.checkpoint_id = record.checkpoint_id
        # The driver wrote the sources' positions with the checkpoint: bytes of the epoch too
        # (a checkpoint of sources alone wrote nothing else).
        pending.summary.state_bytes_written += sum(f["size"] for op in record.operators for f in op["files"]
                                                   if f.get("source_state"))
        pending.summary.checkpoint_ms = (ended - pending.handed_at) * 1000
        self.report(pending.summary)
