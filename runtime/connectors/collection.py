"""``from_collection``: one split holding the items; the offset is the next item's index."""
from __future__ import annotations

from runtime.connectors.base import SourceReader, SplitEnumerator, index_range_batches
from runtime.task.deployment import SplitRead

SPLIT = "collection"


class CollectionEnumerator(SplitEnumerator):
    def plan_epoch(self, epoch):
        start = self.positions.get(SPLIT, {}).get("offset", 0)
        total = len(self.source.items)
        end = total if self.max_records_per_split is None else min(total, start + self.max_records_per_split)
        self.input_ends_with_plan = end >= total
        return {0: (SplitRead(SPLIT, start, end, self.positions.get(SPLIT, {})),)}

    @property
    def finished(self):
        return self.positions.get(SPLIT, {}).get("offset", 0) >= len(self.source.items)


class CollectionReader(SourceReader):
    def read(self, split, batch_size):
        return index_range_batches(split.start, split.end, batch_size, self.source.unpacked_items().__getitem__)
