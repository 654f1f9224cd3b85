"""The spec -> operator table: which executing operator runs a job graph node's operator
descriptor (Flink's ``StreamOperatorFactory``). It imports the operator modules; none of them
imports it, so the operators form no cycle."""
from __future__ import annotations

from runtime.datastream import operators as ops
from runtime.task.batch_operators import FilterBatchesOperator, MapBatchesOperator
from runtime.task.broadcast_operator import BroadcastProcessOperator
from runtime.task.grouped_reduce import StreamGroupedReduceOperator
from runtime.task.operators import TaskOperator
from runtime.task.process_operator import CoProcessOperator, ProcessOperator
from runtime.task.simple_operators import (
    CoStreamFlatMap, CoStreamMap, SourceOperator, StreamFilter, StreamFlatMap, StreamMap)
from runtime.task.stream_sink import StreamSink
from runtime.task.task_context import TaskContext
from runtime.task.timestamps_and_watermarks import TimestampsAndWatermarksOperator
from runtime.task.window_aggregation import WindowAggregationOperator, is_vectorizable
from runtime.task.window_operator import WindowOperator


def create_operator(node, ctx: TaskContext) -> TaskOperator:
    return operator_class(node)(node, ctx)


def snapshots_incrementally(node) -> bool:
    """Whether the operator of ``node`` can snapshot only what changed (its state is all in
    its keyed backend): the driver asks it to, per the incremental checkpoint policy."""
    return bool(node.is_keyed) and operator_class(node).state_in_backend


def operator_class(node) -> type:
    """The executing operator of a job graph node's operator descriptor."""
    spec = node.operator
    if is_vectorizable(spec):
        return WindowAggregationOperator
    # A function that names its own executing operator (Flink's custom stream operators, as CEP's
    # CepOperator: the packages above the task layer bring operators this table cannot import).
    own = getattr(getattr(spec, "function", None), "operator_class", None)
    if own is not None:
        return own
    table = {
        ops.SourceSpec: SourceOperator,
        ops.MapSpec: StreamMap,
        ops.FlatMapSpec: StreamFlatMap,
        ops.FilterSpec: StreamFilter,
        ops.MapBatchesSpec: MapBatchesOperator,
        ops.FilterBatchesSpec: FilterBatchesOperator,
        ops.ProcessSpec: ProcessOperator,
        ops.KeyedProcessSpec: ProcessOperator,
        ops.CoProcessSpec: CoProcessOperator,
        ops.KeyedCoProcessSpec: CoProcessOperator,
        ops.CoMapSpec: CoStreamMap,
        ops.CoFlatMapSpec: CoStreamFlatMap,
        ops.GroupedReduceSpec: StreamGroupedReduceOperator,
        ops.TimestampsAndWatermarksSpec: TimestampsAndWatermarksOperator,
        ops.WindowSpec: WindowOperator,
        ops.SinkSpec: StreamSink,
        ops.BroadcastProcessSpec: BroadcastProcessOperator,
        ops.KeyedBroadcastProcessSpec: BroadcastProcessOperator,
    }
    cls = table.get(type(spec))
    if cls is None:
        raise TypeError(f"No executing operator for {type(spec).__name__} ('{node.operator_name}')")
    return cls
