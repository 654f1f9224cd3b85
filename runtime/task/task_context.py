"""What an operator knows of the subtask running it (Flink's Environment): which subtask it is
(its TaskInfo), the epoch, the keyed state backend chosen, the sink writers. Its own module
because the task, its operators and the connectors' readers each take one."""
from __future__ import annotations

from typing import Optional

from runtime.metrics.registry import TaskMetrics
from runtime.state.backend import DEFAULT_STATE_BACKEND
from runtime.task.task_info import TaskInfo

# Records in a batch down an operator chain (sluice.task.batch-size): enough to spread a batch's
# fixed costs (a call per operator, an Arrow group-by), few enough that its records are still in
# the CPU's caches when the next operator reads them.
DEFAULT_BATCH_SIZE = 4096


class TaskContext:
    """What an operator knows of the subtask running it: which subtask it is (``info``, fixed)
    and this epoch's run of it (its processing time, the metrics and state it goes on with)."""

    def __init__(self, info: TaskInfo, processing_time: int, job_parameters: dict, *,
                 key_group_range=None, epoch: int = 0, sink_writers: Optional[dict] = None,
                 state_backend: str = DEFAULT_STATE_BACKEND, state_dir: Optional[str] = None,
                 heap_compact_after: Optional[int] = None,
                 barrier: bool = False, end_of_input: bool = False, metric_counts: Optional[dict] = None,
                 batch_size: int = DEFAULT_BATCH_SIZE):
        self.info = info
        self.epoch = epoch
        self.batch_size = batch_size    # records in a batch down the chain (sluice.task.batch-size)
        # User metrics of the subtask, its counters and meters continuing from the run's totals.
        self.metrics = TaskMetrics(metric_counts)
        # The epoch ends in a checkpoint barrier (or, without checkpoints, commits its sinks), and
        # whether the job's bounded input ends with it: what a sink writer prepares to commit.
        self.barrier = barrier
        self.end_of_input = end_of_input
        # Keyed state: the backend (state.backend.type: hashmap | rocksdb) and, for rocksdb, the
        # directory of this subtask's stores (one folder per operator under it); without one,
        # each operator's store is a temporary directory removed when the task ends.
        self.state_backend = state_backend
        self.state_dir = state_dir
        self.heap_compact_after = heap_compact_after   # a heap's map packs past this many entries
        self.sink_writers = sink_writers or {}      # sink node id -> writer class (from the driver)
        self.processing_time = processing_time
        self.job_parameters = job_parameters
        self.key_group_range = key_group_range
        # BATCH mode (execution.runtime-mode): final results only, watermarks at the end only.
        self.batch = False

    # Which subtask: read from ``info``, never set on the context.
    task_name = property(lambda self: self.info.task_name)
    subtask_index = property(lambda self: self.info.subtask_index)
    parallelism = property(lambda self: self.info.parallelism)
    max_parallelism = property(lambda self: self.info.max_parallelism)
    attempt_number = property(lambda self: self.info.attempt_number)
    subtask_label = property(lambda self: self.info.subtask_label)
