"""Timers per key and namespace (Flink's InternalTimerService).

Event-time timers fire when the watermark passes them, processing-time timers when the
epoch's processing time does. A timer is registered once per (timestamp, key, namespace):
registering it again is a no-op, as in Flink's deduplicating timer queue.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable, Iterable, Iterator

from runtime.common.watermark_strategy import MIN_WATERMARK
from runtime.state.key_groups import KeyGroupRange, assign_to_key_group

EVENT_TIME = "event"
PROCESSING_TIME = "processing"


class _TimerQueue:
    def __init__(self):
        self.heap: list = []
        self.live: set = set()
        self.seq = itertools.count()

    def add(self, timestamp: int, key, namespace) -> None:
        timer = (timestamp, key, namespace)
        if timer not in self.live:
            self.live.add(timer)
            heapq.heappush(self.heap, (timestamp, next(self.seq), key, namespace))

    def delete(self, timestamp: int, key, namespace) -> None:
        self.live.discard((timestamp, key, namespace))

    def pop_until(self, time: int) -> Iterator[tuple]:
        heap = self.heap
        while heap and heap[0][0] <= time:
            timestamp, _, key, namespace = heapq.heappop(heap)
            timer = (timestamp, key, namespace)
            if timer in self.live:      # deleted timers stay in the heap until popped
                self.live.discard(timer)
                yield timer

    def __len__(self) -> int:
        return len(self.live)


class InternalTimerService:
    def __init__(self, key_context):
        self.key_context = key_context      # the keyed state backend: knows the current key
        self.event = _TimerQueue()
        self.processing = _TimerQueue()
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

    def snapshot(self, max_parallelism: int) -> Iterator[tuple]:
        """Rows (key_group, domain, timestamp, key, namespace)."""
        for domain, queue in ((EVENT_TIME, self.event), (PROCESSING_TIME, self.processing)):
            for timestamp, key, namespace in queue.live:
                yield assign_to_key_group(key, max_parallelism), domain, timestamp, key, namespace

    def restore(self, rows: Iterable[tuple], key_group_range: KeyGroupRange) -> None:
        for key_group, domain, timestamp, key, namespace in rows:
            if key_group_range.contains(key_group):
                queue = self.event if domain == EVENT_TIME else self.processing
                queue.add(timestamp, key, namespace)
