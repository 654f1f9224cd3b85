"""Writing rows into the RocksDB backend's store: a restore from a full snapshot, or full and
incremental rows applied in order, in WriteBatches (Flink's RocksDB restore operations and
RocksDBWriteBatchWrapper).

Its own module because a restore writes past the write buffer and the change tracking: restored
rows are not changes of the epoch.
"""
from __future__ import annotations

from typing import Iterable

from runtime.state.backend import TOMBSTONE
from runtime.state.key_groups import KeyGroupRange
from runtime.state.rocksdb_codecs import encode_list, encode_value
from runtime.state.rocksdb_keys import encode_entry_keys
from runtime.state.rocksdb_states import RocksDBListState
from runtime.state.rocksdb_store import RocksDBStore
from runtime.state.rocksdb_write_buffer import RocksDBWriteBuffer

__all__ = ["RocksDBRestoreOperation", "RocksDBWriteBatchWrapper"]

_BATCH = 10_000                 # writes per WriteBatch in a restore


class RocksDBWriteBatchWrapper:
    """Flink's RocksDBWriteBatchWrapper: writes into a store in WriteBatches of ``_BATCH`` entries."""

    def __init__(self, store: RocksDBStore):
        self.store = store
        self.batch = store.rd.WriteBatch(raw_mode=True)
        self.count = 0

    def put(self, k: bytes, value: bytes) -> None:
        self.batch.put(k, value)
        self.store.written += len(k) + len(value)
        self._wrote()

    def delete(self, k: bytes) -> None:
        self.batch.delete(k)
        self.store.written += len(k)
        self._wrote()

    def _wrote(self) -> None:
        self.count += 1
        if self.count % _BATCH == 0:
            self.store.db.write(self.batch)
            self.batch = self.store.rd.WriteBatch(raw_mode=True)

    def close(self) -> None:
        if self.count % _BATCH:
            self.store.db.write(self.batch)


class RocksDBRestoreOperation:
    """The restores of a RocksDBKeyedStateBackend (Flink's RocksDBFullRestoreOperation and
    RocksDBIncrementalRestoreOperation): rows written into ``store`` after ``write_buffer``'s."""

    def __init__(self, store: RocksDBStore, write_buffer: RocksDBWriteBuffer):
        self.store = store
        self.write_buffer = write_buffer

    def restore(self, rows: Iterable[tuple], key_group_range: KeyGroupRange, states: dict, operator: str) -> None:
        """Take the rows of ``key_group_range`` (not a change). ``states``: the backend's states by
        name (their ids and codecs), ``operator`` names the backend in errors."""
        self._write_rows(rows, key_group_range, states, operator, tombstones=False)

    def apply(self, rows: Iterable[tuple], key_group_range: KeyGroupRange, states: dict, operator: str) -> None:
        """Full or incremental rows, in order: a TOMBSTONE value removes the entry (not a change)."""
        self._write_rows(rows, key_group_range, states, operator, tombstones=True)

    def _write_rows(self, rows, kgr: KeyGroupRange, states: dict, operator: str, tombstones: bool) -> None:
        self.write_buffer.flush()       # the rows come after what was written before
        store = self.store
        sids = {}
        writer = RocksDBWriteBatchWrapper(store)
        # A restore's column-wise chunks (KeyedRows) are encoded a chunk at a time; other rows
        # come as one-row chunks.
        chunks = rows.column_chunks() if hasattr(rows, "column_chunks") else None
        if chunks is None:
            chunks = ((name, (kg,), (ns,), (key,), (value,)) for kg, name, ns, key, value in rows)
        for name, kgs, nss, keys, values in chunks:
            if name not in sids:
                state = states.get(name)
                sids[name] = (state.sid, state.codec, isinstance(state, RocksDBListState)) if state is not None \
                    else (*store.state_id(name), False)
            sid, codec, is_list = sids[name]
            encoded = encode_entry_keys(kgs, sid, nss, keys, kgr)
            for k, value, key in zip(encoded, values, keys):
                if k is None:       # outside this backend's key-group range
                    continue
                if value is TOMBSTONE:
                    if not tombstones:
                        raise ValueError(f"{operator}: a full snapshot holds a tombstone ({name}, {key!r})")
                    writer.delete(k)
                else:
                    writer.put(k, encode_list(value, codec) if is_list else encode_value(value, codec))
        writer.close()
        if store.versioned and writer.count:
            store.unversion()
