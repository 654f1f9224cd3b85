"""The RocksDB backend's store: opening a store directory, its metadata (the states' ids and
types, the version), scans in key order, closing and destroying it.

Its own module because it alone touches the store's files and RocksDB's options (Flink's
RocksDBResourceContainer and RocksDBOperationUtils.openDB, and the registry of its states:
RocksDBKeyedStateBackend's kvStateInformation); the states, timers, snapshots and restores only
read and write entries of an open store, through the backend's other parts.

The store is a directory the caller chooses (a subtask's local directory, kept across epochs);
``close()`` releases RocksDB's lock so that another process can open it; an open waits for the
process that keeps it (runtime.state.kept_stores) to release it.

The version: ``version`` is what the store was at when it was opened (None when it
was never set, or the store holds another key-group range or max parallelism). Opening a
store removes its version from disk, so a store whose writer died mid-epoch says nothing;
setting ``version`` writes it and flushes the store in the background (the write-ahead log is
off: the epoch's checkpoint in Delta is the durable copy), and any later write removes it again.
A store kept open is checked the same way, against the version in its memory.
"""
from __future__ import annotations

import os
import pickle
import shutil
import time
from typing import Iterator, Optional

from runtime.state import kept_stores
from runtime.state.key_groups import KeyGroupRange
from runtime.state.rocksdb_codecs import Codec, codec_of
from runtime.state.rocksdb_keys import META_KEY, PICKLE_PROTOCOL

__all__ = ["RocksDBStore", "StateStoreException", "CorruptStateStoreException", "StateStoreInUseException",
           "FORMAT", "RELEASE_WAIT_S", "BLOCK_CACHE_BYTES"]

FORMAT = 1
_COMPACT_AFTER = 16 << 20       # bytes an epoch writes before its store is compacted at its end
RELEASE_WAIT_S = 2.0            # how long an open waits for another process to release the store
# One block cache per process, shared by every store it opens (Flink shares one among a slot's
# RocksDB instances: state.backend.rocksdb.memory.managed). A Python worker outlives its tasks,
# and RocksDB's cache keys stay the same when a store is closed and opened again, so the next
# epoch's task in this worker finds the store's index, filter and hot data blocks in memory.
BLOCK_CACHE_BYTES = 256 << 20
_block_cache = None


class StateStoreException(IOError):
    """A local state store cannot be used; names its directory."""

    def __init__(self, path: str, what: str):
        super().__init__(f"RocksDB state store {path} {what}")
        self.path = path


class CorruptStateStoreException(StateStoreException):
    """The store on disk is damaged or not a Sluice state store: rebuild it from the checkpoint
    (remove the directory, open it again, restore)."""


class StateStoreInUseException(StateStoreException):
    """Another process (or an unclosed backend) holds the store's lock."""


def _rocksdict():
    try:
        import rocksdict
    except ImportError as e:      # pragma: no cover - pinned in pyproject.toml
        raise ImportError("state.backend.type: rocksdb needs the 'rocksdict' package (pip install "
                          "rocksdict), or use state.backend.type: hashmap") from e
    return rocksdict


def _shared_block_cache(rd):
    global _block_cache
    if _block_cache is None:
        _block_cache = rd.Cache(BLOCK_CACHE_BYTES)
    return _block_cache


class RocksDBStore:
    """The store of a RocksDBKeyedStateBackend: ``db`` at ``path``, its metadata (``meta``: the
    states, the version) and what was written since it was opened (``written``).

    ``temporary``: the directory is removed when the store is destroyed (a store for one task,
    when the caller gives no directory to keep)."""

    def __init__(self, path: str, temporary: bool = False):
        self.path = os.path.abspath(path)
        self.temporary = temporary
        self.written = 0                # bytes written into the store since it was opened
        self.db = self._open()
        self.meta = self._read_meta()
        self.sids: dict[str, tuple] = {}          # state name -> (sid bytes, codec)
        self.names: dict[bytes, tuple] = {}       # sid bytes -> (state name, codec)
        for name, (sid, type_info) in self.meta["states"].items():
            self._index_state(name, sid, type_info)
        self.versioned = False          # whether the version was set since the task began
        self.opened_version = None

    def begin(self, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int) -> None:
        """The version the store was at, for a task of ``key_group_range`` (``version``), removed
        from the store as the task begins."""
        stored_range = self.meta.get("key_group_range")
        self.opened_version = self.meta.get("version") if (
            stored_range == _range_tuple(key_group_range)
            and self.meta.get("max_parallelism") == max_parallelism) else None
        # From now on the store is being written: a writer that dies leaves no version behind.
        # Not flushed: memtables reach disk whole and in order, so any write of this epoch that
        # reaches disk carries the removal with it, and a store where none did is still at its
        # version.
        self.meta.update(version=None, key_group_range=_range_tuple(key_group_range),
                         max_parallelism=max_parallelism, operator=operator_name)
        self._write_meta()
        self.versioned = False

    def _index_state(self, name: str, sid: int, type_info) -> None:
        sid_bytes = sid.to_bytes(2, "big")
        codec = codec_of(type_info)
        self.sids[name] = (sid_bytes, codec)
        self.names[sid_bytes] = (name, codec)

    def state_id(self, name: str, type_info=None) -> tuple[bytes, Optional[Codec]]:
        """The id and codec of state ``name``, registered in the store's metadata when new. The
        type of a state is fixed by the first registration that declares one."""
        known = self.meta["states"].get(name)
        if known is not None and (known[1] is not None or type_info is None):
            return self.sids[name]
        sid = known[0] if known is not None else len(self.meta["states"]) + 1
        if sid >= 0xFFFF:
            raise ValueError(f"{self.meta.get('operator')}: too many states in one operator")
        self.meta["states"][name] = (sid, type_info)
        self._index_state(name, sid, type_info)
        self._write_meta()
        return self.sids[name]

    def _open(self):
        rd = _rocksdict()
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as e:
            raise StateStoreException(self.path, f"cannot be created ({e}): choose a writable local "
                                                 f"directory for the task's state "
                                                 f"(state.backend.rocksdb.localdir)") from e
        options = rd.Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_paranoid_checks(True)
        # RocksDB starts a new info LOG at every open and keeps 1,000 old ones by default: a
        # store opened every epoch piled them up. Flink's defaults (state.backend.rocksdb.log.*).
        options.set_keep_log_file_num(4)
        options.set_max_log_file_size(25 << 20)
        # An open reads its files' footers on 16 new threads by default: for a store of a few
        # files, starting them cost more than the reads (an open of 500,000 keys, alone: 11.4 -> 6.0 ms).
        options.set_max_file_opening_threads(1)
        # Reads map the store's files and read uncompressed blocks in place: a store is cold in
        # its process after a rebuild or a move to another worker, and mapped files are shared
        # through the page cache, where a block cache is per process and a
        # compressed block is decompressed into it at every first read. 5,000 gets from a fresh
        # process, 5,000,000 keys: 57 ms compressed and cached, 28 ms mapped. The price is about
        # three times the disk space of a compressed store. Index and filter blocks stay with
        # their file's reader; a bloom filter per file lets a get skip the files without its key
        # (every epoch adds a level-0 file), as Flink's RocksDB options for point lookups do.
        options.set_allow_mmap_reads(True)
        options.set_compression_type(rd.DBCompressionType.none())
        table = rd.BlockBasedOptions()
        table.set_bloom_filter(10, False)
        table.set_block_cache(_shared_block_cache(rd))
        options.set_block_based_table_factory(table)
        # Universal (tiered) compaction merges the small files of recent epochs among themselves
        # and only rarely rewrites the whole state: leveled compaction rewrote it every few epochs,
        # and a store closed after each task cut those compactions short, so their files piled up.
        options.set_compaction_style(rd.DBCompactionStyle.universal())
        db = self._locked_open(rd, options)
        self._lock_inode = _inode(os.path.join(self.path, "LOCK"))
        # Scans read the whole state (a snapshot, the keys of a state, expired entries): they do
        # not push the blocks the epoch's gets need out of the shared cache.
        self._scan_options = rd.ReadOptions()
        self._scan_options.fill_cache(False)
        write = rd.WriteOptions()
        write.disable_wal = True        # the checkpoint in Delta is the durable copy
        db.set_write_options(write)
        self.rd = rd
        return db

    def _locked_open(self, rd, options):
        """The store opened; when another process keeps it open between its tasks, that one is
        asked to close it (it does at once, unless a task of its own is using it)."""
        deadline = None
        try:
            while True:
                try:
                    return rd.Rdict(self.path, options)
                except Exception as e:
                    text = str(e)
                    low = text.lower()
                    if "lock" not in low:
                        raise self._open_failure(text, low) from e
                    if deadline is None and kept_stores.request_release(self.path):
                        deadline = time.monotonic() + RELEASE_WAIT_S
                    if deadline is None or time.monotonic() > deadline:
                        raise StateStoreInUseException(
                            self.path, f"is in use by another process or backend (close() the one that "
                                       f"has it): {text}") from e
                    time.sleep(0.002)
        finally:
            if deadline is not None:
                kept_stores.withdraw_request(self.path)

    def _open_failure(self, text: str, low: str) -> StateStoreException:
        if "no space" in low or "permission denied" in low or "read-only" in low:
            return StateStoreException(self.path, f"cannot be written ({text}): choose a writable local "
                                                  f"directory with free space for the task's state "
                                                  f"(state.backend.rocksdb.localdir)")
        return CorruptStateStoreException(self.path, f"cannot be opened, it is damaged: {text}. Remove the "
                                                     f"directory and rebuild it from the checkpoint")

    def same_directory(self) -> bool:
        """Whether the store's directory is still the one it opened (not removed or replaced)."""
        return _inode(os.path.join(self.path, "LOCK")) == self._lock_inode

    def _read_meta(self) -> dict:
        try:
            raw = self.db.get(META_KEY)
            if raw is None:
                it = self.db.iter()
                it.seek_to_first()
                empty = not it.valid()
                del it
                if not empty:
                    raise CorruptStateStoreException(self.path, "holds data but no Sluice metadata: it is not a "
                                                                "state store of this backend")
                return {"format": FORMAT, "states": {}, "version": None}
            meta = pickle.loads(raw)
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise CorruptStateStoreException(self.path, f"has metadata of an unknown format: {meta!r:.200}")
            return meta
        except Exception as e:
            self.db.close()
            self.db = None
            if isinstance(e, StateStoreException):
                raise
            raise CorruptStateStoreException(self.path, f"has unreadable metadata ({type(e).__name__}: {e}). "
                                                        f"Remove the directory and rebuild it from the "
                                                        f"checkpoint") from e

    def _write_meta(self, flush: bool = False) -> None:
        self.db.put(META_KEY, pickle.dumps(self.meta, protocol=PICKLE_PROTOCOL))
        if flush:
            # In the background: a store kept open is at its version in memory, and a close waits
            # for the flush. A process that dies before it ends leaves the store at an earlier
            # version on disk (memtables reach disk whole and in order), which is not trusted.
            self.db.flush(False)

    @property
    def version(self):
        """The version (checkpoint or epoch) the store was at when opened, or the one set since."""
        return self.meta["version"] if self.versioned else self.opened_version

    def set_version(self, value) -> None:
        """The store holds everything written before (the caller flushed its writes)."""
        if self.written >= _COMPACT_AFTER:
            # A bulk epoch (a build, a rebuild) leaves runs that overlap over the whole key range.
            # Merged in the background, they would cost the next epochs' gets half the CPU (and a
            # store closed after its task cut that merge short at every open). Merged once, here,
            # they stay merged.
            self.db.compact_range(None, None)
            self.written = 0
        self.meta["version"] = value
        self._write_meta(flush=True)
        self.versioned = value is not None
        self.opened_version = None

    def unversion(self) -> None:
        """The store is written: it is at no version until one is set."""
        self.versioned = False
        self.meta["version"] = None
        self._write_meta()

    @property
    def keepable(self) -> bool:
        """Whether a process may keep the store open for its next task on it: a local store,
        open, at the version its task set."""
        return self.db is not None and self.versioned and not self.temporary

    def close(self) -> None:
        """Release the store (its lock), so another process can open it (the caller flushed its
        writes)."""
        db = self.db
        if db is None:
            return
        self.db = None
        db.close()
        del db

    def delete_all(self) -> None:
        """Remove every entry and timer (a rebuild from a checkpoint follows)."""
        self.db.delete_range(b"\x00", b"\xff")
        if self.versioned:
            self.unversion()

    # ---- reads in key order (the caller flushed its writes) ----------------------------------

    def entries(self, lower: bytes, upper: bytes) -> Iterator[tuple]:
        """(store key, stored value) of the keys in [lower, upper), without filling the block cache."""
        it = self.db.iter(self._scan_options)
        try:
            it.seek(lower)
            while it.valid():
                k = it.key()
                if k >= upper:
                    break
                yield k, it.value()
                it.next()
        finally:
            del it

    def state_entries(self, sid: bytes, key_group_range: KeyGroupRange) -> Iterator[tuple]:
        """(store key, stored value) of a state's entries in ``key_group_range``."""
        upper = (int.from_bytes(sid, "big") + 1).to_bytes(2, "big")
        for kg in range(key_group_range.start_key_group, key_group_range.end_key_group + 1):
            group = kg.to_bytes(2, "big")
            yield from self.entries(group + sid, group + upper)

    def items(self, lower: bytes, upper: bytes):
        """The store's (key, value) pairs from ``lower`` to ``upper``, a bulk read (a snapshot's)."""
        options = self.rd.ReadOptions()
        options.fill_cache(False)
        options.set_iterate_upper_bound(upper)
        return self.db.items(from_key=lower, read_opt=options)

    @staticmethod
    def destroy(path: str) -> None:
        """Remove a (closed) store from disk, damaged or not."""
        shutil.rmtree(path, ignore_errors=True)


def _inode(path: str) -> Optional[int]:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _range_tuple(key_group_range) -> Optional[tuple]:
    if key_group_range is None:
        return None
    return (key_group_range.start_key_group, key_group_range.end_key_group)
