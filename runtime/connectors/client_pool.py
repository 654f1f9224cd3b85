"""Clients a Python worker keeps between epochs, one per key (a client configuration, and for a
consumer its partition): the mechanics the Kafka source's consumers (``kafka_consumer_pool``)
and the Kafka sink's producers (``kafka_producer_pool``) share. Each pool keeps only its own
rules: which kept client may serve again, and when a client goes back.

The pool is the process's own: a forked child starts empty (its parent's clients and their
sockets are not its to use). Past ``capacity`` the least recently used client is disposed of,
and all are at the process's exit.
"""
from __future__ import annotations

import atexit
import os
from collections import OrderedDict
from typing import Callable, Generic, Optional, TypeVar

Client = TypeVar("Client")

# Settings that are objects made per client (callbacks, loggers), not part of what the client is.
_NOT_CONFIGURATION = ("error_cb", "logger", "stats_cb", "throttle_cb", "oauth_cb")


def configuration_key(config: dict) -> tuple:
    """The configuration a client is made with, as a key (its callbacks left out): two clients of
    equal keys are interchangeable."""
    return tuple(sorted((k, v if isinstance(v, (str, int, float, bool)) else repr(v))
                        for k, v in config.items() if k not in _NOT_CONFIGURATION))


class KeyedClientPool(Generic[Client]):
    def __init__(self, capacity: int):
        self.capacity = capacity
        self._kept: OrderedDict = OrderedDict()
        self._pid = os.getpid()
        self.reused = self.opened = 0      # takes by how they got their client: kept, or new
        atexit.register(self.close)

    def dispose(self, client: Client) -> None:
        """Let go of a client the pool no longer keeps (evicted, unusable, or at exit)."""

    def take(self, key, make: Callable[[], Client],
             usable: Callable[[Client], bool] = lambda client: True) -> Client:
        """The client kept for ``key`` if ``usable`` says it may serve (else it is disposed of),
        or ``make()``'s. Out of the pool until ``keep``."""
        if self._pid != os.getpid():        # a forked child: the parent's clients are not its own
            self._kept, self._pid = OrderedDict(), os.getpid()
        kept: Optional[Client] = self._kept.pop(key, None)
        if kept is not None and not usable(kept):
            self.dispose(kept)
            kept = None
        if kept is None:
            self.opened += 1
            return make()
        self.reused += 1
        return kept

    def keep(self, key, client: Client) -> None:
        """Keep ``client`` for the next ``take`` of ``key``; the least recently used goes past capacity."""
        self._kept[key] = client
        while len(self._kept) > self.capacity:
            self.dispose(self._kept.popitem(last=False)[1])

    def close(self) -> None:
        kept, self._kept = self._kept, OrderedDict()
        if self._pid == os.getpid():
            for client in kept.values():
                self.dispose(client)
