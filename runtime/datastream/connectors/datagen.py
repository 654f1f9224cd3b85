"""A deterministic data generator (Flink's ``DataGeneratorSource``).

Record i is ``generator_function(i)``, so a replayed epoch regenerates the same records.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional

from runtime.datastream.connectors.base import Boundedness, Source


@dataclass(frozen=True)
class RateLimiterStrategy:
    records_per_second: Optional[float] = None

    @staticmethod
    def per_second(records_per_second: float) -> "RateLimiterStrategy":
        if records_per_second <= 0:
            raise ValueError(f"RateLimiterStrategy.per_second needs a positive rate, got {records_per_second}")
        return RateLimiterStrategy(float(records_per_second))

    @staticmethod
    def no_op() -> "RateLimiterStrategy":
        return RateLimiterStrategy(None)


@dataclass(frozen=True)
class DataGeneratorSource(Source):
    default_name: ClassVar[str] = "Data Generator Source"

    generator_function: Callable[[int], Any]
    # None: unbounded.
    count: Optional[int] = None
    rate_limiter: RateLimiterStrategy = RateLimiterStrategy()
    type_info: Any = None

    def __post_init__(self):
        if not callable(self.generator_function):
            raise TypeError(
                f"DataGeneratorSource needs a generator function index -> record, got {self.generator_function!r}")
        if self.count is not None and self.count < 0:
            raise ValueError(f"DataGeneratorSource: count must not be negative, got {self.count}")

    @property
    def boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED if self.count is not None else Boundedness.CONTINUOUS_UNBOUNDED

    @property
    def produced_type(self):
        return self.type_info
