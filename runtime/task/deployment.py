"""What the driver and a task send each other: the deployment of one subtask for one epoch
(``TaskDeploymentDescriptor``, with the ``SplitRead``s of a source and the ``RestoredState`` to
restore) and the task's ``Acknowledgement`` back, as Flink's TaskDeploymentDescriptor and
AcknowledgeCheckpoint. Plain data in a module of its own: the driver, the connectors and every
part of the task use them, and none of them needs the task's code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from runtime.common.watermark_strategy import MIN_WATERMARK
from runtime.metrics.epoch_timings import RecordTimes
from runtime.task.task_context import DEFAULT_BATCH_SIZE
from runtime.task.watermarks import TaskWatermarks

ACK = -1        # the key of acknowledgement rows in a task's output


@dataclass(frozen=True)
class SplitRead:
    """What a source subtask reads of one split this epoch: [start, end) and the split's state;
    with a ``step``, every step-th record of it from ``start`` (a consumer's share of a rebalance,
    ``runtime.graph.job_graph``)."""

    split_id: str
    start: Any
    end: Any
    state: dict = field(default_factory=dict)   # watermark generator, idleness clock
    step: int = 1


@dataclass(frozen=True)
class TaskDeploymentDescriptor:
    job_vertex_id: int
    subtask_index: int
    attempt_number: int
    epoch: int
    processing_time: int
    end_of_input: bool                      # the job's input ends in this epoch
    splits: tuple = ()                      # SplitReads, for source subtasks
    restored_state: Optional["RestoredState"] = None   # state of the previous epoch or checkpoint
    snapshot_dir: Optional[str] = None      # where to write this epoch's snapshot ("{operator_id}" in it)
    batch_size: int = DEFAULT_BATCH_SIZE
    watermarks: Optional[TaskWatermarks] = None     # event time where the previous epoch left it
    # The connectors' task sides, chosen by the driver: this layer knows only their interfaces.
    source_reader: Optional[type] = None            # SourceReader class of a source vertex
    sink_writers: dict = field(default_factory=dict)    # sink node id -> its writer class
    # State that stays with its task (a local store, state.backend.type: rocksdb): the store is
    # used as it is only when it is at ``state_version`` (the version the previous epoch of this
    # run set); otherwise it is rebuilt from ``restored_state``. ``next_state_version`` is set on
    # it once this epoch's snapshot is written.
    state_version: Optional[str] = None
    next_state_version: Optional[str] = None
    state_dir: Optional[str] = None             # root of the local stores (else Spark's local dirs)
    incremental: frozenset = frozenset()        # operator ids that snapshot their changes only
    # The epoch ends in a checkpoint barrier, or commits its sinks without checkpoints.
    barrier: bool = False
    metric_counts: dict = field(default_factory=dict)   # the subtask's counter and meter totals in the run


@dataclass(frozen=True)
class RestoredState:
    """What a subtask restores: per operator id, the snapshot files holding state of its key
    groups (operator state included), and the parallelism they were written at."""

    files: dict = field(default_factory=dict)          # operator id -> tuple of paths
    parallelism: dict = field(default_factory=dict)    # operator id -> parallelism at the snapshot
    checksums: dict = field(default_factory=dict)      # path -> checksum recorded with the file
    # path -> KeyRegrouping: a file whose keys were hashed with another key type than the job's
    regrouping: dict = field(default_factory=dict)


@dataclass
class Acknowledgement:
    job_vertex_id: int
    subtask_index: int
    failure: Optional[str] = None
    unrecoverable: bool = False             # the failure would recur after a restart (common.throwables)
    records_in: int = 0
    records_out: int = 0
    records_written: int = 0                # records that reached the sinks of this subtask
    watermark: int = MIN_WATERMARK
    task_watermarks: Optional[TaskWatermarks] = None   # valves and operators' watermarks at the end
    split_states: dict = field(default_factory=dict)
    state_files: list = field(default_factory=list)     # StateFiles written by the snapshot
    snapshot_ms: float = 0.0
    committables: dict = field(default_factory=dict)    # sink node id -> its writer's committable
    late_records_dropped: int = 0
    duration_ms: float = 0.0
    started_at: float = 0.0
    damaged_files: dict = field(default_factory=dict)   # restored state file -> what is wrong with it
    store_hits: int = 0                 # local stores used as they were
    store_misses: int = 0               # local stores rebuilt from the checkpoint's files
    metrics: dict = field(default_factory=dict)     # user metrics: TaskMetrics.report()
    record_times: Optional[RecordTimes] = None      # a source's sample of its records' timestamps (latency)
