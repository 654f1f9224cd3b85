"""The bounded in-memory source behind ``from_collection`` (Flink's FromElementsFunction)."""
from __future__ import annotations

import io
import pickle
from dataclasses import dataclass, replace
from functools import cached_property
from types import FunctionType
from typing import Any, ClassVar, Sequence

from runtime.datastream.connectors.base import Source


@dataclass(frozen=True)
class CollectionSource(Source):
    """``shares``: how many subtasks read the items, each every ``shares``-th from its own first
    (the job graph sets it when the source does its rebalance's dealing, ``runtime.graph.job_graph``):
    the items travel dealt into that many shares, so a subtask unpickles its own only."""

    default_name: ClassVar[str] = "Collection Source"
    parallel: ClassVar[bool] = False
    strided: ClassVar[bool] = True

    items: tuple
    type_info: Any = None
    shares: int = 1

    @property
    def produced_type(self):
        return self.type_info

    def dealt(self, n: int) -> "CollectionSource":
        return replace(self, shares=n)

    def share(self, k: int, n: int) -> Sequence:
        """Items k, k + n, k + 2n, ... (all of them for n = 1), to slice a batch at a time: the
        share unpickled when the items came dealt into n shares, else a view of the items."""
        items = self.items
        if isinstance(items, PackedItems):
            if n == len(items.blobs):
                return items.share(k)
            items = items.unpacked()    # read at another parallelism than they were dealt for
        return items if n == 1 else _Strided(items, k, n)

    def __reduce__(self):
        # The job graph goes to every task, the items are read by the source's subtasks only: they
        # travel as a blob per share, unpickled on its first read. Pickled without a memo (5x
        # faster over records of plain values); items of other classes (the job's own, pickled by
        # value) or cycles go with the graph as they are.
        items = self.items
        if not isinstance(items, PackedItems):
            try:
                items = PackedItems(tuple(_pack_plain(items[k::self.shares]) for k in range(self.shares)), len(items))
            except _NotPlain:
                pass
        return CollectionSource, (items, self.type_info, self.shares)


class PackedItems:
    """A collection's items dealt round-robin into shares, each a pickled blob, unpickled on first
    use: what a task that does not read the collection (every one but the source's) never pays
    for, and a source subtask pays for its share only."""

    def __init__(self, blobs: tuple, length: int):
        # one blob of bytes: a plan pickled before collections were dealt into shares
        self.blobs, self.length = (blobs,) if isinstance(blobs, bytes) else blobs, length
        self._shares: dict = {}

    def share(self, k: int) -> tuple:
        if k not in self._shares:
            self._shares[k] = pickle.loads(self.blobs[k])
        return self._shares[k]

    @cached_property
    def _items(self) -> tuple:
        n = len(self.blobs)
        if n == 1:
            return self.share(0)
        items = [None] * self.length
        for k in range(n):
            items[k::n] = self.share(k)
        return tuple(items)

    def unpacked(self) -> tuple:
        return self._items

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index):
        return self._items[index]

    def __iter__(self):
        return iter(self._items)

    def __reduce__(self):
        return PackedItems, (self.blobs, self.length)


class _Strided:
    """Items k, k + n, k + 2n, ... of ``items`` without a copy of them all: what a slice
    [lo:hi] of the share would hold, sliced from the items (a reader's batch)."""
    __slots__ = ("items", "k", "n")

    def __init__(self, items: Sequence, k: int, n: int):
        self.items, self.k, self.n = items, k, n

    def __getitem__(self, batch: slice):
        k, n = self.k, self.n
        return self.items[k + batch.start * n:k + batch.stop * n:n]


_RUNTIME = __name__.split(".")[0] + "."


class _NotPlain(Exception):
    pass


class _PlainPickler(pickle.Pickler):
    # Builtin values never reach reducer_override; of the rest only Sluice's own (Row, RowKind,
    # their functions) are importable in every worker.
    def reducer_override(self, obj):
        module = getattr(obj, "__module__", None) if isinstance(obj, (type, FunctionType)) \
            else type(obj).__module__
        if module is None or not module.startswith(_RUNTIME):
            raise _NotPlain
        return NotImplemented


def _pack_plain(items: tuple) -> bytes:
    out = io.BytesIO()
    pickler = _PlainPickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True     # no memo: equal values are written twice, identity is not kept
    try:
        pickler.dump(items)
    except (ValueError, RecursionError) as e:     # fast mode refuses cycles
        raise _NotPlain from e
    return out.getvalue()
