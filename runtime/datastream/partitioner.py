"""Stream partitioners: how an edge routes records from producer to consumer subtasks.

Mirrors ``org.apache.flink.streaming.runtime.partitioner``. ``ship_strategy`` is the
name Flink prints in plans; ``is_pointwise`` decides POINTWISE vs ALL_TO_ALL job edges.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional


@dataclass(frozen=True)
class StreamPartitioner:
    ship_strategy: ClassVar[str] = ""
    is_pointwise: ClassVar[bool] = False

    def __str__(self) -> str:
        return self.ship_strategy


@dataclass(frozen=True)
class ForwardPartitioner(StreamPartitioner):
    ship_strategy: ClassVar[str] = "FORWARD"
    is_pointwise: ClassVar[bool] = True


@dataclass(frozen=True)
class RescalePartitioner(StreamPartitioner):
    ship_strategy: ClassVar[str] = "RESCALE"
    is_pointwise: ClassVar[bool] = True


@dataclass(frozen=True)
class RebalancePartitioner(StreamPartitioner):
    ship_strategy: ClassVar[str] = "REBALANCE"


@dataclass(frozen=True)
class ShufflePartitioner(StreamPartitioner):
    ship_strategy: ClassVar[str] = "SHUFFLE"


@dataclass(frozen=True)
class BroadcastPartitioner(StreamPartitioner):
    ship_strategy: ClassVar[str] = "BROADCAST"


@dataclass(frozen=True)
class GlobalPartitioner(StreamPartitioner):
    ship_strategy: ClassVar[str] = "GLOBAL"


@dataclass(frozen=True)
class KeyGroupStreamPartitioner(StreamPartitioner):
    """Routes by key group: the consumer is the subtask owning the record's key group."""

    ship_strategy: ClassVar[str] = "HASH"
    key_selector: Any = None
    max_parallelism: Optional[int] = None  # resolved at StreamGraph generation


@dataclass(frozen=True)
class CustomPartitionerWrapper(StreamPartitioner):
    ship_strategy: ClassVar[str] = "CUSTOM"
    partitioner: Any = None
    key_selector: Any = None
