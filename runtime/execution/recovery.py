"""Where a run starts, and where it falls back to when a checkpoint's files turn out damaged.

A run restores the checkpoint (or savepoint) its preflight chose and replays the epochs logged
after it (their sink commits are no-ops, the plans the same), or replays the epochs a fresh
start logged before its first checkpoint completed, or starts fresh (Flink's
CheckpointCoordinator.restoreLatestCheckpointedState with the epoch log as the source of
replays). A run whose restore finds state files damaged (their checksum, or gone) marks those
checkpoints INVALID and restores the one ``latest`` now picks, as Flink's failover falls back
to an earlier checkpoint.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Optional

from runtime.checkpoint.restore import (NoUsableCheckpointException, RestorePoint, choose, damaged_checkpoints,
                                        invalidate, print_warning, source_positions)
from runtime.checkpoint.sink_committers import committed_sinks
from runtime.checkpoint.checkpoint_record import CheckpointException
from runtime.common.watermark_strategy import MIN_WATERMARK
from runtime.execution.job_context import JobContext
from runtime.execution.preflight import START_OVER, warn_start_over
from runtime.state.snapshot_reader import CorruptStateException

log = logging.getLogger(__name__)


@dataclass
class StartingPoint:
    """Where a run's epochs start: the first epoch, the job's watermark, the checkpoint restored
    and the logged plans of the epochs to replay (taken one by one as they run)."""
    first_epoch: int = 0
    watermark: int = MIN_WATERMARK
    restored_from: Optional[int] = None
    replay: list = field(default_factory=list)


class Recovery:
    def __init__(self, context: JobContext, say: Callable[[str], None]):
        self.context = context
        self.say = say

    def start(self, point: Optional[RestorePoint], run_id: str) -> StartingPoint:
        """Restore ``point``, or replay what a fresh start logged, or start fresh."""
        if point is not None:
            return self.restore(point)
        if self.context.batch:
            pass    # a fresh run of the whole input: nothing to replay
        elif self.context.options.restore_from != START_OVER:
            logged = self.context.storage.epoch_log.logged_epochs(-1, None)
            if any(e["checkpoint_id"] is not None for e in logged):
                self.say(f"no completed checkpoint since the job started: replaying its {len(logged)} "
                         f"logged epoch(s) from the start")
                return StartingPoint(replay=logged)
        else:
            warn_start_over(self.context.job_graph, self.context.storage)
        if not self.context.batch:
            self.say("no checkpoint to restore: the job starts fresh")
        self.context.storage.epoch_log.log_start(run_id, self.context.coordinator.next_id)
        return StartingPoint()

    def restore(self, point: RestorePoint) -> StartingPoint:
        record = point.record
        known = {n.operator_id for v in self.context.job_graph.vertices for n in v.operators}
        files = [f for f in point.files() if f["operator_id"] in known and not f.get("source_state")]
        self.context.states.restore(files, {op["operator_id"]: op["parallelism"] for op in record.operators},
                            record.watermarks)
        self.context.sources.restore(source_positions(point))
        self.context.coordinator.restored(record)
        start = StartingPoint(
            first_epoch=record.epoch + 1, restored_from=record.checkpoint_id,
            watermark=min((w["watermark"] if isinstance(w, dict) else w for w in record.watermarks.values()),
                          default=MIN_WATERMARK))
        if point.root == self.context.storage.job_dir:
            start.replay = self.context.storage.epoch_log.logged_epochs(record.epoch, record.checkpoint_id)
        what = f"savepoint {point.root}" if record.kind == "SAVEPOINT" else f"checkpoint {record.checkpoint_id}"
        replay = f", replaying {len(start.replay)} logged epoch(s)" if start.replay else ""
        self.say(f"restored {what} (epoch {record.epoch}){replay}")
        return start

    def fall_back(self, damaged_files: dict, restored_from: Optional[int]) -> Optional[StartingPoint]:
        """The checkpoints whose ``damaged_files`` were found are marked INVALID and the one
        ``latest`` now picks is restored. None when the files are no checkpoint's of this job (a
        savepoint's, a scratch snapshot's): the failure stands. A checkpoint restored by its id
        is never swapped for another: that fails."""
        self.context.coordinator.await_retention()      # it chooses among the checkpoints retention keeps
        while True:
            found = damaged_checkpoints(self.context.storage.checkpoints, self.context.storage.job_dir, damaged_files)
            if not found:
                return None
            pinned = str(self.context.options.restore_from or "")
            for record, what in found:
                if pinned.isdigit() and record.checkpoint_id == int(pinned) == restored_from:
                    invalidate(self.context.storage, record, what)
                    raise CheckpointException(f"checkpoint {pinned} is damaged, now marked INVALID: "
                                              + "; ".join(what)) from None
                invalidate(self.context.storage, record, what, print_warning)
            try:
                point = choose(self.context.storage, "latest")
            except NoUsableCheckpointException as e:
                raise e.naming(self.context.job_graph.job_name, committed_sinks(self.context.job_graph)) from None
            if point is None:
                return None
            self.context.states.reset()
            self.context.coordinator.pending = {}
            try:
                return self.restore(point)
            except CorruptStateException as e:
                damaged_files = e.damaged_files
