"""A heap state's entries of one namespace (Flink's StateMap): a dict, and past a size, columns.

A Python dict costs about 90 bytes an entry for a short string key and a small value (the
dict's slot, the key object): a subtask holding 5,000,000 keys spends about 450 MB on them. So a
map holding ``sluice.state.heap.compact-after-entries`` entries (262,144 by default; 0: never) as
Python objects packs them (``CompactStateMap``): the keys' bytes, the values as int64/float64 or
pickled bytes, each key's hash, and an open-addressing index over them (about 40 bytes an entry),
with only the entries written since it last settled as Python objects in the dict itself. A read
of a settled entry looks it up in the index (~0.5 us); a write puts the entry in the dict and
retires the settled one. The backend settles its maps between records: the dict's entries are
appended to the columns, and indexed.

The columns grow in place: a buffer of 1 MiB or more is mmapped, and numpy's resize reallocates
it by remapping its pages, so settling never copies the settled entries (nor holds a second copy
of them at its peak); retired entries are dropped in place, a chunk at a time, when the index
grows. Measured (bench/README.md, issue 35): the kept state in less than half the memory, small
epochs as fast, new keys about 1.6 times as costly to build.

A value that may be changed in place (a list, a map) is moved into the dict when read, so a
ListState's ``add`` or a MapState's ``put`` changes the dict's object, as on a plain heap.

The index and hashes use Python's ``hash``, stable within a process: the columns live in one
Python worker and are rebuilt from a checkpoint's rows in another.
"""
from __future__ import annotations

import pickle
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.common.pickling import dumps_each
from runtime.common.memory import map_large_buffers, return_freed_memory

_LOAD = 0.7                     # the index's fill at most
_INT64, _FLOAT64, _TEXT, _PICKLED = "int64", "float64", "text", "pickled"
_INSERT_CHUNK = 1 << 18         # entries indexed at a time (the rounds' arrays stay small)
# Arrow buffers made here (a restore's slices cast to large binary) come from malloc, not Arrow's
# pool (mimalloc keeps what is freed): what a settling frees goes back to the system
# (runtime.common.memory).
_POOL = pa.system_memory_pool()


class StateMap(dict):
    """A namespace's {key: value} of a heap state: a plain dict (every operation at dict speed)
    until the backend settles it into a ``CompactStateMap`` (the same object, its class changed,
    so every reference to it stays valid)."""

    settled = 0     # entries in columns (none in a plain map)

    def settle_due(self, after: int) -> bool:
        """Whether to settle: the map holds ``after`` entries or more as Python objects."""
        return dict.__len__(self) >= after

    def settle(self) -> None:
        """Pack the entries into columns (the map becomes a CompactStateMap)."""
        self._compact().settle()

    def absorb_columns(self, keys: pa.Array, values: pa.Array) -> None:
        self._compact().absorb_columns(keys, values)

    def _compact(self) -> "CompactStateMap":
        self.__class__ = CompactStateMap
        self._init_columns()
        return self


class PackedColumn:
    """Python values packed by kind: int64 or float64 when every value is exactly that Python
    type, UTF-8 text (keys), else pickled bytes (``data`` and ``offsets``, as Arrow's large
    binary); read one at a time through memoryviews. A map's own columns grow in place
    (``extend``) and drop retired entries in place (``keep``): a large state is never copied."""

    __slots__ = ("kind", "items", "data", "offsets", "_items", "_data", "_offsets")

    def __init__(self, kind: str, items: Optional[np.ndarray] = None, data: Optional[np.ndarray] = None,
                 offsets: Optional[np.ndarray] = None):
        self.kind = kind
        self.items = items          # numbers: int64 or float64
        self.data = data            # text, pickled: the bytes (uint8) ...
        self.offsets = offsets      # ... and where each item starts (int64, one more than items)
        self.views()

    @classmethod
    def empty(cls, kind: str) -> "PackedColumn":
        if kind is _INT64 or kind is _FLOAT64:
            return cls(kind, np.zeros(0, np.int64 if kind is _INT64 else np.float64))
        return cls(kind, data=np.zeros(0, np.uint8), offsets=np.zeros(1, np.int64))

    @classmethod
    def of_binary(cls, kind: str, array: pa.Array) -> "PackedColumn":
        """A view of an Arrow binary or string column's bytes (read-only: a part to extend by)."""
        array = pc.cast(array, pa.large_binary(), memory_pool=_POOL)
        offsets = np.frombuffer(array.buffers()[1], np.int64, count=len(array) + 1, offset=8 * array.offset)
        data = array.buffers()[2]
        return cls(kind, data=np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8),
                   offsets=offsets)

    def views(self) -> None:
        """The memoryviews reads go through; ``release`` them before the column grows or shrinks
        (numpy resizes in place without checking for them)."""
        if self.items is not None:
            self._items, self._data, self._offsets = memoryview(self.items), None, None
        else:
            # 'B': compared with bytes byte by byte
            self._items, self._data, self._offsets = None, memoryview(self.data), memoryview(self.offsets)

    def release(self) -> None:
        self._items = self._data = self._offsets = None

    def __len__(self) -> int:
        return len(self.items) if self.items is not None else len(self.offsets) - 1

    @classmethod
    def pack(cls, values: list, keys: bool = False) -> "PackedColumn":
        if values and all(type(v) is int for v in values):
            try:
                return cls(_INT64, np.array(values, np.int64))
            except OverflowError:
                pass
        elif values and all(type(v) is float for v in values):
            return cls(_FLOAT64, np.array(values, np.float64))
        if keys and values and all(type(v) is str for v in values):
            return cls._of_bytes(_TEXT, [v.encode("utf-8", "surrogatepass") for v in values])
        return cls._of_bytes(_PICKLED, dumps_each(values))

    @classmethod
    def _of_bytes(cls, kind: str, raws: list) -> "PackedColumn":
        offsets = np.zeros(len(raws) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, raws), np.int64, len(raws)), out=offsets[1:])
        return cls(kind, data=np.frombuffer(b"".join(raws), np.uint8), offsets=offsets)

    def get(self, i: int):
        kind = self.kind
        if kind is _INT64 or kind is _FLOAT64:
            return self._items[i]
        raw = self._data[self._offsets[i]:self._offsets[i + 1]]
        return str(raw, "utf-8", "surrogatepass") if kind is _TEXT else pickle.loads(raw)

    def matches(self, i: int, key) -> bool:
        """Whether item ``i`` is ``key``."""
        kind = self.kind
        if kind is _TEXT:
            return type(key) is str and \
                self._data[self._offsets[i]:self._offsets[i + 1]] == key.encode("utf-8", "surrogatepass")
        if kind is _INT64 or kind is _FLOAT64:
            return self._items[i] == key        # as a dict compares: 1, 1.0 and True are one key
        return pickle.loads(self._data[self._offsets[i]:self._offsets[i + 1]]) == key

    def _binary(self) -> pa.Array:
        """The bytes as an Arrow large binary column, without a copy (dropped before a resize)."""
        return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(self), [
            None, pa.py_buffer(self.offsets), pa.py_buffer(self.data)])

    def decode(self, indexes: np.ndarray) -> list:
        """The items at ``indexes`` as Python objects."""
        if self.items is not None:
            return self.items[indexes].tolist()
        raws = self._binary().take(pa.array(indexes)).to_pylist()
        if self.kind is _TEXT:
            return [r.decode("utf-8", "surrogatepass") for r in raws]
        return [pickle.loads(r) for r in raws]

    def arrow(self, indexes: np.ndarray) -> Optional[pa.Array]:
        """The items at ``indexes`` as an Arrow column of their type (text as string); None when
        pickled, or text that is not UTF-8 (a lone surrogate)."""
        if self.items is not None:
            return pa.array(self.items[indexes])
        if self.kind is _TEXT:
            try:
                return self._binary().take(pa.array(indexes)).cast(pa.large_string()).cast(pa.string())
            except pa.ArrowInvalid:
                return None
        return None

    def extend(self, part: "PackedColumn") -> None:
        """Append ``part``'s items (released views first): in place when they share a kind (a
        large buffer's realloc is a remap, not a copy), else both re-packed as pickles."""
        if part.kind != self.kind:
            merged = PackedColumn.pack(self.decode(np.arange(len(self))) + part.decode(np.arange(len(part))))
            self.kind, self.items, self.data, self.offsets = merged.kind, merged.items, merged.data, merged.offsets
            self.owned()
            return
        if self.items is not None:
            _append(self.items, part.items)
            return
        first, end = int(part.offsets[0]), int(self.offsets[-1])
        _append(self.data, part.data[first:int(part.offsets[-1])])
        _append(self.offsets, part.offsets[1:] - (first - end))

    def owned(self) -> None:
        """Make the buffers this column's own (growable) arrays."""
        if self.items is not None:
            self.items = np.array(self.items)
        else:
            self.data, self.offsets = np.array(self.data), np.array(self.offsets)

    def keep(self, kept: np.ndarray) -> None:
        """Keep only the items at ``kept`` (ascending), moved down in place a chunk at a time."""
        if self.items is not None:
            _keep(self.items, kept)
            return
        binary = self._binary()
        lengths = self.offsets[kept + 1] - self.offsets[kept]
        end = 0
        for start in range(0, len(kept), _INSERT_CHUNK):
            taken = binary.take(pa.array(kept[start:start + _INSERT_CHUNK]))   # a copy: its bytes move down
            size = int(lengths[start:start + _INSERT_CHUNK].sum())
            if size:
                self.data[end:end + size] = np.frombuffer(taken.buffers()[2], np.uint8, count=size)
            end += size
        del binary
        new_offsets = np.zeros(len(kept) + 1, np.int64)
        np.cumsum(lengths, out=new_offsets[1:])
        self.offsets.resize(len(kept) + 1, refcheck=False)
        self.offsets[:] = new_offsets
        self.data.resize(end, refcheck=False)


def _append(array: np.ndarray, part: np.ndarray) -> None:
    """Grow ``array`` (its own buffer, no view of it alive) by ``part``."""
    n = len(array)
    array.resize(n + len(part), refcheck=False)
    array[n:] = part


def _keep(array: np.ndarray, kept: np.ndarray) -> None:
    """Keep ``array``'s items at ``kept`` (ascending) in place: each chunk moves down, to places
    already read (kept[i] >= i), then the array shrinks."""
    for start in range(0, len(kept), _INSERT_CHUNK):
        chunk = kept[start:start + _INSERT_CHUNK]
        array[start:start + len(chunk)] = array[chunk]
    array.resize(len(kept), refcheck=False)


class CompactStateMap(StateMap):
    """A StateMap whose settled entries are packed columns (see the module's docstring). The
    dict part holds the entries written (or, for mutable values, read) since it last settled;
    a settled entry also in the dict, or removed, is retired (``_alive`` false)."""

    def _init_columns(self) -> None:
        map_large_buffers()
        self._hashes = np.zeros(0, np.int64)
        self._keys: Optional[PackedColumn] = None
        self._values: Optional[PackedColumn] = None
        self._alive = np.zeros(0, np.bool_)
        self._index = np.full(16, -1, np.int32)
        self._views()
        self.settled = 0
        self._pending: list = []        # packed (hashes, keys, values) not yet indexed
        self._absorbed = False          # some may repeat a key: settle keeps the last
        self._probed = (None, -1)       # the last lookup (key, its settled index or -1)

    def _views(self) -> None:
        self._hash_items = memoryview(self._hashes)
        self._alive_items = memoryview(self._alive)
        self._index_items = memoryview(self._index)
        self._mask = len(self._index) - 1
        self._shift = 64 - (len(self._index).bit_length() - 1)
        for column in (self._keys, self._values):
            if column is not None:
                column.views()

    def _release_views(self) -> None:
        """Before the columns grow or shrink in place."""
        self._hash_items = self._alive_items = self._index_items = None
        for column in (self._keys, self._values):
            if column is not None:
                column.release()

    # ---- lookups -----------------------------------------------------------------------

    def _find(self, key) -> int:
        """The settled, live index of ``key``, or -1."""
        last_key, last = self._probed
        if last_key is key or (last_key == key and type(last_key) is type(key)):
            return last if last < 0 or self._alive_items[last] else -1
        found = -1
        if self.settled:
            h = hash(key)
            slot = ((h * _GOLDEN) & _U64) >> self._shift
            index, hashes, mask = self._index_items, self._hash_items, self._mask
            while True:
                e = index[slot]
                if e < 0:
                    break
                if hashes[e] == h and self._alive_items[e] and self._keys.matches(e, key):
                    found = e
                    break
                slot = (slot + 1) & mask
        self._probed = (key, found)
        return found

    def _retire(self, e: int) -> None:
        self._alive_items[e] = False
        self.settled -= 1

    def __missing__(self, key):
        e = self._find(key)
        if e < 0:
            raise KeyError(key)
        return self._take(key, e)

    def _take(self, key, e: int):
        value = self._values.get(e)
        if self._values.kind is _PICKLED:
            # It may be changed in place (a list, a dict): it lives in the dict from now on.
            self._retire(e)
            dict.__setitem__(self, key, value)
        return value

    def get(self, key, default=None):
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        e = self._find(key)
        return default if e < 0 else self._take(key, e)

    def __contains__(self, key) -> bool:
        return dict.__contains__(self, key) or self._find(key) >= 0

    def __setitem__(self, key, value) -> None:
        if not dict.__contains__(self, key):
            e = self._find(key)
            if e >= 0:
                self._retire(e)
        dict.__setitem__(self, key, value)

    def setdefault(self, key, default=None):
        value = self.get(key)
        if value is None and not dict.__contains__(self, key):
            self[key] = value = default
        return value

    def update(self, other=(), **kwargs) -> None:
        for key, value in (other.items() if hasattr(other, "items") else other):
            self[key] = value
        for key, value in kwargs.items():
            self[key] = value

    def __delitem__(self, key) -> None:
        if dict.__contains__(self, key):
            dict.__delitem__(self, key)
            return
        e = self._find(key)
        if e < 0:
            raise KeyError(key)
        self._retire(e)

    def pop(self, key, *default):
        if dict.__contains__(self, key):
            return dict.pop(self, key)
        e = self._find(key)
        if e < 0:
            if default:
                return default[0]
            raise KeyError(key)
        value = self._values.get(e)
        self._retire(e)
        return value

    def clear(self) -> None:
        dict.clear(self)
        self._init_columns()

    def __len__(self) -> int:
        return dict.__len__(self) + self.settled

    def __bool__(self) -> bool:
        return len(self) > 0

    def _live(self) -> np.ndarray:
        return np.flatnonzero(self._alive)

    def __iter__(self) -> Iterator:
        yield from dict.keys(self)
        for live in self._live_chunks():
            yield from self._keys.decode(live)

    def keys(self):
        return list(self)

    def items(self) -> Iterator[tuple]:
        yield from dict.items(self)
        for live in self._live_chunks():
            yield from zip(self._keys.decode(live), self._values.decode(live))

    def values(self):
        return [v for _, v in self.items()]

    def _live_chunks(self, size: int = 100_000) -> Iterator[tuple]:
        live = self._live()
        for start in range(0, len(live), size):
            yield live[start:start + size]

    def settled_chunks(self, size: int) -> Iterator:
        """The live settled entries, ``size`` at a time (a snapshot never copies the whole map):
        (keys as a string column, values as an Arrow column) when both have Arrow types (text
        keys; int64, float64 or text values), else a list of (key, value) pairs (pickled values,
        a key that is not UTF-8: a lone surrogate)."""
        for live in self._live_chunks(size):
            values = self._values.arrow(live) if self._keys.kind is _TEXT else None
            keys = self._keys.arrow(live) if values is not None else None
            if keys is None:
                yield list(zip(self._keys.decode(live), self._values.decode(live)))
            else:
                yield keys, values

    def unsettled_items(self):
        return dict.items(self)

    # ---- settling ----------------------------------------------------------------------

    def settle_due(self, after: int) -> bool:
        return dict.__len__(self) >= after or bool(self._pending)

    def absorb(self, keys: list, values: list, unique: bool = False) -> None:
        """Entries given column-wise (a restore's chunk): settled at the next ``settle``, where a
        key given again, or already in the map, keeps its last value (``unique``: the caller
        knows none is; else settling compares the keys whose hashes repeat)."""
        self._absorbed = self._absorbed or not unique
        self._pending.append((np.array([hash(k) for k in keys], np.int64),
                              PackedColumn.pack(keys, keys=True), PackedColumn.pack(values)))

    def absorb_columns(self, keys: pa.ChunkedArray, values: pa.ChunkedArray) -> None:
        """Entries given as Arrow columns (text keys not in the map, each once; int64 or float64
        values): a restore without a Python object per entry, settled a slice at a time (the
        slice's keys hashed, its columns appended), so no second copy of the columns is made."""
        kind = _INT64 if values.type == pa.int64() else _FLOAT64
        for start in range(0, len(keys), _INSERT_CHUNK):
            chunk = keys.slice(start, _INSERT_CHUNK).combine_chunks()
            hashes = np.fromiter(map(hash, chunk.to_pylist()), np.int64, len(chunk))
            part = values.slice(start, _INSERT_CHUNK).combine_chunks().to_numpy()
            self._pending.append((hashes, PackedColumn.of_binary(_TEXT, chunk), PackedColumn(kind, part)))
            self.settle()

    def settle(self) -> None:
        """Pack the dict's entries and any absorbed ones after the settled entries, and index
        them: into the index as it is while it has room, else into a new one, without the
        retired entries (a retired entry also stays in the index until then: lookups pass it)."""
        absorbed = self._absorbed
        if dict.__len__(self):
            # Keys not among the live settled entries (writing one retires it).
            self.absorb(list(dict.keys(self)), list(dict.values(self)), unique=not self._pending)
            dict.clear(self)
        if not self._pending:
            return
        first_new = len(self._hashes)
        parts, self._pending = self._pending, []
        self._release_views()
        if self._keys is None:
            self._keys, self._values = PackedColumn.empty(parts[0][1].kind), PackedColumn.empty(parts[0][2].kind)
        for hashes, keys, values in parts:
            _append(self._hashes, hashes)
            self._keys.extend(keys)
            self._values.extend(values)
        del parts
        _append(self._alive, np.ones(len(self._hashes) - first_new, np.bool_))
        if absorbed:
            self._retire_repeated_keys(first_new)
        self._absorbed = False
        live = int(np.count_nonzero(self._alive))
        if len(self._hashes) > _LOAD * len(self._index):
            if live < len(self._hashes):
                kept = np.flatnonzero(self._alive)
                _keep(self._hashes, kept)
                self._keys.keep(kept)
                self._values.keep(kept)
                _keep(self._alive, kept)
            self._index = None      # the old index freed before the new one is made, not beside it
            self._index = np.full(_index_size(live), -1, np.int32)
            first_new = 0
        _insert(self._index, self._hashes, first_new)
        self.settled = live
        self._probed = (None, -1)
        self._views()
        return_freed_memory()

    def _retire_repeated_keys(self, first_new: int) -> None:
        """Of entries with one key, only the last stays alive. The new entries (``first_new`` on,
        not indexed yet) are looked for among the indexed ones by their hashes (probed in the
        index, vectorised) and among themselves; only entries whose hashes match are compared as
        Python objects. A restore that settles a chunk at a time costs its chunks, not the map."""
        fresh = self._hashes[first_new:]
        order = np.argsort(fresh, kind="stable")
        ordered = fresh[order]
        repeats = np.flatnonzero(ordered[1:] == ordered[:-1])
        found_new, found_old = _probe(self._index, self._hashes, self._alive, fresh)
        candidates = np.unique(np.concatenate([order[repeats] + first_new, order[repeats + 1] + first_new,
                                               found_new + first_new, found_old]))
        if not len(candidates):
            return
        candidates = candidates[self._alive[candidates]]
        last = {}
        for i, key in zip(candidates.tolist(), self._keys.decode(candidates)):
            last[(self._hashes[i], key)] = i       # candidates ascend: the last one wins
        self._alive[candidates] = False
        self._alive[np.array(sorted(last.values()), np.int64)] = True


def _probe(index: np.ndarray, hashes: np.ndarray, alive: np.ndarray, wanted: np.ndarray) -> tuple:
    """(positions in ``wanted``, entries) of the live indexed entries whose hash is one wanted,
    vectorised: each round looks at one more slot of every probe sequence not at an empty slot."""
    mask = len(index) - 1
    pending = np.arange(len(wanted))
    slots = _home_slots(wanted, len(index))
    found_new, found_old = [], []
    while len(pending):
        entries = index[slots]
        going = entries >= 0
        pending, slots, entries = pending[going], slots[going], entries[going]
        hit = (hashes[entries] == wanted[pending]) & alive[entries]
        found_new.append(pending[hit])
        found_old.append(entries[hit])
        slots = (slots + 1) & mask
    return (np.concatenate(found_new) if found_new else np.zeros(0, np.int64),
            np.concatenate(found_old).astype(np.int64) if found_old else np.zeros(0, np.int64))


# Fibonacci hashing: a slot is the top bits of the hash times 2^64 / golden ratio. Python hashes
# consecutive ints to consecutive values; taken as they are (hash & mask), a packed map of such
# keys was one run of full slots, and each re-written key walked the run to its end.
_GOLDEN = 0x9E3779B97F4A7C15
_U64 = (1 << 64) - 1


def _home_slots(hashes: np.ndarray, size: int) -> np.ndarray:
    """Each hash's first slot in an index of ``size`` (a power of two) slots."""
    shift = np.uint64(64 - (size.bit_length() - 1))
    return (hashes.astype(np.uint64) * np.uint64(_GOLDEN) >> shift).astype(np.int64)


def _index_size(entries: int) -> int:
    """Slots for ``entries`` at most ``_LOAD`` full: a power of two (so on average another half
    of them fits before the next rebuild)."""
    return 1 << max(4, int(np.ceil(np.log2(max(entries, 1) / _LOAD))))


def _insert(index: np.ndarray, hashes: np.ndarray, first: int) -> None:
    """Put entries ``first`` and on into ``index``, a linear-probing table of entry numbers (-1:
    empty), vectorised: each round places, in every still-empty slot wanted, the first entry that
    wants it; the others try the next slot."""
    mask = len(index) - 1
    for start in range(first, len(hashes), _INSERT_CHUNK):
        pending = np.arange(start, min(start + _INSERT_CHUNK, len(hashes)), dtype=np.int32)
        slots = _home_slots(hashes[pending], len(index)).astype(np.int32)
        while len(pending):
            free = index[slots] < 0
            wanting, wanted = pending[free], slots[free]
            taken, first_wanting = np.unique(wanted, return_index=True)
            index[taken] = wanting[first_wanting]
            placed = np.zeros(len(pending), np.bool_)
            placed[np.flatnonzero(free)[first_wanting]] = True
            pending, slots = pending[~placed], (slots[~placed] + 1) & mask
