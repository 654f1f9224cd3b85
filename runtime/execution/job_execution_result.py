"""What a job run gives back (PyFlink's ``pyflink.common.job_execution_result``): the
``JobExecutionResult`` with each epoch's ``EpochSummary``, and the ``JobExecutionException`` a
failed run raises.

Its own module because clients, the control plane and tests read these without running anything:
they are data about a run, not the run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from runtime.common.logs import utc_time
from runtime.common.throwables import ThrowableType
from runtime.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from runtime.graph.execution_graph import ExecutionGraph
from runtime.metrics.epoch_timings import EpochTimings
from runtime.scheduler.slots import SlotPlan


class JobExecutionException(RuntimeError):
    """The job failed; the message names the operator, subtask and record when user code failed.

    ``failed_tasks`` are the (vertex id, subtask) that failed, when known. The restart strategy's
    decision on the failure is a field of the run's execution record (``restarting``)."""

    def __init__(self, message: str, failed_tasks: tuple = (), damaged_files: Optional[dict] = None,
                 unrecoverable: bool = False):
        super().__init__(message)
        self.failed_tasks = tuple(failed_tasks)
        self.damaged_files = damaged_files or {}    # restored state file -> what is wrong with it
        if unrecoverable:       # a task's failure whose cause a restart cannot cure (common.throwables)
            self.throwable_type = ThrowableType.NON_RECOVERABLE_ERROR


@dataclass
class EpochSummary:
    epoch: int
    processing_time: int
    records_in: int
    records_out: int
    watermark: int
    duration_ms: float                  # from its start until its checkpoint is handed to the completer
    late_records_dropped: int = 0
    checkpoint_id: Optional[int] = None
    checkpoint_ms: float = 0.0          # completing the checkpoint (state, sinks, record), in the background
    state_bytes_written: int = 0        # snapshot files written by the tasks (increments or whole)
    local_stores: int = 0               # subtasks' local stores (state.backend.type: rocksdb) ...
    local_store_hits: int = 0           # ... of which were at the expected version, not rebuilt
    metrics: dict = field(default_factory=dict)     # user metrics by scope (runtime.metrics.aggregation)
    vertices: dict = field(default_factory=dict)    # built-in ones per vertex (runtime.metrics.vertex_metrics)
    started_at: float = 0.0             # wall clock (s): epochs overlap their checkpoints, so the
                                        # time between two starts is what an epoch costs
    timings: Optional[EpochTimings] = None  # where its time went, and its records' latency (epoch_timings)

    @property
    def local_store_hit_rate(self) -> Optional[float]:
        return self.local_store_hits / self.local_stores if self.local_stores else None

    def progress_line(self, job_name: str) -> str:
        wm = ("none" if self.watermark <= MIN_WATERMARK else
              "end of input" if self.watermark >= MAX_WATERMARK else utc_time(self.watermark))
        cp = f", checkpoint {self.checkpoint_id} ({self.checkpoint_ms:.0f} ms)" if self.checkpoint_id else ""
        local = f", local state {self.local_store_hits}/{self.local_stores}" if self.local_stores else ""
        biggest = self.timings.biggest() if self.timings is not None else []
        most = ("; biggest: " + ", ".join(f"{name} {ms:.0f} ms" for name, ms in biggest)) if biggest else ""
        return (f"[{job_name}] epoch {self.epoch}: {self.records_in} records in, {self.records_out} out, "
                f"watermark {wm}, {self.duration_ms:.0f} ms{cp}{local}{most}")


@dataclass
class JobExecutionResult:
    job_id: str
    job_name: str
    run_id: str
    net_runtime_ms: float
    epochs: list[EpochSummary]
    execution_graph: ExecutionGraph
    slot_plan: SlotPlan
    collected: dict = field(default_factory=dict)       # collect-sink id -> records
    printed: list = field(default_factory=list)         # lines of print() sinks, in order
    sink_files: dict = field(default_factory=dict)      # Delta sink node id -> the files it committed
    restored_from: Optional[int] = None                 # the checkpoint id the run started from
    epoch_count: int = 0                                # epochs run, also those no longer in ``epochs``
    records_in_total: int = 0
    savepoint: Optional[str] = None                     # the savepoint a stop with savepoint took

    # A run of months takes millions of epochs: ``epochs`` keeps the last of them (their
    # metrics rows in the epoch log are the history; the totals count them all).
    MAX_EPOCHS_KEPT = 10_000

    def add_epoch(self, summary: "EpochSummary") -> None:
        self.epochs.append(summary)
        self.epoch_count += 1
        self.records_in_total += summary.records_in
        if len(self.epochs) > self.MAX_EPOCHS_KEPT:
            del self.epochs[:len(self.epochs) - self.MAX_EPOCHS_KEPT]

    @property
    def last_checkpoint(self) -> Optional[int]:
        return max((e.checkpoint_id for e in self.epochs if e.checkpoint_id), default=None)

    def get_job_id(self) -> str:
        return self.job_id

    def get_net_runtime(self) -> float:
        return self.net_runtime_ms

    def get_collected(self, sink_id) -> list:
        return self.collected.get(sink_id, [])
