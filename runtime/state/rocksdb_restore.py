"""Writing rows into the RocksDB backend's store: a restore from a full snapshot, or full and
incremental rows applied in order, in WriteBatches (Flink's RocksDB restore operations and
RocksDBWriteBatchWrapper).

Its own module because a restore writes past the write buffer and the change tracking: restored
rows are not changes of the epoch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from runtime.state.backend import TOMBSTONE
from runtime.state.rocksdb_codecs import encode_list, encode_value
from runtime.state.rocksdb_keys import encode_entry_keys
from runtime.state.rocksdb_states import RocksDBListState

if TYPE_CHECKING:   # for annotations: the backend is composed of this module's classes
    from runtime.state.rocksdb import RocksDBKeyedStateBackend

__all__ = ["RocksDBRestore"]

_BATCH = 10_000                 # writes per WriteBatch in a restore


class _BatchWriter:
    """Writes into a backend's store in WriteBatches of ``_BATCH`` entries."""

    def __init__(self, backend: "RocksDBKeyedStateBackend"):
        self.backend = backend
        self.batch = backend._rd.WriteBatch(raw_mode=True)
        self.count = 0

    def put(self, k: bytes, value: bytes) -> None:
        self.batch.put(k, value)
        self.backend._written += len(k) + len(value)
        self._wrote()

    def delete(self, k: bytes) -> None:
        self.batch.delete(k)
        self.backend._written += len(k)
        self._wrote()

    def _wrote(self) -> None:
        self.count += 1
        if self.count % _BATCH == 0:
            self.backend.db.write(self.batch)
            self.batch = self.backend._rd.WriteBatch(raw_mode=True)

    def close(self) -> None:
        if self.count % _BATCH:
            self.backend.db.write(self.batch)


class RocksDBRestore:
    """The restores of RocksDBKeyedStateBackend."""

    def _write_rows(self, rows, tombstones: bool) -> None:
        self.flush()        # the rows come after what was written before
        kgr = self.key_group_range
        sids = {}
        writer = _BatchWriter(self)
        # A restore's column-wise chunks (KeyedRows) are encoded a chunk at a time; other rows
        # come as one-row chunks.
        chunks = rows.column_chunks() if hasattr(rows, "column_chunks") else None
        if chunks is None:
            chunks = ((name, (kg,), (ns,), (key,), (value,)) for kg, name, ns, key, value in rows)
        for name, kgs, nss, keys, values in chunks:
            if name not in sids:
                state = self.states.get(name)
                sids[name] = (state.sid, state.codec, isinstance(state, RocksDBListState)) if state is not None \
                    else (*self.state_id(name), False)
            sid, codec, is_list = sids[name]
            encoded = encode_entry_keys(kgs, sid, nss, keys, kgr)
            for k, value, key in zip(encoded, values, keys):
                if k is None:       # outside this backend's key-group range
                    continue
                if value is TOMBSTONE:
                    if not tombstones:
                        raise ValueError(f"{self.operator_name}: a full snapshot holds a tombstone ({name}, {key!r})")
                    writer.delete(k)
                else:
                    writer.put(k, encode_list(value, codec) if is_list else encode_value(value, codec))
        writer.close()
        if self._versioned and writer.count:
            self._unversion()

    def restore(self, rows: Iterable[tuple]) -> None:
        """Take the rows of this backend's key-group range (not a change)."""
        self._write_rows(rows, tombstones=False)

    def apply(self, rows: Iterable[tuple]) -> None:
        """Full or incremental rows, in order: a TOMBSTONE value removes the entry (not a change)."""
        self._write_rows(rows, tombstones=True)
