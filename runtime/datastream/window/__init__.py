"""Window model as ``pyflink.datastream.window``: windows, assigners, triggers, evictors.

Pure Python with Flink's semantics, one module per concept; the engine drives these objects
through the context interfaces they declare (``WindowAssigner.WindowAssignerContext``,
``Trigger.TriggerContext`` / ``Trigger.OnMergeContext``, ``Evictor.EvictorContext``). Jobs
import every name from here, as from PyFlink's one module.
"""
from runtime.datastream.window.assigners import (
    CountSlidingWindowAssigner, CountTumblingWindowAssigner, DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows, EventTimeSessionWindows, GlobalWindows, MergingWindowAssigner,
    ProcessingTimeSessionWindows, SessionWindowTimeGapExtractor, SlidingEventTimeWindows,
    SlidingProcessingTimeWindows, TumblingEventTimeWindows, TumblingProcessingTimeWindows, WindowAssigner)
from runtime.datastream.window.evictors import (
    CountEvictor, DeltaEvictor, Evictor, TimeEvictor, TimestampedValue)
from runtime.datastream.window.triggers import (
    ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger, CountTrigger, EventTimeTrigger,
    NeverTrigger, ProcessingTimeTrigger, PurgingTrigger, Trigger, TriggerResult)
from runtime.datastream.window.windows import (
    MAX_LONG_VALUE, MIN_LONG_VALUE, CountWindow, GlobalWindow, T, TimeWindow, W, W2, Window)

__all__ = [
    "MAX_LONG_VALUE",
    "MIN_LONG_VALUE",
    "Window",
    "TimeWindow",
    "CountWindow",
    "GlobalWindow",
    "TimestampedValue",
    "WindowAssigner",
    "MergingWindowAssigner",
    "SessionWindowTimeGapExtractor",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "EventTimeSessionWindows",
    "ProcessingTimeSessionWindows",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "GlobalWindows",
    "CountTumblingWindowAssigner",
    "CountSlidingWindowAssigner",
    "TriggerResult",
    "Trigger",
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "PurgingTrigger",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "NeverTrigger",
    "Evictor",
    "CountEvictor",
    "TimeEvictor",
    "DeltaEvictor",
]

# Pickles (window namespaces in state tables, stored plans) name the package, a path jobs
# import from, not the module a class happens to live in: the layout may change, they stay.
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = __name__
del _name, _obj
