"""Bootstrapping an operator's keyed state from data (Flink's ``OperatorTransformation`` and
``KeyedStateBootstrapFunction``): ``OperatorTransformation.bootstrap_with(data).key_by(selector,
key_type).transform(function)``.

Each subtask of the new state runs the function on its records in a heap backend of its key
groups and writes the backend's snapshot as a state file (``runtime.state.snapshot_writer``):
the format a checkpoint writes, so a restore reads it unchanged. A DataFrame is bootstrapped in
Spark (``mapInArrow``: the records are routed to their subtask, then each subtask's records run
in one Python worker); an Arrow table in this process.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator, Optional

import copy

import numpy as np
import pyarrow as pa

from runtime.common.arrow import arrow_to_records
from runtime.common.typeinfo import TypeInformation
from runtime.common.types import Row
from runtime.datastream.functions import Function
from runtime.state.heap import HeapKeyedStateBackend
from runtime.state.key_groups import KeyGroupRange, assign_key_groups, compute_key_group_range_for_operator_index
from runtime.state.snapshot_writer import write_snapshot

SUBTASK = "__sluice_subtask"
BATCH = 10_000


class KeyedStateBootstrapFunction(Function):
    """Writes keyed state for each record of the bootstrap data (Flink's
    KeyedStateBootstrapFunction): ``open(ctx)`` registers the states, ``process_element(value,
    ctx)`` writes them for the record's key (``ctx.get_current_key()``) and may register timers
    (``ctx.timer_service()``)."""

    def process_element(self, value, ctx: "BootstrapContext") -> None:
        raise NotImplementedError


class _TimerService:
    def __init__(self, ctx: "BootstrapContext"):
        self.ctx = ctx

    def register_event_time_timer(self, timestamp: int) -> None:
        self.ctx.timers.add(("event", int(timestamp), self.ctx.get_current_key()))

    def register_processing_time_timer(self, timestamp: int) -> None:
        self.ctx.timers.add(("processing", int(timestamp), self.ctx.get_current_key()))


class BootstrapContext:
    """The runtime context (``open``) and the element context (``process_element``) of a
    bootstrap function: its states, the current key, timers."""

    def __init__(self, backend: HeapKeyedStateBackend, subtask: int, parallelism: int):
        self.backend, self.subtask, self.parallelism = backend, subtask, parallelism
        self.timers: set = set()

    def get_state(self, descriptor):
        return self.backend.get_partitioned_state(descriptor)

    get_list_state = get_map_state = get_reducing_state = get_aggregating_state = get_state

    def get_current_key(self):
        return self.backend.get_current_key()

    def timer_service(self) -> _TimerService:
        return _TimerService(self)

    def get_index_of_this_subtask(self) -> int:
        return self.subtask

    def get_number_of_parallel_subtasks(self) -> int:
        return self.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self.backend.max_parallelism


@dataclass(frozen=True)
class StateBootstrapTransformation:
    """Bootstrap data, how its records are keyed, and the function writing their state."""

    data: Any                           # a pyspark DataFrame or a pyarrow Table
    key_selector: Callable
    key_type: Optional[TypeInformation]
    function: KeyedStateBootstrapFunction
    record_type: Optional[TypeInformation] = None
    parallelism: Optional[int] = None   # the subtasks writing files (default: the savepoint's max parallelism, at most 4)

    def set_parallelism(self, parallelism: int) -> "StateBootstrapTransformation":
        return replace(self, parallelism=parallelism)

    def write(self, directory: str, operator_id: str, operator: str, max_parallelism: int) -> list[dict]:
        """The state files of the bootstrapped state, written under ``directory``: dicts as a
        checkpoint records them (path absolute)."""
        parallelism = min(self.parallelism or 4, max_parallelism)
        if isinstance(self.data, pa.Table):
            return _bootstrap_batches(self.data.to_batches(BATCH), self, directory, operator_id, operator,
                                      max_parallelism, parallelism)
        return self._write_in_spark(directory, operator_id, operator, max_parallelism, parallelism)

    def _write_in_spark(self, directory, operator_id, operator, max_parallelism, parallelism) -> list[dict]:
        from pyspark.sql import functions as F
        routed_schema = f"{SUBTASK} int, batch binary"
        import pickle
        from runtime.execution.dependencies import dumps_by_value
        # The function goes to the workers by value (a job script's or test's class is not
        # importable there), the DataFrame not at all.
        shipped = dumps_by_value(replace(self, data=None))

        def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            # Each batch's records go to the subtasks of their keys, as Arrow IPC bytes.
            this = pickle.loads(shipped)
            for batch in batches:
                for subtask, part in _by_subtask(batch, this, max_parallelism, parallelism):
                    sink = pa.BufferOutputStream()
                    with pa.ipc.new_stream(sink, part.schema) as w:
                        w.write_batch(part)
                    yield pa.record_batch([pa.array([subtask], pa.int32()), pa.array([sink.getvalue().to_pybytes()], pa.binary())],
                                          names=[SUBTASK, "batch"])

        def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            this = pickle.loads(shipped)
            parts = (rb for b in batches for blob in b.column("batch").to_pylist()
                     for rb in pa.ipc.open_stream(blob))
            files = _bootstrap_batches(parts, this, directory, operator_id, operator, max_parallelism,
                                       parallelism)
            yield pa.record_batch([pa.array([pickle.dumps(files)], pa.binary())], names=["files"])

        routed = self.data.mapInArrow(route, routed_schema)
        out = routed.repartition(parallelism, F.col(SUBTASK)).sortWithinPartitions(SUBTASK) \
            .mapInArrow(write, "files binary").collect()
        return [f for r in out for f in pickle.loads(r["files"])]


def _records(batch: pa.RecordBatch, record_type) -> list:
    if record_type is not None:
        return arrow_to_records(batch, record_type)
    names = batch.schema.names
    return [Row(**dict(zip(names, values))) for values in zip(*(c.to_pylist() for c in batch.columns))]


def _routed(batch: pa.RecordBatch, t: StateBootstrapTransformation, max_parallelism: int, parallelism: int):
    """The batch's records, their keys, and the subtask of each key (Flink's operator index of
    its key group)."""
    records = _records(batch, t.record_type)
    keys = [t.key_selector(r) for r in records]
    groups = assign_key_groups(keys, max_parallelism, t.key_type) if keys else np.zeros(0, np.int32)
    subtasks = groups.astype(np.int64) * parallelism // max_parallelism
    return records, keys, subtasks


def _by_subtask(batch: pa.RecordBatch, t: StateBootstrapTransformation, max_parallelism: int, parallelism: int):
    _, _, subtasks = _routed(batch, t, max_parallelism, parallelism)
    for s in np.unique(subtasks).tolist():
        yield s, batch.filter(pa.array(subtasks == s))


def _bootstrap_batches(batches: Iterable[pa.RecordBatch], t: StateBootstrapTransformation, directory: str,
                       operator_id: str, operator: str, max_parallelism: int, parallelism: int) -> list[dict]:
    """Run the function on the records of ``batches`` in one heap backend per subtask (each with
    its own copy of the function, opened on it), and write each subtask's snapshot as its state file."""
    contexts: dict[int, tuple] = {}
    for batch in batches:
        records, keys, subtasks = _routed(batch, t, max_parallelism, parallelism)
        for record, key, subtask in zip(records, keys, subtasks.tolist()):
            found = contexts.get(subtask)
            if found is None:
                kgr = compute_key_group_range_for_operator_index(max_parallelism, parallelism, subtask)
                backend = HeapKeyedStateBackend(operator, KeyGroupRange(kgr.start_key_group, kgr.end_key_group),
                                                max_parallelism)
                backend.key_type = t.key_type
                backend.track_changes(False)
                ctx = BootstrapContext(backend, subtask, parallelism)
                function = copy.deepcopy(t.function)
                function.open(ctx)
                found = contexts[subtask] = (ctx, function.process_element)
            ctx, process = found
            ctx.backend.set_current_key(key)
            process(record, ctx)
    contexts = {s: ctx for s, (ctx, _) in contexts.items()}
    files = []
    for subtask, ctx in sorted(contexts.items()):
        backend = ctx.backend
        timers = sorted(ctx.timers, key=lambda x: (x[0], x[1], repr(x[2])))
        groups = assign_key_groups([k for _, _, k in timers], max_parallelism, t.key_type).tolist() if timers else []
        snapshot = {"keyed": backend.snapshot(),
                    "timers": [(g, domain, ts, key, None) for g, (domain, ts, key) in zip(groups, timers)],
                    "types": {name: s.descriptor.type_info for name, s in backend.states.items()}}
        f = write_snapshot(snapshot, directory, operator_id, subtask, operator)
        if f is not None:
            files.append({"path": f.path, "size": f.size, "rows": f.rows, "checksum": f.checksum,
                          "subtask": subtask, "key_group_min": f.key_group_min, "key_group_max": f.key_group_max,
                          "source_state": False, "increment": False, "schema": f.schema})
    return files


@dataclass(frozen=True)
class KeyedBootstrap:
    """``bootstrap_with(data).key_by(...)``: waits for ``transform``."""

    data: Any
    key_selector: Callable
    key_type: Optional[TypeInformation]
    record_type: Optional[TypeInformation]

    def transform(self, function: KeyedStateBootstrapFunction) -> StateBootstrapTransformation:
        if not isinstance(function, KeyedStateBootstrapFunction):
            raise TypeError(f"transform takes a KeyedStateBootstrapFunction, got {type(function).__name__}")
        return StateBootstrapTransformation(self.data, self.key_selector, self.key_type, function, self.record_type)


@dataclass(frozen=True)
class OneInputBootstrap:
    data: Any
    record_type: Optional[TypeInformation] = None

    def key_by(self, key_selector, key_type: Optional[TypeInformation] = None) -> KeyedBootstrap:
        """``key_selector``: a function of the record, or a field name; ``key_type`` as the job's
        ``key_by`` declares it (keys hash into key groups by it, as the job's records do)."""
        selector = (lambda r, f=key_selector: r[f]) if isinstance(key_selector, (str, int)) else key_selector
        return KeyedBootstrap(self.data, selector, key_type, self.record_type)


class OperatorTransformation:
    """Flink's entry point for bootstrapping state: ``bootstrap_with(data)``."""

    @staticmethod
    def bootstrap_with(data, record_type: Optional[TypeInformation] = None) -> OneInputBootstrap:
        """``data``: a pyspark DataFrame or a pyarrow Table; its rows reach the function as Rows
        (``record_type``: their type, default inferred from the data's schema)."""
        if not isinstance(data, pa.Table) and not hasattr(data, "mapInArrow"):
            raise TypeError(f"bootstrap_with takes a pyspark DataFrame or a pyarrow Table, got {type(data).__name__}")
        return OneInputBootstrap(data, record_type)
