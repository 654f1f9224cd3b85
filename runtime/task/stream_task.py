"""One subtask of one epoch (Flink's StreamTask with its OperatorChain and input processor).

The task builds its operator chain, restores its state, reads its input (source splits, or
the channels of its input gates, merged with a watermark valve per gate), pushes batches
through the chain, writes records per output channel, snapshots its state, and returns an
acknowledgement. A failure in user code is returned as a failed acknowledgement naming
operator, subtask and record, so Spark does not retry a deterministic error.
"""
from __future__ import annotations

import gc
import os
import pickle
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional

from runtime.state.snapshot import OPERATOR_PREFIX
from runtime.common.faults import fault_point
from runtime.common.arrow import as_shipped
from runtime.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from runtime.datastream.operators import BroadcastProcessSpec
from runtime.datastream.partitioner import KeyGroupStreamPartitioner
from runtime.graph.execution_graph import consumed_partitions
from runtime.graph.job_graph import JobGraph, JobVertex
from runtime.task.channel_events import IDLE, PreAggregatedPanes, RecordBatch, Watermark
from runtime.task.operator_factory import create_operator
from runtime.task.operators import UserCodeException
from runtime.task.record_helpers import extreme
from runtime.state.backend import state_backend_type
from runtime.state.key_groups import compute_key_group_range_for_operator_index
from runtime.task.partitioning import ChannelSelector
from runtime.task.sorting_input import SortingDataInput, sorts_input
from runtime.task.task_context import TaskContext
from runtime.task.timestamps_and_watermarks import assign_timestamps
from runtime.task.watermarks import GateWatermarks, TaskWatermarks
from runtime.task.window_aggregation import PreAggregatingRecordWriter, is_vectorizable

ACK = -1        # the key of acknowledgement rows in a task's output


@dataclass(frozen=True)
class SplitRead:
    """What a source subtask reads of one split this epoch: [start, end) and the split's state."""

    split_id: str
    start: Any
    end: Any
    state: dict = field(default_factory=dict)   # watermark generator, idleness clock


@dataclass(frozen=True)
class TaskDeploymentDescriptor:
    job_vertex_id: int
    subtask_index: int
    attempt_number: int
    epoch: int
    processing_time: int
    end_of_input: bool                      # the job's input ends in this epoch
    splits: tuple = ()                      # SplitReads, for source subtasks
    restored_state: Optional["RestoredState"] = None   # state of the previous epoch or checkpoint
    snapshot_dir: Optional[str] = None      # where to write this epoch's snapshot ("{operator_id}" in it)
    batch_size: int = 4096
    watermarks: Optional[TaskWatermarks] = None     # event time where the previous epoch left it
    # The connectors' task sides, chosen by the driver: this layer knows only their interfaces.
    source_reader: Optional[type] = None            # SourceReader class of a source vertex
    sink_writers: dict = field(default_factory=dict)    # sink node id -> its writer class
    # State that stays with its task (a local store, state.backend.type: rocksdb): the store is
    # used as it is only when it is at ``state_version`` (the version the previous epoch of this
    # run set); otherwise it is rebuilt from ``restored_state``. ``next_state_version`` is set on
    # it once this epoch's snapshot is written.
    state_version: Optional[str] = None
    next_state_version: Optional[str] = None
    state_dir: Optional[str] = None             # root of the local stores (else Spark's local dirs)
    incremental: frozenset = frozenset()        # operator ids that snapshot their changes only
    # The epoch ends in a checkpoint barrier, or commits its sinks without checkpoints.
    barrier: bool = False
    metric_counts: dict = field(default_factory=dict)   # the subtask's counter and meter totals in the run


@dataclass(frozen=True)
class RestoredState:
    """What a subtask restores: per operator id, the snapshot files holding state of its key
    groups (operator state included), and the parallelism they were written at."""

    files: dict = field(default_factory=dict)          # operator id -> tuple of paths
    parallelism: dict = field(default_factory=dict)    # operator id -> parallelism at the snapshot
    checksums: dict = field(default_factory=dict)      # path -> checksum recorded with the file


@dataclass
class Acknowledgement:
    job_vertex_id: int
    subtask_index: int
    failure: Optional[str] = None
    records_in: int = 0
    records_out: int = 0
    records_written: int = 0                # records that reached the sinks of this subtask
    watermark: int = MIN_WATERMARK
    task_watermarks: Optional[TaskWatermarks] = None   # valves and operators' watermarks at the end
    split_states: dict = field(default_factory=dict)
    state_files: list = field(default_factory=list)     # StateFiles written by the snapshot
    snapshot_ms: float = 0.0
    committables: dict = field(default_factory=dict)    # sink node id -> its writer's committable
    late_records_dropped: int = 0
    duration_ms: float = 0.0
    started_at: float = 0.0
    damaged_files: dict = field(default_factory=dict)   # restored state file -> what is wrong with it
    store_hits: int = 0                 # local stores used as they were
    store_misses: int = 0               # local stores rebuilt from the checkpoint's files
    metrics: dict = field(default_factory=dict)     # user metrics: TaskMetrics.report()


def _key_of(selector, value):
    return selector.get_key(value)


# Records a channel buffers before they are pickled: a task holds an epoch's output (and the next
# task its input) as pickled chunks, a few bytes a record, and as Python objects one chunk per
# channel at a time (a 10,000,000-record build epoch held 5,000,000 records per task).
CHANNEL_CHUNK = 65_536


class RecordWriter:
    """Buffers the records of one JobEdge per consumer channel; watermarks go to every channel.
    A channel's events leave as pickled chunks, numbered in order: (channel, (edge key,
    producer, chunk number, pickled events))."""

    def __init__(self, edge, edge_key: str, producer: int, producer_p: int, consumer_p: int, seed: int):
        self.edge_key = edge_key
        self.producer = producer
        self.consumer_p = consumer_p
        self.selector = ChannelSelector(edge, producer, producer_p, consumer_p, seed, _key_of)
        self.channels: dict[int, list] = {c: [] for c in range(consumer_p)}
        self.buffered: dict[int, int] = dict.fromkeys(range(consumer_p), 0)     # records in channels[c]
        self.sealed: dict[int, list] = {c: [] for c in range(consumer_p)}       # pickled chunks
        self.records_out = 0
        self.watermark = MIN_WATERMARK

    def process_batch(self, values, timestamps, input_index):
        self.records_out += len(values)
        for c, (vs, ts) in self.selector.select(values, timestamps).items():
            events = self.channels[c]
            if events and type(events[-1]) is RecordBatch:
                events[-1].values.extend(vs)
                events[-1].timestamps.extend(ts)
            else:
                events.append(RecordBatch(list(vs), list(ts)))
            self.buffered[c] += len(vs)
            if self.buffered[c] >= CHANNEL_CHUNK:
                self._seal(c)

    def _seal(self, c: int) -> None:
        # Dropped once pickled: held until the task ends, they would be freed by a cyclic
        # collection (operators and writers reference each other), at ~2 µs per record.
        events, self.channels[c], self.buffered[c] = self.channels[c], [], 0
        self.sealed[c].append(pickle.dumps(events, protocol=5))

    def process_watermark(self, watermark, input_index):
        if watermark > self.watermark:
            self.watermark = watermark
            for events in self.channels.values():
                events.append(Watermark(watermark))

    def process_idle(self, input_index):
        for events in self.channels.values():
            events.append(IDLE)

    def rows(self) -> Iterator[tuple]:
        for c in self.channels:
            if self.channels[c]:
                self._seal(c)
            chunks, self.sealed[c] = self.sealed[c], []
            for i, payload in enumerate(chunks):
                yield c, (self.edge_key, self.producer, i, payload)


class ShippingWriter:
    """A shuffle's records as PyFlink's coder hands them to the consumer (``as_shipped``: the Rows
    of a row type named); a chained operator gets them as they were made, as in PyFlink."""

    def __init__(self, writer, declared):
        self.writer = writer
        self.declared = declared

    def process_batch(self, values, timestamps, input_index):
        self.writer.process_batch(as_shipped(values, self.declared), timestamps, input_index)

    def process_watermark(self, watermark, input_index):
        self.writer.process_watermark(watermark, input_index)

    def process_idle(self, input_index):
        self.writer.process_idle(input_index)


def _declared_type(stream_graph, edge):
    """The declared type of the records on ``edge``: a side output's is its tag's."""
    tag = edge.output_tag
    return tag.type_info if tag is not None else stream_graph.node(edge.source_id).output_type


def channel_events(chunks: list) -> Iterator:
    """The events of one channel from its numbered chunks, unpickled one chunk at a time."""
    for _, payload in sorted(chunks, key=lambda chunk: chunk[0]):
        yield from pickle.loads(payload)


class StreamTask:
    def __init__(self, job_graph: JobGraph, tdd: TaskDeploymentDescriptor, job_parameters: dict):
        self.job_graph = job_graph
        self.tdd = tdd
        self.vertex: JobVertex = job_graph.vertex(tdd.job_vertex_id)
        v = self.vertex
        kgr = None
        if v.is_keyed:
            kgr = compute_key_group_range_for_operator_index(v.max_parallelism, v.parallelism, tdd.subtask_index)
        self.ctx = TaskContext(v.name, tdd.subtask_index, v.parallelism, v.max_parallelism,
                               tdd.attempt_number, tdd.processing_time, job_parameters, kgr, tdd.epoch,
                               tdd.sink_writers,
                               state_backend=state_backend_type(dict(job_graph.settings.configuration)),
                               state_dir=_local_state_dir(job_graph, tdd),
                               barrier=tdd.barrier, end_of_input=tdd.end_of_input,
                               metric_counts=tdd.metric_counts)
        self.ctx.batch = self.batch = job_graph.settings.runtime_mode == "BATCH"
        self.operators = {n.id: create_operator(n, self.ctx) for n in v.operators}
        stream_graph = job_graph.stream_graph
        for n in v.operators:
            edges = stream_graph.in_edges(n.id)
            if edges:
                self.operators[n.id].input_type = _declared_type(stream_graph, edges[0])
        self.writers: list[RecordWriter] = []
        self._wire()
        self.gates: dict = {}       # input index -> StatusWatermarkValve, for the acknowledgement

    def _wire(self) -> None:
        v, tdd = self.vertex, self.tdd
        for e in v.chained_edges:
            tag = e.output_tag.tag_id if e.output_tag is not None else None
            self.operators[e.source_id].output.add(self.operators[e.target_id], e.type_number, tag)
        for i, je in enumerate(self.job_graph.outputs_of(v.id)):
            se = je.stream_edge
            consumer = self.job_graph.vertex(je.target_vertex)
            writer = RecordWriter(je, je.data_set, tdd.subtask_index, v.parallelism, consumer.parallelism,
                                  seed=hash((tdd.epoch, tdd.subtask_index, i)) & 0xFFFFFFFF)
            target = self.job_graph.stream_graph.node(se.target_id).operator
            if isinstance(se.partitioner, KeyGroupStreamPartitioner) and is_vectorizable(target):
                writer = PreAggregatingRecordWriter(writer, target, tdd.processing_time,
                                                    self.operators[se.source_id].fail)
            tag = se.output_tag.tag_id if se.output_tag is not None else None
            self.writers.append(writer)
            shipping = ShippingWriter(writer, _declared_type(self.job_graph.stream_graph, se))
            self.operators[se.source_id].output.add(shipping, se.type_number, tag)

    @property
    def head(self):
        return self.operators[self.vertex.head.id]

    def _all_operators(self):
        return [self.operators[n.id] for n in self.vertex.operators]

    # ---- running -----------------------------------------------------------------------

    def run(self, inputs: Iterable) -> Iterator[tuple]:
        # Records are short-lived tuples without cycles: the cyclic collector would only scan
        # them over and over. It runs again once the task is done.
        collecting = gc.isenabled()
        gc.disable()
        try:
            yield from self._run(inputs)
        finally:
            for op in self._all_operators():
                op.dispose()
            if collecting:
                gc.enable()

    def _run(self, inputs: Iterable) -> Iterator[tuple]:
        started = time.time()
        ack = Acknowledgement(self.tdd.job_vertex_id, self.tdd.subtask_index, started_at=started)
        try:
            self._restore(ack)
            self._restore_watermarks()
            for op in reversed(self._all_operators()):
                op.open()
            for op in self._all_operators():
                op.advance_processing_time(self.tdd.processing_time)
            if self.vertex.is_input_vertex:
                ack.records_in, ack.split_states = self._run_source()
            else:
                ack.records_in = self._run_inputs(inputs)
            if self.tdd.end_of_input:
                # Bounded input ended: fire every processing-time timer as Flink's batch mode does.
                for op in self._all_operators():
                    op.advance_processing_time(MAX_WATERMARK)
            for op in self._all_operators():
                op.close()
            ack.metrics = self.ctx.metrics.report()     # after close(): what it counts counts too
            fault_point("mid-epoch", self.tdd.epoch)
            self._snapshot(ack)
            self._finish_sinks(ack)
        except UserCodeException as e:
            ack.failure = str(e)
        except Exception as e:
            ack.failure = (f"{self.vertex.name} {self.ctx.subtask_label} failed: {type(e).__name__}: {e}\n"
                           f"--- original traceback ---\n{traceback.format_exc()}")
        if ack.failure is None:
            for writer in self.writers:
                yield from writer.rows()
            ack.records_out = sum(w.records_out for w in self.writers)
            ack.watermark = max((op.current_watermark for op in self._all_operators()), default=MIN_WATERMARK)
            ack.task_watermarks = TaskWatermarks(
                {i: GateWatermarks.of(valve) for i, valve in self.gates.items()},
                {op.node.operator_id: (op.current_watermark, *op.input_watermarks) for op in self._all_operators()})
            for op in self._all_operators():
                ack.late_records_dropped += getattr(op, "num_late_records_dropped", 0)
        ack.duration_ms = (time.time() - started) * 1000
        yield ACK, pickle.dumps(ack, protocol=5)

    def _finish_sinks(self, ack: Acknowledgement) -> None:
        """Each sink's committable of the epoch, for the driver to commit (the deployment names
        the subtask's sinks with their writer classes)."""
        for node_id in self.tdd.sink_writers:
            sink = self.operators[node_id]
            ack.records_written += sink.records_in
            ack.committables[node_id] = sink.committable()

    def _restore(self, ack: Acknowledgement) -> None:
        from runtime.state.snapshot import CorruptStateException, read_state_file, table_to_snapshot
        restored = self.tdd.restored_state
        kgr = self.ctx.key_group_range
        for op in self._all_operators():
            if op.backend is not None:
                op.backend.track_changes(self._incremental(op))
            if op.keeps_local_state():
                if self.tdd.state_version is not None and op.backend.version == self.tdd.state_version:
                    ack.store_hits += 1
                    continue
                ack.store_misses += 1
                op.backend.clear()      # stale, or of another epoch: rebuilt from the files
            paths = restored.files.get(op.node.operator_id) if restored is not None else None
            if not paths:
                continue
            try:
                snapshot = table_to_snapshot(read_state_file(p, kgr, restored.checksums.get(p)) for p in paths)
            except CorruptStateException as e:
                ack.damaged_files.update(e.damaged_files)    # the driver marks its checkpoint INVALID
                raise
            snapshot["restored_parallelism"] = restored.parallelism.get(op.node.operator_id)
            same_parallelism = snapshot["restored_parallelism"] == self.ctx.parallelism
            for name, entries in list(snapshot["operator_state"].items()):
                if name.startswith(OPERATOR_PREFIX):
                    del snapshot["operator_state"][name]
                    snapshot[name[len(OPERATOR_PREFIX):]] = _operator_value(
                        entries, self.tdd.subtask_index if same_parallelism else None)
            op.restore(snapshot)    # the other operator state (broadcast state) as the operator lists it

    def _restore_watermarks(self) -> None:
        restored = self.tdd.watermarks
        if restored is None:
            return
        for op in self._all_operators():
            marks = restored.operators.get(op.node.operator_id)
            if marks is not None:
                op.current_watermark, *inputs = marks
                op.input_watermarks = list(inputs)

    def _incremental(self, op) -> bool:
        """Whether the operator's snapshot of this epoch holds only what changed since the last."""
        return (bool(self.tdd.snapshot_dir) and op.backend is not None and op.state_in_backend
                and op.node.operator_id in self.tdd.incremental)

    def _snapshot(self, ack: Acknowledgement) -> None:
        from runtime.state.snapshot import snapshot_to_table, state_table_name, write_state_file
        if not self.tdd.snapshot_dir:
            return
        started = time.time()
        for op in self._all_operators():
            incremental = self._incremental(op)
            snapshot = op.snapshot(incremental=True) if incremental else op.snapshot()
            table = snapshot_to_table(snapshot, self.tdd.subtask_index, f"{op.name} {self.ctx.subtask_label}")
            if table is not None:
                directory = self.tdd.snapshot_dir.format(table=state_table_name(op.node))
                ack.state_files.append(write_state_file(table, directory, op.node.operator_id,
                                                        self.tdd.subtask_index, increment=incremental))
            if op.backend is not None:
                op.backend.mark_checkpointed()
            if op.keeps_local_state() and self.tdd.next_state_version is not None:
                op.backend.version = self.tdd.next_state_version
        ack.snapshot_ms = (time.time() - started) * 1000

    # ---- sources -----------------------------------------------------------------------

    def _run_source(self) -> tuple[int, dict]:
        spec = self.head.spec
        strategy = spec.watermark_strategy
        reader = self.tdd.source_reader(spec.source, self.ctx)
        out = self.head.output
        splits = list(self.tdd.splits)
        generators, states = {}, {}
        for s in splits:
            gen = strategy.create_generator() if strategy is not None else None
            if gen is not None and "max_timestamp" in s.state:
                gen.max_timestamp = s.state["max_timestamp"]
            generators[s.split_id] = gen
            states[s.split_id] = dict(s.state)
        assigner = strategy.timestamp_assigner if strategy is not None else None
        # BATCH ignores watermark generators: MAX_WATERMARK at the end is the only one (Flink's rule).
        has_watermarks = strategy is not None and strategy.has_watermarks and not self.batch
        emitted = MIN_WATERMARK
        records = 0
        if has_watermarks:
            # Re-emit the watermark the splits had reached, before any record of this epoch.
            emitted = self._emit_split_watermark(generators, states, set(), emitted)
        iterators = [(s, reader.read(s, self.tdd.batch_size)) for s in splits]
        read = dict.fromkeys(states, 0)      # records read of each split so far: the batch's first index
        active_this_epoch: set = set()
        while iterators:
            still = []
            for split, it in iterators:
                batch = next(it, None)
                if batch is None:
                    continue
                still.append((split, it))
                values, timestamps = batch
                if not values:
                    continue
                active_this_epoch.add(split.split_id)
                records += len(values)
                try:
                    if assigner is not None:
                        timestamps = assign_timestamps(self.head, assigner, values, timestamps)
                    gen = generators[split.split_id]
                    latest = extreme(max, timestamps) if gen is not None else None
                    if latest is not None:
                        gen.on_event(latest)
                    out.collect(values, timestamps)
                except UserCodeException as e:
                    raise _with_origin(e, values, lambda i: reader.origin(split, read[split.split_id] + i)) from e.error
                read[split.split_id] += len(values)
                if has_watermarks:
                    emitted = self._emit_split_watermark(generators, states, active_this_epoch, emitted)
            iterators = still
        for s in splits:
            states[s.split_id].update(reader.end_state(s))
            gen = generators[s.split_id]
            if gen is not None and hasattr(gen, "max_timestamp"):
                states[s.split_id]["max_timestamp"] = gen.max_timestamp
            if s.split_id in active_this_epoch:
                states[s.split_id]["last_active"] = self.tdd.processing_time
        if has_watermarks:
            idle = self._idle(splits, states, active_this_epoch, strategy)
            if not splits or (idle and len(idle) == len(splits)):
                if not self.tdd.end_of_input:
                    out.emit_idle()
            else:
                self._emit_split_watermark(generators, states, active_this_epoch, emitted, idle)
        elif not splits and not self.tdd.end_of_input:
            # No split this epoch and no watermarks of the source's own: a timestamp assigner
            # further down the chain sees no record either, so nothing of this subtask would let
            # the watermark downstream advance (Flink's reader without splits is idle, or done).
            out.emit_idle()
        if self.tdd.end_of_input:
            self.head.current_watermark = MAX_WATERMARK
            out.emit_watermark(MAX_WATERMARK)
        return records, states

    def _idle(self, splits, states, active, strategy) -> set:
        if strategy.idleness_ms is None:
            return set()
        now = self.tdd.processing_time
        return {s.split_id for s in splits if s.split_id not in active
                and now - states[s.split_id].get("last_active", now) >= strategy.idleness_ms}

    def _emit_split_watermark(self, generators, states, active, emitted, idle=frozenset()) -> int:
        marks = [g.current_watermark() for sid, g in generators.items() if g is not None and sid not in idle]
        if not marks:
            return emitted
        watermark = min(marks)
        if watermark > emitted:
            self.head.current_watermark = watermark
            self.head.output.emit_watermark(watermark)
            return watermark
        return emitted

    # ---- network inputs ----------------------------------------------------------------

    def _run_inputs(self, inputs: Iterable) -> int:
        received: dict[tuple, list] = {}
        for _, (edge_key, producer, number, payload) in inputs:
            received.setdefault((edge_key, producer), []).append((number, payload))
        head = self.head
        records = 0
        # One gate per input of the head (two for a two-input operator); the edges of a union
        # share a gate. A channel is (data set, producer subtask).
        gates: dict[int, list] = {}
        for je in self.job_graph.inputs_of(self.vertex.id):
            producer_p = self.job_graph.vertex(je.source_vertex).parallelism
            for p in consumed_partitions(je, producer_p, self.vertex.parallelism, self.tdd.subtask_index):
                channel = (je.data_set, p)
                gates.setdefault(je.stream_edge.type_number, []).append(
                    (channel, channel_events(received.pop(channel, []))))
        restored = self.tdd.watermarks.gates if self.tdd.watermarks is not None else {}
        self.gates = {idx: restored.get(idx, GateWatermarks()).valve([c for c, _ in chans])
                      for idx, chans in gates.items()}
        merged = {idx: (self.gates[idx], chans) for idx, chans in gates.items()}
        # BATCH mode sorts a keyed input by key before the operator sees it, as Flink does.
        reader = SortingDataInput(head) if self.batch and sorts_input(head) else head
        for group in _input_order(head, merged):
            records += self._drain(reader, {idx: merged[idx] for idx in group})
        if reader is not head:
            reader.end_input()
        return records

    def _drain(self, head, merged: dict) -> int:
        """Read the gates of ``merged`` round-robin, an event per channel at a time, to their end."""
        records = 0
        cursors = {idx: [(c, iter(ev)) for c, ev in chans] for idx, (_, chans) in merged.items()}
        while cursors:
            for input_index in list(cursors):
                valve = merged[input_index][0]
                live = []
                for channel, it in cursors[input_index]:
                    event = next(it, None)
                    if event is None:
                        continue
                    live.append((channel, it))
                    kind = type(event)
                    if kind is RecordBatch:
                        records += len(event.values)
                        head.process_batch(event.values, event.timestamps, input_index)
                    elif kind is PreAggregatedPanes:
                        records += event.record_count
                        head.process_panes(event)
                    elif kind is Watermark:
                        wm = valve.on_watermark(channel, event.timestamp)
                        if wm is not None:
                            head.process_watermark(wm, input_index)
                    else:
                        wm = valve.on_idle(channel)
                        if wm is not None:
                            head.process_watermark(wm, input_index)
                        elif valve.all_idle:
                            head.process_idle(input_index)
                if live:
                    cursors[input_index] = live
                else:
                    del cursors[input_index]
        return records


def _input_order(head, gates: dict) -> list[list[int]]:
    """Groups of input indexes, read one group after the other. The broadcast side of a broadcast
    operator comes first: within an epoch, every record of the other side sees the broadcast
    state as the epoch's broadcast records left it (Flink's batch mode orders them so; in
    streaming Flink gives no order, here the order is the same on every run and replay)."""
    if isinstance(head.spec, BroadcastProcessSpec):
        return [[i] for i in (2, 1) if i in gates]
    return [list(gates)]


def _operator_value(entries: list, subtask: Optional[int]):
    """A subtask's restored value of per-subtask operator state (its watermark, say): its own at
    the same parallelism; after a rescale the minimum over all, so nothing becomes late."""
    if subtask is not None:
        own = [v for s, v in entries if s == subtask]
        if own:
            return own[0]
    values = [v for _, v in entries if v is not None]
    try:
        return min(values) if values else None
    except TypeError:
        return values[0]


def _local_state_dir(job_graph: JobGraph, tdd: TaskDeploymentDescriptor) -> str:
    """Where this subtask's local stores live: the configured root, else the executor's first
    Spark local dir (PySpark gives it to its workers; removed when the application ends)."""
    import tempfile
    root = tdd.state_dir or (os.environ.get("SPARK_LOCAL_DIRS") or "").split(",")[0] or tempfile.gettempdir()
    return os.path.join(root, "sluice-state", job_graph.job_id, f"{tdd.job_vertex_id}-{tdd.subtask_index}")


def run_task(job_graph: JobGraph, tdd: TaskDeploymentDescriptor, job_parameters: dict,
             inputs: Iterable) -> Iterator[tuple]:
    return StreamTask(job_graph, tdd, job_parameters).run(inputs)


def _with_origin(error: UserCodeException, batch: list, origin: Callable[[int], str]) -> UserCodeException:
    """The failure with its record's origin when the failed operator's input was the very batch
    the source read (chained to the source, or after a timestamp assigner that passes it on):
    the record's index there is its index in the read. Past a filter, a map or a shuffle the
    position is lost: nothing is said rather than something wrong (records are not compared,
    equal or interned values would name the wrong line)."""
    return error.at(origin(error.index)) if error.batch is batch and error.index is not None else error
