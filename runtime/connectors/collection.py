"""``from_collection``: one split holding the items; the offset is the next item's index.

The source is non-parallel, as Flink's. When a rebalance deals its records to n consumers, the
job graph runs it at their parallelism instead (``runtime.graph.job_graph``): subtask k reads
the records the rebalance would send channel k, every n-th from the epoch's k-th, and each
reports the epoch's end as the split's offset, so a checkpoint holds one offset at any
parallelism.
"""
from __future__ import annotations

from runtime.connectors.base import SourceReader, SplitEnumerator
from runtime.task.deployment import SplitRead

SPLIT = "collection"


class CollectionEnumerator(SplitEnumerator):
    def plan_epoch(self, epoch):
        state = self.positions.get(SPLIT, {})
        start = state.get("offset", 0)
        total = len(self.source.items)
        end = total if self.max_records_per_split is None else min(total, start + self.max_records_per_split)
        self.input_ends_with_plan = end >= total
        n = self.parallelism
        return {k: (SplitRead(SPLIT, start + k, end, state, step=n),) for k in range(n)}

    @property
    def finished(self):
        return self.positions.get(SPLIT, {}).get("offset", 0) >= len(self.source.items)


class CollectionReader(SourceReader):
    def read(self, split, batch_size):
        # Items start, start + n, ... < end are items j0, j0 + 1, ... < j1 of share start mod n.
        n = split.step
        k = split.start % n
        items = self.source.share(k, n)
        j0, j1 = split.start // n, max(split.start // n, (split.end - k + n - 1) // n)
        for lo in range(j0, j1, batch_size):
            values = list(items[lo:min(lo + batch_size, j1)])
            yield values, [None] * len(values)
