"""The RocksDB backend's snapshot strategies (Flink's RocksDBSnapshotStrategyBase,
RocksFullSnapshotStrategy and RocksIncrementalSnapshotStrategy): the rows of a key-group range,
full snapshots and increments (the entries changed since the last checkpoint), read in key order
and decoded a chunk of column at a time where a state's codec allows.

Its own module because snapshots read the store whole, apart from the per-record path: they
flush the write buffer and scan without filling the block cache (the backend drops expired TTL
entries first: Flink's cleanup in full snapshot).
"""
from __future__ import annotations

from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.state.backend import TOMBSTONE, KeyedColumns, chunked, rows_by_state
from runtime.state.key_groups import KeyGroupRange
from runtime.state.rocksdb_codecs import decode_value
from runtime.state.rocksdb_keys import STATE_END, decode_key, decode_namespace
from runtime.state.rocksdb_read_ahead import ABSENT
from runtime.state.rocksdb_store import RocksDBStore
from runtime.state.rocksdb_write_buffer import RocksDBWriteBuffer

__all__ = ["RocksDBSnapshotStrategyBase", "RocksFullSnapshotStrategy", "RocksIncrementalSnapshotStrategy"]

_ROWS_CHUNK = 10_000            # entries read at a time for rows of a snapshot or an increment


class RocksDBSnapshotStrategyBase:
    """Reads the entries of ``store`` (after flushing ``write_buffer``) as rows
    (key_group, state_name, namespace, key, value), or a state's entries of a chunk as columns.
    ``typed``: the states a snapshot types (the operator's), whose entries may come as columns."""

    def __init__(self, store: RocksDBStore, write_buffer: RocksDBWriteBuffer):
        self.store = store
        self.write_buffer = write_buffer

    def snapshot(self, typed) -> "_Entries":
        """The strategy's entries, read in key order: rows, or column chunks
        (``_Entries.column_chunks``)."""
        return _Entries(self, typed)

    def raw_chunks(self, size: int) -> Iterator[tuple[list, list]]:
        """(keys, values) of the strategy's entries in key order, ``size`` at a time, as stored
        (a None value: deleted since the last checkpoint)."""
        raise NotImplementedError

    def row(self, k: bytes, raw) -> tuple:
        name, codec = self.store.names[k[2:4]]
        key, i = decode_key(k, 4)
        ns = decode_namespace(k, i)
        value = TOMBSTONE if raw is None else decode_value(raw, codec)
        return int.from_bytes(k[:2], "big"), name, ns, key, value

    def entries(self, key_group_range: Optional[KeyGroupRange] = None) -> Iterator[tuple]:
        """Rows of the key groups in ``key_group_range`` (all by default): a prefix range of the store."""
        if key_group_range is None:
            lower, upper = b"\x00\x00", STATE_END
        else:
            lower = key_group_range.start_key_group.to_bytes(2, "big")
            upper = (key_group_range.end_key_group + 1).to_bytes(2, "big")
        self.write_buffer.flush()
        for k, raw in self.store.entries(lower, upper):
            yield self.row(k, raw)

    def decode_columns(self, keys: list, values: list, typed) -> Iterator[tuple]:
        """A raw chunk as (state name, KeyedColumns) for each state of ``typed`` whose entries
        are all in the void namespace with text keys and values its codec decodes as a column,
        else (state name, rows). A state's entries keep their key order."""
        n = len(keys)
        ka = pa.array(keys, pa.binary())
        lengths = pc.binary_length(ka).to_numpy()
        if lengths.min() < 9:       # shorter than key group, state id, tag and a text's length
            yield from rows_by_state(map(self.row, keys, values)).items()
            return
        head = np.frombuffer(pc.binary_slice(ka, 0, 9).cast(pa.binary(9)).buffers()[1], np.uint8).reshape(n, 9)
        key_groups = head[:, 0].astype(np.int32) << 8 | head[:, 1]
        sids = head[:, 2].astype(np.int32) << 8 | head[:, 3]
        text_length = head[:, 5:9].copy().view(">u4").ravel()
        plain = (head[:, 4] == 1) & (lengths == 9 + text_length)     # a text key, the void namespace
        for sid in np.unique(sids):
            where = np.nonzero(sids == sid)[0]
            name, codec = self.store.names[int(sid).to_bytes(2, "big")]
            columns = None
            if name in typed and codec is not None and codec.column and plain[where].all():
                columns = _columns_of(ka.take(where), pa.array([values[i] for i in where], pa.binary()),
                                      key_groups[where], codec.column)
            yield name, ([self.row(keys[i], values[i]) for i in where] if columns is None else columns)


class RocksFullSnapshotStrategy(RocksDBSnapshotStrategyBase):
    """Every entry (a full snapshot)."""

    def raw_chunks(self, size: int) -> Iterator[tuple[list, list]]:
        self.write_buffer.flush()
        items = self.store.items(b"\x00\x00", STATE_END)
        try:
            for chunk in chunked(items, size):
                yield [k for k, _ in chunk], [v for _, v in chunk]
        finally:
            del items


class RocksIncrementalSnapshotStrategy(RocksDBSnapshotStrategyBase):
    """The entries changed since the last checkpoint (the write buffer's ``changed``), a deleted
    one's value a TOMBSTONE (an increment)."""

    def raw_chunks(self, size: int) -> Iterator[tuple[list, list]]:
        """As stored now (None: deleted since the last checkpoint; an entry added and deleted in
        between is left out). Entries still in the write buffer are taken from it; the rest
        (written before a flush) are read, in key order."""
        buffer = self.write_buffer
        buffered = dict(buffer.pending)
        buffer.flush()
        changed = buffer.changed
        db = self.store.db
        for chunk in chunked(sorted(changed), size):
            values = [buffered.get(k, ABSENT) for k in chunk]
            unread = [i for i, raw in enumerate(values) if raw is ABSENT]
            if unread:
                for i, raw in zip(unread, db.get([chunk[i] for i in unread])):
                    values[i] = raw
            kept = [i for i, raw in enumerate(values) if raw is not None or changed[chunk[i]]]
            yield [chunk[i] for i in kept], [values[i] for i in kept]


class _Entries:
    """A store's entries read a chunk of raw (key, value) pairs at a time (a strategy's
    ``raw_chunks(size)``, a None value: deleted since the last checkpoint): every entry (a full
    snapshot) or the changed ones (an increment). Iterated, rows; ``column_chunks`` decodes each state's entries of a chunk
    at once where its codec allows, deletions as TOMBSTONE rows (entry by entry in Python, a
    5,000,000-key subtask's full snapshot took about 18 s, an increment of 5,000 keys about 20 ms
    of a small epoch's task)."""

    def __init__(self, strategy: RocksDBSnapshotStrategyBase, typed):
        self.strategy = strategy
        self.typed = typed

    def __iter__(self) -> Iterator[tuple]:
        strategy = self.strategy
        for keys, values in strategy.raw_chunks(_ROWS_CHUNK):
            yield from map(strategy.row, keys, values)

    def column_chunks(self, size: int) -> Iterator[tuple]:
        strategy = self.strategy
        for keys, values in strategy.raw_chunks(size):
            there = [i for i, raw in enumerate(values) if raw is not None]
            if len(there) < len(keys):
                yield from rows_by_state(strategy.row(k, None) for k, raw in zip(keys, values) if raw is None).items()
                keys, values = [keys[i] for i in there], [values[i] for i in there]
            if keys:
                yield from strategy.decode_columns(keys, values, self.typed)


def _columns_of(keys: pa.Array, values: pa.Array, key_groups, column: str) -> Optional[KeyedColumns]:
    """Text keys (their encoding: a 9-byte head) and typed values as columns; None when a
    value is not stored in its codec (pickled: it did not fit the declared type) or a key is not
    valid UTF-8."""
    m = len(values)
    tags = pc.binary_slice(values, 0, 1)
    if not pc.all(pc.equal(tags, pa.scalar(b"\x00", pa.binary()))).as_py():
        return None
    try:
        texts = _tail(keys, 9).cast(pa.string())
        if column == "utf8":
            decoded = _tail(values, 1).cast(pa.string())
        else:
            width = np.dtype(column).itemsize
            if not pc.all(pc.equal(pc.binary_length(values), width + 1)).as_py():
                return None
            offsets = np.frombuffer(values.buffers()[1], np.int32, count=m + 1, offset=4 * values.offset)
            data = np.frombuffer(values.buffers()[2], np.uint8, count=m * (width + 1), offset=int(offsets[0]))
            decoded = pa.array(data.reshape(m, width + 1)[:, 1:].copy().view(column).ravel()
                               .astype(np.dtype(column).newbyteorder("=")))
    except pa.ArrowInvalid:     # text that is not UTF-8 (a lone surrogate): decoded one by one
        return None
    return KeyedColumns(pa.array(key_groups, pa.int32()), texts, decoded)


def _tail(array: pa.Array, start: int) -> pa.Array:
    """Each binary value from byte ``start`` on (pyarrow 23's binary_slice fails without a stop)."""
    return pc.binary_slice(array, start, max(start, pc.max(pc.binary_length(array)).as_py() or 0))
