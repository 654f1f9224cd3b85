"""Sources as Flink's FLIP-27 splits: an enumerator on the driver, a reader in the task; sinks
as Flink's two-phase sinks: a writer in the task, a committer on the driver.

Per epoch the enumerator plans what each source subtask reads of each split, [start, end),
and that plan is written before the epoch runs, so a replay reads the same records. The
reader returns each split's new position, which the enumerator takes once the epoch is done.

A sink's writer (``runtime.task.sink_writer.SinkWriter``) returns a committable at the end of
each epoch; its ``Committer`` commits them on the driver: at once (printed lines, collected
records) or with the next checkpoint, exactly once (a Delta sink's staged files).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Iterator, Optional

from runtime.common.phase_timer import SINK_COMMITS
from runtime.datastream.connectors.base import Boundedness
from runtime.task.deployment import SplitRead

Batch = tuple  # (values, timestamps)


@dataclass(frozen=True)
class EnumeratorContext:
    parallelism: int
    max_records_per_split: Optional[int] = None   # None: all that is available
    epoch_interval_ms: int = 1000
    work_dir: Optional[str] = None                # where a source may keep a write-ahead log
    job_name: str = ""
    operator_id: str = ""


class SplitEnumerator:
    """Driver side of a source: discovers splits, assigns them, plans each epoch's reads."""

    def __init__(self, source, context: EnumeratorContext):
        self.source = source
        self.context = context
        self.parallelism = context.parallelism
        self.max_records_per_split = context.max_records_per_split
        self.positions: dict[str, dict] = {}     # split id -> state (offset, watermark, ...)
        # Set by plan_epoch: whether the planned reads take the rest of a bounded input.
        self.input_ends_with_plan = False

    def check(self) -> None:
        """Fail now, before the job starts, if the source cannot be read (a missing input)."""

    def plan_epoch(self, epoch: int) -> dict[int, tuple[SplitRead, ...]]:
        raise NotImplementedError

    def complete_epoch(self, split_states: dict[str, dict]) -> None:
        for split_id, state in split_states.items():
            self.positions.setdefault(split_id, {}).update(state)

    @property
    def finished(self) -> bool:
        """True once a bounded source has nothing more to read."""
        raise NotImplementedError

    @property
    def paced(self) -> bool:
        """Whether this source's epoch is a span of time (``sluice.epoch.interval``): an
        unbounded source collects input for it. A bounded input is there already: cut into
        epochs, they run one right after the other (Flink reads it at once; Structured
        Streaming's AvailableNow trigger does not wait either)."""
        return self.source.boundedness != Boundedness.BOUNDED

    def has_input(self) -> Optional[bool]:
        """Whether records wait past the positions the last epoch reached: True starts the next
        epoch now (``sluice.epoch.trigger=input``, Structured Streaming's default trigger), False
        waits; None, a source that cannot tell, waits out ``sluice.epoch.interval``. Polled
        every few milliseconds between epochs: a cheap question, never a read."""
        return None

    def split_metrics(self) -> dict[str, dict]:
        """Each split's figures once the epoch is done, for the epoch log and the web view's
        source-lag chart (``runtime.metrics.vertex_metrics``): by convention ``offset`` (the
        position reached, as the checkpoint records it), ``latest`` (the newest position there
        was when the epoch was planned) and ``lag`` (how far ``offset`` is behind ``latest``).
        A source that does not know how much is waiting reports nothing."""
        return {}

    def snapshot(self) -> dict:
        return {k: dict(v) for k, v in self.positions.items()}

    def notify_checkpoint_complete(self, checkpoint_id: int, positions: dict) -> None:
        """The checkpoint ``checkpoint_id``, which recorded ``positions`` (this enumerator's
        ``snapshot``), completed (Flink's ``notifyCheckpointComplete``): a Kafka source commits
        them to its consumer group."""

    def restore(self, positions: dict) -> None:
        self.positions = {k: dict(v) for k, v in positions.items()}

    def close(self) -> None:
        pass


class SourceReader:
    """Task side of a source: reads the planned range of a split in batches."""

    def __init__(self, source, ctx):
        self.source = source
        self.ctx = ctx
        self.ends: dict[str, dict] = {}

    def read(self, split: SplitRead, batch_size: int) -> Iterator[Batch]:
        raise NotImplementedError

    def end_state(self, split: SplitRead) -> dict:
        """The split's state after this epoch's read (its new offset)."""
        return self.ends.get(split.split_id, {"offset": split.end})

    def origin(self, split: SplitRead, index: int) -> str:
        """Where the ``index``-th record this epoch read of ``split`` came from, for error
        messages (sources whose offsets count records: the split and the record's offset)."""
        return f"split {split.split_id}, offset {split.start + index * split.step}"


def index_range_batches(start: int, end: int, batch_size: int, make) -> Iterator[Batch]:
    """Batches of ``make(i)`` for i in [start, end): sources whose offsets are record indexes."""
    for lo in range(start, end, batch_size):
        hi = min(lo + batch_size, end)
        values = [make(i) for i in range(lo, hi)]
        yield values, [None] * len(values)


@dataclass(frozen=True)
class CommitterContext:
    """What a sink's committer knows of the run (on the driver)."""

    job_name: str
    sink_id: int            # the sink's node id
    operator_id: str
    # The id of the sink's transactions (``sluice-<job>-<operator id>``; a run without checkpoints
    # adds its run id): the commits carry it, so a replayed commit is a no-op.
    app_id: str
    # The run's JobExecutionResult: what the job gives back (printed lines, collected records,
    # committed files).
    result: Any = None
    # The declared type of the sink's records (None or PICKLED_BYTE_ARRAY: none declared): a
    # table's schema before any record arrives.
    input_type: Any = None


class Committer:
    """Driver side of a sink (Flink's Committer): commits what its writers' ``finish`` returned.

    ``at_checkpoint``: whether the committables wait for the next checkpoint and are committed
    with it, in one transaction that a replay repeats as a no-op (exactly once); otherwise each
    subtask's committable is committed as its epoch ends (as Flink's print sink writes at once).
    This base class commits nothing (a SinkFunction's writer did all there was to do)."""

    at_checkpoint: ClassVar[bool] = False
    commit_phase: ClassVar[str] = SINK_COMMITS      # what its commit is, in an epoch's timings

    def __init__(self, sink, context: CommitterContext):
        self.sink = sink            # the sink's descriptor
        self.context = context

    def commit(self, committables: list, version: int) -> dict:
        """Commit ``committables`` (in subtask order). ``version`` is the checkpoint id, or the
        epoch + 1 in a run without checkpoints. Returns {table: its version after the commit}
        for the checkpoint record."""
        return {}

    def runs_spark_jobs(self) -> bool:
        """Whether its commits run Spark jobs of the driver's (they need a free task slot)."""
        return False

    @staticmethod
    def committed_output(sink, app_id: str) -> Optional[str]:
        """Where ``sink`` holds output committed under ``app_id`` (its table), None if nowhere."""
        return None

    @staticmethod
    def output_location(sink) -> Optional[tuple[str, str]]:
        """Where ``sink`` writes (its table or base folder) and the setting that names it, for the
        run's preflight to check before the first epoch; None when it writes to no store."""
        return None

    @staticmethod
    def check(sink, name: str, input_type=None) -> None:
        """Fail before the first epoch when ``sink`` (the sink named ``name``) cannot take the
        job's output as configured (a Delta upsert sink's keys that its table lacks, a stream whose
        declared type ``input_type`` does not fit its table)."""
