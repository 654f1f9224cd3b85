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
        """Items k, k + n, k + 2n, ... (all of them for n = 1), unpickled if they came packed."""
        if isinstance(self.items, PackedItems):
            return self.items.share(k, n)
        return self.items if n == 1 else self.items[k::n]

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

    def share(self, k: int, n: int) -> Sequence:
        if n != len(self.blobs):        # read at another parallelism than it was dealt for
            return self.unpacked()[k::n]
        if k not in self._shares:
            self._shares[k] = pickle.loads(self.blobs[k])
        return self._shares[k]

    @cached_property
    def _items(self) -> tuple:
        n = len(self.blobs)
        if n == 1:
            return self.share(0, 1)
        items = [None] * self.length
        for k in range(n):
            items[k::n] = self.share(k, n)
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
