"""The Kafka sink's producers kept in the Python worker between epochs (AT_LEAST_ONCE and NONE,
whose records the tasks write), one per client configuration, as Flink's writer keeps its
producer for the life of the task and Structured Streaming's Kafka sink caches its producers.

A new producer pays its start before the first record leaves: an idempotent one (AT_LEAST_ONCE)
asks the broker for a producer id, about 0.5 s on loopback, against 2-3 ms to flush an epoch of a
few hundred records through a kept one (measured on librdkafka 2.16). A producer goes back to the
pool only after a flush that left nothing undelivered and no failed record: one that lost records
or reported errors is dropped, and the next epoch makes a new one. The pool's mechanics (per
process, least recently used dropped past a bound) are ``client_pool``'s.
"""
from __future__ import annotations

from typing import Callable

from runtime.connectors.client_pool import KeyedClientPool

# Producers a worker keeps (its sinks' configurations across the jobs of its session).
CAPACITY = 8

class ProducerPool(KeyedClientPool[tuple]):
    """(producer, its ClientErrors) by configuration. An evicted producer is only dropped: what
    it holds was flushed before it came back (``release``)."""

    def acquire(self, key: tuple, make: Callable[[], tuple]) -> tuple:
        """(producer, its ClientErrors) for ``key``: the kept one unless it reported a failing
        error while it waited, else ``make()``'s. Taken out of the pool until ``release``."""
        producer, errors = self.take(key, make, usable=lambda kept: not kept[1].failing())
        errors.clear()                  # transient errors while it waited are not this epoch's
        return producer, errors

    def release(self, key: tuple, producer, errors) -> None:
        """Keep ``producer`` (flushed: nothing in flight, no record failed) for the next epoch's writer."""
        self.keep(key, (producer, errors))


PRODUCERS = ProducerPool(CAPACITY)
