"""The DataStream API, named as ``pyflink.datastream``: a PyFlink job ports by changing imports."""
from runtime.datastream.checkpoint_config import (
    CheckpointConfig, CheckpointingMode, ExternalizedCheckpointCleanup)
from runtime.datastream.data_stream import (
    AllWindowedStream, BroadcastConnectedStream, BroadcastStream, ConnectedStreams, DataStream,
    DataStreamSink, KeyedStream, WindowedStream)
from runtime.datastream.execution_config import ExecutionConfig
from runtime.datastream.functions import (
    AggregateFunction, AllWindowFunction, BroadcastProcessFunction, CoFlatMapFunction, CoMapFunction,
    CoProcessFunction, FilterFunction, FlatMapFunction, KeyedBroadcastProcessFunction, KeyedCoProcessFunction,
    KeyedProcessFunction, KeySelector,
    MapFunction, Partitioner, ProcessAllWindowFunction, ProcessFunction, ProcessWindowFunction,
    ReduceFunction, RuntimeContext, SinkFunction, TimeDomain, TimerService, WindowFunction)
from runtime.datastream.output_tag import OutputTag
from runtime.datastream.slot_sharing_group import MemorySize, SlotSharingGroup
from runtime.datastream.stream_execution_environment import (
    RuntimeExecutionMode, StreamExecutionEnvironment)
from runtime.datastream.window import (
    ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger, CountEvictor, CountSlidingWindowAssigner,
    CountTrigger, CountTumblingWindowAssigner, CountWindow, DeltaEvictor, DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows, EventTimeSessionWindows, EventTimeTrigger, Evictor, GlobalWindow,
    GlobalWindows, MergingWindowAssigner, NeverTrigger, ProcessingTimeSessionWindows, ProcessingTimeTrigger,
    PurgingTrigger, SlidingEventTimeWindows, SlidingProcessingTimeWindows, TimeEvictor, TimeWindow, Trigger,
    TriggerResult, TumblingEventTimeWindows, TumblingProcessingTimeWindows, Window, WindowAssigner)

__all__ = [
    "AggregateFunction", "AllWindowFunction", "AllWindowedStream", "BroadcastConnectedStream",
    "BroadcastProcessFunction", "BroadcastStream", "CheckpointConfig",
    "CheckpointingMode", "CoFlatMapFunction", "CoMapFunction", "CoProcessFunction", "ConnectedStreams",
    "ContinuousEventTimeTrigger", "ContinuousProcessingTimeTrigger", "CountEvictor",
    "CountSlidingWindowAssigner", "CountTrigger", "CountTumblingWindowAssigner", "CountWindow",
    "DataStream", "DataStreamSink", "DeltaEvictor", "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows", "EventTimeSessionWindows", "EventTimeTrigger", "Evictor",
    "ExecutionConfig", "ExternalizedCheckpointCleanup", "FilterFunction", "FlatMapFunction",
    "GlobalWindow", "GlobalWindows", "KeySelector", "KeyedBroadcastProcessFunction", "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStream", "MapFunction", "MemorySize", "MergingWindowAssigner", "NeverTrigger", "OutputTag", "Partitioner",
    "ProcessAllWindowFunction", "ProcessFunction", "ProcessWindowFunction",
    "ProcessingTimeSessionWindows", "ProcessingTimeTrigger", "PurgingTrigger", "ReduceFunction",
    "RuntimeContext", "RuntimeExecutionMode", "SinkFunction", "SlidingEventTimeWindows", "SlotSharingGroup",
    "SlidingProcessingTimeWindows", "StreamExecutionEnvironment", "TimeDomain", "TimeEvictor",
    "TimeWindow", "TimerService", "Trigger", "TriggerResult", "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows", "Window", "WindowAssigner", "WindowFunction", "WindowedStream",
]
