"""Stream operator descriptors: what each node of a job runs.

Each ``*Spec`` describes one of Flink's stream operators (``MapSpec`` is ``StreamMap``, ...): an
immutable description holding the user's functions. The task layer (``runtime.task``) has the
executing operator of each, under Flink's name.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional


class ChainingStrategy(enum.Enum):
    ALWAYS = "ALWAYS"   # may chain to its predecessor and successors
    HEAD = "HEAD"       # starts a chain; successors may chain to it
    NEVER = "NEVER"     # never chained


@dataclass(frozen=True)
class OperatorSpec:
    default_name: ClassVar[str] = ""
    chaining_strategy: ClassVar[ChainingStrategy] = ChainingStrategy.ALWAYS
    # Keyed operators own keyed state and timers: they need a key selector per input.
    keyed: ClassVar[bool] = False
    two_input: ClassVar[bool] = False


@dataclass(frozen=True)
class SourceSpec(OperatorSpec):
    chaining_strategy: ClassVar[ChainingStrategy] = ChainingStrategy.HEAD
    source: Any = None
    watermark_strategy: Any = None


@dataclass(frozen=True)
class MapSpec(OperatorSpec):
    default_name: ClassVar[str] = "Map"
    function: Any = None


@dataclass(frozen=True)
class FlatMapSpec(OperatorSpec):
    default_name: ClassVar[str] = "Flat Map"
    function: Any = None


@dataclass(frozen=True)
class FilterSpec(OperatorSpec):
    default_name: ClassVar[str] = "Filter"
    function: Any = None


@dataclass(frozen=True)
class MapBatchesSpec(OperatorSpec):
    """``map_batches``: a function of a pyarrow RecordBatch returning one (a Sluice extension,
    as Spark's ``mapInArrow``); ``output_type`` is the declared type of what it returns."""
    default_name: ClassVar[str] = "Map Batches"
    function: Any = None
    output_type: Any = None


@dataclass(frozen=True)
class FilterBatchesSpec(OperatorSpec):
    """``filter_batches``: a function of a pyarrow RecordBatch returning a boolean mask."""
    default_name: ClassVar[str] = "Filter Batches"
    function: Any = None


@dataclass(frozen=True)
class ProcessSpec(OperatorSpec):
    default_name: ClassVar[str] = "Process"
    function: Any = None


@dataclass(frozen=True)
class KeyedProcessSpec(OperatorSpec):
    default_name: ClassVar[str] = "KeyedProcess"
    keyed: ClassVar[bool] = True
    function: Any = None


@dataclass(frozen=True)
class TimestampsAndWatermarksSpec(OperatorSpec):
    default_name: ClassVar[str] = "Timestamps/Watermarks"
    watermark_strategy: Any = None


@dataclass(frozen=True)
class Aggregation:
    """A built-in aggregation over one field: sum, min, max, min_by, max_by.

    ``position`` is the resolved field (an index for tuples, a name for named rows,
    None for a plain value). Built-ins are associative, so the runtime may pre-aggregate
    them before the keyed shuffle and run them vectorised.
    """

    kind: str
    field: Any
    position: Any
    first: bool = True

    @property
    def class_name(self) -> str:
        return "SumAggregator" if self.kind == "sum" else "ComparableAggregator"


@dataclass(frozen=True)
class GroupedReduceSpec(OperatorSpec):
    """Rolling reduce or aggregation on a KeyedStream: one updated result per record."""

    default_name: ClassVar[str] = "Keyed Reduce"
    keyed: ClassVar[bool] = True
    function: Any = None            # a ReduceFunction, or None for a built-in aggregation
    aggregation: Optional[Aggregation] = None


@dataclass(frozen=True)
class WindowSpec(OperatorSpec):
    """Flink's WindowOperator (EvictingWindowOperator when an evictor is set).

    Exactly one way to compute the result is set: ``reduce_function``,
    ``aggregate_function``, ``aggregation`` (built-in), or only a full-window function;
    ``window_function`` (apply/process) then sees the elements or the pre-aggregate.
    ``window_function_kind`` is "apply", "process" or None (pass-through).
    """

    default_name: ClassVar[str] = "Window"
    keyed: ClassVar[bool] = True
    assigner: Any = None
    trigger: Any = None
    evictor: Any = None
    allowed_lateness: int = 0
    late_data_output_tag: Any = None
    reduce_function: Any = None
    aggregate_function: Any = None
    aggregation: Optional[Aggregation] = None
    window_function: Any = None
    window_function_kind: Optional[str] = None
    # window_all: the key is a constant, the function does not receive it.
    non_keyed: bool = False


@dataclass(frozen=True)
class CoMapSpec(OperatorSpec):
    default_name: ClassVar[str] = "Co-Map"
    two_input: ClassVar[bool] = True
    function: Any = None


@dataclass(frozen=True)
class CoFlatMapSpec(OperatorSpec):
    default_name: ClassVar[str] = "Co-Flat Map"
    two_input: ClassVar[bool] = True
    function: Any = None


@dataclass(frozen=True)
class CoProcessSpec(OperatorSpec):
    default_name: ClassVar[str] = "Co-Process"
    two_input: ClassVar[bool] = True
    function: Any = None


@dataclass(frozen=True)
class KeyedCoProcessSpec(OperatorSpec):
    default_name: ClassVar[str] = "KeyedCoProcess"
    two_input: ClassVar[bool] = True
    keyed: ClassVar[bool] = True
    function: Any = None


@dataclass(frozen=True)
class BroadcastProcessSpec(OperatorSpec):
    """Flink's CoBroadcastWithNonKeyedOperator: input 1 is the stream, input 2 the broadcast one;
    ``descriptors`` name the broadcast states (MapStateDescriptors) the operator keeps."""

    default_name: ClassVar[str] = "Co-Process-Broadcast"
    two_input: ClassVar[bool] = True
    function: Any = None
    descriptors: tuple = ()


@dataclass(frozen=True)
class KeyedBroadcastProcessSpec(BroadcastProcessSpec):
    """Flink's CoBroadcastWithKeyedOperator: input 1 keyed (keyed state, timers)."""

    default_name: ClassVar[str] = "Co-Process-Broadcast-Keyed"
    keyed: ClassVar[bool] = True


@dataclass(frozen=True)
class SinkSpec(OperatorSpec):
    """A sink: ``kind`` is "print", "collect", "delta", "file" or "function"."""

    kind: str = "function"
    sink: Any = None            # PrintSink / DeltaSink / SinkFunction / collect id or KeyedCollect


@dataclass(frozen=True)
class KeyedCollect:
    """The descriptor of ``execute_and_collect()``'s sink on a KeyedStream (on a plain stream it is
    the stream's id): the records come back as PyFlink's keyed stream carries them,
    ``Row(f0=key, f1=value)``, the key taken by ``key_selector``. Equal by the stream's id alone,
    as the run's result is looked up by it."""

    stream_id: int
    key_selector: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class PrintSink:
    """``print()``: Flink's PrintSinkFunction, with the ``N> `` prefix above parallelism 1."""

    sink_identifier: Optional[str] = None
    to_stderr: bool = False

    @property
    def name(self) -> str:
        return "Print to Std. Err" if self.to_stderr else "Print to Std. Out"
