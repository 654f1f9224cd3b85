"""User function interfaces, as ``pyflink.datastream.functions``.

A job passes either an instance of one of these classes or a plain callable;
``as_function`` turns a callable into an instance, so operators only ever call
the interface method (``map``, ``flat_map``, ...).

The window functions are generic as PyFlink's (``ProcessWindowFunction[IN, OUT, KEY, W]``,
``ProcessWindowFunction.Context[W2]``), so a PyFlink job's ``class F(ProcessWindowFunction[tuple,
tuple, str, TimeWindow])`` ports unchanged; so are the broadcast process functions
(``KeyedBroadcastProcessFunction[KEY, IN1, IN2, OUT]``); the other classes are not generic in
PyFlink 2.3 either. The parameters are for type checkers: nothing is checked when a job runs.
"""
from __future__ import annotations

import abc
from typing import Any, Callable, Generic, Iterable, TypeVar

# PyFlink's type variables (pyflink.datastream.functions).
IN = TypeVar("IN")
OUT = TypeVar("OUT")
KEY = TypeVar("KEY")
IN1 = TypeVar("IN1")
IN2 = TypeVar("IN2")
W = TypeVar("W")
W2 = TypeVar("W2")


class RuntimeContext(abc.ABC):
    """What a rich function sees of the task running it (``open(runtime_context)``)."""

    @abc.abstractmethod
    def get_task_name(self) -> str: ...

    @abc.abstractmethod
    def get_number_of_parallel_subtasks(self) -> int: ...

    @abc.abstractmethod
    def get_max_number_of_parallel_subtasks(self) -> int: ...

    @abc.abstractmethod
    def get_index_of_this_subtask(self) -> int: ...

    @abc.abstractmethod
    def get_attempt_number(self) -> int: ...

    @abc.abstractmethod
    def get_task_name_with_subtasks(self) -> str: ...

    @abc.abstractmethod
    def get_job_parameter(self, key: str, default_value: Any = None) -> Any: ...

    @abc.abstractmethod
    def get_state(self, state_descriptor): ...

    @abc.abstractmethod
    def get_list_state(self, state_descriptor): ...

    @abc.abstractmethod
    def get_map_state(self, state_descriptor): ...

    @abc.abstractmethod
    def get_reducing_state(self, state_descriptor): ...

    @abc.abstractmethod
    def get_aggregating_state(self, state_descriptor): ...

    @abc.abstractmethod
    def get_metrics_group(self):
        """The operator's ``runtime.metrics.MetricGroup``: register metrics on it in ``open()``."""


class Function:
    """Base of all user functions; ``open``/``close`` make it a rich function."""

    def open(self, runtime_context: RuntimeContext) -> None:
        pass

    def close(self) -> None:
        pass


class MapFunction(Function):
    @abc.abstractmethod
    def map(self, value): ...


class FlatMapFunction(Function):
    @abc.abstractmethod
    def flat_map(self, value) -> Iterable: ...


class FilterFunction(Function):
    @abc.abstractmethod
    def filter(self, value) -> bool: ...


class KeySelector(Function):
    @abc.abstractmethod
    def get_key(self, value): ...


class ReduceFunction(Function):
    @abc.abstractmethod
    def reduce(self, value1, value2): ...


class AggregateFunction(Function):
    @abc.abstractmethod
    def create_accumulator(self): ...

    @abc.abstractmethod
    def add(self, value, accumulator): ...

    @abc.abstractmethod
    def get_result(self, accumulator): ...

    def merge(self, acc_a, acc_b):
        raise NotImplementedError(
            f"{type(self).__name__}.merge is needed by merging (session) windows: implement it")


class SinkFunction(Function):
    @abc.abstractmethod
    def invoke(self, value, context) -> None: ...


class Partitioner(Function):
    """Chooses the channel of a key (``partition_custom``)."""

    @abc.abstractmethod
    def partition(self, key, num_partitions: int) -> int: ...


class TimerService(abc.ABC):
    @abc.abstractmethod
    def current_processing_time(self) -> int: ...

    @abc.abstractmethod
    def current_watermark(self) -> int: ...

    @abc.abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None: ...

    @abc.abstractmethod
    def register_event_time_timer(self, timestamp: int) -> None: ...

    @abc.abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None: ...

    @abc.abstractmethod
    def delete_event_time_timer(self, timestamp: int) -> None: ...


class TimeDomain:
    EVENT_TIME = 0
    PROCESSING_TIME = 1


class BaseContext(abc.ABC):
    @abc.abstractmethod
    def timestamp(self) -> int | None: ...

    @abc.abstractmethod
    def timer_service(self) -> TimerService: ...


class ProcessFunction(Function):
    class Context(BaseContext):
        @abc.abstractmethod
        def output(self, output_tag, value) -> None: ...

    @abc.abstractmethod
    def process_element(self, value, ctx: "ProcessFunction.Context") -> Iterable | None: ...


class KeyedProcessFunction(Function):
    class Context(BaseContext):
        @abc.abstractmethod
        def get_current_key(self): ...

        @abc.abstractmethod
        def output(self, output_tag, value) -> None: ...

    class OnTimerContext(Context):
        @abc.abstractmethod
        def time_domain(self) -> int: ...

    @abc.abstractmethod
    def process_element(self, value, ctx: "KeyedProcessFunction.Context") -> Iterable | None: ...

    def on_timer(self, timestamp: int, ctx: "KeyedProcessFunction.OnTimerContext") -> Iterable | None:
        pass


class CoMapFunction(Function):
    @abc.abstractmethod
    def map1(self, value): ...

    @abc.abstractmethod
    def map2(self, value): ...


class CoFlatMapFunction(Function):
    @abc.abstractmethod
    def flat_map1(self, value) -> Iterable: ...

    @abc.abstractmethod
    def flat_map2(self, value) -> Iterable: ...


class CoProcessFunction(Function):
    class Context(BaseContext):
        @abc.abstractmethod
        def output(self, output_tag, value) -> None: ...

    @abc.abstractmethod
    def process_element1(self, value, ctx) -> Iterable | None: ...

    @abc.abstractmethod
    def process_element2(self, value, ctx) -> Iterable | None: ...


class KeyedCoProcessFunction(Function):
    class Context(BaseContext):
        @abc.abstractmethod
        def get_current_key(self): ...

        @abc.abstractmethod
        def output(self, output_tag, value) -> None: ...

    class OnTimerContext(Context):
        @abc.abstractmethod
        def time_domain(self) -> int: ...

    @abc.abstractmethod
    def process_element1(self, value, ctx) -> Iterable | None: ...

    @abc.abstractmethod
    def process_element2(self, value, ctx) -> Iterable | None: ...

    def on_timer(self, timestamp: int, ctx: "KeyedCoProcessFunction.OnTimerContext") -> Iterable | None:
        pass


class BaseBroadcastProcessFunction(Function):
    """What both broadcast process functions share: their contexts (PyFlink's)."""

    class BaseContext(abc.ABC):
        @abc.abstractmethod
        def timestamp(self) -> int | None: ...

        @abc.abstractmethod
        def current_processing_time(self) -> int: ...

        @abc.abstractmethod
        def current_watermark(self) -> int: ...

    class Context(BaseContext):
        """The broadcast side's: the broadcast state, writable."""

        @abc.abstractmethod
        def get_broadcast_state(self, state_descriptor): ...

    class ReadOnlyContext(BaseContext):
        """The other side's: the broadcast state, read only."""

        @abc.abstractmethod
        def get_broadcast_state(self, state_descriptor): ...


class BroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[IN1, IN2, OUT]):
    """``stream.connect(rules.broadcast(descriptor)).process(f)``: ``process_element`` per record of
    the stream (broadcast state read only), ``process_broadcast_element`` per broadcast record
    (broadcast state writable), each returning or yielding any number of records."""

    class Context(BaseBroadcastProcessFunction.Context, abc.ABC):
        pass

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext, abc.ABC):
        pass

    @abc.abstractmethod
    def process_element(self, value: IN1, ctx: "BroadcastProcessFunction.ReadOnlyContext"): ...

    @abc.abstractmethod
    def process_broadcast_element(self, value: IN2, ctx: "BroadcastProcessFunction.Context"): ...


class KeyedBroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[KEY, IN1, IN2, OUT]):
    """``keyed.connect(rules.broadcast(descriptor)).process(f)``: as BroadcastProcessFunction, and the
    keyed side also has keyed state, timers (``ctx.timer_service()``, ``on_timer``) and
    ``ctx.get_current_key()``. PyFlink has no ``apply_to_keyed_state``, nor has this."""

    class Context(BaseBroadcastProcessFunction.Context, abc.ABC):
        pass

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext, abc.ABC):
        @abc.abstractmethod
        def timer_service(self) -> TimerService: ...

        @abc.abstractmethod
        def get_current_key(self): ...

    class OnTimerContext(ReadOnlyContext, abc.ABC):
        @abc.abstractmethod
        def time_domain(self) -> int: ...

    @abc.abstractmethod
    def process_element(self, value: IN1, ctx: "KeyedBroadcastProcessFunction.ReadOnlyContext"): ...

    @abc.abstractmethod
    def process_broadcast_element(self, value: IN2, ctx: "KeyedBroadcastProcessFunction.Context"): ...

    def on_timer(self, timestamp: int, ctx: "KeyedBroadcastProcessFunction.OnTimerContext"):
        pass


class WindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """``apply(key, window, inputs) -> iterable`` over the whole window's contents."""

    @abc.abstractmethod
    def apply(self, key: KEY, window: W, inputs: Iterable[IN]) -> Iterable[OUT]: ...


class AllWindowFunction(Function, Generic[IN, OUT, W]):
    @abc.abstractmethod
    def apply(self, window: W, inputs: Iterable[IN]) -> Iterable[OUT]: ...


class ProcessWindowFunction(Function, Generic[IN, OUT, KEY, W]):
    class Context(abc.ABC, Generic[W2]):
        @abc.abstractmethod
        def window(self) -> W2: ...

        @abc.abstractmethod
        def current_processing_time(self) -> int: ...

        @abc.abstractmethod
        def current_watermark(self) -> int: ...

        @abc.abstractmethod
        def window_state(self): ...

        @abc.abstractmethod
        def global_state(self): ...

        @abc.abstractmethod
        def output(self, output_tag, value) -> None: ...

    @abc.abstractmethod
    def process(self, key: KEY, context: "ProcessWindowFunction.Context[W]",
                elements: Iterable[IN]) -> Iterable[OUT]: ...

    def clear(self, context: "ProcessWindowFunction.Context[W]") -> None:
        pass


class ProcessAllWindowFunction(Function, Generic[IN, OUT, W]):
    Context = ProcessWindowFunction.Context

    @abc.abstractmethod
    def process(self, context: "ProcessWindowFunction.Context[W]",
                elements: Iterable[IN]) -> Iterable[OUT]: ...

    def clear(self, context) -> None:
        pass


# Interface → the one method a plain callable stands for.
_SINGLE_METHOD = {
    MapFunction: "map",
    FlatMapFunction: "flat_map",
    FilterFunction: "filter",
    KeySelector: "get_key",
    ReduceFunction: "reduce",
    SinkFunction: "invoke",
    Partitioner: "partition",
    ProcessFunction: "process_element",
    KeyedProcessFunction: "process_element",
    WindowFunction: "apply",
    AllWindowFunction: "apply",
    ProcessWindowFunction: "process",
    ProcessAllWindowFunction: "process",
}
_WRAPPERS: dict[type, type] = {}


def _wrapper_class(interface: type) -> type:
    if interface not in _WRAPPERS:
        method = _SINGLE_METHOD[interface]

        if interface is SinkFunction:
            # A sink written as a function takes the record only: invoke(value, context).
            def call(self, value, context=None):
                return self._fn(value)
        else:
            def call(self, *args):
                return self._fn(*args)

        def init(self, fn):
            self._fn = fn

        _WRAPPERS[interface] = type(
            f"Lambda{interface.__name__}", (interface,),
            {"__init__": init, method: call, "__module__": __name__,
             "__reduce__": lambda self: (_rewrap, (interface, self._fn))})
    return _WRAPPERS[interface]


def _rewrap(interface: type, fn: Callable) -> Function:
    return _wrapper_class(interface)(fn)


def as_function(fn: Any, interface: type, operator: str) -> Function:
    """``fn`` as an instance of ``interface``; a callable is wrapped.

    ``operator`` names the API call in the error, so a job author sees where it went wrong.
    """
    if isinstance(fn, interface):
        return fn
    if isinstance(fn, Function):
        raise TypeError(
            f"{operator}() expects a {interface.__name__} or a function, got a "
            f"{type(fn).__name__}: implement {interface.__name__} instead")
    if interface in _SINGLE_METHOD and callable(fn):
        return _wrapper_class(interface)(fn)
    raise TypeError(
        f"{operator}() expects a {interface.__name__}"
        + (" or a function" if interface in _SINGLE_METHOD else "")
        + f", got {fn!r}")


def function_name(fn: Any) -> str:
    """The name Flink shows for a user function inside an operator name."""
    inner = getattr(fn, "_fn", None)
    target = inner if inner is not None else fn
    name = getattr(target, "__name__", None) or type(target).__name__
    return name


def is_lambda_wrapper(fn: Any) -> bool:
    return type(fn) in _WRAPPERS.values()


def method_of(function: Function, name: str) -> Callable:
    """``function.<name>``; for a wrapped plain function, that function itself (one Python
    call per record instead of two)."""
    return function._fn if is_lambda_wrapper(function) else getattr(function, name)
