"""The driver's record of where each epoch's time goes (Flink's CheckpointStatsTracker, per
epoch): a ``PhaseTimer`` per epoch that the loop and the checkpoint's completion time their
steps into, the Spark job's stages as Spark's status store saw them, and the latency of the
records whose results the epoch made visible. What the figures mean: ``runtime.metrics.epoch_timings``.

Its own module so that the loop only says what it is doing (``with timer.phase(...)``): reading
Spark's stages, matching them with the vertices, carrying the sampled record times of epochs
without a checkpoint on to the next one, all happen here. Nothing here can fail an epoch: a
figure that cannot be read is left out.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Iterator, Optional

from runtime.common.phase_timer import PhaseTimer
from runtime.metrics.epoch_timings import (BOUNDARY_WAIT, KAFKA_TRANSACTION, SINK_COMMITS, SPARK_JOB, EpochTimings,
                                           SinkCommit, StageTiming, latency_percentiles, shares, stage_shares)

log = logging.getLogger(__name__)
_KEPT = 8       # epochs whose timers wait for their report at most (one checkpoint in flight, replays)


def spark_stages(sc, job_group: str) -> list[StageTiming]:
    """The stages Spark ran for ``job_group``'s jobs, with its submission and completion times
    (ms); a stage Spark skipped (its output was there) is left out. About ten py4j calls a stage."""
    tracker, store = sc.statusTracker(), sc._jsc.sc().statusStore()
    stages = []
    for job_id in tracker.getJobIdsForGroup(job_group):
        info = tracker.getJobInfo(job_id)
        for stage_id in (info.stageIds if info is not None else ()):
            data = store.lastStageAttempt(stage_id)
            submitted, completed = data.submissionTime(), data.completionTime()
            if not submitted.isDefined():
                continue
            stages.append(StageTiming(stage_id, data.name(), data.numTasks(), submitted.get().getTime(),
                                      completed.get().getTime() if completed.isDefined() else 0))
    return sorted(stages, key=lambda s: s.stage_id)


def task_stages(acks: list, vertex_names: dict, order: dict) -> list[StageTiming]:
    """Long-running tasks run no stage per epoch: each vertex's subtasks stand for one, from the
    first one's start to the last one's end, as the tasks' clocks say."""
    by_vertex: dict = {}
    for a in acks:
        by_vertex.setdefault(a.job_vertex_id, []).append(a)
    return [StageTiming(order[v], vertex_names[v], len(acks_), int(min(a.started_at for a in acks_) * 1000),
                        int(max(a.started_at * 1000 + a.duration_ms for a in acks_)),
                        max(a.snapshot_ms for a in acks_))
            for v, acks_ in sorted(by_vertex.items(), key=lambda kv: order[kv[0]])]


class EpochStatsTracker:
    def __init__(self, sc, job_graph, run_id: str, stage_vertices: dict, checkpoints: bool):
        """``stage_vertices``: a stage's name (as the epoch's Spark job names them) -> the ids of the
        vertices it runs; ``checkpoints``: whether the job takes checkpoints (then an epoch without
        one makes its results visible with the next)."""
        self.sc = sc
        self.run_id = run_id
        self.stage_vertices = stage_vertices
        self.checkpoints = checkpoints
        # Each node's name by its id: a sink's commit is timed under its node id.
        self.node_names = {n.id: n.operator_name for v in job_graph.vertices for n in v.operators}
        self.order = {v.id: i for i, v in enumerate(job_graph.vertices)}
        self.vertex_names = {v.id: v.name for v in job_graph.vertices}
        self._timers: dict = {}         # epoch -> (its timer, its record times, each vertex's longest snapshot ms)
        self._waited: Optional[tuple] = None    # the boundary wait before the next epoch
        self._last_end: Optional[float] = None  # when the epoch before handed its checkpoint over
        self._unseen: list = []         # record times of epochs whose results are not visible yet
        # Spark's stages are read on a thread of their own (ten-odd py4j calls a stage, 5-40 ms on
        # a busy driver), while the epoch's checkpoint completes, not in the loop.
        self._reader: Optional[ThreadPoolExecutor] = None

    @contextmanager
    def boundary_wait(self) -> Iterator[None]:
        started = time.time()
        try:
            yield
        finally:
            self._waited = (started, time.time())

    def begin(self, epoch: int, started: float) -> PhaseTimer:
        """The epoch's timer: from the end of the epoch before (its wait for the boundary counts);
        its first lap from ``started``."""
        timer = PhaseTimer(self._last_end if self._last_end is not None else started)
        timer.lapped = started
        if self._waited is not None:
            timer.add(BOUNDARY_WAIT, *self._waited)
            self._waited = None
        for old in [e for e in self._timers if e < epoch - _KEPT or e >= epoch]:
            del self._timers[old]       # a failed checkpoint's, a replayed epoch's earlier attempt
        self._timers[epoch] = (timer, [], {}, [])
        return timer

    def restarted(self) -> None:
        """The run falls back to a checkpoint: the epochs since are run again."""
        self._timers.clear()
        self._unseen = []
        self._last_end = self._waited = None

    def handed_over(self, epoch: int, acks: list) -> None:
        """The epoch's driver steps are done: its tasks' record times and snapshot times are kept."""
        timer, times, snapshots, stages = self._timers[epoch]
        self._last_end = time.time()
        if timer.first(SPARK_JOB) is not None and not self.stage_vertices:     # long-running tasks
            stages.append(Future())
            stages[-1].set_result(task_stages(acks, self.vertex_names, self.order))
        elif timer.first(SPARK_JOB) is not None:
            if self._reader is None:
                self._reader = ThreadPoolExecutor(1, thread_name_prefix="sluice-epoch-stats")
            stages.append(self._reader.submit(spark_stages, self.sc, f"sluice-{self.run_id}-{epoch}"))
        # The records' timestamps as first known: of the first vertex (in the graph's order) that
        # sampled any, so that a record is not counted again by an assigner downstream.
        sampled = [a for a in acks if getattr(a, "record_times", None)]
        first = min((self.order[a.job_vertex_id] for a in sampled), default=None)
        times.extend(a.record_times for a in sampled if self.order[a.job_vertex_id] == first)
        for a in acks:
            snapshots[a.job_vertex_id] = max(snapshots.get(a.job_vertex_id, 0.0), a.snapshot_ms)

    def finish(self, epoch: int, checkpoint_id: Optional[int]) -> Optional[EpochTimings]:
        """The epoch's timings once its results are visible (its checkpoint completed, or it took none)."""
        entry = self._timers.pop(epoch, None)
        if entry is None:
            return None
        timer, times, snapshots, stages = entry
        self._unseen.extend(times)
        latency = None
        if checkpoint_id is not None or not self.checkpoints:
            latency = latency_percentiles(self._unseen, timer.ended * 1000)
            self._unseen = []
        # Phases that ran at once (a checkpoint's state and sink commits) share the time they
        # overlapped, as stages do: the parts add up to the epoch's time.
        phases: dict = {}
        for p, ms in zip(timer.phases, shares([(p.started * 1000, p.ended * 1000) for p in timer.phases])):
            phases[p.name] = round(phases.get(p.name, 0.0) + ms, 1)
        sinks = tuple(SinkCommit(self.node_names.get(p.detail, p.detail), p.name, round(p.ms, 1))
                      for p in timer.phases if p.name in (SINK_COMMITS, KAFKA_TRANSACTION))
        return EpochTimings(round((timer.ended - timer.begun) * 1000, 1), phases,
                            self._stages(epoch, timer, snapshots, stages), sinks, latency, checkpoint_id)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.shutdown()
            self._reader = None

    def _stages(self, epoch: int, timer: PhaseTimer, snapshots: dict, read: list) -> tuple:
        job = timer.first(SPARK_JOB)
        if job is None or not read:
            return ()
        try:
            stages = read[0].result()
        except Exception as e:      # the figures are worth less than the epoch
            log.debug("reading epoch %s's stages from Spark failed: %s", epoch, e)
            return ()
        end = int(job.ended * 1000)
        # A stage Spark's listener had not marked complete yet when read ended with the job.
        stages = [StageTiming(s.stage_id, s.name, s.tasks, s.submitted, s.completed or end,
                              max((snapshots.get(v, 0.0) for v in self.stage_vertices.get(s.name, ())),
                                  default=s.snapshot_ms))
                  for s in stages]
        return tuple(stage_shares(stages, job.started, job.ended))
