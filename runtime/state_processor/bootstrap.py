"""Bootstrapping an operator's keyed state from data (Flink's ``OperatorTransformation`` and
``KeyedStateBootstrapFunction``): ``OperatorTransformation.bootstrap_with(data).key_by(selector,
key_type).transform(function)``.

Each subtask of the new state runs the function on its records in a heap backend of its key
groups and writes the backend's snapshot as a state file (``runtime.state.snapshot_writer``):
the format a checkpoint writes, so a restore reads it unchanged. A DataFrame is bootstrapped in
Spark (``mapInArrow``: the records are routed to their subtask, then each subtask's records run
in one Python worker); an Arrow table in this process.

A ``ValueStateBootstrapFunction`` (a ValueState set from a column of the record, keyed by a
column) is bootstrapped columnarly: a batch's keys hash into key groups at once and its columns
are written as the state file's rows, without a record or a function call per key.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator, Optional

import copy
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.common.arrow import arrow_to_records
from runtime.common.typeinfo import TypeInformation
from runtime.common.types import Row
from runtime.datastream.functions import Function
from runtime.state.heap import HeapKeyedStateBackend
from runtime.datastream.state import ValueStateDescriptor
from runtime.state.key_groups import (
    KeyGroupRange, assign_key_groups, compute_key_group_range_for_operator_index, key_groups_of_hashes, key_hash_codes)
from runtime.state.snapshot_format import declared
from runtime.state.snapshot_writer import StateFile, write_snapshot, write_value_state

SUBTASK = "__sluice_subtask"
BATCH = 10_000
ROUTE_SLICE = 500_000       # rows a columnar bootstrap routes in one thread, at least


class KeyedStateBootstrapFunction(Function):
    """Writes keyed state for each record of the bootstrap data (Flink's
    KeyedStateBootstrapFunction): ``open(ctx)`` registers the states, ``process_element(value,
    ctx)`` writes them for the record's key (``ctx.get_current_key()``) and may register timers
    (``ctx.timer_service()``)."""

    def process_element(self, value, ctx: "BootstrapContext") -> None:
        raise NotImplementedError


class ValueStateBootstrapFunction(KeyedStateBootstrapFunction):
    """Sets a ValueState of each key to a column of its record: ``ValueStateBootstrapFunction(
    ValueStateDescriptor("count", Types.LONG()), "n")`` is the function ``open`` getting the state
    and ``process_element`` calling ``state.update(value.n)`` (a null clears it; a key given twice
    keeps its last record's value), bootstrapped a batch of columns at a time when the data is
    keyed by a column (``key_by("word", ...)``) and the descriptor declares its type without TTL,
    else a record at a time."""

    def __init__(self, descriptor: ValueStateDescriptor, column: str):
        if not isinstance(descriptor, ValueStateDescriptor):
            raise TypeError(f"ValueStateBootstrapFunction takes a ValueStateDescriptor, got {type(descriptor).__name__}")
        if not isinstance(column, str):
            raise TypeError(f"ValueStateBootstrapFunction's column is a field name (str), got {column!r}")
        self.descriptor, self.column = descriptor, column

    def open(self, ctx) -> None:
        self.state = ctx.get_state(self.descriptor)

    def process_element(self, value, ctx) -> None:
        self.state.update(value[self.column])


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
    key_field: Optional[str] = None     # key_by a field name: the key column

    @property
    def columnar(self) -> bool:
        """Whether the state is written from the data's columns (``ValueStateBootstrapFunction``)."""
        f = self.function
        return isinstance(f, ValueStateBootstrapFunction) and self.key_field is not None \
            and declared(f.descriptor.type_info) and f.descriptor.ttl_config is None

    def set_parallelism(self, parallelism: int) -> "StateBootstrapTransformation":
        return replace(self, parallelism=parallelism)

    def write(self, directory: str, operator_id: str, operator: str, max_parallelism: int) -> list[dict]:
        """The state files of the bootstrapped state, written under ``directory``: dicts as a
        checkpoint records them (path absolute)."""
        parallelism = min(self.parallelism or 4, max_parallelism)
        if isinstance(self.data, pa.Table):
            if self.columnar:
                return _bootstrap_columns(self.data, self, directory, operator_id, operator, max_parallelism,
                                          parallelism)
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
    return records, keys, _subtasks(groups, max_parallelism, parallelism)


def _by_subtask(batch: pa.RecordBatch, t: StateBootstrapTransformation, max_parallelism: int, parallelism: int):
    if t.columnar:
        subtasks = _subtasks(_key_groups_of(batch, t, max_parallelism)[2], max_parallelism, parallelism)
    else:
        _, _, subtasks = _routed(batch, t, max_parallelism, parallelism)
    for s in np.unique(subtasks).tolist():
        yield s, batch.filter(pa.array(subtasks == s))


def _bootstrap_batches(batches: Iterable[pa.RecordBatch], t: StateBootstrapTransformation, directory: str,
                       operator_id: str, operator: str, max_parallelism: int, parallelism: int) -> list[dict]:
    """Run the function on the records of ``batches`` in one heap backend per subtask (each with
    its own copy of the function, opened on it), and write each subtask's snapshot as its state file."""
    if t.columnar:
        batches = list(batches)
        if not batches:
            return []
        return _bootstrap_columns(pa.Table.from_batches(batches), t, directory, operator_id, operator,
                                  max_parallelism, parallelism)
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
            files.append(_entry(f))
    return files


def _entry(f: StateFile) -> dict:
    """A state file as a checkpoint records it."""
    return {"path": f.path, "size": f.size, "rows": f.rows, "checksum": f.checksum, "subtask": f.subtask,
            "key_group_min": f.key_group_min, "key_group_max": f.key_group_max, "source_state": False,
            "increment": False, "schema": f.schema}


def _column(table, name: str, what: str):
    if name not in table.schema.names:
        raise KeyError(f"the bootstrap data has no column {name!r} ({what}); its columns: "
                       f"{', '.join(table.schema.names)}")
    return table.column(name)


def _key_groups_of(table, t: StateBootstrapTransformation, max_parallelism: int):
    """The key column, each key's hash (``key_by``'s, as the job hashes it) and key group."""
    keys = _column(table, t.key_field, "the key_by field")
    keys = _one_array(keys)
    hashes = key_hash_codes(keys, t.key_type)
    return keys, hashes, key_groups_of_hashes(hashes, max_parallelism)


def _one_array(column) -> pa.Array:
    """A column as one array: its chunk when it has one (a slice of it, not a copy: combine_chunks
    copied 5,000,000 keys and values in 0.05 s)."""
    if not isinstance(column, pa.ChunkedArray):
        return column
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _subtasks(groups: np.ndarray, max_parallelism: int, parallelism: int) -> np.ndarray:
    """Flink's operator index of each key group (uint16: a max parallelism is at most 32,768),
    looked up in a table of the key groups' (no int64 temporaries the size of the column)."""
    return (np.arange(max_parallelism, dtype=np.int64) * parallelism // max_parallelism).astype(np.uint16)[groups]


def _bootstrap_columns(table: pa.Table, t: StateBootstrapTransformation, directory: str, operator_id: str,
                       operator: str, max_parallelism: int, parallelism: int) -> list[dict]:
    """A ``ValueStateBootstrapFunction``'s state written from the table's columns: each subtask's
    rows (the last of each key, null values left out as ``update(None)`` clears), in the data's
    order, as its state file.

    The keys are hashed a slice at a time side by side, then the subtasks' files are written side
    by side (NumPy, Arrow and Parquet run outside the GIL), each taking its rows' columns a row
    group at a time as it writes them: the filters this replaced copied every slice's rows once
    per subtask, then the subtasks' parts again (0.4 s of CPU for 10,000,000 keys and two subtasks)."""
    f: ValueStateBootstrapFunction = t.function
    keys = _one_array(_column(table, t.key_field, "the key_by field"))
    values = _one_array(_column(table, f.column, "the ValueStateBootstrapFunction's column"))
    n = len(keys)
    workers = max(1, min(os.cpu_count() or 1, 4))
    step = -(-n // max(1, min(workers, n // ROUTE_SLICE))) or 1

    hashes, groups, subtasks = np.empty(n, np.int32), np.empty(n, np.int32), np.empty(n, np.uint16)

    def route(start: int) -> np.ndarray:
        # A slice's key hashes, key groups and subtasks, in place (nothing left to join after),
        # ROUTE_SLICE rows at a time (temporaries of a few MB, whose memory the allocator reuses:
        # the kernel gave 5,000,000 rows' temporaries fresh memory each time); how many rows
        # each subtask has of the slice.
        for at in (slice(i, min(i + ROUTE_SLICE, start + step, n)) for i in range(start, min(start + step, n),
                                                                                   ROUTE_SLICE)):
            hashes[at] = key_hash_codes(keys[at], t.key_type)
            groups[at] = key_groups_of_hashes(hashes[at], max_parallelism)
            subtasks[at] = _subtasks(groups[at], max_parallelism, parallelism)
        return np.bincount(subtasks[start:start + step], minlength=parallelism)

    with ThreadPoolExecutor(workers) as pool:
        counts = sum(pool.map(route, range(0, n, step)), np.zeros(parallelism, np.int64))
        rows_of = _rows_by_subtask(subtasks, counts)
        valid = values.is_valid().to_numpy(zero_copy_only=False) if values.null_count else None

        def write(subtask: int) -> Optional[StateFile]:
            if not counts[subtask]:
                return None
            rows = None if counts[subtask] == n else rows_of(subtask)       # None: every row (no copy)
            keep = _last_of_each_key(hashes if rows is None else hashes[rows],
                                     lambda at: keys.take(pa.array(at if rows is None else rows[at])))
            if valid is not None:
                present = valid if rows is None else valid[rows]
                keep = present if keep is None else keep & present
            if keep is not None:
                rows = np.flatnonzero(keep) if rows is None else rows[keep]
            return write_value_state(f.descriptor.name, f.descriptor.type_info, groups, keys, values, directory,
                                     operator_id, subtask, operator, rows)

        written = list(pool.map(write, range(parallelism)))
    return [_entry(w) for w in written if w is not None]


FOUND_BY_PASSES = 8     # subtasks up to which each finds its rows in a pass over all of them


def _rows_by_subtask(subtasks: np.ndarray, counts: np.ndarray):
    """``rows_of(subtask)``: the rows of a subtask, ascending (``subtasks``: each row's, uint16). A
    few subtasks each find theirs in a pass over the subtask indexes (0.013 s of CPU per 10,000,000
    rows, in the subtasks' threads); more share one stable sort of the rows by subtask (0.1 s: a
    radix sort, as the indexes fit 16 bits), each then a run of it."""
    if len(counts) <= FOUND_BY_PASSES:
        return lambda subtask: np.flatnonzero(subtasks == subtask)
    order = np.argsort(subtasks, kind="stable")
    ends = np.cumsum(counts)
    return lambda subtask: order[ends[subtask] - counts[subtask]:ends[subtask]]


def _last_of_each_key(hashes: np.ndarray, keys_at) -> Optional[np.ndarray]:
    """Which rows are the last of their key, or None when every key is there once;
    ``keys_at(rows)``: the keys of some rows. Equal keys have equal hashes: only the keys of the
    few rows sharing a hash are compared."""
    ordered = np.sort(hashes)
    shared = ordered[1:][ordered[1:] == ordered[:-1]]
    if not len(shared):
        return None
    # The rows whose hash's low 20 bits are a shared hash's (a lookup in a table of 1 MB, in
    # cache), then of those the rows with a shared hash (a hash set's lookup): for 5,000,000
    # hashes 0.014 s of CPU, the hash set's lookup of every row 0.056 s, np.isin (a sort) 0.78 s.
    low = np.zeros(1 << 20, dtype=bool)
    low[shared & 0xFFFFF] = True
    near = np.flatnonzero(low[np.bitwise_and(hashes, 0xFFFFF, out=ordered)])     # (ordered: done with)
    candidates = near[pc.is_in(pa.array(hashes[near]), value_set=pa.array(shared)).to_numpy(zero_copy_only=False)]
    keep = np.ones(len(hashes), dtype=bool)
    keys = keys_at(candidates)
    try:
        # The last row of each of the candidates' keys, grouped by Arrow: 5,000,000 rows, each
        # key twice, took 1.8 s of CPU so, 5 s as a Python loop.
        last = pa.table({"key": keys, "row": candidates}).group_by("key", use_threads=False) \
            .aggregate([("row", "max")]).column("row_max").to_numpy()
    except pa.ArrowNotImplementedError:     # keys Arrow does not group (structs, lists): one at a time
        seen: set = set()
        for i, key in zip(candidates[::-1].tolist(), map(_hashable, keys.to_pylist()[::-1])):
            if key in seen:
                keep[i] = False
            else:
                seen.add(key)
    else:
        keep[candidates] = False
        keep[last] = True
    return None if keep.all() else keep


def _hashable(value):
    """A struct's or list's Python value (a dict, a list) as a tuple, equal where they are equal."""
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    return tuple(map(_hashable, value)) if isinstance(value, list) else value


@dataclass(frozen=True)
class KeyedBootstrap:
    """``bootstrap_with(data).key_by(...)``: waits for ``transform``."""

    data: Any
    key_selector: Callable
    key_type: Optional[TypeInformation]
    record_type: Optional[TypeInformation]
    key_field: Optional[str] = None

    def transform(self, function: KeyedStateBootstrapFunction) -> StateBootstrapTransformation:
        if not isinstance(function, KeyedStateBootstrapFunction):
            raise TypeError(f"transform takes a KeyedStateBootstrapFunction, got {type(function).__name__}")
        return StateBootstrapTransformation(self.data, self.key_selector, self.key_type, function, self.record_type,
                                            key_field=self.key_field)


@dataclass(frozen=True)
class OneInputBootstrap:
    data: Any
    record_type: Optional[TypeInformation] = None

    def key_by(self, key_selector, key_type: Optional[TypeInformation] = None) -> KeyedBootstrap:
        """``key_selector``: a function of the record, or a field name; ``key_type`` as the job's
        ``key_by`` declares it (keys hash into key groups by it, as the job's records do)."""
        selector = (lambda r, f=key_selector: r[f]) if isinstance(key_selector, (str, int)) else key_selector
        return KeyedBootstrap(self.data, selector, key_type, self.record_type,
                              key_selector if isinstance(key_selector, str) else None)


class OperatorTransformation:
    """Flink's entry point for bootstrapping state: ``bootstrap_with(data)``."""

    @staticmethod
    def bootstrap_with(data, record_type: Optional[TypeInformation] = None) -> OneInputBootstrap:
        """``data``: a pyspark DataFrame or a pyarrow Table; its rows reach the function as Rows
        (``record_type``: their type, default inferred from the data's schema)."""
        if not isinstance(data, pa.Table) and not hasattr(data, "mapInArrow"):
            raise TypeError(f"bootstrap_with takes a pyspark DataFrame or a pyarrow Table, got {type(data).__name__}")
        return OneInputBootstrap(data, record_type)
