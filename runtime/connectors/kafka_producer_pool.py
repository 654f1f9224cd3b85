"""The Kafka sink's producers kept in the Python worker between epochs (AT_LEAST_ONCE and NONE,
whose records the tasks write), one per client configuration, as Flink's writer keeps its
producer for the life of the task and Structured Streaming's Kafka sink caches its producers.

A new producer pays its start before the first record leaves: an idempotent one (AT_LEAST_ONCE)
asks the broker for a producer id, about 0.5 s on loopback, against 2-3 ms to flush an epoch of a
few hundred records through a kept one (measured on librdkafka 2.16). A producer goes back to the
pool only after a flush that left nothing undelivered and no failed record: one that lost records
or reported errors is dropped, and the next epoch makes a new one.
"""
from __future__ import annotations

import atexit
import os
from collections import OrderedDict
from typing import Callable

# Producers a worker keeps (its sinks' configurations across the jobs of its session).
CAPACITY = 8
# Settings that are objects made per writer (callbacks, loggers), not part of what the client is.
_NOT_CONFIGURATION = ("error_cb", "logger", "stats_cb", "throttle_cb", "oauth_cb")


def pool_key(config: dict) -> tuple:
    """The configuration a producer is made with, as a key (its callbacks left out)."""
    return tuple(sorted((k, v if isinstance(v, (str, int, float, bool)) else repr(v))
                        for k, v in config.items() if k not in _NOT_CONFIGURATION))


class ProducerPool:
    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self._kept: OrderedDict = OrderedDict()
        self._pid = os.getpid()
        self.reused = self.opened = 0      # acquisitions by how they got their producer

    def acquire(self, key: tuple, make: Callable[[], tuple]) -> tuple:
        """(producer, its ClientErrors) for ``key``: the kept one, else ``make()``'s. Taken out of
        the pool until ``release``."""
        if self._pid != os.getpid():        # a forked child: the parent's producers are not its own
            self._kept, self._pid = OrderedDict(), os.getpid()
        kept = self._kept.pop(key, None)
        if kept is not None and not kept[1].failing():
            self.reused += 1
            kept[1].clear()                 # transient errors while it waited are not this epoch's
            return kept
        self.opened += 1
        return make()

    def release(self, key: tuple, producer, errors) -> None:
        """Keep ``producer`` (flushed: nothing in flight) for the next epoch's writer."""
        self._kept[key] = (producer, errors)
        while len(self._kept) > self.capacity:
            self._kept.popitem(last=False)

    def close(self) -> None:
        self._kept = OrderedDict()


PRODUCERS = ProducerPool()
atexit.register(PRODUCERS.close)
