"""The RocksDB backend's store lifecycle: opening a store directory (or taking the one this process
kept open), its metadata and version, closing, disposing, clearing and destroying it.

Its own module because it alone touches the store's files and RocksDB's options (Flink's
RocksDBResourceContainer and RocksDBOperationUtils.openDB); the states, timers, snapshots and
restores only read and write entries of an open store.

The store is a directory the caller chooses (a subtask's local directory, kept across epochs);
``close()`` releases RocksDB's lock so that another process can open it. A reused PySpark
worker keeps its store open between tasks instead (``suspend``, ``resume``): which stores it
keeps is the task state manager's decision (runtime.task.task_state_manager), the registry of
kept stores and their release to another process runtime.state.kept_stores.

The version: ``backend.version`` is what the store was at when it was opened (None when it
was never set, or the store holds another key-group range or max parallelism). Opening a
store removes its version from disk, so a store whose writer died mid-epoch says nothing;
setting ``version`` writes it and flushes the store in the background (the write-ahead log is
off: the epoch's checkpoint in Delta is the durable copy), and any later write removes it again.
A store kept open is checked the same way, against the version in its memory.
"""
from __future__ import annotations

import logging
import os
import pickle
import shutil
import time
from typing import TYPE_CHECKING, Callable, Optional

from runtime.state import kept_stores
from runtime.state.key_groups import KeyGroupRange
from runtime.state.rocksdb_keys import META_KEY, PICKLE_PROTOCOL

__all__ = ["RocksDBStore", "StateStoreException", "CorruptStateStoreException", "StateStoreInUseException",
           "FORMAT", "RELEASE_WAIT_S", "BLOCK_CACHE_BYTES"]

if TYPE_CHECKING:   # for annotations: the backend is composed of this module's classes
    from runtime.state.rocksdb import RocksDBKeyedStateBackend

FORMAT = 1
_COMPACT_AFTER = 16 << 20       # bytes an epoch writes before its store is compacted at its end
log = logging.getLogger(__name__)
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
    """The store of RocksDBKeyedStateBackend: ``db`` at ``path``, its metadata (``_meta``) and
    version."""

    on_disk = True

    def resume(self, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int,
               clock: Optional[Callable[[], int]] = None) -> bool:
        """Ready a store this process kept open since its last task on it for the next task
        (runtime.state.kept_stores). False, and the store closed, when its directory was removed
        or replaced since: never trusted, its files are gone (the caller opens it anew)."""
        if self._same_directory():
            self._begin(operator_name, key_group_range, max_parallelism, clock)
            return True
        log.warning("%s: RocksDB state store %s was removed while this process kept it open; "
                    "opening it anew (the task rebuilds it from the checkpoint)", operator_name, self.path)
        try:
            self.close()
        except Exception:       # RocksDB cannot finish its files in a folder that is gone
            self.db = None
        return False

    def _begin_version(self, operator_name: str, key_group_range: KeyGroupRange, max_parallelism: int) -> None:
        """The version the store was at, for a task of ``key_group_range`` (``version``), removed
        from the store as the task begins."""
        stored_range = self._meta.get("key_group_range")
        self._opened_version = self._meta.get("version") if (
            stored_range == _range_tuple(key_group_range)
            and self._meta.get("max_parallelism") == max_parallelism) else None
        # From now on the store is being written: a writer that dies leaves no version behind.
        # Not flushed: memtables reach disk whole and in order, so any write of this epoch that
        # reaches disk carries the removal with it, and a store where none did is still at its
        # version.
        self._meta.update(version=None, key_group_range=_range_tuple(key_group_range),
                          max_parallelism=max_parallelism, operator=operator_name)
        self._write_meta()
        self._versioned = False

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
        self._rd = rd
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

    def _same_directory(self) -> bool:
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
        self.db.put(META_KEY, pickle.dumps(self._meta, protocol=PICKLE_PROTOCOL))
        if flush:
            # In the background: a store kept open is at its version in memory, and a close waits
            # for the flush. A process that dies before it ends leaves the store at an earlier
            # version on disk (memtables reach disk whole and in order), which is not trusted.
            self.db.flush(False)

    @property
    def version(self):
        """The version (checkpoint or epoch) the store was at when opened, or the one set since."""
        return self._meta["version"] if self._versioned else self._opened_version

    @version.setter
    def version(self, value) -> None:
        self.flush()        # the version says the store holds everything written before it
        if self._written >= _COMPACT_AFTER:
            # A bulk epoch (a build, a rebuild) leaves runs that overlap over the whole key range.
            # Merged in the background, they would cost the next epochs' gets half the CPU (and a
            # store closed after its task cut that merge short at every open). Merged once, here,
            # they stay merged.
            self.db.compact_range(None, None)
            self._written = 0
        self._meta["version"] = value
        self._write_meta(flush=True)
        self._versioned = value is not None
        self._opened_version = None

    def _unversion(self) -> None:
        self._versioned = False
        self._meta["version"] = None
        self._write_meta()

    def close(self) -> None:
        """Flush and release the store (its lock), so another process can open it."""
        db = getattr(self, "db", None)
        if db is None:
            return
        kept_stores.discard(self)
        self.flush()
        self.db = None
        self._detach()
        db.close()
        del db

    def _detach(self) -> None:
        for queue in self.timer_queues.values():
            queue.backend = None
        self.timer_queues = {}
        self.states = {}

    @property
    def keepable(self) -> bool:
        """Whether a process may keep the store open for its next task on it: a local store,
        open, at the version its task set."""
        return self.db is not None and self._versioned and not self.temporary

    def suspend(self) -> None:
        """The task is done with a store its process keeps open: what the task held is dropped,
        the store stays open at its version (``resume`` readies it again)."""
        self.flush()
        self._detach()
        self._batch = None
        self._forget_prefetched()
        self._key_cache.clear()

    def dispose(self) -> None:
        """The task is done with the store: closed (and a temporary one removed)."""
        self.close()
        if self.temporary:
            shutil.rmtree(self.path, ignore_errors=True)

    def clear(self) -> None:
        """Remove every entry and timer (a rebuild from a checkpoint follows)."""
        self.pending.clear()
        self._pending_bytes = 0
        self._forget_prefetched()
        self.db.delete_range(b"\x00", b"\xff")
        self.changed.clear()
        for queue in self.timer_queues.values():
            queue.changed.clear()
        if self._versioned:
            self._unversion()

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
