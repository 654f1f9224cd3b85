"""A heap state's entries of one namespace (Flink's StateMap): a dict, and past a size, columns.

A Python dict costs about 90 bytes an entry for a short string key and a small value (the
dict's slot, the key object): a subtask holding 5,000,000 keys spends about 450 MB on them. A
map may instead (``sluice.state.heap.compact-after-entries``, off by default) pack its settled
entries once it holds that many as Python objects (``CompactStateMap``): the keys' bytes, the
values as int64/float64 or pickled bytes, each key's hash, and an open-addressing index over
them (about 40 bytes an entry), with only the entries written since it last settled as Python
objects in the dict itself. A read of a settled entry looks it up in the index (~0.5 us); a
write puts the entry in the dict and retires the settled one. The backend settles its maps
between records: the dict's entries are appended to the columns, and indexed.

Measured (bench/README.md, issue 35): the kept state's memory about halves, but building new
keys costs about 1.8 times as much, and its packing (the columns copied, the index rebuilt as
the state grows) makes a higher peak than the dicts' at 10,000,000 keys: so it is a setting.

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

_LOAD = 0.7                     # the index's fill at most
_INT64, _FLOAT64, _TEXT, _PICKLED = "int64", "float64", "text", "pickled"
_INSERT_CHUNK = 1 << 18         # entries indexed at a time (the rounds' arrays stay small)
# The columns' Arrow buffers come from malloc, not Arrow's pool (mimalloc keeps what is freed):
# what a settling frees goes back to the system (_return_freed_memory).
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
    type, UTF-8 text (keys), else pickled bytes; read one at a time through memoryviews."""

    __slots__ = ("kind", "array", "_items", "_data", "_offsets")

    def __init__(self, kind: str, array):
        self.kind = kind
        self.array = array          # numpy (int64, float64) or a pyarrow LargeBinaryArray
        self._items = self._data = self._offsets = None
        if kind is _INT64 or kind is _FLOAT64:
            self._items = memoryview(array)
        else:
            if array.offset:
                self.array = array = pa.concat_arrays([array], memory_pool=_POOL)
            offsets, data = array.buffers()[1], array.buffers()[2]
            self._offsets = memoryview(np.frombuffer(offsets, np.int64, count=len(array) + 1))
            # 'B': compared with bytes byte by byte (pyarrow exports signed chars)
            self._data = memoryview(data).cast("B") if data is not None else memoryview(b"")

    def __len__(self) -> int:
        return len(self.array)

    @classmethod
    def pack(cls, values: list, keys: bool = False) -> "PackedColumn":
        if values and all(type(v) is int for v in values):
            try:
                return cls(_INT64, np.array(values, np.int64))
            except OverflowError:
                pass
        elif values and all(type(v) is float for v in values):
            return cls(_FLOAT64, np.array(values, np.float64))
        elif keys and values and all(type(v) is str for v in values):
            return cls(_TEXT, pa.array([v.encode("utf-8", "surrogatepass") for v in values], pa.large_binary(),
                                       memory_pool=_POOL))
        return cls(_PICKLED, pa.array([pickle.dumps(v, protocol=5) for v in values], pa.large_binary(),
                                      memory_pool=_POOL))

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

    def decode(self, indexes: np.ndarray) -> list:
        """The items at ``indexes`` as Python objects."""
        if self.kind is _INT64 or self.kind is _FLOAT64:
            return self.array[indexes].tolist()
        raws = self.array.take(pa.array(indexes)).to_pylist()
        if self.kind is _TEXT:
            return [r.decode("utf-8", "surrogatepass") for r in raws]
        return [pickle.loads(r) for r in raws]

    def arrow(self, indexes: np.ndarray) -> Optional[pa.Array]:
        """The items at ``indexes`` as an Arrow column of their type (text as string); None when
        pickled, or text that is not UTF-8 (a lone surrogate)."""
        if self.kind is _INT64 or self.kind is _FLOAT64:
            return pa.array(self.array[indexes])
        if self.kind is _TEXT:
            try:
                return self.array.take(pa.array(indexes)).cast(pa.large_string()).cast(pa.string())
            except pa.ArrowInvalid:
                return None
        return None

    @staticmethod
    def concat(parts: list) -> "PackedColumn":
        """The parts' items in order, of their kind when they share it, else pickled."""
        kind = parts[0].kind
        if len(parts) == 1:
            return parts[0]
        if any(p.kind != kind for p in parts):
            return PackedColumn.pack([v for p in parts for v in p.decode(np.arange(len(p)))])
        if kind is _INT64 or kind is _FLOAT64:
            return PackedColumn(kind, np.concatenate([p.array for p in parts]))
        return PackedColumn(kind, pa.concat_arrays([p.array for p in parts], memory_pool=_POOL))

    def take(self, indexes: np.ndarray) -> "PackedColumn":
        if self.kind is _INT64 or self.kind is _FLOAT64:
            return PackedColumn(self.kind, self.array[indexes])
        return PackedColumn(self.kind, pc.take(self.array, pa.array(indexes), memory_pool=_POOL))


class CompactStateMap(StateMap):
    """A StateMap whose settled entries are packed columns (see the module's docstring). The
    dict part holds the entries written (or, for mutable values, read) since it last settled;
    a settled entry also in the dict, or removed, is retired (``_alive`` false)."""

    def _init_columns(self) -> None:
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

    # ---- lookups -----------------------------------------------------------------------

    def _find(self, key) -> int:
        """The settled, live index of ``key``, or -1."""
        last_key, last = self._probed
        if last_key is key or (last_key == key and type(last_key) is type(key)):
            return last if last < 0 or self._alive_items[last] else -1
        found = -1
        if self.settled:
            h = hash(key)
            slot, index, hashes, mask = h & self._mask, self._index_items, self._hash_items, self._mask
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
        # Also an eighth of the settled entries: each settling copies their columns.
        return dict.__len__(self) >= max(after, self.settled // 8) or bool(self._pending)

    def absorb(self, keys: list, values: list, unique: bool = False) -> None:
        """Entries given column-wise (a restore's chunk): settled at the next ``settle``, where a
        key given again, or already in the map, keeps its last value (``unique``: the caller
        knows none is; else settling compares the keys whose hashes repeat)."""
        self._absorbed = self._absorbed or not unique
        self._pending.append((np.array([hash(k) for k in keys], np.int64),
                              PackedColumn.pack(keys, keys=True), PackedColumn.pack(values)))

    def absorb_columns(self, keys: pa.Array, values: pa.Array) -> None:
        """Entries given as Arrow columns (text keys not in the map, each once; int64 or float64
        values), settled at once: a restore without a Python object per entry (the keys' hashes
        are taken a chunk of keys at a time)."""
        hashes = np.empty(len(keys), np.int64)
        for start in range(0, len(keys), _INSERT_CHUNK):
            chunk = keys.slice(start, _INSERT_CHUNK).to_pylist()
            hashes[start:start + len(chunk)] = [hash(k) for k in chunk]
        kind = _INT64 if values.type == pa.int64() else _FLOAT64
        self._pending.append((hashes, PackedColumn(_TEXT, pc.cast(keys, pa.large_binary(), memory_pool=_POOL)),
                              PackedColumn(kind, values.to_numpy().copy())))
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
        self._hashes = np.concatenate([self._hashes] + [p[0] for p in parts])
        self._keys = PackedColumn.concat(([self._keys] if first_new else []) + [p[1] for p in parts])
        self._values = PackedColumn.concat(([self._values] if first_new else []) + [p[2] for p in parts])
        del parts
        self._alive = np.concatenate([self._alive, np.ones(len(self._hashes) - first_new, np.bool_)])
        if absorbed:
            self._retire_repeated_keys()
        self._absorbed = False
        live = int(np.count_nonzero(self._alive))
        if len(self._hashes) > _LOAD * len(self._index):
            if live < len(self._hashes):
                kept = np.flatnonzero(self._alive)
                self._hashes, self._keys, self._values = self._hashes[kept], self._keys.take(kept), self._values.take(kept)
                self._alive = np.ones(live, np.bool_)
            self._index = np.full(_index_size(live), -1, np.int32)
            first_new = 0
        _insert(self._index, self._hashes, first_new)
        self.settled = live
        self._probed = (None, -1)
        self._views()
        _return_freed_memory()

    def _retire_repeated_keys(self) -> None:
        """Of entries with one key (their hashes equal), only the last stays alive. Only the
        entries whose hash repeats are compared as Python objects."""
        order = np.argsort(self._hashes, kind="stable")
        ordered = self._hashes[order]
        repeats = np.flatnonzero(ordered[1:] == ordered[:-1])
        if not len(repeats):
            return
        candidates = np.unique(np.concatenate([order[repeats], order[repeats + 1]]))
        candidates = candidates[self._alive[candidates]]
        last = {}
        for i, key in zip(candidates.tolist(), self._keys.decode(candidates)):
            last[(self._hashes[i], key)] = i       # candidates ascend: the last one wins
        self._alive[candidates] = False
        self._alive[np.array(sorted(last.values()), np.int64)] = True


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
        slots = (hashes[pending] & mask).astype(np.int32)
        while len(pending):
            free = index[slots] < 0
            wanting, wanted = pending[free], slots[free]
            taken, first_wanting = np.unique(wanted, return_index=True)
            index[taken] = wanting[first_wanting]
            placed = np.zeros(len(pending), np.bool_)
            placed[np.flatnonzero(free)[first_wanting]] = True
            pending, slots = pending[~placed], (slots[~placed] + 1) & mask


_MALLOC = None


def _return_freed_memory() -> None:
    """Give the pages of the buffers a settling freed back to the system: glibc keeps freed heap
    memory (and, after a large buffer is freed, serves the next ones of its size from the heap),
    so a worker holding a large state would keep a settling's peak for its life."""
    global _MALLOC
    if _MALLOC is None:
        try:
            import ctypes
            _MALLOC = ctypes.CDLL("libc.so.6")
            _MALLOC.mallopt(-3, 1 << 20)      # M_MMAP_THRESHOLD: buffers of 1 MiB and more mmapped
        except (OSError, AttributeError):
            _MALLOC = False
    if _MALLOC:
        _MALLOC.malloc_trim(0)
