"""Timers per key and namespace (Flink's InternalTimerService).

Event-time timers fire when the watermark passes them, processing-time timers when the
epoch's processing time does. A timer is registered once per (timestamp, key, namespace):
registering it again is a no-op, as in Flink's deduplicating timer queue. The queues come
from the keyed state backend (Flink's PriorityQueueSetFactory): heap queues for the heap
backend, queues stored in RocksDB for the RocksDB backend.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from runtime.common.watermark_strategy import MIN_WATERMARK
from runtime.state.backend import TOMBSTONE
from runtime.state.key_groups import KeyGroupRange, assign_to_key_group

EVENT_TIME = "event"
PROCESSING_TIME = "processing"


class InternalTimerService:
    def __init__(self, backend):
        self.key_context = backend      # the keyed state backend: knows the current key, makes the queues
        self.event = backend.create_timer_queue(EVENT_TIME)
        self.processing = backend.create_timer_queue(PROCESSING_TIME)
        self.current_watermark = MIN_WATERMARK
        self.current_processing_time = MIN_WATERMARK

    def register_event_time_timer(self, namespace, timestamp: int) -> None:
        self.event.add(timestamp, self.key_context.current_key, namespace)

    def register_processing_time_timer(self, namespace, timestamp: int) -> None:
        self.processing.add(timestamp, self.key_context.current_key, namespace)

    def delete_event_time_timer(self, namespace, timestamp: int) -> None:
        self.event.delete(timestamp, self.key_context.current_key, namespace)

    def delete_processing_time_timer(self, namespace, timestamp: int) -> None:
        self.processing.delete(timestamp, self.key_context.current_key, namespace)

    def advance_watermark(self, watermark: int, on_timer: Callable[[int, Any, Any], None]) -> None:
        """Fire event-time timers up to ``watermark``; timers registered while firing fire too."""
        self.current_watermark = watermark
        for timestamp, key, namespace in self.event.pop_until(watermark):
            self.key_context.set_current_key(key)
            on_timer(timestamp, key, namespace)

    def advance_processing_time(self, time: int, on_timer: Callable[[int, Any, Any], None]) -> None:
        self.current_processing_time = time
        for timestamp, key, namespace in self.processing.pop_until(time):
            self.key_context.set_current_key(key)
            on_timer(timestamp, key, namespace)

    def _key_group(self, key_group: int, key, max_parallelism: int) -> int:
        """A timer's key group as its key's records are routed: the queues hash keys as they are
        (a field key's), a key of ``key_by(selector)`` goes by its key type (the backend's)."""
        key_type = self.key_context.key_type
        return key_group if key_type is None else assign_to_key_group(key, max_parallelism, key_type)

    def _queues(self):
        return ((EVENT_TIME, self.event), (PROCESSING_TIME, self.processing))

    def snapshot(self, max_parallelism: int) -> Iterator[tuple]:
        """Rows (key_group, domain, timestamp, key, namespace)."""
        for domain, queue in self._queues():
            for key_group, timestamp, key, namespace in queue.timers_with_key_groups(max_parallelism):
                yield self._key_group(key_group, key, max_parallelism), domain, timestamp, key, namespace

    def restore(self, rows: Iterable[tuple], key_group_range: KeyGroupRange) -> None:
        self.apply(rows, key_group_range)

    def changes(self, max_parallelism: int) -> Iterator[tuple]:
        """Rows (key_group, domain, timestamp, key, namespace, value) of the timers added (value
        None) or removed (value TOMBSTONE) since the last checkpoint (``mark_checkpointed``)."""
        for domain, queue in self._queues():
            for key_group, timestamp, key, namespace, live in queue.changes(max_parallelism):
                key_group = self._key_group(key_group, key, max_parallelism)
                yield key_group, domain, timestamp, key, namespace, (None if live else TOMBSTONE)

    def apply(self, rows: Iterable[tuple], key_group_range: KeyGroupRange) -> None:
        """Full rows (five fields) or incremental rows (six, the last TOMBSTONE for a removed
        timer), in order; rows of other key groups are skipped. Not a change."""
        added: dict = {EVENT_TIME: [], PROCESSING_TIME: []}
        removed: dict = {EVENT_TIME: [], PROCESSING_TIME: []}
        for row in rows:
            key_group, domain, timestamp, key, namespace = row[:5]
            if key_group_range is not None and not key_group_range.contains(key_group):
                continue
            if len(row) > 5 and row[5] is TOMBSTONE:
                if added[domain]:       # keep the order: what was added before goes in first
                    self._queue(domain).restore(added[domain])
                    added[domain] = []
                removed[domain].append((timestamp, key, namespace))
            else:
                if removed[domain]:
                    self._queue(domain).remove_restored(removed[domain])
                    removed[domain] = []
                added[domain].append((timestamp, key, namespace))
        for domain in (EVENT_TIME, PROCESSING_TIME):
            self._queue(domain).restore(added[domain])
            self._queue(domain).remove_restored(removed[domain])

    def mark_checkpointed(self) -> None:
        self.event.mark_checkpointed()
        self.processing.mark_checkpointed()

    def _queue(self, domain: str):
        return self.event if domain == EVENT_TIME else self.processing
