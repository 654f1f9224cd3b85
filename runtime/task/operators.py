"""The base of the executing operators (Flink's AbstractStreamOperator), a batch of records at a
time, and the failure of a user function (UserCodeException).

Records travel through a chain as two parallel lists, values and timestamps (None: no
timestamp). User functions are called once per record; a failure names the operator, the
subtask and the record, with the original traceback. Each kind of operator has its own module
(simple_operators, process_operator, grouped_reduce, timestamps_and_watermarks, stream_sink,
window_operator, window_aggregation, broadcast_operator); runtime.task.operator_factory picks one.
"""
from __future__ import annotations

import traceback
from functools import partial
from itertools import chain
from operator import is_not, length_hint
from typing import Callable, Optional

from runtime.common.throwables import ThrowableType, throwable_type
from runtime.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from runtime.datastream import functions as fn
from runtime.datastream.key_selector import select_keys
from runtime.state.backend import KeyedStateBackend
from runtime.state.key_groups import key_type_of
from runtime.task.output import Output
from runtime.task.record_helpers import no_timestamps
from runtime.task.runtime_context import StreamingRuntimeContext
from runtime.task.task_context import TaskContext
from runtime.task.task_state_manager import create_keyed_state_backend, release_keyed_state_backend
from runtime.task.timer_service import InternalTimerService


_is_not_none = partial(is_not, None)


class UserCodeException(RuntimeError):
    """A user function failed: names the operator, the subtask (i/p), the record and, when the
    source chain knows it, where the record came from (a file and line, a split and offset)."""

    def __init__(self, where: str, record, error: BaseException, trace: str, origin: Optional[str] = None,
                 batch: Optional[list] = None, index: Optional[int] = None, on: Optional[str] = "record"):
        self.where, self.record, self.error, self.trace, self.origin = where, record, error, trace, origin
        # The failed operator's input batch and the record's index in it: the source task tells
        # the record's origin when that batch is the one it read (runtime.task.source_reader).
        self.batch, self.index = batch, index
        # What failed: a record, a whole batch named by its first record (Arrow-batch functions),
        # or None: a call on no record (open, close).
        self.on = on
        # The cause first (operator, subtask, reason), then the record and where it came from.
        at = f", {origin}" if origin else ""
        on_what = f" (on {on} {record!r}{at})" if on is not None else ""
        super().__init__(f"{where} failed: {type(error).__name__}: {error}{on_what}\n"
                         f"--- original traceback ---\n{trace}")

    @property
    def throwable_type(self) -> ThrowableType:
        """As recoverable as the user function's error (copies made by ``at``/``within`` have no cause)."""
        return throwable_type(self.error)

    def at(self, origin: str) -> "UserCodeException":
        return UserCodeException(self.where, self.record, self.error, self.trace, origin, on=self.on)

    def within(self, batch: list, offset: int) -> "UserCodeException":
        """The failure on a slice of ``batch`` that starts at ``offset``, named as in ``batch``."""
        return UserCodeException(self.where, self.record, self.error, self.trace, self.origin, batch,
                                 offset + self.index, self.on)


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
            self.backend = create_keyed_state_backend(node, ctx, clock=lambda: self.ctx.processing_time,
                                                      kept=self.state_in_backend)
            self.backend.key_type = key_type_of(node.state_key_selectors[0])    # as key_by hashes keys
            self.timers = InternalTimerService(self.backend)
        self.records_in = 0
        self.records_out = 0
        # Input records per run of flat_map: one record out per record in, to begin with.
        self._flat_map_run = ctx.batch_size
        self.input_type = None      # the type of the first input's records, set by the task

    # ---- life cycle --------------------------------------------------------------------

    def user_functions(self) -> list:
        return [getattr(self.spec, "function", None)]

    def open(self) -> None:
        runtime_context = StreamingRuntimeContext(self)
        for f in self.user_functions():
            if isinstance(f, fn.Function):
                self._call_on_no_record(f.open, runtime_context)

    def close(self) -> None:
        for f in self.user_functions():
            if isinstance(f, fn.Function):
                self._call_on_no_record(f.close)

    def _call_on_no_record(self, f: Callable, *args) -> None:
        """A user function's ``open`` or ``close``: a failure names the call, not a record."""
        try:
            f(*args)
        except UserCodeException:
            raise
        except Exception as e:
            raise UserCodeException(f"{self.name} {self.ctx.subtask_label} {f.__name__}()", None, e,
                                    traceback.format_exc(), on=None) from e

    def dispose(self) -> None:
        """The task is done: drop state and buffers now. Operators, their contexts and the task's
        writers reference each other, so what they hold would otherwise wait for a cyclic
        collection, which costs ~2 µs per record held (a second per 500,000)."""
        if self.backend is not None:
            release_keyed_state_backend(self.backend)   # kept open for the next task, or closed
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
        """Whether the operator's state stays on the executor between epochs (a kept heap in its
        worker's memory, a RocksDB store on its disk)."""
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
            # The types the states were stored as: checked when the operator registers them.
            self.backend.restored_types = keyed.stored_types() if hasattr(keyed, "stored_types") else {}
            (self.backend.apply if getattr(keyed, "deletions", False) else self.backend.restore)(keyed)
            self.timers.restore(snapshot.get("timers", ()), self.ctx.key_group_range)

    # ---- helpers -----------------------------------------------------------------------

    def key_of(self, value, input_index: int = 0):
        selector = self.key_selectors[max(input_index - 1, 0)]
        return self._call(selector.get_key, value, value)

    def keys_of(self, values: list, input_index: int = 0) -> list:
        """The keys of a batch of records, announced to the keyed backend (``prepare_keys``)."""
        keys = select_keys(self.key_selectors[max(input_index - 1, 0)], values, self.each)
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
        with the record's timestamp, in batches of about the task's batch size: a function that
        makes many records of one (a line's words) would otherwise hand the chain a batch many
        times that size, whose records are out of the CPU's caches by the time the next operator
        reads them (a word count's source subtasks used a fifth more CPU). The input is taken in
        runs sized by the output per input record so far."""
        n, lo = len(values), 0
        while lo < n:
            hi = min(n, lo + self._flat_map_run)
            whole = hi - lo == n
            try:
                made = self._flat_map(f, values if whole else values[lo:hi],
                                      timestamps if whole else timestamps[lo:hi], input_index)
            except UserCodeException as e:
                if whole or e.index is None:
                    raise
                # Named as in the whole batch: the source task tells a record's origin by its index there.
                raise e.within(values, lo) from e.error
            self._flat_map_run = max(1, (hi - lo) * self.ctx.batch_size // max(made, 1))
            lo = hi

    def _flat_map(self, f: Callable, values: list, timestamps: list, input_index: int) -> int:
        """``flat_map`` of one run of records: the number of records emitted."""
        results = self.each_keyed(f, values, input_index, drain=True)
        out: list = []
        pending = iter(results)
        try:
            if no_timestamps(timestamps):      # the common case, at C speed
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
        return len(out)

    def fail(self, error: BaseException, record, batch: Optional[list] = None, index: Optional[int] = None) -> None:
        """Raise the failure on ``record``, ``batch[index]`` when the operator knows its position."""
        raise UserCodeException(f"{self.name} {self.ctx.subtask_label}", record, error,
                                traceback.format_exc(), batch=batch, index=index) from error

