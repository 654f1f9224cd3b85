"""The metric interfaces of ``pyflink.metrics.metricbase`` (PyFlink 2.3), same names and signatures."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable


class MetricGroup(ABC):
    """A named container for metrics and further metric subgroups."""

    @abstractmethod
    def add_group(self, name: str, extra: str = None) -> "MetricGroup":
        """A subgroup; with ``extra``, a key group ``name`` and in it the value group ``extra``
        (returned), as Flink's key-value groups."""

    @abstractmethod
    def counter(self, name: str) -> "Counter": ...

    @abstractmethod
    def gauge(self, name: str, obj: Callable[[], int]) -> None: ...

    @abstractmethod
    def meter(self, name: str, time_span_in_seconds: int = 60) -> "Meter": ...

    @abstractmethod
    def distribution(self, name: str) -> "Distribution": ...


class Metric(ABC):
    """Base interface of a metric object."""


class Counter(Metric, ABC):
    @abstractmethod
    def inc(self, n: int = 1): ...

    @abstractmethod
    def dec(self, n: int = 1): ...

    @abstractmethod
    def get_count(self) -> int: ...


class Meter(Metric, ABC):
    @abstractmethod
    def mark_event(self, value: int = 1): ...

    @abstractmethod
    def get_count(self) -> int: ...


class Distribution(Metric, ABC):
    @abstractmethod
    def update(self, value): ...
