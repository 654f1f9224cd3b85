"""DataStream, KeyedStream, WindowedStream, ConnectedStreams (``pyflink.datastream``).

Each call adds a Transformation to the environment and returns a stream wrapping it.
Wrong use is reported here, when the job is built, naming the operator and the fix.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Union

from runtime.common.time import to_millis
from runtime.common.typeinfo import TypeInformation, Types
from runtime.common.watermark_strategy import WatermarkStrategy
from runtime.datastream import functions as fn
from runtime.datastream import partitioner as part
from runtime.datastream.key_selector import KeyByKeySelector
from runtime.datastream.connectors.base import Sink
from runtime.datastream.connectors.delta import DeltaSink, UpsertKeySelector
from runtime.datastream.connectors.file_system import FileSink
from runtime.datastream.connectors.kafka import KafkaSink
from runtime.datastream.operators import (
    Aggregation, BroadcastProcessSpec, ChainingStrategy, CoProcessSpec, CoFlatMapSpec, CoMapSpec,
    KeyedCollect, KeyedCoProcessSpec, KeyedProcessSpec, PrintSink, ProcessSpec, FilterSpec,
    FilterBatchesSpec, FlatMapSpec, GroupedReduceSpec, KeyedBroadcastProcessSpec, MapBatchesSpec, MapSpec,
    OperatorSpec, SinkSpec,
    TimestampsAndWatermarksSpec, WindowSpec)
from runtime.datastream.output_tag import OutputTag
from runtime.datastream.slot_sharing_group import SlotSharingGroup
from runtime.datastream.state import MapStateDescriptor
from runtime.datastream.transformations import (
    VIRTUAL, KeyedStreamValuesTransformation, OneInputTransformation, PartitionTransformation,
    SideOutputTransformation, SinkTransformation, Transformation, TwoInputTransformation,
    UnionTransformation)

if TYPE_CHECKING:
    from runtime.datastream.stream_execution_environment import StreamExecutionEnvironment

# The name of the map PyFlink takes a KeyedStream's values with (PythonConfigUtil's
# KEYED_STREAM_VALUE_OPERATOR_NAME): the plan's node where a keyed stream is used as a plain one.
KEYED_STREAM_VALUE_OPERATOR_NAME = "_keyed_stream_values_operator"


class FieldKeySelector(fn.KeySelector):
    """``key_by(1)`` / ``key_by("word")``: the key is one field of the record.

    Recognised by the runtime, which extracts and hashes such keys vectorised.
    """

    def __init__(self, field: Union[int, str]):
        self.field = field

    def get_key(self, value):
        try:
            if isinstance(self.field, str):
                return value[self.field] if isinstance(value, dict) else getattr(value, self.field)
            if isinstance(value, (tuple, list)):
                return value[self.field]
            if self.field == 0:
                return value
        except (AttributeError, IndexError, KeyError):
            pass
        raise KeyError(f"key_by({self.field!r}): record {value!r} has no field {self.field!r}")

    def __eq__(self, other):
        return isinstance(other, FieldKeySelector) and other.field == self.field

    def __hash__(self):
        return hash(("FieldKeySelector", self.field))

    def __repr__(self):
        return f"FieldKeySelector({self.field!r})"


class NullByteKeySelector(fn.KeySelector):
    """The constant key of ``window_all``: every record goes to the one subtask."""

    def get_key(self, value):
        return 0

    def __eq__(self, other):
        return isinstance(other, NullByteKeySelector)

    def __hash__(self):
        return hash("NullByteKeySelector")


def _is_unknown(type_info) -> bool:
    return type_info is None or type(type_info).__name__ == "PickledBytesTypeInfo"


def resolve_field(type_info, field, operator: str):
    """The position of ``field`` in records of ``type_info``, checked when the type is known."""
    if isinstance(field, bool) or not isinstance(field, (int, str)):
        raise TypeError(f"{operator}: a field is an index (int) or a name (str), got {field!r}")
    if isinstance(field, int) and field < 0:
        raise ValueError(f"{operator}: field index {field} is negative; fields count from 0")
    if _is_unknown(type_info):
        return field
    try:
        return type_info.field_index(field)
    except (ValueError, KeyError, IndexError) as e:  # the type's message names the valid fields
        raise ValueError(f"{operator}: {e}") from None


def _field_type(type_info, position: int):
    if _is_unknown(type_info):
        return None
    return type_info.get_field_types()[position] if type_info.is_composite_type() else type_info


_NUMERIC = {"Byte", "Short", "Integer", "Long", "Float", "Double", "BigInteger", "BigDecimal"}


def _check_aggregable(type_info, position, kind: str, operator: str) -> None:
    ftype = _field_type(type_info, position)
    if ftype is None or _is_unknown(ftype):
        return
    if kind == "sum" and str(ftype) not in _NUMERIC:
        raise ValueError(
            f"{operator}: sum({position!r}) needs a numeric field, but the field is {ftype}. "
            f"Aggregate a numeric field, or use reduce() for other types.")


class DataStream:
    """A stream of records, as ``pyflink.datastream.DataStream``."""

    def __init__(self, env: "StreamExecutionEnvironment", transformation: Transformation):
        self._env = env
        self._t = transformation

    # ---- operator settings -------------------------------------------------------------

    def _operator(self, setting: str) -> Transformation:
        if isinstance(self._t, VIRTUAL):
            raise ValueError(
                f"{setting}() applies to an operator, but '{self._t.name}' is a partitioning, "
                f"union or side output, not an operator: call {setting}() on the operator "
                f"before or after it.")
        return self._t

    def get_name(self) -> str:
        """The operator's name, as the plan and the web view show it.

            ds.map(parse).name("Parse").get_name()      # 'Parse'
        """
        return self._t.name

    def name(self, name: str) -> "DataStream":
        """Names the operator in the plan, the web view and failure messages (Flink's ``name``).

            ds.map(parse).name("Parse")
            ds.print().name("Print counts")
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"name() needs a non-empty string, got {name!r}")
        self._operator("name").name = name
        return self

    def uid(self, uid: str) -> "DataStream":
        """Gives the operator a stable ID: its state is found by it on restore (Flink's ``uid``).

            counts = ds.key_by(lambda r: r[0]).sum(1).uid("word-counts")
        """
        if not isinstance(uid, str) or not uid:
            raise ValueError(f"uid() of '{self._t.name}' needs a non-empty string, got {uid!r}")
        self._operator("uid").uid = uid
        return self

    def set_parallelism(self, parallelism: int) -> "DataStream":
        """Runs the operator as this many parallel subtasks (Flink's ``setParallelism``).

            ds.map(parse).set_parallelism(4)
        """
        self._operator("set_parallelism").set_parallelism(parallelism)
        return self

    def set_max_parallelism(self, max_parallelism: int) -> "DataStream":
        """Sets the operator's maximum parallelism: its number of key groups, the limit of a rescale.

            ds.key_by(lambda r: r[0]).sum(1).set_max_parallelism(256)
        """
        self._operator("set_max_parallelism").set_max_parallelism(max_parallelism)
        return self

    def get_parallelism(self) -> int:
        """The operator's parallelism: its own, or the environment's default.

            ds.map(parse).set_parallelism(3).get_parallelism()      # 3
        """
        return self._t.parallelism or self._env.get_parallelism()

    def get_type(self):
        """The records' declared TypeInformation (None when nothing declared it: records are pickled).

            ds.map(len, output_type=Types.INT()).get_type()     # Types.INT()
        """
        return self._t.output_type

    def get_execution_environment(self) -> "StreamExecutionEnvironment":
        """The StreamExecutionEnvironment this stream belongs to.

            env = ds.get_execution_environment()
        """
        return self._env

    def force_non_parallel(self) -> "DataStream":
        """Runs the operator as one subtask, for good: parallelism and max parallelism 1.

            ds.map(assign_sequence_number).force_non_parallel()
        """
        t = self._operator("force_non_parallel")
        t.set_parallelism(1)
        t.set_max_parallelism(1)
        t.non_parallel = True
        return self

    def slot_sharing_group(self, slot_sharing_group) -> "DataStream":
        """Puts the operator in a slot sharing group: only operators of one group share a slot.

            ds.map(score).slot_sharing_group("heavy")
        """
        group = slot_sharing_group
        if isinstance(group, str):      # as Flink's setSlotSharingGroup(String): a group without resources
            group = SlotSharingGroup.builder(group).build()
        if not isinstance(group, SlotSharingGroup) or not group.get_name():
            raise ValueError(f"slot_sharing_group() needs a non-empty name or a SlotSharingGroup, "
                             f"got {slot_sharing_group!r}")
        self._operator("slot_sharing_group").slot_sharing_group = group
        return self

    def disable_chaining(self) -> "DataStream":
        """Never chains the operator with the one before or after it (Flink's ``disableChaining``).

            ds.map(parse).disable_chaining()
        """
        self._operator("disable_chaining").chaining_strategy = ChainingStrategy.NEVER
        return self

    def start_new_chain(self) -> "DataStream":
        """Starts a new chain at this operator: it is not chained to the one before it.

            ds.map(parse).filter(valid).start_new_chain()
        """
        self._operator("start_new_chain").chaining_strategy = ChainingStrategy.HEAD
        return self

    def set_buffer_timeout(self, timeout_millis: int) -> "DataStream":
        """Flink flushes an operator's output buffers at least every ``timeout_millis``; here records
        cross to the next task when their epoch ends, so the latency bound is the epoch
        (``sluice.epoch.interval``), whatever the timeout. Accepted and checked, no effect.

            ds.map(parse).set_buffer_timeout(100)
        """
        if not isinstance(timeout_millis, int) or timeout_millis < -1:
            raise ValueError(f"set_buffer_timeout() takes -1 (the default) or a timeout >= 0 in ms, got {timeout_millis!r}")
        return self

    def set_description(self, description: str) -> "DataStream":
        """A longer text about the operator than its name (Flink's web UI and JSON plan show it).

            ds.map(parse).name("Parse").set_description("parses CSV lines into Orders")
        """
        self._operator("set_description").description = description
        return self

    def get_execution_config(self):
        """The environment's ExecutionConfig (``env.get_config()``)."""
        return self._env.get_config()

    def project(self, *field_indexes: int) -> "DataStream":
        """Keeps the given fields of each tuple, in that order: a stream of tuples of those fields.

            orders.project(2, 0)     # (amount, id) of TUPLE([INT id, STRING name, DOUBLE amount])
        """
        from runtime.common.typeinfo import TupleTypeInfo, Types
        types = self.get_type()
        if not isinstance(types, TupleTypeInfo):
            raise TypeError(f"project{field_indexes}: only Tuple DataStreams can be projected (declare "
                            f"output_type=Types.TUPLE([...])), this stream's type is {types}")
        fields = types.get_field_types()
        for i in field_indexes:
            if not isinstance(i, int) or not 0 <= i < len(fields):
                raise ValueError(f"project{field_indexes}: field {i!r} is not a position 0..{len(fields) - 1}")
        return self.map(lambda record: tuple(record[i] for i in field_indexes),
                        output_type=Types.TUPLE([fields[i] for i in field_indexes])).name("Projection")

    # ---- transformations ---------------------------------------------------------------

    def _one_input(self, operator: OperatorSpec, output_type, name: Optional[str] = None,
                   cls=None) -> "DataStream":
        t = self._env._add(OneInputTransformation(
            id=self._env._new_id(), name=name or operator.default_name, output_type=output_type,
            input=self._t, operator=operator, **self._state_key()))
        return (cls or DataStream)(self._env, t)

    def _state_key(self) -> dict:
        return {}

    def map(self, func, output_type=None) -> "DataStream":
        """One record out per record in (Flink's ``map``): a MapFunction or a plain function.

            ds.map(lambda word: (word, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
        """
        return self._one_input(MapSpec(function=fn.as_function(func, fn.MapFunction, "map")),
                               output_type)

    def flat_map(self, func, output_type=None) -> "DataStream":
        """Zero or more records out per record in: a FlatMapFunction, or a function returning an iterable.

            lines.flat_map(lambda line: line.split(), output_type=Types.STRING())
        """
        return self._one_input(
            FlatMapSpec(function=fn.as_function(func, fn.FlatMapFunction, "flat_map")), output_type)

    def filter(self, func) -> "DataStream":
        """Keeps the records the function says True of (Flink's ``filter``).

            ds.filter(lambda n: n % 2 == 0)
        """
        return self._one_input(FilterSpec(function=fn.as_function(func, fn.FilterFunction, "filter")),
                               self._t.output_type)

    def map_batches(self, func, output_type) -> "DataStream":
        """Runs ``func`` once per batch of records as Arrow (a Sluice extension: PyFlink's DataStream
        has no such method; compare Spark's ``mapInArrow`` and Flink SQL's vectorised Python
        functions). ``func`` gets a ``pyarrow.RecordBatch`` of this stream's declared columns (a
        ROW_NAMED's field names, ``f0``.. for a tuple or a plain type) plus ``__timestamp`` (the
        records' timestamps in epoch milliseconds, null where none), and returns a RecordBatch or
        Table with the columns of ``output_type`` (by name in any order; a tuple's also by
        position), any number of rows. The output rows' timestamps: a ``__timestamp`` column it
        returns; else, for as many rows as it got, each row's at its position; else the batch's
        latest. The batches stay Arrow into the next batch function, a timestamp/watermark
        assigner without a timestamp assigner, and a keyed built-in window sum/min/max.

            import pyarrow.compute as pc
            lines.map_batches(lambda b: pa.record_batch({"word": pc.utf8_upper(b["f0"])}),
                              output_type=Types.ROW_NAMED(["word"], [Types.STRING()]))
        """
        if not callable(func):
            raise TypeError(f"map_batches() expects a function of a pyarrow.RecordBatch, got {func!r}")
        if _is_unknown(output_type):
            raise TypeError("map_batches() needs output_type, the declared type of the batches the function "
                            "returns (e.g. Types.ROW_NAMED(['word', 'count'], [Types.STRING(), Types.LONG()]))")
        return self._batch_function(MapBatchesSpec(function=func, output_type=output_type), output_type)

    def filter_batches(self, func) -> "DataStream":
        """Keeps the records ``func`` marks True, a batch at a time as Arrow (a Sluice extension, as
        ``map_batches``): ``func`` gets a ``pyarrow.RecordBatch`` (with ``__timestamp``) and returns
        a boolean array with a value per row (pyarrow or NumPy; null drops the row, as SQL's WHERE).

            orders.filter_batches(lambda b: pc.greater(b["amount"], 100))
        """
        if not callable(func):
            raise TypeError(f"filter_batches() expects a function of a pyarrow.RecordBatch, got {func!r}")
        return self._batch_function(FilterBatchesSpec(function=func), self._t.output_type)

    def _batch_function(self, spec: OperatorSpec, output_type) -> "DataStream":
        # Runs unkeyed even after key_by: a batch holds many keys, so there is no current key.
        if _is_unknown(self._t.output_type):
            raise TypeError(
                f"{spec.default_name}: the input stream has no declared type, so its records have no "
                f"Arrow columns. Declare it on the operator before (output_type=Types.ROW_NAMED(...), "
                f"or type_info= on from_collection)")
        t = self._env._add(OneInputTransformation(id=self._env._new_id(), name=spec.default_name,
                                                  output_type=output_type, input=self._t, operator=spec))
        return DataStream(self._env, t)

    def process(self, func, output_type=None) -> "DataStream":
        """Runs a ProcessFunction (or a function of ``(value, ctx)``) per record; it returns or yields
        any number of records, and ``(output_tag, value)`` goes to a side output.

            ds.process(lambda value, ctx: [(value, ctx.timestamp())])
        """
        if isinstance(func, fn.KeyedProcessFunction):
            raise TypeError(
                "process() got a KeyedProcessFunction on a non-keyed stream: call key_by(...) "
                "first, or implement ProcessFunction.")
        return self._one_input(
            ProcessSpec(function=fn.as_function(func, fn.ProcessFunction, "process")), output_type)

    def assign_timestamps_and_watermarks(self, watermark_strategy: WatermarkStrategy) -> "DataStream":
        """Gives records event-time timestamps and the stream watermarks, per a WatermarkStrategy.

            ds.assign_timestamps_and_watermarks(
                WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))
                .with_timestamp_assigner(lambda event, _: event.ts))
        """
        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise TypeError(
                "assign_timestamps_and_watermarks() expects a WatermarkStrategy, e.g. "
                "WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5)), "
                f"got {watermark_strategy!r}")
        return self._one_input(TimestampsAndWatermarksSpec(watermark_strategy=watermark_strategy),
                               self._t.output_type)

    def key_by(self, key_selector, key_type=None) -> "KeyedStream":
        """Partitions the stream by key: state, timers and windows are then per key (Flink's ``keyBy``).

            ds.key_by(lambda r: r[0])       # a function (or KeySelector)
            ds.key_by("word")               # a field, by name or index, of the declared type
        """
        if key_type is not None and not isinstance(key_type, TypeInformation):
            raise TypeError(f"key_by(): key_type must be a TypeInformation such as Types.STRING(), "
                            f"got {key_type!r}")
        if isinstance(key_selector, (int, str)) and not isinstance(key_selector, bool):
            resolve_field(self._t.output_type, key_selector, f"key_by({key_selector!r})")
            selector = FieldKeySelector(key_selector)      # hashed as the field's Java value
        else:
            # As PyFlink: keyed by the key as key_type, or by its pickled bytes (key_selector.py).
            selector = KeyByKeySelector(fn.as_function(key_selector, fn.KeySelector, "key_by"),
                                        key_type if key_type is not None else Types.PICKLED_BYTE_ARRAY())
        t = self._env._add(PartitionTransformation(
            id=self._env._new_id(), name="Partition", output_type=self._t.output_type,
            input=self._t, partitioner=part.KeyGroupStreamPartitioner(key_selector=selector)))
        return KeyedStream(self._env, t, selector, key_type)

    def union(self, *streams: "DataStream") -> "DataStream":
        """Merges streams of the same type into one (Flink's ``union``); a KeyedStream's records
        join as they are, no longer keyed.

            everything = clicks.union(views, purchases)
        """
        streams = tuple(s._values() if isinstance(s, KeyedStream) else s for s in streams)
        for s in streams:
            if not isinstance(s, DataStream):
                raise TypeError(f"union() takes DataStreams, got {s!r}")
            if s._env is not self._env:
                raise ValueError("union() of streams from different StreamExecutionEnvironments")
            a, b = self._t.output_type, s._t.output_type
            if not _is_unknown(a) and not _is_unknown(b) and a != b:
                raise ValueError(
                    f"Cannot union streams of different types: {a} and {b}. Map them to one type first.")
        t = self._env._add(UnionTransformation(
            id=self._env._new_id(), name="Union", output_type=self._t.output_type,
            union_inputs=(self._t,) + tuple(s._t for s in streams)))
        return DataStream(self._env, t)

    def connect(self, ds: Union["DataStream", "BroadcastStream"]) -> Union["ConnectedStreams", "BroadcastConnectedStream"]:
        """Pairs two streams, of any types, for one two-input operator (co-map, co-flat-map, co-process);
        with a BroadcastStream, for a (Keyed)BroadcastProcessFunction.

            rules.connect(events).key_by(lambda r: r.id, lambda e: e.rule_id).process(ApplyRules())
            events.key_by(lambda e: e.user).connect(rules.broadcast(RULES)).process(MatchRules())
        """
        if isinstance(ds, BroadcastStream):
            return BroadcastConnectedStream(self, ds)
        if not isinstance(ds, DataStream):
            raise TypeError(f"connect() takes a DataStream or a BroadcastStream, got {ds!r}")
        return ConnectedStreams(self, ds)

    def get_side_output(self, output_tag: OutputTag) -> "DataStream":
        """The records an operator sent to ``output_tag`` (yielding ``(output_tag, value)``), as a stream.

            errors = OutputTag("errors", Types.STRING())
            parsed = lines.process(lambda line, ctx: [(errors, line)] if not line else [line.upper()])
            parsed.get_side_output(errors).print()
        """
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"get_side_output() expects an OutputTag, got {output_tag!r}")
        t = self._env._add(SideOutputTransformation(
            id=self._env._new_id(), name=f"SideOutput({output_tag.tag_id})",
            output_type=output_tag.type_info, input=self._t, output_tag=output_tag))
        return DataStream(self._env, t)

    # ---- partitioning ------------------------------------------------------------------

    def _partition(self, partitioner: part.StreamPartitioner) -> "DataStream":
        t = self._env._add(PartitionTransformation(
            id=self._env._new_id(), name="Partition", output_type=self._t.output_type,
            input=self._t, partitioner=partitioner))
        return DataStream(self._env, t)

    def forward(self) -> "DataStream":
        """Sends each record to the downstream subtask of the same index (the parallelism must match).

            ds.forward().map(enrich)
        """
        return self._partition(part.ForwardPartitioner())

    def rebalance(self) -> "DataStream":
        """Sends records round-robin to all downstream subtasks, to even out skew.

            ds.rebalance().map(score)
        """
        return self._partition(part.RebalancePartitioner())

    def rescale(self) -> "DataStream":
        """Sends records round-robin to a subset of the downstream subtasks (Flink's ``rescale``).

            ds.rescale().map(score)
        """
        return self._partition(part.RescalePartitioner())

    def shuffle(self) -> "DataStream":
        """Sends each record to a random downstream subtask.

            ds.shuffle().map(score)
        """
        return self._partition(part.ShufflePartitioner())

    def broadcast(self, broadcast_state_descriptor: Optional[MapStateDescriptor] = None,
                  *other_broadcast_state_descriptors: MapStateDescriptor) -> Union["DataStream", "BroadcastStream"]:
        """Sends every record to every downstream subtask; with MapStateDescriptors, a BroadcastStream
        to ``connect`` to, whose records update those broadcast states.

            rules.broadcast().map(compile_rule)
            events.connect(rules.broadcast(MapStateDescriptor("rules", Types.STRING(), Types.INT())))
        """
        stream = self._partition(part.BroadcastPartitioner())
        if broadcast_state_descriptor is None:
            return stream
        descriptors = (broadcast_state_descriptor,) + other_broadcast_state_descriptors
        for d in descriptors:
            if not isinstance(d, MapStateDescriptor):
                raise TypeError(f"broadcast() takes MapStateDescriptors (the broadcast states), got {d!r}")
        return BroadcastStream(stream, descriptors)

    def global_(self) -> "DataStream":
        """Sends every record to the first downstream subtask.

            ds.global_().map(assign_sequence_number)
        """
        return self._partition(part.GlobalPartitioner())

    def partition_custom(self, partitioner, key_selector) -> "DataStream":
        """A Partitioner (or a function of ``(key, num_partitions)``) picks each record's downstream
        subtask from its key (a function, or a field by index or name).

            ds.partition_custom(lambda key, n: key % n, lambda r: r[1])
        """
        p = fn.as_function(partitioner, fn.Partitioner, "partition_custom")
        if isinstance(key_selector, (int, str)) and not isinstance(key_selector, bool):
            resolve_field(self._t.output_type, key_selector, f"partition_custom(..., {key_selector!r})")
            selector = FieldKeySelector(key_selector)
        else:
            selector = fn.as_function(key_selector, fn.KeySelector, "partition_custom")
        return self._partition(part.CustomPartitionerWrapper(partitioner=p, key_selector=selector))

    # ---- non-keyed windows -------------------------------------------------------------

    def window_all(self, window_assigner) -> "AllWindowedStream":
        """Windows over the whole (non-keyed) stream, evaluated by one subtask (Flink's ``windowAll``).

            ds.window_all(TumblingProcessingTimeWindows.of(Time.seconds(10))).reduce(lambda a, b: a + b)
        """
        _check_assigner(window_assigner, "window_all")
        return AllWindowedStream(self, window_assigner)

    def count_window_all(self, size: int, slide: int = 0) -> "AllWindowedStream":
        """Count windows over the whole stream, as ``KeyedStream.count_window`` per key.

            ds.count_window_all(100).apply(lambda window, inputs: [len(list(inputs))])
        """
        return AllWindowedStream(self, _count_window_assigner(size, slide, "count_window_all"))

    def window(self, *args, **kwargs):
        """Only on a KeyedStream: key the stream first, or use ``window_all``.

            ds.key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(Time.seconds(5)))
        """
        raise TypeError(
            "window() is defined on a KeyedStream: call key_by(...) first, or use window_all(...) "
            "for a window over the whole (non-keyed) stream.")

    def count_window(self, *args, **kwargs):
        """Only on a KeyedStream: key the stream first, or use ``count_window_all``.

            ds.key_by(lambda r: r[0]).count_window(3)
        """
        raise TypeError(
            "count_window() is defined on a KeyedStream: call key_by(...) first, or use "
            "count_window_all(...) for a count window over the whole (non-keyed) stream.")

    def _keyed_only(name):
        def method(self, *args, **kwargs):
            raise TypeError(
                f"{name}() is defined on a KeyedStream: call key_by(...) first "
                f"(e.g. ds.key_by(lambda r: r[0]).{name}(...)).")
        method.__name__ = name
        method.__doc__ = (f"Only on a KeyedStream (a rolling {name} per key): key the stream first.\n\n"
                          f"    ds.key_by(lambda r: r[0]).{name}(...)")
        return method

    sum = _keyed_only("sum")
    min = _keyed_only("min")
    max = _keyed_only("max")
    min_by = _keyed_only("min_by")
    max_by = _keyed_only("max_by")
    reduce = _keyed_only("reduce")
    del _keyed_only

    # ---- sinks -------------------------------------------------------------------------

    def _sink(self, operator: SinkSpec, name: str) -> "DataStreamSink":
        t = self._env._add(SinkTransformation(
            id=self._env._new_id(), name=name, output_type=None, input=self._t, operator=operator))
        return DataStreamSink(self._env, t)

    def print(self, sink_identifier: Optional[str] = None) -> "DataStreamSink":
        """Prints each record to standard output as Flink's ``print``, prefixed ``counts:2> ``
        (the identifier, then the subtask from 1 when the parallelism is above 1), ``2> `` or nothing.

            counts.print()
            counts.print("counts")
        """
        sink = PrintSink(sink_identifier=sink_identifier)
        return self._sink(SinkSpec(kind="print", sink=sink), sink.name)

    def sink_to(self, sink) -> "DataStreamSink":
        """Writes the stream to a Delta table (a path or a DeltaSink) or to files (a FileSink),
        exactly once: each checkpoint commits what the epochs since the last one wrote.

            counts.sink_to("warehouse/word-counts")
            counts.sink_to(FileSink.for_row_format("out", Encoder.simple_string_encoder()).build())
        """
        if isinstance(sink, str):
            sink = DeltaSink.for_row_data(sink)
        if not isinstance(sink, (DeltaSink, FileSink, KafkaSink)):
            raise TypeError(
                f"sink_to() takes a Delta table path, a DeltaSink, a FileSink or a KafkaSink, got {sink!r}; "
                "use add_sink(function) for a custom sink.")
        kind = "delta" if isinstance(sink, DeltaSink) else "kafka" if isinstance(sink, KafkaSink) else "file"
        if kind == "delta" and sink.upsert:
            return self._upsert_input(sink)._sink(SinkSpec(kind=kind, sink=sink), sink.default_name)
        return self._sink(SinkSpec(kind=kind, sink=sink), sink.default_name)

    def _upsert_input(self, sink: DeltaSink) -> "KeyedStream":
        """An upsert Delta sink's input: the key columns must be fields of the declared record type,
        and the stream is keyed by them (as Flink's upsert sinks shuffle by their primary key), so
        all changes of a key reach one sink subtask, in the order they were made."""
        type_info = self._t.output_type
        operator = f"sink_to(DeltaSink ... .with_upsert_keys{sink.upsert_keys!r}) to {sink.table_path}"
        if not _is_unknown(type_info):
            names = list(type_info.get_field_names()) if hasattr(type_info, "get_field_names") else []
            missing = [k for k in sink.upsert_keys if k not in names]
            if missing:
                fields = f"its fields are {names}" if names else "it has no named fields"
                raise ValueError(
                    f"{operator}: the key column(s) {missing} are not fields of the stream's record type "
                    f"{type_info} ({fields}). Key the sink by fields the records have, or declare them "
                    f"in the output_type, e.g. Types.ROW_NAMED([{', '.join(repr(k) for k in sink.upsert_keys)}, "
                    f"...], [...])")
        return self.key_by(UpsertKeySelector(sink.upsert_keys, sink.table_path))

    def add_sink(self, sink_func) -> "DataStreamSink":
        """Calls a SinkFunction's ``invoke(value, context)``, or a function of the record, per record.

            alerts.add_sink(lambda alert: log.warning("alert: %s", alert))
        """
        f = fn.as_function(sink_func, fn.SinkFunction, "add_sink")
        return self._sink(SinkSpec(kind="function", sink=f), "Unnamed")

    def execute_and_collect(self, job_name: Optional[str] = None, limit: Optional[int] = None):
        """Runs the job and returns its records (all of them, or the first ``limit``), iterable;
        a KeyedStream's as ``Row(f0=key, f1=value)``, as PyFlink's.

            doubled = list(env.from_collection([1, 2, 3]).map(lambda x: x * 2).execute_and_collect())
        """
        return self._env._execute_and_collect(job_name, self._collect_sink()._t, limit)

    def _collect_sink(self) -> "DataStreamSink":
        """execute_and_collect's sink; its descriptor is the id of the stream it collects."""
        return self._sink(SinkSpec(kind="collect", sink=self._t.id), "Collect Stream Sink")


class DataStreamSink:
    """What ``print()``/``sink_to()``/``add_sink()`` return: settings of the sink operator."""

    def __init__(self, env, transformation: SinkTransformation):
        self._env = env
        self._t = transformation

    name = DataStream.name
    uid = DataStream.uid
    set_parallelism = DataStream.set_parallelism
    set_max_parallelism = DataStream.set_max_parallelism
    slot_sharing_group = DataStream.slot_sharing_group
    disable_chaining = DataStream.disable_chaining
    start_new_chain = DataStream.start_new_chain
    set_description = DataStream.set_description
    _operator = DataStream._operator

    def get_name(self) -> str:
        """The sink's name, as the plan and the web view show it.

            ds.print().get_name()       # 'Print to Std. Out'
        """
        return self._t.name


class KeyedStream(DataStream):
    """A stream partitioned by key: state, timers and windows are per key."""

    def __init__(self, env, transformation, key_selector, key_type=None):
        super().__init__(env, transformation)
        self._key_selector = key_selector
        self._key_type = key_type

    def get_key_selector(self):
        """The KeySelector the stream was keyed by.

            key = keyed.get_key_selector().get_key(record)
        """
        return self._key_selector

    def _state_key(self) -> dict:
        return {"state_key_selector": self._key_selector, "state_key_type": self._key_type}

    def _values(self) -> DataStream:
        """The records as a plain stream (PyFlink's ``KeyedStream._values()``): no operator runs,
        the plan shows PyFlink's ``_keyed_stream_values_operator`` (transformations.py)."""
        t = self._env._add(KeyedStreamValuesTransformation(
            id=self._env._new_id(), name=KEYED_STREAM_VALUE_OPERATOR_NAME,
            output_type=self._t.output_type, input=self._t))
        return DataStream(self._env, t)

    # As PyFlink's KeyedStream, these take the records as a plain stream.
    def union(self, *streams: DataStream) -> DataStream:
        """Merges the records, no longer keyed, with other streams' (``DataStream.union``).

            everything = clicks.key_by(lambda c: c.user).union(views)
        """
        return self._values().union(*streams)

    def add_sink(self, sink_func) -> "DataStreamSink":
        """``DataStream.add_sink`` of the records; each reaches the sink's subtask of its key.

            alerts.key_by(lambda a: a.user).add_sink(lambda alert: log.warning("alert: %s", alert))
        """
        return self._values().add_sink(sink_func)

    def print(self, sink_identifier: Optional[str] = None) -> "DataStreamSink":
        """``DataStream.print`` of the records; each reaches the sink's subtask of its key.

            counts.key_by(lambda c: c[0]).print("counts")
        """
        return self._values().print(sink_identifier)

    def project(self, *field_indexes: int) -> DataStream:
        """``DataStream.project`` of the records, a plain (not keyed) map.

            orders.key_by(lambda o: o[0]).project(2, 0)
        """
        return self._values().project(*field_indexes)

    def _collect_sink(self) -> "DataStreamSink":
        # PyFlink carries a keyed stream's records as Row(key, value) and collects them so.
        return self._sink(SinkSpec(kind="collect", sink=KeyedCollect(self._t.id, self._key_selector)),
                          "Collect Stream Sink")

    def process(self, func, output_type=None) -> DataStream:
        """Runs a KeyedProcessFunction per record, with keyed state and timers (or a function of
        ``(value, ctx)``; a ProcessFunction is accepted too, without timers per key).

            keyed.process(lambda value, ctx: [(ctx.get_current_key(), value)])
        """
        if isinstance(func, fn.ProcessFunction):
            # Flink accepts a ProcessFunction on a keyed stream; it just has no timers per key.
            return self._one_input(ProcessSpec(function=func), output_type)
        return self._one_input(
            KeyedProcessSpec(function=fn.as_function(func, fn.KeyedProcessFunction, "process")),
            output_type)

    def reduce(self, func) -> DataStream:
        """Rolling reduce per key (Flink's ``reduce``): emits the running result for every record.

            ds.key_by(lambda r: r[0]).reduce(lambda a, b: (a[0], a[1] + b[1]))
        """
        return self._one_input(
            GroupedReduceSpec(function=fn.as_function(func, fn.ReduceFunction, "reduce")),
            self._t.output_type)

    def _aggregate(self, kind: str, field, first: bool = True) -> DataStream:
        op = f"{kind}({field!r}) on a KeyedStream"
        position = resolve_field(self._t.output_type, field, op)
        _check_aggregable(self._t.output_type, position, kind, op)
        agg = Aggregation(kind, field, position, first)
        return self._one_input(GroupedReduceSpec(aggregation=agg), self._t.output_type,
                               name="Keyed Aggregation")

    def sum(self, position_to_sum: Union[int, str] = 0) -> DataStream:
        """Rolling sum of a field per key: for every record, the key's first record with the running sum.

            ds.key_by(lambda r: r[0]).sum(1)        # or .sum("count") on a named ROW
        """
        return self._aggregate("sum", position_to_sum)

    def min(self, position_to_min: Union[int, str] = 0) -> DataStream:
        """Rolling minimum of a field per key: the key's first record with the field's running minimum.

            ds.key_by(lambda r: r[0]).min(1)
        """
        return self._aggregate("min", position_to_min)

    def max(self, position_to_max: Union[int, str] = 0) -> DataStream:
        """Rolling maximum of a field per key: the key's first record with the field's running maximum.

            ds.key_by(lambda r: r[0]).max(1)
        """
        return self._aggregate("max", position_to_max)

    def min_by(self, position_to_min_by: Union[int, str] = 0, first: bool = True) -> DataStream:
        """Rolling: the key's record with the smallest field so far (of equals the first, or the last
        with ``first=False``).

            ds.key_by(lambda r: r[0]).min_by(1)
        """
        return self._aggregate("min_by", position_to_min_by, first)

    def max_by(self, position_to_max_by: Union[int, str] = 0, first: bool = True) -> DataStream:
        """Rolling: the key's record with the largest field so far (of equals the first, or the last
        with ``first=False``).

            ds.key_by(lambda r: r[0]).max_by(1)
        """
        return self._aggregate("max_by", position_to_max_by, first)

    def window(self, window_assigner) -> "WindowedStream":
        """Windows each key's records with a WindowAssigner (Flink's ``window``).

            keyed.window(TumblingEventTimeWindows.of(Time.seconds(5))).sum(1)
        """
        _check_assigner(window_assigner, "window")
        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: int = 0) -> "WindowedStream":
        """PyFlink's count windows: tumbling (``slide`` 0) or sliding, each fired once it holds
        ``size`` elements, with ``CountWindow(id)`` as the window.

        >>> keyed.count_window(3).sum(1)          # every 3 elements of a key
        >>> keyed.count_window(4, 2).apply(f)     # elements 0-3, 2-5, 4-7, ... of a key

        Java Flink's ``countWindow(size, slide)`` differs (GlobalWindows + CountTrigger(slide) +
        CountEvictor(size): it fires every ``slide`` elements with the last ``size``, partial at
        first); build that with ``window(GlobalWindows.create())`` if it is what you want.
        """
        return WindowedStream(self, _count_window_assigner(size, slide, "count_window"))

    def _keyed_partition_error(self, *args, **kwargs):
        """Refused: a KeyedStream is partitioned by its key; repartition before ``key_by``.

            ds.rebalance().key_by(lambda r: r[0])
        """
        raise TypeError(
            "A KeyedStream is already partitioned by key; to repartition it differently, "
            "build the partitioning on the stream before key_by.")

    # Flink forbids changing the partitioning of a keyed stream.
    forward = rebalance = rescale = shuffle = broadcast = global_ = partition_custom = \
        _keyed_partition_error


def _check_assigner(assigner, call: str) -> None:
    if not hasattr(assigner, "assign_windows"):
        raise TypeError(
            f"{call}() expects a WindowAssigner such as "
            f"TumblingEventTimeWindows.of(Time.seconds(5)), got {assigner!r}")


def _count_window_assigner(size, slide, call: str):
    from runtime.datastream.window import CountSlidingWindowAssigner, CountTumblingWindowAssigner
    for what, value in (("size", size), ("slide", slide)):
        if not isinstance(value, int) or isinstance(value, bool) or value < (1 if what == "size" else 0):
            raise ValueError(f"{call}(): the {what} must be a positive number of records"
                             f"{' (or 0: tumbling)' if what == 'slide' else ''}, got {value!r}")
    return CountTumblingWindowAssigner(size) if slide == 0 else CountSlidingWindowAssigner(size, slide)


class WindowedStream:
    """``key_by(...).window(assigner)``: set trigger, evictor, lateness, then the function."""

    _non_keyed = False

    def __init__(self, stream: DataStream, window_assigner):
        self._stream = stream
        self._assigner = window_assigner
        self._trigger = None
        self._evictor = None
        self._allowed_lateness = 0
        self._late_tag: Optional[OutputTag] = None

    def get_execution_environment(self):
        """The StreamExecutionEnvironment of the windowed stream.

            env = keyed.window(GlobalWindows.create()).get_execution_environment()
        """
        return self._stream._env

    def get_input_type(self):
        """The declared type of the records entering the windows (None when undeclared).

            keyed.window(GlobalWindows.create()).get_input_type()
        """
        return self._stream._t.output_type

    def trigger(self, trigger) -> "WindowedStream":
        """Replaces the assigner's default trigger: when a window pane fires (and purges).

            keyed.window(GlobalWindows.create()).trigger(CountTrigger.of(100))
        """
        if not hasattr(trigger, "on_element"):
            raise TypeError(f"trigger() expects a Trigger such as CountTrigger.of(3), got {trigger!r}")
        if getattr(self._assigner, "merge_windows", None) and not trigger.can_merge():
            raise ValueError(
                f"A merging window assigner ({self._assigner}) cannot be used with a trigger that "
                f"does not support merging ({type(trigger).__name__}).")
        self._trigger = trigger
        return self

    def evictor(self, evictor) -> "WindowedStream":
        """Removes records from a pane before or after the window function (not with session windows).

            keyed.window(GlobalWindows.create()).trigger(CountTrigger.of(1)).evictor(CountEvictor.of(2))
        """
        if not hasattr(evictor, "evict_before"):
            raise TypeError(f"evictor() expects an Evictor such as CountEvictor.of(2), got {evictor!r}")
        if getattr(self._assigner, "merge_windows", None):
            raise ValueError(
                f"Cannot use a merging WindowAssigner ({self._assigner}) with an Evictor.")
        self._evictor = evictor
        return self

    def allowed_lateness(self, time) -> "WindowedStream":
        """Keeps event-time windows this long past their end: a late record fires its window again.

            keyed.window(TumblingEventTimeWindows.of(Time.minutes(1))).allowed_lateness(Time.seconds(30))
        """
        ms = to_millis(time, "allowed_lateness")
        if ms < 0:
            raise ValueError(f"The allowed lateness cannot be negative, got {ms} ms.")
        self._allowed_lateness = ms
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> "WindowedStream":
        """Sends records too late for their windows to a side output instead of dropping them.

            late = OutputTag("late", Types.TUPLE([Types.STRING(), Types.INT()]))
            windowed = keyed.window(TumblingEventTimeWindows.of(Time.seconds(5)))
            counts = windowed.side_output_late_data(late).sum(1)
            counts.get_side_output(late).print()
        """
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"side_output_late_data() expects an OutputTag, got {output_tag!r}")
        self._late_tag = output_tag
        return self

    # ---- the window function -----------------------------------------------------------

    def _build(self, udf_names: list[str], output_type, **spec) -> DataStream:
        trigger = self._trigger or self._assigner.get_default_trigger()
        parts = [str(self._assigner), type(trigger).__name__]
        if self._evictor is not None:
            parts.append(type(self._evictor).__name__)
        name = "Window(" + ", ".join(parts + udf_names) + ")"
        operator = WindowSpec(
            assigner=self._assigner, trigger=trigger, evictor=self._evictor,
            # Flink applies allowed lateness to event-time windows only.
            allowed_lateness=self._allowed_lateness if self._assigner.is_event_time() else 0,
            late_data_output_tag=self._late_tag, non_keyed=self._non_keyed, **spec)
        out = self._stream._one_input(operator, output_type, name=name)
        if self._non_keyed:
            out._t.set_parallelism(1)
            out._t.non_parallel = True
        return out

    def _window_function(self, window_function, keyed_iface, all_iface, call: str):
        if window_function is None:
            return None, None, "PassThroughWindowFunction"
        process_iface = fn.ProcessAllWindowFunction if self._non_keyed else fn.ProcessWindowFunction
        if isinstance(window_function, process_iface):
            return window_function, "process", fn.function_name(window_function)
        iface = all_iface if self._non_keyed else keyed_iface
        f = fn.as_function(window_function, iface, call)
        return f, "apply", fn.function_name(f)

    def reduce(self, reduce_function, window_function=None, output_type=None) -> DataStream:
        """Reduces each pane incrementally; a window function, if given, then gets the one reduced record
        with the key and the window.

            windowed.reduce(lambda a, b: (a[0], a[1] + b[1]))
        """
        r = fn.as_function(reduce_function, fn.ReduceFunction, "reduce")
        wf, kind, wname = self._window_function(window_function, fn.WindowFunction,
                                                fn.AllWindowFunction, "reduce")
        out_type = output_type if wf is not None else self.get_input_type()
        return self._build([fn.function_name(r), wname], out_type, reduce_function=r,
                           window_function=wf, window_function_kind=kind)

    def aggregate(self, aggregate_function, window_function=None, accumulator_type=None,
                  output_type=None) -> DataStream:
        """Aggregates each pane incrementally with an AggregateFunction (an accumulator per key and
        window); a window function, if given, then gets the result with the key and the window.

            windowed.aggregate(Average(), output_type=Types.DOUBLE())
        """
        if not isinstance(aggregate_function, fn.AggregateFunction):
            raise TypeError(
                "aggregate() expects an AggregateFunction (create_accumulator, add, get_result, "
                f"merge), got {aggregate_function!r}")
        wf, kind, wname = self._window_function(window_function, fn.WindowFunction,
                                                fn.AllWindowFunction, "aggregate")
        return self._build([fn.function_name(aggregate_function), wname], output_type,
                           aggregate_function=aggregate_function, window_function=wf,
                           window_function_kind=kind)

    def apply(self, window_function, output_type=None) -> DataStream:
        """Runs a WindowFunction on a pane's records when it fires: ``apply(key, window, inputs)``
        (``apply(window, inputs)`` after ``window_all``).

            windowed.apply(lambda key, window, inputs: [(key, window.end, len(list(inputs)))])
        """
        iface = fn.AllWindowFunction if self._non_keyed else fn.WindowFunction
        f = fn.as_function(window_function, iface, "apply")
        return self._build([fn.function_name(f)], output_type, window_function=f,
                           window_function_kind="apply")

    def process(self, process_window_function, output_type=None) -> DataStream:
        """Runs a ProcessWindowFunction on a pane's records when it fires: ``process(key, context,
        elements)``, with ``context.window()``, window and global state (``process(context, elements)``
        after ``window_all``).

            windowed.process(lambda key, ctx, elements: [(key, ctx.window().end, len(list(elements)))])
        """
        iface = fn.ProcessAllWindowFunction if self._non_keyed else fn.ProcessWindowFunction
        f = fn.as_function(process_window_function, iface, "process")
        return self._build([fn.function_name(f)], output_type, window_function=f,
                           window_function_kind="process")

    def _aggregation(self, kind: str, field, first: bool = True) -> DataStream:
        op = f"{kind}({field!r}) on a window"
        position = resolve_field(self.get_input_type(), field, op)
        _check_aggregable(self.get_input_type(), position, kind, op)
        agg = Aggregation(kind, field, position, first)
        return self._build([agg.class_name, "PassThroughWindowFunction"], self.get_input_type(),
                           aggregation=agg)

    def sum(self, position_to_sum: Union[int, str] = 0) -> DataStream:
        """Sum of a field over each pane: its first record with the sum (on tumbling and sliding
        windows with their default trigger, pre-aggregated before the shuffle).

            keyed.window(TumblingProcessingTimeWindows.of(Time.seconds(5))).sum("count")
        """
        return self._aggregation("sum", position_to_sum)

    def min(self, position_to_min: Union[int, str] = 0) -> DataStream:
        """Minimum of a field over each pane: its first record with the minimum.

            windowed.min(1)
        """
        return self._aggregation("min", position_to_min)

    def max(self, position_to_max: Union[int, str] = 0) -> DataStream:
        """Maximum of a field over each pane: its first record with the maximum.

            windowed.max(1)
        """
        return self._aggregation("max", position_to_max)

    def min_by(self, position_to_min_by: Union[int, str] = 0, first: bool = True) -> DataStream:
        """The pane's record with the smallest field (of equals the first, or the last with ``first=False``).

            windowed.min_by("price")
        """
        return self._aggregation("min_by", position_to_min_by, first)

    def max_by(self, position_to_max_by: Union[int, str] = 0, first: bool = True) -> DataStream:
        """The pane's record with the largest field (of equals the first, or the last with ``first=False``).

            windowed.max_by("price")
        """
        return self._aggregation("max_by", position_to_max_by, first)


class AllWindowedStream(WindowedStream):
    """``window_all(assigner)``: one window operator at parallelism 1 over the whole stream."""

    _non_keyed = True

    def __init__(self, stream: DataStream, window_assigner):
        keyed = stream.key_by(NullByteKeySelector())
        super().__init__(keyed, window_assigner)


class ConnectedStreams:
    """Two streams processed by one two-input operator (``connect``)."""

    def __init__(self, stream1: DataStream, stream2: DataStream):
        if stream1._env is not stream2._env:
            raise ValueError("connect() of streams from different StreamExecutionEnvironments")
        self.stream1 = stream1
        self.stream2 = stream2

    def key_by(self, key_selector1, key_selector2, key_type=None) -> "ConnectedStreams":
        """Keys both inputs, each by its own selector, so a KeyedCoProcessFunction gets state and timers.

            orders.connect(payments).key_by(lambda o: o.id, lambda p: p.order_id)
        """
        return ConnectedStreams(self.stream1.key_by(key_selector1, key_type),
                                self.stream2.key_by(key_selector2, key_type))

    def _is_keyed(self) -> bool:
        return isinstance(self.stream1, KeyedStream) and isinstance(self.stream2, KeyedStream)

    def _two_input(self, operator: OperatorSpec, output_type) -> DataStream:
        env = self.stream1._env
        keys = {}
        if self._is_keyed():
            keys = {"state_key_selector1": self.stream1._key_selector,
                    "state_key_selector2": self.stream2._key_selector}
        t = env._add(TwoInputTransformation(
            id=env._new_id(), name=operator.default_name, output_type=output_type,
            input1=self.stream1._t, input2=self.stream2._t, operator=operator, **keys))
        return DataStream(env, t)

    @staticmethod
    def _check(func, iface, call: str):
        if not isinstance(func, iface):
            raise TypeError(f"ConnectedStreams.{call}() expects a {iface.__name__}, got {func!r}")
        return func

    def map(self, func, output_type=None) -> DataStream:
        """A CoMapFunction: ``map1`` for each record of the first input, ``map2`` for the second's.

            celsius.connect(fahrenheit).map(ToCelsius(), output_type=Types.DOUBLE())
        """
        return self._two_input(CoMapSpec(function=self._check(func, fn.CoMapFunction, "map")),
                               output_type)

    def flat_map(self, func, output_type=None) -> DataStream:
        """A CoFlatMapFunction: ``flat_map1``/``flat_map2`` yield any number of records per input record.

            control.connect(words).flat_map(FilterBlocked(), output_type=Types.STRING())
        """
        return self._two_input(
            CoFlatMapSpec(function=self._check(func, fn.CoFlatMapFunction, "flat_map")), output_type)

    def process(self, func, output_type=None) -> DataStream:
        """A CoProcessFunction, or after ``key_by`` a KeyedCoProcessFunction (keyed state and timers).

            orders.connect(payments).key_by(lambda o: o.id, lambda p: p.order_id).process(Match())
        """
        if isinstance(func, fn.KeyedCoProcessFunction):
            if not self._is_keyed():
                raise TypeError(
                    "KeyedCoProcessFunction can only be used when both input streams are of type "
                    "KeyedStream: call key_by(key_selector1, key_selector2) first.")
            return self._two_input(KeyedCoProcessSpec(function=func), output_type)
        return self._two_input(
            CoProcessSpec(function=self._check(func, fn.CoProcessFunction, "process")), output_type)


class BroadcastStream:
    """``stream.broadcast(descriptor, ...)``: records for every parallel instance of the operator it
    is connected to, with the broadcast states they update (Flink's BroadcastStream)."""

    def __init__(self, stream: DataStream, descriptors: tuple):
        self._stream = stream
        self.broadcast_state_descriptors = descriptors

    def get_execution_environment(self):
        """The StreamExecutionEnvironment of the stream.

            env = rules.broadcast(RULES).get_execution_environment()
        """
        return self._stream._env


class BroadcastConnectedStream:
    """A stream (keyed or not) connected to a BroadcastStream: ``process`` takes a
    KeyedBroadcastProcessFunction after ``key_by``, a BroadcastProcessFunction otherwise."""

    def __init__(self, stream: DataStream, broadcast_stream: BroadcastStream):
        if stream._env is not broadcast_stream._stream._env:
            raise ValueError("connect() of streams from different StreamExecutionEnvironments")
        self.non_broadcast_stream = stream
        self.broadcast_stream = broadcast_stream

    def process(self, func, output_type=None) -> DataStream:
        """Runs the function's ``process_element`` on the stream's records (broadcast state read only)
        and ``process_broadcast_element`` on the broadcast records (broadcast state writable).

            events.key_by(lambda e: e.user).connect(rules.broadcast(RULES)).process(MatchRules())
        """
        stream, keyed = self.non_broadcast_stream, isinstance(self.non_broadcast_stream, KeyedStream)
        descriptors = self.broadcast_stream.broadcast_state_descriptors
        if isinstance(func, fn.KeyedBroadcastProcessFunction):
            if not keyed:
                raise TypeError("A KeyedBroadcastProcessFunction can only be used on a keyed stream: "
                                "call key_by(...) on the stream before connect(), or implement "
                                "BroadcastProcessFunction.")
            spec, keys = KeyedBroadcastProcessSpec(function=func, descriptors=descriptors), \
                {"state_key_selector1": stream._key_selector}
        elif isinstance(func, fn.BroadcastProcessFunction):
            if keyed:
                raise TypeError("A BroadcastProcessFunction can only be used on a non-keyed stream: "
                                "implement KeyedBroadcastProcessFunction for a keyed one.")
            spec, keys = BroadcastProcessSpec(function=func, descriptors=descriptors), {}
        else:
            raise TypeError("BroadcastConnectedStream.process() expects a BroadcastProcessFunction or a "
                            f"KeyedBroadcastProcessFunction, got {func!r}")
        env = stream._env
        t = env._add(TwoInputTransformation(
            id=env._new_id(), name=spec.default_name, output_type=output_type, input1=stream._t,
            input2=self.broadcast_stream._stream._t, operator=spec, **keys))
        return DataStream(env, t)
