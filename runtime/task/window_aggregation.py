"""Local-global window aggregation: built-in window aggregations run vectorised.

For a time window (tumbling or sliding, default trigger, no evictor, no lateness, no late
side output) aggregated with a built-in ``sum``/``min``/``max``, the producer of the keyed
edge pre-aggregates its records per (key, window) with Arrow before the shuffle, and the
window subtask merges those partial aggregates and fires complete windows. Flink SQL calls
this local-global aggregation; it is valid because these aggregations are associative.

The result equals the general WindowOperator's: the emitted record is the first record of
the key's window with the aggregated field replaced, at the window's max timestamp, and
the state is kept in the same rows (WINDOW_CONTENTS per key and window), so a snapshot
restores into either operator.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Optional

import numpy as np
import pyarrow as pa

from runtime.common.arrow import arrow_schema, arrow_to_records
from runtime.common.watermark_strategy import MAX_WATERMARK
from runtime.datastream import window as w
from runtime.datastream.data_stream import FieldKeySelector
from runtime.datastream.key_selector import select_keys
from runtime.datastream.operators import WindowSpec
from runtime.task.arrow_batch import ArrowBatch
from runtime.task.channel_events import PreAggregatedPanes
from runtime.task.operators import TaskOperator
from runtime.task.record_helpers import extreme, field_of
from runtime.task.record_columns import RecordColumns, plain_tuple, take, to_pylist
from runtime.task.partitioning import key_channels
from runtime.task.timer_service import EVENT_TIME, PROCESSING_TIME
from runtime.state.key_groups import assign_to_key_group, key_type_of
from runtime.state.snapshot_format import WINDOW_CONTENTS

_AGGREGATIONS = {"sum", "min", "max"}
_EXACT_KEYS = {pa.string(), pa.int64()}     # not binary: Arrow makes str and bytes one binary column
# Buffer at most this many records before pre-aggregating, whatever the watermark.
MAX_BUFFERED_RECORDS = 500_000


def is_vectorizable(spec) -> bool:
    if not isinstance(spec, WindowSpec) or spec.aggregation is None:
        return False
    a = spec.assigner
    return (spec.aggregation.kind in _AGGREGATIONS
            and isinstance(a, (w.TumblingEventTimeWindows, w.TumblingProcessingTimeWindows,
                               w.SlidingEventTimeWindows, w.SlidingProcessingTimeWindows))
            and type(spec.trigger) is type(a.get_default_trigger(None))
            and spec.evictor is None and spec.window_function is None
            and spec.allowed_lateness == 0 and spec.late_data_output_tag is None)


class _Windows:
    """Vectorised window assignment of a tumbling or sliding assigner."""

    def __init__(self, assigner):
        self.event_time = assigner.is_event_time()
        self.size = assigner.get_size()
        self.slide = assigner.get_slide() if hasattr(assigner, "get_slide") else self.size
        self.offset = assigner._offset

    def assign(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row of each assignment, window start), latest window first per row as Flink does."""
        last = ts - np.mod(ts - self.offset + self.slide, self.slide)
        if self.slide == self.size:
            return np.arange(len(ts)), last
        per = -(-self.size // self.slide)
        rows = np.repeat(np.arange(len(ts)), per)
        starts = np.repeat(last, per) - np.tile(np.arange(per) * self.slide, len(ts))
        keep = starts > np.repeat(ts, per) - self.size
        return rows[keep], starts[keep]

    def max_timestamp(self, start: int) -> int:
        return start + self.size - 1


def _keys(selector, values: list) -> list:
    if isinstance(selector, FieldKeySelector) and isinstance(selector.field, int):
        return list(map(itemgetter(selector.field), values))
    return select_keys(selector, values)


_NOT_ARROW = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, OverflowError)


def _arrays(keys: list, fields: list) -> tuple:
    """Keys and aggregated fields as Arrow arrays; TypeError where Arrow would change them."""
    key_array = pa.array(keys)
    if pa.types.is_binary(key_array.type) and set(map(type, keys)) != {bytes}:
        raise TypeError("str and bytes keys: Arrow would make 'a' and b'a' one key")
    field_array = pa.array(fields)
    if pa.types.is_decimal(field_array.type) or pa.types.is_decimal(key_array.type):
        # Arrow gives a batch's decimals one scale; a BigDecimal keeps its own (a sum's
        # is its summands' largest, a max is the value as it came).
        raise TypeError("decimals keep their own scale: aggregated in Python")
    return key_array, field_array


class PanePreAggregator:
    """Producer side: turns a run of records into partial aggregates per (key, window)."""

    def __init__(self, spec, key_selector, processing_time: int, record_error):
        self.windows = _Windows(spec.assigner)
        self.kind = spec.aggregation.kind
        self.position = spec.aggregation.position
        self.key_selector = key_selector
        self.key_field = (key_selector.field if isinstance(key_selector, FieldKeySelector)
                          and isinstance(key_selector.field, int) else None)
        self.key_field_name = key_selector.field if isinstance(key_selector, FieldKeySelector) else None
        self.processing_time = processing_time
        self.record_error = record_error

    def aggregate(self, values: list, timestamps: list) -> PreAggregatedPanes:
        """The distinct (key, window) of the records, with their aggregates."""
        ts = self._timestamps(values, timestamps)
        pos = self.position
        try:
            keys = _keys(self.key_selector, values)
            fields = values if pos is None else list(map(itemgetter(pos), values))
        except Exception as e:      # a record without the key or the field
            for v in values:
                try:
                    _keys(self.key_selector, [v]), (None if pos is None else v[pos])
                except Exception:
                    self.record_error(e, v)
            raise
        try:
            return self._record_panes(values, *_arrays(keys, fields), ts)
        except _NOT_ARROW:
            rows, starts = self.windows.assign(ts)
            return self._aggregate_in_python(keys, fields, rows, starts, values)

    def _timestamps(self, values: list, timestamps: list) -> np.ndarray:
        n = len(values)
        if not self.windows.event_time:
            return np.full(n, self.processing_time, dtype=np.int64)
        try:
            return np.fromiter(timestamps, dtype=np.int64, count=n)
        except TypeError:
            bad = next(v for v, t in zip(values, timestamps) if t is None)
            self.record_error(RuntimeError(
                "Record has no timestamp (Long.MIN_VALUE). Is the time characteristic set to "
                "'ProcessingTime', or did you forget to call 'assign_timestamps_and_watermarks(...)'?"), bad)

    def batch_columns(self, values: list, timestamps: list) -> Optional[tuple]:
        """(keys, aggregated fields, timestamps) of a batch of records as Arrow and NumPy, made as
        the batch comes, while its records are fresh in the CPU's caches (converting a buffered run
        of 200,000 records at once took 1.7 times as long); None when the key is a function (user
        code: called once per record, by ``aggregate``) or the batch does not convert."""
        if not isinstance(self.key_selector, FieldKeySelector) or not values:
            return None
        try:
            # A record without a timestamp fails the conversion (no scan for None first).
            ts = (np.fromiter(timestamps, dtype=np.int64, count=len(values)) if self.windows.event_time
                  else self._timestamps(values, timestamps))
            keys = _keys(self.key_selector, values)
            fields = values if self.position is None else list(map(itemgetter(self.position), values))
            return (*_arrays(keys, fields), ts)
        except Exception:       # aggregate() names the record, or aggregates in Python
            return None

    def batch_panes(self, values: list, timestamps: list) -> Optional[PreAggregatedPanes]:
        """``aggregate`` of a batch of records as it comes, from its ``batch_columns``, while its
        records are fresh in the CPU's caches: a buffered run keeps its panes, not its records
        (holding 500,000 records to group at once, then freeing them cold, took a fifth of a word
        count's source subtask); None where ``aggregate`` must see the records."""
        columns = self.batch_columns(values, timestamps)
        if columns is None:
            return None
        try:
            return self._record_panes(values, *columns)
        except _NOT_ARROW:      # an aggregation Arrow has not (a sum of strings)
            return None

    def merge(self, parts: list) -> PreAggregatedPanes:
        """The panes of consecutive batches (``batch_panes``, in arrival order) as one run's: per
        (key, window) the combined aggregate, the first part's representative and the summed
        count. Raises an Arrow error when the parts' types differ (ints, then floats)."""
        if len(parts) == 1:
            return parts[0]
        reps = RecordColumns.concat([p.representatives for p in parts])
        table = pa.Table.from_arrays(
            [pa.concat_arrays([p.keys for p in parts]), pa.array(np.concatenate([p.starts for p in parts])),
             pa.concat_arrays([p.accumulators for p in parts]), pa.array(np.arange(len(reps))),
             pa.array(np.concatenate([p.counts for p in parts]))], names=["k", "s", "v", "i", "c"])
        grouped = table.group_by(["k", "s"], use_threads=False).aggregate(
            [("v", self.kind), ("i", "min"), ("c", "sum")])
        keys, accs = grouped.column("k").combine_chunks(), grouped.column(f"v_{self.kind}").combine_chunks()
        given = self._given(keys, accs)     # as _record_panes gives them: the merged columns stand in
        first = reps.take(grouped.column("i_min").to_numpy(),
                          {id(c): given[i] for i, c in enumerate(reps.columns or ()) if i in given})
        return PreAggregatedPanes(keys, grouped.column("s").to_numpy(), accs, first,
                                  grouped.column("c_sum").to_numpy())

    def _record_panes(self, values: list, key_array, field_array, ts: np.ndarray) -> PreAggregatedPanes:
        rows, starts = self.windows.assign(ts)

        def representatives(first, keys, accs):
            return RecordColumns.of(take(values, first), self._given(keys, accs))
        return self._group(key_array, field_array, rows, starts, representatives)

    def _given(self, keys, accs) -> dict:
        """The representatives' fields that are the panes' columns, by position: the aggregated
        field (replaced by the merged aggregate wherever it is used: the partial one stands in)
        and the key field where Arrow holds the keys exactly (strings, integers; not a double that
        was an int)."""
        given = {} if self.position is None else {self.position: accs}
        if self.key_field is not None and keys.type in _EXACT_KEYS:
            given[self.key_field] = keys
        return given

    def _group(self, key_array, field_array, rows, starts, representatives) -> PreAggregatedPanes:
        """The panes of (key, window start) with Arrow's group-by; ``representatives(first rows,
        keys, aggregates)`` gives the first record of each."""
        if self.windows.slide != self.windows.size:     # sliding: a record in several windows
            key_array, field_array = key_array.take(rows), field_array.take(rows)
        # from_arrays, not pa.table(dict): the latter imports pandas (seconds per worker).
        table = pa.Table.from_arrays([key_array, pa.array(starts), field_array, pa.array(rows)],
                                     names=["k", "s", "v", "i"])
        grouped = table.group_by(["k", "s"], use_threads=False).aggregate(
            [("v", self.kind), ("i", "min"), ([], "count_all")])     # count_all: half the time of a count of "i"
        first = grouped.column("i_min").to_numpy()
        # Keys and aggregates stay Arrow arrays: the channel split and the shuffle are columnar.
        keys, accs = grouped.column("k").combine_chunks(), grouped.column(f"v_{self.kind}").combine_chunks()
        return PreAggregatedPanes(keys, grouped.column("s").to_numpy(), accs, representatives(first, keys, accs),
                                  grouped.column("count_all").to_numpy())

    def aggregate_arrow(self, batch: ArrowBatch) -> Optional[PreAggregatedPanes]:
        """``aggregate`` of an Arrow batch from its columns, its records never made; None when its
        key is not a field, its key or field not a plain number or string, or a timestamp is
        missing (``aggregate`` of its records then says the same as for any records)."""
        t = batch.type_info
        if self.key_field_name is None:
            return None
        key_array = batch.columns.column(t.field_index(self.key_field_name))
        position = self.position
        field_array = batch.columns.column(0 if position is None else t.field_index(position))
        key_array, field_array = _plain_column(key_array, keys=True), _plain_column(field_array, keys=False)
        if key_array is None or field_array is None:
            return None
        if self.windows.event_time:
            ts = batch.timestamp_array()
            if ts is None:
                return None
        else:
            ts = np.full(len(batch), self.processing_time, dtype=np.int64)
        rows, starts = self.windows.assign(ts)
        plain = plain_tuple(t)
        field = None if position is None else t.field_index(position)
        key_field = t.field_index(self.key_field_name)

        def representatives(first, keys, accs):
            taken = batch.columns.take(pa.array(first))
            if plain:       # tuples of plain fields: the columns are the records' fields
                given = {field: accs}
                if keys.type == taken.column(key_field).type:   # the grouped keys are the key field
                    given.setdefault(key_field, keys)
                return RecordColumns(columns=[given.get(i, c) for i, c in enumerate(taken.columns)])
            return RecordColumns.of(arrow_to_records(taken, t), {} if field is None else {field: accs})
        return self._group(key_array, field_array, rows, starts, representatives)

    def _aggregate_in_python(self, keys, fields, rows, starts, values):
        # Keys Arrow cannot hold (tuples, mixed types): same result, one dict update per record.
        combine = _COMBINE[self.kind]
        groups: dict = {}
        for r, s in zip(rows.tolist(), starts.tolist()):
            g = groups.get((keys[r], s))
            if g is None:
                groups[(keys[r], s)] = [fields[r], r, 1]
            else:
                g[0] = combine(g[0], fields[r])
                g[2] += 1
        ks = [k for k, _ in groups]
        return PreAggregatedPanes(ks, np.array([s for _, s in groups], dtype=np.int64),
                                  [g[0] for g in groups.values()], RecordColumns.of([values[g[1]] for g in groups.values()]),
                                  np.array([g[2] for g in groups.values()]))


_COMBINE = {"sum": lambda a, b: a + b, "min": min, "max": max}


def _plain_column(column: pa.Array, keys: bool) -> Optional[pa.Array]:
    """A key (string, integer) or aggregated (integer, floating) column as the Python records' own
    would be in Arrow (int64, double), so both kinds of panes merge; None for any other column."""
    t = column.type
    if column.null_count:
        return None
    if pa.types.is_integer(t):
        return column.cast(pa.int64())
    if pa.types.is_string(t) and keys:
        return column
    if pa.types.is_floating(t) and not keys:
        return column.cast(pa.float64())
    return None


class PreAggregatingRecordWriter:
    """A keyed edge into a vectorisable window: ships partial aggregates, one batch per channel.

    Records are buffered while the watermark stays below every buffered window's end: such
    a watermark cannot make them late, so it may overtake them. A watermark that reaches a
    buffered window flushes the buffer first.
    """

    def __init__(self, writer, spec, processing_time: int, record_error):
        self.writer = writer            # the plain RecordWriter: channels, events, rows()
        self.edge = writer.selector.p
        self.aggregator = PanePreAggregator(spec, self.edge.key_selector, processing_time, record_error)
        self.windows = self.aggregator.windows
        self.values: list = []      # records whose panes aggregate() makes at the flush
        self.timestamps: list = []
        self.panes: list = []       # each buffered batch's panes (batch_panes), in arrival order
        self.arrow: list = []       # ArrowBatches, buffered as they came
        self.buffered = 0
        self.min_end = MAX_WATERMARK

    takes_arrow = True

    def process_batch(self, values, timestamps, input_index):
        if not len(values):
            return
        self.writer.records_out += len(values)
        # Each kind of buffer holds a run alone, flushed when another kind comes: in arrival
        # order, a pane's first record is the first to come.
        first_start = None          # the first window of the batch's earliest record
        if type(values) is ArrowBatch:
            if self.values or self.panes:
                self.flush()
            self.arrow.append(values)
            earliest = values.min_timestamp() if self.windows.event_time else None
        else:
            if self.arrow:
                self.flush()
            panes = self.aggregator.batch_panes(values, timestamps) if not self.values else None
            if panes is not None:
                self.panes.append(panes)
                earliest = None
                if self.windows.event_time:
                    first_start = int(panes.starts.min())
            else:
                if self.panes:
                    self.flush()
                self.values.extend(values)
                self.timestamps.extend(timestamps)
                earliest = extreme(min, timestamps) if self.windows.event_time else None
        self.buffered += len(values)
        if earliest is not None:
            _, starts = self.windows.assign(np.array([earliest], dtype=np.int64))
            first_start = int(starts.min())
        if first_start is not None:
            # The first window of the earliest buffered record is the first that can fire.
            self.min_end = min(self.min_end, self.windows.max_timestamp(first_start))
        if self.buffered >= MAX_BUFFERED_RECORDS:
            self.flush()

    def flush(self) -> None:
        if self.arrow:
            batch = ArrowBatch.concat(self.arrow)
            panes = self.aggregator.aggregate_arrow(batch)
            parts = [panes if panes is not None else self.aggregator.aggregate(*batch.rows())]
        elif self.panes:
            try:
                parts = [self.aggregator.merge(self.panes)]
            except _NOT_ARROW:      # parts of different types: the window subtask merges them
                parts = self.panes
        elif self.values:
            parts = [self.aggregator.aggregate(self.values, self.timestamps)]
        else:
            return
        self.values, self.timestamps, self.panes, self.arrow = [], [], [], []
        self.buffered, self.min_end = 0, MAX_WATERMARK
        for panes in parts:
            self._ship(panes)

    def _ship(self, panes: PreAggregatedPanes) -> None:
        """Each channel's panes into its events."""
        channels = key_channels(panes.keys, self.edge.max_parallelism, self.writer.consumer_p,
                                key_type_of(self.edge.key_selector))
        for c in np.unique(channels).tolist():
            idx = np.flatnonzero(channels == c)
            keys, accs = take(panes.keys, idx), take(panes.accumulators, idx)
            # A representative's key and aggregated fields are these columns: taken once, they
            # are pickled once (a third less to shuffle).
            reps = panes.representatives.take(idx, {id(panes.keys): keys, id(panes.accumulators): accs})
            self.writer.channels[c].append(PreAggregatedPanes(keys, panes.starts[idx], accs, reps, panes.counts[idx]))

    def process_watermark(self, watermark, input_index):
        if watermark >= self.min_end:
            self.flush()
        self.writer.process_watermark(watermark, input_index)

    def process_idle(self, input_index):
        self.writer.process_idle(input_index)

    def rows(self):
        self.flush()
        return self.writer.rows()

    @property
    def records_out(self):
        return self.writer.records_out


class WindowAggregationOperator(TaskOperator):
    """The global half: collects partial aggregates per window, merges them when it fires."""

    state_in_backend = False    # its panes are in memory, snapshotted whole

    def __init__(self, node, ctx):
        super().__init__(node, ctx)     # state is restored before open(), as in Flink
        spec = self.spec
        self.windows = _Windows(spec.assigner)
        self.kind = spec.aggregation.kind
        self.position = spec.aggregation.position
        # window start -> chunks of (keys, aggregates, first records), merged when the window fires
        self.panes: dict[int, list] = {}
        self.num_late_records_dropped = 0
        self.local = PanePreAggregator(spec, self.key_selectors[0], self.ctx.processing_time, self.fail)
        self.result_schema = None

    def open(self):
        super().open()
        # Results of plain tuples leave as Arrow columns (an ArrowBatch): no Python record per
        # result for a sink or operator that takes Arrow (the collect sink ships the columns).
        if plain_tuple(self.input_type) and isinstance(self.position, int):
            self.result_schema = arrow_schema(self.input_type)

    def process_batch(self, values, timestamps, input_index):
        if type(values) is ArrowBatch:
            values, timestamps = values.rows()
        self.process_panes(self.local.aggregate(values, timestamps))

    def process_panes(self, panes: PreAggregatedPanes) -> None:
        keys, starts, accs, reps, counts = panes
        live = np.ones(len(starts), dtype=bool)
        if self.windows.event_time:
            live = starts + (self.windows.size - 1) > self.current_watermark
            self.num_late_records_dropped += int(counts[~live].sum())
        for start in np.unique(starts[live]).tolist():
            idx = np.flatnonzero((starts == start) & live)
            self.panes.setdefault(start, []).append(
                (take(keys, idx), take(accs, idx), reps.take(idx)))

    def _merge(self, chunks: list) -> tuple:
        """Distinct keys of a window with their merged aggregate (Arrow arrays, or lists when Arrow
        cannot merge them) and first record."""
        reps = RecordColumns.concat([chunk_reps for _, _, chunk_reps in chunks])
        if all(isinstance(k, pa.Array) and isinstance(a, pa.Array) for k, a, _ in chunks):
            try:
                table = pa.Table.from_arrays(
                    [pa.concat_arrays([k for k, _, _ in chunks]), pa.concat_arrays([a for _, a, _ in chunks]),
                     pa.array(np.arange(len(reps)))], names=["k", "v", "i"])
                grouped = table.group_by("k", use_threads=False).aggregate([("v", self.kind), ("i", "min")])
                first = grouped.column("i_min").to_numpy()
                return (grouped.column("k").combine_chunks(), grouped.column(f"v_{self.kind}").combine_chunks(),
                        reps.take(first))
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                pass
        combine, merged = _COMBINE[self.kind], {}
        for keys, accs, _ in chunks:
            for key, acc in zip(to_pylist(keys), to_pylist(accs)):
                merged[key] = acc if key not in merged else combine(merged[key], acc)
        firsts: dict = {}
        for keys, _, chunk_reps in chunks:
            for key, rep in zip(to_pylist(keys), chunk_reps.records()):
                firsts.setdefault(key, rep)
        return list(merged), list(merged.values()), RecordColumns(rows=[firsts[k] for k in merged])

    def _fire_until(self, time: int) -> None:
        ready = sorted(s for s in self.panes if self.windows.max_timestamp(s) <= time)
        results, stamps = [], []
        for start in ready:
            _, accs, reps = self._merge(self.panes.pop(start))
            results.append(self._results(reps, accs))
            stamps.append(np.full(len(accs), self.windows.max_timestamp(start), dtype=np.int64))
        if not results:
            return
        if all(isinstance(r, pa.RecordBatch) for r in results):
            batch = pa.Table.from_batches(results, schema=self.result_schema).combine_chunks().to_batches()
            out = ArrowBatch(batch[0] if batch else results[0], pa.array(np.concatenate(stamps)), self.input_type)
            self.output.collect(out, out.timestamps)
            return
        values = []
        for r in results:
            values.extend(arrow_to_records(r, self.input_type) if isinstance(r, pa.RecordBatch) else r)
        self.output.collect(values, np.concatenate(stamps).tolist())

    def _results(self, reps: RecordColumns, accs):
        """A window's results: its first records with the aggregated field replaced, as a batch of
        the input type's columns when they are Arrow columns of its types, else as records."""
        pos = self.position
        if self.result_schema is not None and reps.columns is not None and isinstance(accs, pa.Array):
            columns = [accs if i == pos else c for i, c in enumerate(reps.columns)]
            if len(columns) == len(self.result_schema) and all(
                    isinstance(c, pa.Array) and c.type == f.type for c, f in zip(columns, self.result_schema)):
                return pa.RecordBatch.from_arrays(columns, schema=self.result_schema)
        return reps.with_field(pos, to_pylist(accs))

    def dispose(self) -> None:
        super().dispose()
        self.panes = {}

    def process_watermark(self, watermark, input_index):
        if watermark <= self.current_watermark:
            return
        self.current_watermark = watermark
        if self.windows.event_time:
            self._fire_until(watermark)
        self.output.emit_watermark(watermark)

    def advance_processing_time(self, time):
        if not self.windows.event_time:
            self._fire_until(time)

    # State in the rows of the general WindowOperator: WINDOW_CONTENTS per key and window,
    # plus the window's timer, so either operator restores the other's snapshot.
    def snapshot(self) -> dict:
        maxp, key_type = self.ctx.max_parallelism, key_type_of(self.key_selectors[0])
        keyed, timers = [], []
        domain = EVENT_TIME if self.windows.event_time else PROCESSING_TIME
        for start, chunks in self.panes.items():
            window = w.TimeWindow(start, start + self.windows.size)
            keys, accs, reps = self._merge(chunks)
            for key, value in zip(to_pylist(keys), reps.with_field(self.position, to_pylist(accs))):
                kg = assign_to_key_group(key, maxp, key_type)
                keyed.append((kg, WINDOW_CONTENTS, window, key, value))
                timers.append((kg, domain, window.max_timestamp(), key, window))
        return {"keyed": keyed, "timers": timers,
                "types": {WINDOW_CONTENTS: self.input_type}}

    def restore(self, snapshot: dict) -> None:
        kgr = self.ctx.key_group_range
        restored: dict[int, tuple] = {}
        for kg, name, window, key, value in snapshot.get("keyed", ()):
            if name == WINDOW_CONTENTS and kgr.contains(kg):
                keys, accs, reps = restored.setdefault(window.start, ([], [], []))
                keys.append(key)
                accs.append(field_of(value, self.position))
                reps.append(value)
        for start, (keys, accs, reps) in restored.items():
            self.panes.setdefault(start, []).append((keys, accs, RecordColumns.of(reps)))
