"""Channel selection (Flink's ChannelSelector): which consumer subtask gets each record.

Works on a batch: returns the records of each channel. Keyed edges route each key as PyFlink
does (``runtime.state.key_groups``), vectorised where they can.
"""
from __future__ import annotations

import random
from typing import Callable

import numpy as np
import pyarrow as pa

from runtime.datastream import partitioner as part
from runtime.datastream.key_selector import select_keys
from runtime.graph.execution_graph import consumed_partitions
from runtime.state.key_groups import assign_key_to_parallel_operator, assign_operator_indexes, key_type_of
from runtime.task.record_columns import take

Channels = dict  # consumer index -> (values, timestamps)


def _split(values: list, timestamps: list, channels: np.ndarray, n: int) -> Channels:
    out: Channels = {}
    if len(values) == 0:
        return out
    order = np.argsort(channels, kind="stable")
    sorted_channels = channels[order]
    bounds = np.searchsorted(sorted_channels, np.arange(n + 1))
    for c in range(n):
        lo, hi = bounds[c], bounds[c + 1]
        if lo < hi:
            idx = order[lo:hi]
            out[c] = (take(values, idx), take(timestamps, idx))
    return out


def key_channels(keys: list, max_parallelism: int, parallelism: int, key_type=None) -> np.ndarray:
    """The consumer subtask of each key, as Flink's KeyGroupStreamPartitioner; ``key_type`` as
    in ``runtime.state.key_groups`` (``None``: a field key, hashed vectorised when it can be)."""
    if key_type is not None:
        return assign_operator_indexes(keys, max_parallelism, parallelism, key_type)
    try:
        array = keys if isinstance(keys, pa.Array) else pa.array(keys)
        if pa.types.is_string(array.type) or pa.types.is_integer(array.type) \
                or pa.types.is_floating(array.type) or pa.types.is_boolean(array.type):
            if array.null_count == 0:
                return assign_operator_indexes(array, max_parallelism, parallelism)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        pass
    if isinstance(keys, pa.Array):
        keys = keys.to_pylist()
    return np.fromiter((assign_key_to_parallel_operator(k, max_parallelism, parallelism) for k in keys),
                       dtype=np.int64, count=len(keys))


class ChannelSelector:
    def __init__(self, edge, producer_index: int, producer_parallelism: int,
                 consumer_parallelism: int, seed: int, key_of: Callable):
        self.p = edge.partitioner
        self.n = consumer_parallelism
        self.producer_index = producer_index
        self.key_of = key_of
        self.next = producer_index % consumer_parallelism    # rebalance starts spread out
        self.random = random.Random(seed)
        if self.p.is_pointwise:
            self.targets = [c for c in range(consumer_parallelism)
                            if producer_index in consumed_partitions(edge, producer_parallelism,
                                                                     consumer_parallelism, c)]
            self.next = 0

    def select(self, values: list, timestamps: list) -> Channels:
        p, n, count = self.p, self.n, len(values)
        if isinstance(p, part.ForwardPartitioner):
            return {self.targets[0]: (values, timestamps)}
        if isinstance(p, part.GlobalPartitioner):
            return {0: (values, timestamps)}
        if isinstance(p, part.BroadcastPartitioner):
            return {c: (values, timestamps) for c in range(n)}
        if isinstance(p, part.RescalePartitioner):
            targets = np.asarray(self.targets)
            channels = targets[(np.arange(count) + self.next) % len(targets)]
            self.next = (self.next + count) % len(targets)
        elif isinstance(p, part.RebalancePartitioner):
            # Round robin: record i goes to channel (i + start) % n, every n-th record a slice.
            start, self.next = self.next, (self.next + count) % n
            firsts = ((c, (c - start) % n) for c in range(n))
            return {c: (values[i::n], timestamps[i::n]) for c, i in firsts if i < count}
        elif isinstance(p, part.ShufflePartitioner):
            channels = np.fromiter((self.random.randrange(n) for _ in range(count)), dtype=np.int64, count=count)
        elif isinstance(p, part.KeyGroupStreamPartitioner):
            keys = select_keys(p.key_selector, values)
            channels = key_channels(keys, p.max_parallelism, n, key_type_of(p.key_selector))
        elif isinstance(p, part.CustomPartitionerWrapper):
            def channel(v):
                c = p.partitioner.partition(self.key_of(p.key_selector, v), n)
                if not isinstance(c, int) or not 0 <= c < n:
                    raise ValueError(f"partition_custom: the partitioner returned {c!r} for record {v!r}; "
                                     f"it must return a channel in 0..{n - 1}")
                return c
            channels = np.fromiter((channel(v) for v in values), dtype=np.int64, count=count)
        else:
            raise TypeError(f"unknown partitioner {p}")
        return _split(values, timestamps, np.asarray(channels), n)
