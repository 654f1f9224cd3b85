"""Generated sources: ``NumberSequenceSource`` and ``DataGeneratorSource``.

Subtask s owns a split of the index space; record i is a pure function of i, so a replayed
epoch regenerates exactly the same records.
"""
from __future__ import annotations

from typing import Optional

from runtime.connectors.base import SourceReader, SplitEnumerator, index_range_batches
from runtime.task.deployment import SplitRead

# An unbounded generator with no rate produces this many records per subtask per epoch.
DEFAULT_RECORDS_PER_EPOCH = 10_000


class _IndexSplits(SplitEnumerator):
    """Split s covers the indexes [lo_s, hi_s); each epoch reads a range of it."""

    def _bounds(self) -> list[tuple[int, Optional[int]]]:
        raise NotImplementedError

    def _epoch_size(self) -> Optional[int]:
        return self.max_records_per_split

    def plan_epoch(self, epoch):
        plan = {}
        self.input_ends_with_plan = True
        for s, (lo, hi) in enumerate(self._bounds()):
            sid = f"split-{s}"
            state = self.positions.get(sid, {})
            start = state.get("offset", lo)
            size = self._epoch_size()
            end = hi if size is None else (start + size if hi is None else min(hi, start + size))
            self.input_ends_with_plan &= hi is not None and end >= hi
            plan[s] = (SplitRead(sid, start, end, state),)
        return plan

    @property
    def finished(self):
        return all(hi is not None and self.positions.get(f"split-{s}", {}).get("offset", lo) >= hi
                   for s, (lo, hi) in enumerate(self._bounds()))


class NumberSequenceEnumerator(_IndexSplits):
    def _bounds(self):
        lo, n, p = self.source.start, self.source.end - self.source.start + 1, self.parallelism
        return [(lo + n * s // p, lo + n * (s + 1) // p) for s in range(p)]


class NumberSequenceReader(SourceReader):
    def read(self, split, batch_size):
        return index_range_batches(split.start, split.end, batch_size, int)


class DataGeneratorEnumerator(_IndexSplits):
    """Subtask s generates the indexes s, s + p, s + 2p, ...; offsets count its own records."""

    def _bounds(self):
        count, p = self.source.count, self.parallelism
        return [(0, None if count is None else (count - s + p - 1) // p) for s in range(p)]

    @property
    def paced(self) -> bool:
        # A rate limit is kept by pacing: each epoch generates the rate's share of an interval.
        return super().paced or self.source.rate_limiter.records_per_second is not None

    def _epoch_size(self):
        if self.max_records_per_split is not None:
            return self.max_records_per_split
        rate = self.source.rate_limiter.records_per_second
        if rate is not None:
            return max(1, int(rate * self.context.epoch_interval_ms / 1000 / self.parallelism))
        return None if self.source.count is not None else DEFAULT_RECORDS_PER_EPOCH


class DataGeneratorReader(SourceReader):
    def read(self, split, batch_size):
        p, s = self.ctx.parallelism, self.ctx.subtask_index
        generate = self.source.generator_function
        return index_range_batches(split.start, split.end, batch_size, lambda i: generate(i * p + s))
