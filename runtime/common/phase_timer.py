"""Where a piece of work's time goes: named phases, one after the other, on a wall clock.

The driver times each epoch with one (``runtime.execution.epoch_stats``): the loop wraps its steps
in ``with timer.phase(...)``, and the checkpoint's commits, which run on another thread once the
epoch handed its checkpoint over, go on timing into the same timer (the hand-over orders them
after the loop's; a checkpoint's state and sink commits, on two threads at once, each append
their phases). Its own module at the bottom of the layers because the checkpoint
coordinator times its commits without knowing what the epoch makes of them.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Optional

# The phases of an epoch that its parts time (runtime.metrics.epoch_timings says what each is).
SINK_COMMITS = "sink commits"
KAFKA_TRANSACTION = "Kafka transaction"
SOURCE_POSITIONS = "source positions"
CHECKPOINT_QUEUE = "checkpoint queue"
CHECKPOINT_RECORD = "checkpoint record"
HAND_OFF = "hand-off"


@dataclass(frozen=True)
class Phase:
    name: str
    started: float      # wall clock, s
    ended: float
    detail: str = ""    # what of the phase it was (which sink committed)

    @property
    def ms(self) -> float:
        return (self.ended - self.started) * 1000


class PhaseTimer:
    """The phases of one piece of work since ``begun`` (wall clock, s), in the order they ended.
    A phase timed twice (two sinks' commits of one kind) counts twice."""

    def __init__(self, begun: Optional[float] = None):
        self.begun = time.time() if begun is None else begun
        self.phases: list[Phase] = []
        self.lapped = self.begun      # where the next ``lap`` starts

    def lap(self, name: str) -> None:
        """A phase from the last lap (or ``lapped``) to now: steps one after the other, each
        timed by one line after it."""
        now = time.time()
        self.phases.append(Phase(name, self.lapped, now))
        self.lapped = now

    @contextmanager
    def phase(self, name: str, detail: str = "") -> Iterator[None]:
        started = time.time()
        try:
            yield
        finally:
            self.phases.append(Phase(name, started, time.time(), detail))

    def add(self, name: str, started: float, ended: float) -> None:
        """A phase measured elsewhere (a wait that began before the timer did)."""
        self.phases.append(Phase(name, started, ended))

    @property
    def ended(self) -> float:
        """When the last phase ended (the timer's start when none did)."""
        return max((p.ended for p in self.phases), default=self.begun)

    def ms(self, name: str) -> float:
        return sum(p.ms for p in self.phases if p.name == name)

    def first(self, name: str) -> Optional[Phase]:
        return next((p for p in self.phases if p.name == name), None)


class _NoTimer(PhaseTimer):
    """Times nothing: what a caller that is not timed passes."""

    @contextmanager
    def phase(self, name: str, detail: str = "") -> Iterator[None]:
        yield

    def add(self, name: str, started: float, ended: float) -> None:
        pass

    def lap(self, name: str) -> None:
        pass


NO_TIMER = _NoTimer(0.0)
