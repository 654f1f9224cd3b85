"""BATCH mode's input of a keyed one-input operator (Flink's SortingDataInput).

Flink sorts such an input by the serialized key, then the timestamp, and hands it on when the
input has ended, so the operator sees one key after the other and emits its keys in that order
(``word_count.py`` prints its counts so). Watermarks wait for the records: in BATCH mode the only
one is the final MAX_WATERMARK.
"""
from __future__ import annotations

from runtime.common.watermark_strategy import MIN_WATERMARK
from runtime.state.key_groups import key_type_of
from runtime.state.key_serializer import sort_key

__all__ = ["SortingDataInput", "sorts_input"]


def sorts_input(head) -> bool:
    """Whether BATCH mode sorts the input of ``head``: a keyed operator of one input."""
    selectors = getattr(head, "key_selectors", ())
    return len(selectors) == 1 and selectors[0] is not None and head.backend is not None


class SortingDataInput:
    """Stands for the head operator while the input is read; ``end_input`` hands it on sorted."""

    def __init__(self, head):
        self.head = head
        self.key_type = key_type_of(head.key_selectors[0])
        self.values: list = []
        self.timestamps: list = []
        self.last: list = []        # (method, args) of the watermark and idleness events, in order
        self.input_index = 0

    def process_batch(self, values, timestamps, input_index) -> None:
        self.values.extend(values)
        self.timestamps.extend(timestamps)
        self.input_index = input_index

    def process_panes(self, panes) -> None:
        self.head.process_panes(panes)      # pre-aggregated per key already: no order to keep

    def process_watermark(self, watermark, input_index) -> None:
        self.last.append((self.head.process_watermark, (watermark, input_index)))

    def process_idle(self, input_index) -> None:
        self.last.append((self.head.process_idle, (input_index,)))

    def end_input(self) -> None:
        values, timestamps = self.values, self.timestamps
        if values:
            keys = [sort_key(self.head.key_of(v), self.key_type) for v in values]
            at = [MIN_WATERMARK if t is None else t for t in timestamps]
            order = sorted(range(len(values)), key=lambda i: (keys[i], at[i]))
            self.head.process_batch([values[i] for i in order], [timestamps[i] for i in order], self.input_index)
        for method, args in self.last:
            method(*args)
        self.values, self.timestamps, self.last = [], [], []
