"""Flink's SourceCoordinator, on the driver: the split enumerators of the job's sources.

Its own module because the sources' side of an epoch is a concept of its own: each source
vertex's enumerator plans the epoch's splits per subtask (or a replayed epoch takes the logged
plan), and completes them with the positions the readers reached, which a checkpoint records
and a restore hands back.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from runtime.connectors import create_enumerator
from runtime.connectors.base import EnumeratorContext
from runtime.execution.options import ExecutionOptions
from runtime.graph.job_graph import JobGraph
from runtime.state.snapshot_format import state_table_name
from runtime.storage.filesystems import join
from runtime.task.deployment import SplitRead

POLL_S = 0.01   # how often a waiting run asks its sources for input (spark.sql.streaming.pollingDelay)


@dataclass(frozen=True)
class PlannedRead(SplitRead):
    """A read as the epoch log keeps it: with the subtask that planned it, so a replay hands it
    back to that subtask (a Kafka partition's watermark and idleness are its owner's state)."""

    subtask: int = 0

    def as_read(self) -> SplitRead:
        return SplitRead(self.split_id, self.start, self.end, self.state, self.step)


class SourceCoordinator:
    """The enumerators of one job run, by source vertex id."""

    def __init__(self, job_graph: JobGraph, options: ExecutionOptions, job_dir: str, batch: bool):
        self.job_graph = job_graph
        self.enumerators = {}
        for v in job_graph.vertices:
            if v.is_input_vertex:
                self.enumerators[v.id] = create_enumerator(v.head.operator.source, EnumeratorContext(
                    parallelism=v.parallelism,
                    max_records_per_split=None if batch else options.max_records_per_split,
                    epoch_interval_ms=options.epoch_interval_ms, work_dir=join(job_dir, "sources"),
                    job_name=job_graph.job_name, operator_id=v.head.operator_id))
        self.operator_ids = {vid: job_graph.vertex(vid).head.operator_id for vid in self.enumerators}
        self.trigger = options.epoch_trigger

    @property
    def paced(self) -> bool:
        """Whether the next epoch waits out sluice.epoch.interval: only when a source's epoch is a
        span of time (asked each epoch: a bounded Kafka source waiting for its stopping offsets)."""
        return any(e.paced for e in self.enumerators.values())

    def await_input(self, deadline: float, stopped: Callable[[], bool]) -> None:
        """Wait between two epochs of paced sources: until ``deadline`` (the interval's end), a
        cancel or stop (``stopped``), or, with ``sluice.epoch.trigger=input``, until a source has
        records waiting (asked every POLL_S, Spark's streaming polling delay): an epoch starts as
        soon as there is input and the one before is done."""
        on_input = self.trigger == "input"
        while not stopped():
            left = deadline - time.time()
            if left <= 0 or (on_input and any(e.has_input() for e in self.enumerators.values())):
                return
            time.sleep(min(POLL_S, left))

    def check(self) -> None:
        """Each source's input is there (the preflight's)."""
        for enumerator in self.enumerators.values():
            enumerator.check()

    def restore(self, positions: dict) -> None:
        """``positions``: source operator id -> its splits' positions, as a checkpoint recorded them."""
        for vid, enumerator in self.enumerators.items():
            uid = self.operator_ids[vid]
            if uid in positions:
                enumerator.restore(positions[uid])

    def plan_epoch(self, epoch: int) -> tuple[dict, bool]:
        """Each source vertex's reads by subtask, and whether the input ends with them."""
        source_plans = {vid: e.plan_epoch(epoch) for vid, e in self.enumerators.items()}
        return source_plans, all(e.input_ends_with_plan for e in self.enumerators.values())

    def replayed_plan(self, logged: dict) -> dict:
        """A logged epoch's reads by source vertex and subtask (``logged_plan`` read back), each
        to the subtask that planned it. Logs written before reads carried their subtask, or a
        replay at another parallelism, hand the reads out round-robin."""
        source_plans = {}
        for vid in self.enumerators:
            reads = logged["plan"].get(self.operator_ids[vid], ())
            p = self.job_graph.vertex(vid).parallelism
            if all(isinstance(r, PlannedRead) and r.subtask < p for r in reads):
                by_subtask = {s: [] for s in range(p)}
                for r in reads:
                    by_subtask[r.subtask].append(r.as_read())
                source_plans[vid] = {s: tuple(rs) for s, rs in by_subtask.items()}
            else:
                reads = [r.as_read() if isinstance(r, PlannedRead) else r for r in reads]
                source_plans[vid] = {s: tuple(reads[s::p]) for s in range(p)}
        return source_plans

    def logged_plan(self, source_plans: dict) -> dict:
        """The plan as the epoch log keeps it: each source operator's reads, subtask by subtask,
        each read naming its subtask."""
        return {self.operator_ids[vid]: [PlannedRead(r.split_id, r.start, r.end, r.state, r.step, subtask=s)
                                         for s in sorted(plan) for r in plan[s]]
                for vid, plan in source_plans.items()}

    def complete_epoch(self, acks: list) -> None:
        """The epoch's reads are done: each enumerator takes its readers' new split positions."""
        for vid, enumerator in self.enumerators.items():
            states = {}
            for a in acks:
                if a.job_vertex_id == vid:
                    states.update(a.split_states)
            enumerator.complete_epoch(states)

    def notify_checkpoint_complete(self, record) -> None:
        """A checkpoint completed: each enumerator hears of it with the positions it recorded."""
        for vid, enumerator in self.enumerators.items():
            positions = record.source_offsets.get(state_table_name(self.job_graph.vertex(vid).head))
            if positions is not None:
                enumerator.notify_checkpoint_complete(record.checkpoint_id, positions)

    def close(self) -> None:
        for enumerator in self.enumerators.values():
            enumerator.close()
