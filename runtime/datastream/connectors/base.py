"""Source and sink descriptors (``pyflink.datastream.connectors``).

A descriptor says what to read or write; the task runtime owns how (splits, offsets,
staging). Descriptors are immutable so a compiled plan can be shipped to Spark tasks.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, ClassVar, Optional


class DeliveryGuarantee(enum.Enum):
    """What a sink promises under failures (PyFlink's ``connectors.base.DeliveryGuarantee``)."""

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1
    NONE = 2


class Boundedness(enum.Enum):
    BOUNDED = "BOUNDED"
    CONTINUOUS_UNBOUNDED = "CONTINUOUS_UNBOUNDED"


@dataclass(frozen=True)
class Source:
    """A source of records. ``parallel = False`` pins the source operator to parallelism 1.
    ``strided``: its offsets are record indexes and its reader can read every n-th record of a
    split, so the rebalance out of it can be done by its consumers reading their shares
    (``runtime.graph.job_graph``)."""

    default_name: ClassVar[str] = "Custom Source"
    parallel: ClassVar[bool] = True
    strided: ClassVar[bool] = False

    @property
    def boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED

    def dealt(self, n: int) -> "Source":
        """A ``strided`` source as ``n`` subtasks read it, each its every n-th record."""
        raise TypeError(f"{type(self).__name__} is not strided")

    def get_boundedness(self) -> Boundedness:
        return self.boundedness

    @property
    def locations(self) -> tuple:
        """The paths or URIs it reads (files, tables), for the run's preflight; () for none."""
        return ()

    @property
    def produced_type(self) -> Any:
        return None


@dataclass(frozen=True)
class Sink:
    default_name: ClassVar[str] = "Unnamed"
