"""Local stores a Python worker keeps open between its tasks (and heaps it keeps in memory).

Structured Streaming keeps its state stores loaded on the executor between micro-batches, and
Flink keeps a subtask's RocksDB open for the life of the task. A PySpark worker process runs
task after task: when a task leaves its store at a new version, the worker keeps the store open
(``keep``) and the next task of the same subtask in this worker takes it as it is (``take``).
That saves the open (about 6 ms) and keeps the pages of the store's files that earlier epochs
touched mapped (5,000 gets in a 500,000-key store: 17 ms just after an open, 9 ms in a store
kept open). The executor runs each subtask that keeps a local store in a Python worker pool of
its own (``PythonRDDs``: pinned stages), so the same worker sees the same subtask every epoch.

RocksDB lets one process at a time open a store. A process that needs a store another one keeps
(a subtask moved to another worker, a second run of the job, a tool) asks for it
(``request_release``): when the process holding the store's lock (``/proc/locks``) is the one
that said it keeps it (its pid in the store's ``KEPT_BY`` file), it writes a release request
into the store and sends that process SIGUSR1; the keeper closes every kept store with a request
and the asker's open goes through. A store in use by a running task is not released: the asker
gives up after a while and rebuilds a store of its own, as before.

Only a reused worker (PySpark's ``SPARK_REUSE_WORKER``) keeps stores, and only from its main
thread, where the signal handler is installed; elsewhere a store is closed after its task.
"""
from __future__ import annotations

import os
import signal
import threading
from typing import Optional, Protocol

__all__ = ["KEPT_BY", "MAX_KEPT", "RELEASE_REQUEST", "discard", "keep", "keeps_stores", "request_release",
           "take", "withdraw_request"]

KEPT_BY = "SLUICE-KEPT-BY"              # the pid of the process that keeps the store open
RELEASE_REQUEST = "SLUICE-RELEASE"      # another process asks the keeper to close it
MAX_KEPT = 8                            # stores a process keeps open (least recently used closed)


class KeptStore(Protocol):
    path: str
    on_disk: bool       # False: a heap kept in memory (no file to advertise, no lock to release)

    def close(self) -> None: ...


_kept: dict[str, KeptStore] = {}        # path -> store, least recently kept first
_advertised: dict[str, int] = {}        # path -> the pid this process last wrote into KEPT_BY
_handler: Optional[bool] = None         # whether this process installed its release handler


def keeps_stores() -> bool:
    """Whether this process keeps stores between tasks: a reused PySpark worker, on its main
    thread, with SIGUSR1 free for release requests (the handler is installed on first use)."""
    global _handler
    if _handler is None:
        _handler = False
        if (os.environ.get("SPARK_REUSE_WORKER") == "1"
                and threading.current_thread() is threading.main_thread()):
            try:
                if signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL:
                    signal.signal(signal.SIGUSR1, _on_release_request)
                    _handler = True
            except (ValueError, OSError, AttributeError):    # no SIGUSR1 (Windows)
                pass
    return _handler


def keep(store: KeptStore) -> None:
    """Keep ``store`` open for this process's next task on it."""
    _kept.pop(store.path, None)
    _kept[store.path] = store
    pid = os.getpid()
    if store.on_disk and _advertised.get(store.path) != pid:
        with open(os.path.join(store.path, KEPT_BY), "w") as f:
            f.write(str(pid))
        _advertised[store.path] = pid
    while len(_kept) > MAX_KEPT:
        oldest = _kept.pop(next(iter(_kept)), None)
        if oldest is not None:
            oldest.close()


def take(path: str) -> Optional[KeptStore]:
    """The store at ``path`` this process kept, now no longer kept (the caller uses it)."""
    return _kept.pop(path, None)


def discard(store: KeptStore) -> None:
    """``store`` is being closed: no longer kept (and the next process to keep it says so)."""
    if _kept.get(store.path) is store:
        del _kept[store.path]
    _advertised.pop(store.path, None)


def request_release(path: str) -> bool:
    """Ask the process that keeps the store at ``path`` open to close it. True when a release
    was asked for (the caller retries its open for a while, then ``withdraw_request``)."""
    owner = _lock_owner(path)
    if owner is None:
        return False
    if owner == os.getpid():
        store = _kept.pop(path, None)
        if store is None:
            return False        # open in this process by a running task
        store.close()
        return True
    try:
        with open(os.path.join(path, KEPT_BY)) as f:
            keeper = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return False
    if keeper != owner:
        return False            # held by a process that does not keep stores: never signalled
    try:
        with open(os.path.join(path, RELEASE_REQUEST), "w"):
            pass
        os.kill(owner, signal.SIGUSR1)
    except OSError:
        return False
    return True


def withdraw_request(path: str) -> None:
    try:
        os.remove(os.path.join(path, RELEASE_REQUEST))
    except OSError:
        pass


def _on_release_request(signum, frame) -> None:
    # Runs on the main thread between two bytecodes, never inside a task's call into RocksDB;
    # a store a running task took is not in ``_kept`` and stays open.
    for path, store in list(_kept.items()):
        if os.path.exists(os.path.join(path, RELEASE_REQUEST)) and _kept.get(path) is store:
            del _kept[path]
            store.close()


def _lock_owner(path: str) -> Optional[int]:
    """The pid holding RocksDB's lock on the store at ``path`` (a POSIX lock on its LOCK file),
    from /proc/locks; None when unlocked, or where there is no /proc/locks."""
    try:
        inode = os.stat(os.path.join(path, "LOCK")).st_ino
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        # "1: POSIX  ADVISORY  WRITE 1234 fd:01:5678 0 EOF" (a waiter's line has "->")
        parts = line.split()
        if len(parts) < 6 or parts[1] != "POSIX" or "->" in parts:
            continue
        try:
            if int(parts[5].rsplit(":", 1)[1]) == inode:
                return int(parts[4])
        except (IndexError, ValueError):
            continue
    return None

