"""Executing operators: Flink's StreamOperators, a batch of records at a time.

Records travel through a chain as two parallel lists, values and timestamps (None: no
timestamp). User functions are called once per record; a failure names the operator, the
subtask and the record, with the original traceback.
"""
from __future__ import annotations

import logging
import traceback
from functools import partial
from itertools import chain, compress, repeat
from operator import is_not, length_hint
from typing import Callable, Optional

from runtime.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from runtime.datastream import functions as fn
from runtime.datastream.output_tag import is_side_output
from runtime.datastream.state import ValueStateDescriptor
from runtime.metrics.registry import TaskMetrics
from runtime.state.snapshot import ROLLING_AGGREGATE
from runtime.state.backend import DEFAULT_STATE_BACKEND, ROCKSDB, VOID_NAMESPACE, KeyedStateBackend
from runtime.state.heap import HeapKeyedStateBackend
from runtime.state.key_groups import key_type_of
from runtime.task.sink_writer import WriterInitContext
from runtime.task.record_helpers import aggregator, extreme
from runtime.task.timer_service import InternalTimerService

log = logging.getLogger(__name__)


class UserCodeException(RuntimeError):
    """A user function failed: names the operator, the subtask (i/p), the record and, when the
    source chain knows it, where the record came from (a file and line, a split and offset)."""

    def __init__(self, where: str, record, error: BaseException, trace: str, origin: Optional[str] = None,
                 batch: Optional[list] = None, index: Optional[int] = None):
        self.where, self.record, self.error, self.trace, self.origin = where, record, error, trace, origin
        # The failed operator's input batch and the record's index in it: the source task tells
        # the record's origin when that batch is the one it read (runtime.task.stream_task).
        self.batch, self.index = batch, index
        # The cause first (operator, subtask, reason), then the record and where it came from.
        at = f", {origin}" if origin else ""
        super().__init__(f"{where} failed: {type(error).__name__}: {error} (on record {record!r}{at})\n"
                         f"--- original traceback ---\n{trace}")

    def at(self, origin: str) -> "UserCodeException":
        return UserCodeException(self.where, self.record, self.error, self.trace, origin)


class Output:
    """Where an operator's records go: chained operators and/or the task's record writers."""

    def __init__(self):
        self.main: list = []        # (target, input_index)
        self.side: dict = {}        # tag_id -> [(target, input_index)]

    def add(self, target, input_index: int, tag_id: Optional[str] = None) -> None:
        (self.main if tag_id is None else self.side.setdefault(tag_id, [])).append((target, input_index))

    def collect(self, values: list, timestamps: list) -> None:
        if values:
            for target, index in self.main:
                target.process_batch(values, timestamps, index)

    def collect_side(self, tag_id: str, values: list, timestamps: list) -> None:
        if values:
            for target, index in self.side.get(tag_id, ()):
                target.process_batch(values, timestamps, index)

    def emit_watermark(self, watermark: int) -> None:
        for target, index in self.main + [t for ts in self.side.values() for t in ts]:
            target.process_watermark(watermark, index)

    def emit_idle(self) -> None:
        for target, index in self.main + [t for ts in self.side.values() for t in ts]:
            target.process_idle(index)


class SideOutputs:
    """What a function emitted to side outputs, per tag, sent on after its main output.

    PyFlink's functions emit to a side output by yielding ``(output_tag, value)`` (its rule: a
    tuple whose first element is an OutputTag); ``ctx.output(output_tag, value)`` does the same.
    A tag no ``get_side_output`` asked for goes nowhere, as in Flink.
    """

    def __init__(self):
        self.by_tag: dict = {}      # tag_id -> ([values], [timestamps])

    def add(self, output_tag, value, timestamp) -> None:
        values, stamps = self.by_tag.setdefault(output_tag.tag_id, ([], []))
        values.append(value)
        stamps.append(timestamp)

    def split(self, results, timestamp, out: list, out_ts: list) -> None:
        """Append ``results`` to ``out`` (main output), the side-output ones to their tags."""
        n = len(out)
        for r in results:
            if is_side_output(r):
                self.add(r[0], r[1], timestamp)
            else:
                out.append(r)
        out_ts.extend(repeat(timestamp, len(out) - n))

    def flush(self, output: Output) -> None:
        by_tag, self.by_tag = self.by_tag, {}
        for tag_id, (values, stamps) in by_tag.items():
            output.collect_side(tag_id, values, stamps)


class TaskContext:
    """What an operator knows of the subtask running it."""

    def __init__(self, task_name: str, subtask_index: int, parallelism: int, max_parallelism: int,
                 attempt_number: int, processing_time: int, job_parameters: dict,
                 key_group_range=None, epoch: int = 0, sink_writers: Optional[dict] = None,
                 state_backend: str = DEFAULT_STATE_BACKEND, state_dir: Optional[str] = None,
                 barrier: bool = False, end_of_input: bool = False, metric_counts: Optional[dict] = None):
        self.epoch = epoch
        # User metrics of the subtask, its counters and meters continuing from the run's totals.
        self.metrics = TaskMetrics(metric_counts)
        # The epoch ends in a checkpoint barrier (or, without checkpoints, commits its sinks), and
        # whether the job's bounded input ends with it: what a sink writer prepares to commit.
        self.barrier = barrier
        self.end_of_input = end_of_input
        # Keyed state: the backend (state.backend.type: hashmap | rocksdb) and, for rocksdb, the
        # directory of this subtask's stores (one folder per operator under it); without one,
        # each operator's store is a temporary directory removed when the task ends.
        self.state_backend = state_backend
        self.state_dir = state_dir
        self.sink_writers = sink_writers or {}      # sink node id -> writer class (from the driver)
        self.task_name = task_name
        self.subtask_index = subtask_index
        self.parallelism = parallelism
        self.max_parallelism = max_parallelism
        self.attempt_number = attempt_number
        self.processing_time = processing_time
        self.job_parameters = job_parameters
        self.key_group_range = key_group_range
        # BATCH mode (execution.runtime-mode): final results only, watermarks at the end only.
        self.batch = False

    @property
    def subtask_label(self) -> str:
        return f"({self.subtask_index + 1}/{self.parallelism})"


def create_keyed_state_backend(node, ctx: TaskContext, clock) -> KeyedStateBackend:
    """The keyed state backend of an operator, as the task's ``state.backend.type`` says."""
    if ctx.state_backend == ROCKSDB:
        import os
        import tempfile
        from runtime.state.rocksdb import (
            CorruptStateStoreException, RocksDBKeyedStateBackend, StateStoreInUseException)

        def temporary() -> RocksDBKeyedStateBackend:
            return RocksDBKeyedStateBackend(node.operator_name, ctx.key_group_range, ctx.max_parallelism,
                                            tempfile.mkdtemp(prefix="sluice-state-"), clock=clock, temporary=True)

        def local(path: str) -> RocksDBKeyedStateBackend:
            return RocksDBKeyedStateBackend.open(node.operator_name, ctx.key_group_range, ctx.max_parallelism,
                                                 path, clock=clock)

        if not ctx.state_dir:
            return temporary()
        path = os.path.join(ctx.state_dir, node.operator_id)
        try:
            return local(path)
        except CorruptStateStoreException as e:
            # Never trusted: removed, and rebuilt from the checkpoint's files (a miss).
            log.warning("%s %s: %s; rebuilding it from the checkpoint", node.operator_name, ctx.subtask_label, e)
            RocksDBKeyedStateBackend.destroy(path)
            return local(path)
        except StateStoreInUseException as e:
            # Another attempt of this subtask holds it (a speculative or orphaned task): this one
            # rebuilds into a store of its own, removed when it ends.
            log.warning("%s %s: %s; using a temporary store", node.operator_name, ctx.subtask_label, e)
            return temporary()
    return HeapKeyedStateBackend(node.operator_name, ctx.key_group_range, ctx.max_parallelism, clock=clock)


class StreamingRuntimeContext(fn.RuntimeContext):
    def __init__(self, operator: "TaskOperator"):
        self._op = operator

    def get_task_name(self) -> str:
        return self._op.ctx.task_name

    def get_number_of_parallel_subtasks(self) -> int:
        return self._op.ctx.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._op.ctx.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self._op.ctx.subtask_index

    def get_attempt_number(self) -> int:
        return self._op.ctx.attempt_number

    def get_task_name_with_subtasks(self) -> str:
        return f"{self._op.ctx.task_name} {self._op.ctx.subtask_label}"

    def get_job_parameter(self, key: str, default_value=None):
        return self._op.ctx.job_parameters.get(key, default_value)

    def _state(self, descriptor):
        backend = self._op.backend
        if backend is None:
            raise RuntimeError(
                f"Keyed state can only be used on a 'keyed stream', i.e., after a 'key_by()' "
                f"operation: '{self._op.name}' is not keyed.")
        return backend.get_partitioned_state(descriptor)

    get_state = get_list_state = get_map_state = get_reducing_state = get_aggregating_state = _state

    def get_metrics_group(self):
        return self._op.ctx.metrics.group(self._op.name)


class _TimerService(fn.TimerService):
    def __init__(self, operator: "TaskOperator"):
        self._op = operator

    def current_processing_time(self) -> int:
        return self._op.ctx.processing_time

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def _timers(self) -> InternalTimerService:
        if self._op.timers is None:
            raise RuntimeError(
                f"Setting timers is only supported on a keyed streams: '{self._op.name}' is not keyed. "
                "Use key_by(...).process(KeyedProcessFunction).")
        return self._op.timers

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._timers().register_processing_time_timer(VOID_NAMESPACE, timestamp)

    def register_event_time_timer(self, timestamp: int) -> None:
        self._timers().register_event_time_timer(VOID_NAMESPACE, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._timers().delete_processing_time_timer(VOID_NAMESPACE, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._timers().delete_event_time_timer(VOID_NAMESPACE, timestamp)


class TaskOperator:
    """Base of the executing operators."""

    def __init__(self, node, ctx: TaskContext):
        self.node = node
        self.name = node.operator_name
        self.spec = node.operator
        self.ctx = ctx
        self.output = Output()
        self.current_watermark = MIN_WATERMARK
        self.input_watermarks = [MIN_WATERMARK, MIN_WATERMARK]
        self.backend: Optional[KeyedStateBackend] = None
        self.timers: Optional[InternalTimerService] = None
        self.key_selectors = node.state_key_selectors
        if node.is_keyed:
            self.backend = create_keyed_state_backend(node, ctx, clock=lambda: self.ctx.processing_time)
            self.backend.key_type = key_type_of(node.state_key_selectors[0])    # as key_by hashes keys
            self.timers = InternalTimerService(self.backend)
        self.records_in = 0
        self.records_out = 0
        self.input_type = None      # the type of the first input's records, set by the task

    # ---- life cycle --------------------------------------------------------------------

    def user_functions(self) -> list:
        return [getattr(self.spec, "function", None)]

    def open(self) -> None:
        runtime_context = StreamingRuntimeContext(self)
        for f in self.user_functions():
            if isinstance(f, fn.Function):
                self._call(f.open, None, runtime_context)

    def close(self) -> None:
        for f in self.user_functions():
            if isinstance(f, fn.Function):
                self._call(f.close, None)

    def dispose(self) -> None:
        """The task is done: drop state and buffers now. Operators, their contexts and the task's
        writers reference each other, so what they hold would otherwise wait for a cyclic
        collection, which costs ~2 µs per record held (a second per 500,000)."""
        if self.backend is not None:
            self.backend.dispose()      # a RocksDB store is closed (and a temporary one removed)
        self.backend = self.timers = None

    def end_input(self) -> None:
        """The bounded input ended: Flink sends MAX_WATERMARK, so every event-time timer fires."""

    # ---- records and time --------------------------------------------------------------

    def process_batch(self, values: list, timestamps: list, input_index: int) -> None:
        raise NotImplementedError

    def process_watermark(self, watermark: int, input_index: int) -> None:
        if self.spec.two_input:
            self.input_watermarks[input_index - 1] = watermark
            watermark = min(self.input_watermarks)
        if watermark <= self.current_watermark:
            return
        self.current_watermark = watermark
        if self.timers is not None:
            self.timers.advance_watermark(watermark, self.on_event_time)
        self.output.emit_watermark(watermark)

    def process_idle(self, input_index: int) -> None:
        if self.spec.two_input:
            # An idle input no longer holds back the combined watermark.
            self.input_watermarks[input_index - 1] = MAX_WATERMARK
            other = self.input_watermarks[2 - input_index]
            if other != MAX_WATERMARK:
                self.process_watermark(other, 3 - input_index)
                return
        self.output.emit_idle()

    def advance_processing_time(self, time: int) -> None:
        if self.timers is not None:
            self.timers.advance_processing_time(time, self.on_processing_time)

    def on_event_time(self, timestamp: int, key, namespace) -> None:
        pass

    def on_processing_time(self, timestamp: int, key, namespace) -> None:
        pass

    # ---- state -------------------------------------------------------------------------

    # Whether all of the operator's state is in its keyed backend (and so in a local store, or
    # in its backend's changes for an incremental snapshot).
    state_in_backend = True

    def keeps_local_state(self) -> bool:
        """Whether the operator's state stays on the executor's disk between epochs."""
        return self.state_in_backend and getattr(self.backend, "local", False)

    def snapshot(self, incremental: bool = False) -> dict:
        # Keyed state and timers, whole or what changed since the last snapshot. The watermarks
        # travel with the task's event time (runtime.task.watermarks), also without state.
        if self.backend is None:
            return {}
        maxp = self.ctx.max_parallelism
        if incremental:
            keyed, timers = self.backend.changes(), self.timers.changes(maxp)
        else:
            keyed, timers = self.backend.snapshot(), self.timers.snapshot(maxp)
        # Iterators: the snapshot's writer takes them in chunks (state.snapshot.snapshot_to_table).
        return {"keyed": keyed, "timers": timers,
                "types": {name: s.descriptor.type_info for name, s in self.backend.states.items()}}

    def restore(self, snapshot: dict) -> None:
        """The state of a snapshot chain (a full snapshot, then increments with deletions)."""
        if self.backend is not None:
            keyed = snapshot.get("keyed", ())
            (self.backend.apply if getattr(keyed, "deletions", False) else self.backend.restore)(keyed)
            self.timers.restore(snapshot.get("timers", ()), self.ctx.key_group_range)

    # ---- helpers -----------------------------------------------------------------------

    def key_of(self, value, input_index: int = 0):
        selector = self.key_selectors[max(input_index - 1, 0)]
        return self._call(selector.get_key, value, value)

    def keys_of(self, values: list, input_index: int = 0) -> list:
        """The keys of a batch of records, announced to the keyed backend (``prepare_keys``)."""
        keys = self.each(self.key_selectors[max(input_index - 1, 0)].get_key, values)
        self.backend.prepare_keys(keys)
        return keys

    def _call(self, f: Callable, record, *args):
        try:
            return f(*args)
        except UserCodeException:
            raise
        except Exception as e:
            self.fail(e, record)

    def _call_drained(self, f: Callable, record, *args) -> list:
        """What ``f`` returned or yielded, as a list: a generator is drained here, so that its
        failure is named like a return's (user functions yield their results lazily)."""
        def drained():
            results = f(*args)
            return [] if results is None else list(results)
        return self._call(drained, record)

    def each(self, f: Callable, *columns: list) -> list:
        """``f`` applied to each record (``map(f, *columns)``); a failure names the record.

        Each record is seen once: ``extend`` keeps what ``f`` returned before it failed, which
        tells the failed record without calling ``f`` again (user functions may have effects)."""
        out: list = []
        try:
            out.extend(map(f, *columns))
        except Exception as e:
            if columns and len(out) < len(columns[0]):
                self.fail(e, columns[0][len(out)], columns[0], len(out))
            self.fail(e, None)
        return out

    def each_keyed(self, f: Callable, values: list, input_index: int = 0, drain: bool = False) -> list:
        """``each``, with each record's key current in the keyed backend while ``f`` runs: PyFlink
        runs a map, flat_map or filter of a keyed stream (and a CoMap/CoFlatMap of two keyed
        streams) as a keyed process function, so its state is per key. ``drain``: what ``f``
        yields is drained while its key is current (a generator runs lazily)."""
        if self.backend is None or self.key_selectors[max(input_index - 1, 0)] is None:
            return self.each(f, values)
        set_current_key = self.backend.set_current_key

        def keyed(value, key):
            set_current_key(key)
            result = f(value)
            return list(result) if drain and result is not None else result
        return self.each(keyed, values, self.keys_of(values, input_index))

    def flat_map(self, f: Callable, values: list, timestamps: list, input_index: int = 0) -> None:
        """Emit what ``f`` gives for each record (a list, a generator, or None for nothing),
        with the record's timestamp. ``f`` is called once per record (``each``); what it gives
        is drained here, and a failure while draining names its record: the results iterator
        has handed out exactly up to that record."""
        results = self.each_keyed(f, values, input_index, drain=True)
        out: list = []
        pending = iter(results)
        try:
            if _no_timestamps(timestamps):      # the common case, at C speed
                out.extend(chain.from_iterable(filter(_is_not_none, pending) if None in results else pending))
                out_ts = [None] * len(out)
            else:
                out_ts = []
                for t, result in zip(timestamps, pending):
                    if result is not None:
                        n = len(out)
                        out.extend(result)
                        out_ts.extend([t] * (len(out) - n))
        except Exception as e:
            failed = len(results) - length_hint(pending) - 1
            self.fail(e, values[failed], values, failed)
        self.output.collect(out, out_ts)

    def fail(self, error: BaseException, record, batch: Optional[list] = None, index: Optional[int] = None) -> None:
        """Raise the failure on ``record``, ``batch[index]`` when the operator knows its position."""
        raise UserCodeException(f"{self.name} {self.ctx.subtask_label}", record, error,
                                traceback.format_exc(), batch=batch, index=index) from error


class SourceOperator(TaskOperator):
    """The head of a source chain: the task reads the splits and pushes their batches here."""

    def process_batch(self, values, timestamps, input_index):
        self.output.collect(values, timestamps)


class StreamMap(TaskOperator):
    def process_batch(self, values, timestamps, input_index):
        self.output.collect(self.each_keyed(fn.method_of(self.spec.function, "map"), values, input_index),
                            timestamps)


def _no_timestamps(timestamps: list) -> bool:
    return timestamps.count(None) == len(timestamps)


class StreamFlatMap(TaskOperator):
    def process_batch(self, values, timestamps, input_index):
        self.flat_map(fn.method_of(self.spec.function, "flat_map"), values, timestamps, input_index)


_is_not_none = partial(is_not, None)


class StreamFilter(TaskOperator):
    def process_batch(self, values, timestamps, input_index):
        keep = self.each_keyed(fn.method_of(self.spec.function, "filter"), values, input_index)
        self.output.collect(list(compress(values, keep)), list(compress(timestamps, keep)))


class _ProcessContext(fn.KeyedProcessFunction.OnTimerContext, fn.KeyedCoProcessFunction.OnTimerContext,
                      fn.ProcessFunction.Context):
    """The ``ctx`` of process functions: timestamp, timers, side outputs, current key."""

    def __init__(self, operator: TaskOperator):
        self._op = operator
        self._timer_service = _TimerService(operator)
        self._timestamp = None
        self._key = None
        self._domain = None
        self.side_outputs = SideOutputs()

    def timestamp(self):
        return self._timestamp

    def timer_service(self):
        return self._timer_service

    def get_current_key(self):
        return self._key

    def time_domain(self):
        return self._domain

    def output(self, output_tag, value) -> None:
        self.side_outputs.add(output_tag, value, self._timestamp)


class _ProcessBase(TaskOperator):
    """Process functions, one- and two-input, keyed or not."""

    def open(self):
        self.pctx = _ProcessContext(self)
        super().open()

    def _run(self, method: Callable, values, timestamps, input_index: int) -> None:
        ctx = self.pctx
        out, out_ts = [], []
        # The inputs with a key selector (not the broadcast side of a keyed broadcast operator).
        keyed = self.backend is not None and self.key_selectors[max(input_index - 1, 0)] is not None
        keys = self.keys_of(values, input_index) if keyed else None
        i = 0
        try:
            for i, (v, t) in enumerate(zip(values, timestamps)):
                ctx._timestamp = t
                if keyed:
                    ctx._key = keys[i]
                    self.backend.set_current_key(ctx._key)
                result = method(v, ctx)
                if result is not None:
                    ctx.side_outputs.split(result, t, out, out_ts)
        except UserCodeException:
            raise
        except Exception as e:
            self.fail(e, values[i], values, i)
        self.output.collect(out, out_ts)
        ctx.side_outputs.flush(self.output)

    def _on_timer(self, timestamp: int, key, domain) -> None:
        on_timer = getattr(self.spec.function, "on_timer", None)
        if on_timer is None:
            return
        ctx = self.pctx
        ctx._timestamp, ctx._key, ctx._domain = timestamp, key, domain
        results = self._call_drained(on_timer, f"timer {timestamp} of key {key!r}", timestamp, ctx)
        values, stamps = [], []
        ctx.side_outputs.split(results, timestamp if domain == fn.TimeDomain.EVENT_TIME else None, values, stamps)
        self.output.collect(values, stamps)
        ctx.side_outputs.flush(self.output)

    def on_event_time(self, timestamp, key, namespace):
        self._on_timer(timestamp, key, fn.TimeDomain.EVENT_TIME)

    def on_processing_time(self, timestamp, key, namespace):
        self._on_timer(timestamp, key, fn.TimeDomain.PROCESSING_TIME)


class ProcessOperator(_ProcessBase):
    def process_batch(self, values, timestamps, input_index):
        self._run(self.spec.function.process_element, values, timestamps, input_index)


class CoProcessOperator(_ProcessBase):
    def process_batch(self, values, timestamps, input_index):
        f = self.spec.function
        method = f.process_element1 if input_index == 1 else f.process_element2
        self._run(method, values, timestamps, input_index)


class CoStreamMap(TaskOperator):
    def process_batch(self, values, timestamps, input_index):
        f = self.spec.function.map1 if input_index == 1 else self.spec.function.map2
        self.output.collect(self.each_keyed(f, values, input_index), timestamps)


class CoStreamFlatMap(TaskOperator):
    def process_batch(self, values, timestamps, input_index):
        f = self.spec.function.flat_map1 if input_index == 1 else self.spec.function.flat_map2
        self.flat_map(f, values, timestamps, input_index)


class StreamGroupedReduceOperator(TaskOperator):
    """Rolling reduce/aggregation: emits the updated value for every record, as Flink does; in
    BATCH mode only each key's final value, at the end of input (Flink's BatchGroupedReduceOperator,
    stamped as there with the end of time)."""

    def open(self):
        super().open()
        spec = self.spec
        self.reduce = spec.function.reduce if spec.function is not None else aggregator(spec.aggregation)
        self.state = self.backend.get_partitioned_state(ValueStateDescriptor(ROLLING_AGGREGATE, self.input_type))

    def process_batch(self, values, timestamps, input_index):
        out = []
        backend, state, reduce = self.backend, self.state, self.reduce
        v = None
        keys = self.keys_of(values)
        try:
            for v, key in zip(values, keys):
                backend.set_current_key(key)
                current = state.value()
                result = v if current is None else reduce(current, v)
                state.update(result)
                if self.ctx.batch:
                    self.timers.register_event_time_timer(VOID_NAMESPACE, MAX_WATERMARK)
                else:
                    out.append(result)
        except UserCodeException:
            raise
        except Exception as e:
            self.fail(e, v)
        self.output.collect(out, timestamps)

    def on_event_time(self, timestamp, key, namespace):
        self.output.collect([self.state.value()], [MAX_WATERMARK])


def assign_timestamps(op: TaskOperator, assigner, values: list, timestamps: list) -> list:
    """The assigner's timestamp of each record (its previous timestamp, or Long.MIN_VALUE)."""
    previous = repeat(MIN_WATERMARK) if _no_timestamps(timestamps) else \
        [MIN_WATERMARK if t is None else t for t in timestamps]
    return op.each(assigner.extract_timestamp, values, previous)


class TimestampsAndWatermarksOperator(TaskOperator):
    """Assigns timestamps and generates watermarks mid-stream (``assign_timestamps_and_watermarks``).

    Upstream watermarks are dropped, except the final MAX_WATERMARK, as in Flink.
    """

    def __init__(self, node, ctx):
        super().__init__(node, ctx)     # state is restored before open(), as in Flink
        self.strategy = self.spec.watermark_strategy
        self.generator = self.strategy.create_generator()
        self.assigner = self.strategy.timestamp_assigner

    def process_batch(self, values, timestamps, input_index):
        if self.assigner is not None:
            timestamps = assign_timestamps(self, self.assigner, values, timestamps)
        latest = extreme(max, timestamps)
        if latest is not None:
            # Periodic generators only track the largest timestamp: one call per batch.
            self.generator.on_event(latest)
        self.output.collect(values, timestamps)
        watermark = self.generator.current_watermark()
        if watermark > self.current_watermark and not self.ctx.batch:     # BATCH: only the final one
            self.current_watermark = watermark
            self.output.emit_watermark(watermark)

    def process_watermark(self, watermark, input_index):
        if watermark == MAX_WATERMARK and self.current_watermark < MAX_WATERMARK:
            self.current_watermark = watermark
            self.output.emit_watermark(watermark)

    def snapshot(self):
        return {"generator": getattr(self.generator, "max_timestamp", None)}

    def restore(self, snapshot):
        super().restore(snapshot)
        if snapshot.get("generator") is not None:
            self.generator.max_timestamp = snapshot["generator"]


class StreamSink(TaskOperator):
    """A sink: its records go to the writer the driver chose for its descriptor (print, collect,
    Delta, a user SinkFunction: ``runtime.task.sink_writer``); when the epoch's input ends, the
    writer's committable goes to the driver."""

    WRITER_STATE = "SinkWriterState"    # the writer's state, one entry per subtask

    restored_writer: tuple = ()

    def open(self):
        super().open()
        ctx = self.ctx
        self.writer = ctx.sink_writers[self.node.id](self.spec.sink, WriterInitContext(
            self.name, ctx.subtask_index, ctx.parallelism, ctx.epoch, ctx.processing_time,
            ctx.attempt_number, self.input_type, self.fail, self.restored_writer, ctx.barrier,
            ctx.end_of_input))

    def snapshot(self, incremental: bool = False) -> dict:
        snapshot = super().snapshot(incremental)
        state = self.writer.snapshot_state()
        if state is not None:
            snapshot["operator_state"] = {self.WRITER_STATE: ("split", [state])}
        return snapshot

    def restore(self, snapshot: dict) -> None:
        super().restore(snapshot)
        self.restored_writer = tuple(snapshot.get("operator_state", {}).get(self.WRITER_STATE, ()))

    def user_functions(self):
        return [self.spec.sink]     # opened and closed when it is a Function (a SinkFunction)

    def process_batch(self, values, timestamps, input_index):
        self.records_in += len(values)
        self.writer.write(values)

    def process_watermark(self, watermark, input_index):
        self.current_watermark = max(self.current_watermark, watermark)

    def process_idle(self, input_index):
        pass

    def committable(self):
        """What the driver commits of this epoch (the writer's ``finish``)."""
        return self.writer.finish()

    def dispose(self) -> None:
        super().dispose()
        self.writer = None
