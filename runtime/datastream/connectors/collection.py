"""The bounded in-memory source behind ``from_collection`` (Flink's FromElementsFunction)."""
from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from functools import cached_property
from types import FunctionType
from typing import Any, ClassVar

from runtime.datastream.connectors.base import Source


@dataclass(frozen=True)
class CollectionSource(Source):
    default_name: ClassVar[str] = "Collection Source"
    parallel: ClassVar[bool] = False

    items: tuple
    type_info: Any = None

    @property
    def produced_type(self):
        return self.type_info

    def unpacked_items(self) -> tuple:
        """The items themselves, unpickled if they came packed (what the source's reader reads)."""
        return self.items.unpacked() if isinstance(self.items, PackedItems) else self.items

    def __reduce__(self):
        # The job graph goes to every task, the items are read by the source's one subtask: they
        # travel as one blob, unpickled on its first read. Pickled without a memo (5x faster over
        # records of plain values); items of other classes (the job's own, pickled by value) or
        # cycles go with the graph as they are.
        items = self.items
        if not isinstance(items, PackedItems):
            try:
                items = PackedItems(_pack_plain(items), len(items))
            except _NotPlain:
                pass
        return CollectionSource, (items, self.type_info)


class PackedItems:
    """A collection's items as a pickled blob, unpickled on first use: what a task that does not
    read the collection (every one but the source's) never pays for."""

    def __init__(self, blob: bytes, length: int):
        self.blob, self.length = blob, length

    @cached_property
    def _items(self) -> tuple:
        return pickle.loads(self.blob)

    def unpacked(self) -> tuple:
        return self._items

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index):
        return self._items[index]

    def __iter__(self):
        return iter(self._items)

    def __reduce__(self):
        return PackedItems, (self.blob, self.length)


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
