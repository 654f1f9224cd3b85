"""Records between the slots of long-running tasks (Flink's network stack: a subtask's result
partition to the input gates of the next vertex's subtasks), for ``runtime.task.task_executor``.

Each slot listens on a socket of its own and connects to every other slot's, authenticated with
the run's secret (``multiprocessing.connection``'s HMAC handshake: the sockets carry pickles). A
subtask's output for subtask t of the next vertex is one message, sent even when empty, so that
t knows when it has all of its input: a *part*, keyed by the edge's data set and the sending
subtask. Parts for the slot's own subtasks never leave the process. A thread per incoming
connection files the parts by (epoch, vertex) as they come, so that two slots sending to each
other never wait on one another.
"""
from __future__ import annotations

import threading
from multiprocessing.connection import Client, Connection, Listener
from typing import Optional

__all__ = ["DataExchange", "ExchangeFailure"]


class ExchangeFailure(RuntimeError):
    """Another slot's task went away (or sent something unreadable) while this one waited on it."""


class DataExchange:
    def __init__(self, slot: int, host: str, secret: bytes) -> None:
        """Listen on ``host`` (an ephemeral port); ``address`` is what the other slots connect to."""
        self.slot = slot
        self.secret = secret
        self._listener = Listener((host, 0), authkey=secret)
        self.address = self._listener.address
        self._parts: dict = {}      # (epoch, vertex id) -> {part key: rows}
        self._arrived = threading.Condition()
        self._failure: Optional[str] = None
        self._closing = False
        self._outgoing: dict[int, Connection] = {}
        self._incoming: list[Connection] = []

    def connect(self, addresses: list) -> None:
        """Connect to every other slot (``addresses``: each slot's, by slot index), accepting theirs
        at the same time: a connection's handshake needs the other side's accept."""
        accepting = threading.Thread(target=self._accept, args=(len(addresses) - 1,), daemon=True,
                                     name=f"sluice-exchange-accept-{self.slot}")
        accepting.start()
        for slot, address in enumerate(addresses):
            if slot != self.slot:
                self._outgoing[slot] = Client(tuple(address), authkey=self.secret)
        accepting.join()
        if self._failure is not None:
            raise ExchangeFailure(self._failure)

    def send(self, slot: int, epoch: int, vertex: int, key: tuple, rows: list) -> None:
        """Subtask ``slot`` of ``vertex`` gets ``rows`` as its input part ``key`` in ``epoch``."""
        if slot == self.slot:
            self._file(epoch, vertex, key, rows)
        else:
            self._outgoing[slot].send((epoch, vertex, key, rows))

    def receive(self, epoch: int, vertex: int, keys: list) -> list:
        """The rows of the parts ``keys``, in that order, once all are there."""
        with self._arrived:
            while True:
                parts = self._parts.get((epoch, vertex), {})
                if all(k in parts for k in keys):
                    del self._parts[(epoch, vertex)]
                    return [row for k in keys for row in parts[k]]
                if self._failure is not None:
                    raise ExchangeFailure(f"slot {self.slot} waited for the input of vertex {vertex} in epoch {epoch}: "
                                          f"{self._failure}")
                self._arrived.wait()

    def discard_before(self, epoch: int) -> None:
        """Parts of epochs before ``epoch`` (a failed epoch's, which its replay sends again)."""
        with self._arrived:
            for key in [k for k in self._parts if k[0] < epoch]:
                del self._parts[key]

    def close(self) -> None:
        self._closing = True
        for conn in [*self._outgoing.values(), *self._incoming]:
            conn.close()
        self._listener.close()

    # ---- threads -----------------------------------------------------------------------------

    def _accept(self, peers: int) -> None:
        try:
            for _ in range(peers):
                conn = self._listener.accept()
                self._incoming.append(conn)
                threading.Thread(target=self._read, args=(conn,), daemon=True,
                                 name=f"sluice-exchange-read-{self.slot}").start()
        except Exception as e:      # a handshake with the wrong secret, a peer gone
            self._failed(f"accepting the other slots' connections failed: {type(e).__name__}: {e}")

    def _read(self, conn: Connection) -> None:
        try:
            while True:
                epoch, vertex, key, rows = conn.recv()
                self._file(epoch, vertex, key, rows)
        except Exception as e:      # EOFError: the sender's task ended
            if not self._closing:
                self._failed(f"the connection from another slot's task ended ({type(e).__name__}: {e})")

    def _file(self, epoch: int, vertex: int, key: tuple, rows: list) -> None:
        with self._arrived:
            self._parts.setdefault((epoch, vertex), {})[key] = rows
            self._arrived.notify_all()

    def _failed(self, why: str) -> None:
        with self._arrived:
            self._failure = self._failure or why
            self._arrived.notify_all()
