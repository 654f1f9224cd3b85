"""The Kafka source's consumers kept in the Python worker between epochs, as Structured
Streaming's Kafka source keeps its ``KafkaDataConsumer``s: one per client configuration and
topic-partition, least recently used closed past a bound, all closed at the process's exit
(``client_pool``).

A new consumer starts fetching from nothing; a kept one has fetched on (within librdkafka's
bounded prefetch) while the rest of the epoch, the checkpoint and the next planning ran, so the
next epoch's range of its partition is mostly waiting in its queue. A kept consumer is used only
where it stands: ``position`` is the offset up to which it handed out every record (the end of
the last range read; messages it returned past that wait in ``pending``); a range that starts
elsewhere (a replayed epoch) gets a new consumer. A read that did not finish closes its consumer, so a
kept one's position is always exact. The consumers are in no group (partitions assigned, nothing
committed): one left in a worker that no longer gets its partition's tasks holds nothing.
"""
from __future__ import annotations

from typing import Callable

from runtime.connectors.client_pool import KeyedClientPool

# Consumers a worker keeps (its partitions across the jobs of its session); the oldest closes.
CAPACITY = 16
# Each kept consumer's prefetch (librdkafka fetches a partition until its queue holds this much):
# a few MiB, about one epoch of small records, not librdkafka's 64 MiB, so that idle consumers
# do not hold much. Once its queue was full, librdkafka waits fetch.queue.backoff.ms (1 s by
# default) before it fetches again: a kept consumer then stalled up to 1 s mid-range. A job's own
# settings win.
PREFETCH = {"queued.max.messages.kbytes": "8192", "queued.min.messages": "100000", "fetch.queue.backoff.ms": "20"}


class PooledConsumer:
    """A consumer assigned one partition, its ``ClientErrors`` (its error callback), the offset
    it has handed out every record up to, and the messages it returned past that."""

    __slots__ = ("consumer", "errors", "position", "pending")

    def __init__(self, consumer, errors, position: int):
        self.consumer, self.errors, self.position = consumer, errors, position
        self.pending: list = []

    def close(self) -> None:
        try:
            self.consumer.close()
        except RuntimeError:        # closed already
            pass


class ConsumerPool(KeyedClientPool[PooledConsumer]):
    def dispose(self, pooled: PooledConsumer) -> None:
        pooled.close()

    def acquire(self, key: tuple, topic: str, partition: int, start: int,
                make: Callable[[], tuple]) -> PooledConsumer:
        """The consumer of ``key`` (the client configuration and the partition) at ``start``:
        the kept one if it stands there, else a new one ``make()`` returns as (consumer, its
        ClientErrors). Taken out of the pool until ``release``."""
        from confluent_kafka import TopicPartition

        def stands_at_start(kept: PooledConsumer) -> bool:
            # What it queued while it waited comes now (a broker down meanwhile: its errors count
            # below, not in the read's first consume); a record it hands out waits with the others.
            message = kept.consumer.poll(0)
            if message is not None:
                kept.pending.append(message)
            # Not a replayed range, nor one another worker read up to (this one's consumer fell
            # behind), nor every broker down while it waited: else a new consumer is as quick as a
            # seek (measured: ~0.1 s for 125,000 records either way; a seek back waited 0.5 s).
            return kept.position == start and not kept.errors.failing()

        def new() -> PooledConsumer:
            consumer, errors = make()
            consumer.assign([TopicPartition(topic, partition, start)])
            return PooledConsumer(consumer, errors, start)

        pooled = self.take(key, new, stands_at_start)
        pooled.errors.errors.clear()      # transient errors while it waited are not this read's
        return pooled

    def release(self, key: tuple, pooled: PooledConsumer) -> None:
        """Keep ``pooled`` (its ``position`` and ``pending`` exact) for the next read of its partition."""
        self.keep(key, pooled)


CONSUMERS = ConsumerPool(CAPACITY)
