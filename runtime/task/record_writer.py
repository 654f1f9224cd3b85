"""Flink's RecordWriter: the records an operator chain sends down one JobEdge, split per
consumer channel by the edge's channel selector, with the watermarks and idleness every channel
gets, leaving the task as numbered pickled chunks; and ``channel_events``, how a consumer reads a
channel's chunks back. Its own module: the wire format between subtasks lives in one place.
"""
from __future__ import annotations

import pickle
from typing import Iterator

from runtime.common.arrow import as_shipped
from runtime.common.pickling import dumps_unshared
from runtime.common.watermark_strategy import MIN_WATERMARK
from runtime.task.arrow_batch import ArrowBatch, takes_arrow
from runtime.task.channel_events import IDLE, RecordBatch, Watermark
from runtime.task.partitioning import ChannelSelector


def _key_of(selector, value):
    return selector.get_key(value)


# Records a channel buffers before they are pickled: a task holds an epoch's output (and the next
# task its input) as pickled chunks, a few bytes a record, and as Python objects one chunk per
# channel at a time (a 10,000,000-record build epoch held 5,000,000 records per task).
CHANNEL_CHUNK = 65_536


class RecordWriter:
    """Buffers the records of one JobEdge per consumer channel; watermarks go to every channel.
    A channel's events leave as pickled chunks, numbered in order: (channel, (edge key,
    producer, chunk number, pickled events))."""

    def __init__(self, edge, edge_key: str, producer: int, producer_p: int, consumer_p: int, seed: int):
        self.edge_key = edge_key
        self.producer = producer
        self.consumer_p = consumer_p
        self.selector = ChannelSelector(edge, producer, producer_p, consumer_p, seed, _key_of)
        self.channels: dict[int, list] = {c: [] for c in range(consumer_p)}
        self.buffered: dict[int, int] = dict.fromkeys(range(consumer_p), 0)     # records in channels[c]
        self.sealed: dict[int, list] = {c: [] for c in range(consumer_p)}       # pickled chunks
        self.records_out = 0
        self.watermark = MIN_WATERMARK

    def process_batch(self, values, timestamps, input_index):
        self.records_out += len(values)
        for c, (vs, ts) in self.selector.select(values, timestamps).items():
            events = self.channels[c]
            if events and type(events[-1]) is RecordBatch:
                events[-1].values.extend(vs)
                events[-1].timestamps.extend(ts)
            else:
                events.append(RecordBatch(list(vs), list(ts)))
            self.buffered[c] += len(vs)
            if self.buffered[c] >= CHANNEL_CHUNK:
                self._seal(c)

    def _seal(self, c: int) -> None:
        # Dropped once pickled: held until the task ends, they would be freed by a cyclic
        # collection (operators and writers reference each other), at ~2 µs per record.
        events, self.channels[c], self.buffered[c] = self.channels[c], [], 0
        self.sealed[c].append(dumps_unshared(events))

    def process_watermark(self, watermark, input_index):
        if watermark > self.watermark:
            self.watermark = watermark
            for events in self.channels.values():
                events.append(Watermark(watermark))

    def process_idle(self, input_index):
        for events in self.channels.values():
            events.append(IDLE)

    def rows(self) -> Iterator[tuple]:
        for c in self.channels:
            if self.channels[c]:
                self._seal(c)
            chunks, self.sealed[c] = self.sealed[c], []
            for i, payload in enumerate(chunks):
                yield c, (self.edge_key, self.producer, i, payload)


class ShippingWriter:
    """A shuffle's records as PyFlink's coder hands them to the consumer (``as_shipped``: the Rows
    of a row type named); a chained operator gets them as they were made, as in PyFlink."""

    def __init__(self, writer, declared):
        self.writer = writer
        self.declared = declared

    @property
    def takes_arrow(self) -> bool:
        return takes_arrow(self.writer)

    def process_batch(self, values, timestamps, input_index):
        if type(values) is not ArrowBatch:      # Arrow decodes to the declared type's records
            values = as_shipped(values, self.declared)
        self.writer.process_batch(values, timestamps, input_index)

    def process_watermark(self, watermark, input_index):
        self.writer.process_watermark(watermark, input_index)

    def process_idle(self, input_index):
        self.writer.process_idle(input_index)


def channel_events(chunks: list) -> Iterator:
    """The events of one channel from its numbered chunks, unpickled one chunk at a time."""
    for _, payload in sorted(chunks, key=lambda chunk: chunk[0]):
        yield from pickle.loads(payload)
