"""Sources as Flink's FLIP-27 splits: an enumerator on the driver, a reader in the task.

Per epoch the enumerator plans what each source subtask reads of each split, [start, end),
and that plan is written before the epoch runs, so a replay reads the same records. The
reader returns each split's new position, which the enumerator takes once the epoch is done.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional

from runtime.task.stream_task import SplitRead

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

    def snapshot(self) -> dict:
        return {k: dict(v) for k, v in self.positions.items()}

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
        return f"split {split.split_id}, offset {split.start + index}"


def index_range_batches(start: int, end: int, batch_size: int, make) -> Iterator[Batch]:
    """Batches of ``make(i)`` for i in [start, end): sources whose offsets are record indexes."""
    for lo in range(start, end, batch_size):
        hi = min(lo + batch_size, end)
        values = [make(i) for i in range(lo, hi)]
        yield values, [None] * len(values)
