"""Flink's WindowOperator (and EvictingWindowOperator) over heap keyed state.

Per record: assign windows (merging them for sessions), drop windows that are already
past their cleanup time, add the record to each window's state, ask the trigger, fire
and/or purge, register a cleanup timer. Timers ask the trigger again and clean up at
``max_timestamp + allowed_lateness``. Records that land in no live window are late:
they go to the late-data side output, or are dropped and counted.
"""
from __future__ import annotations

from runtime.common.watermark_strategy import MAX_WATERMARK
from runtime.datastream import functions as fn
from runtime.datastream.state import (
    AggregatingStateDescriptor, ListStateDescriptor, ReducingStateDescriptor, ValueStateDescriptor)
from runtime.datastream.window import (
    MergingWindowAssigner, TimestampedValue, Trigger, WindowAssigner)
from runtime.state.snapshot_format import WINDOW_CONTENTS
from runtime.task.operators import TaskOperator, UserCodeException
from runtime.task.output import SideOutputs
from runtime.task.record_helpers import aggregator
from runtime.task.runtime_context import StreamingRuntimeContext


class _Contents:
    """Adds records to a window's state and reads the pane the window function gets."""

    def __init__(self, op: "WindowOperator"):
        spec = op.spec
        self.evicting = spec.evictor is not None
        if self.evicting or (spec.reduce_function is None and spec.aggregate_function is None
                             and spec.aggregation is None):
            descriptor = ListStateDescriptor(WINDOW_CONTENTS)
            self.kind = "list"
        elif spec.aggregate_function is not None:
            descriptor = AggregatingStateDescriptor(WINDOW_CONTENTS, spec.aggregate_function)
            self.kind = "single"
        else:
            reduce = spec.reduce_function.reduce if spec.reduce_function else aggregator(spec.aggregation)
            descriptor = ReducingStateDescriptor(WINDOW_CONTENTS, reduce, op.input_type)
            self.kind = "single"
        self.state = op.backend.get_partitioned_state(descriptor)

    def add(self, value, timestamp) -> None:
        self.state.add(TimestampedValue(value, timestamp) if self.evicting else value)


class WindowOperator(TaskOperator):
    def open(self):
        super().open()
        spec = self.spec
        self.assigner: WindowAssigner = spec.assigner
        self.trigger: Trigger = spec.trigger
        self.merging = isinstance(self.assigner, MergingWindowAssigner)
        self.event_time = self.assigner.is_event_time()
        self.allowed_lateness = spec.allowed_lateness
        self.late_tag = spec.late_data_output_tag.tag_id if spec.late_data_output_tag else None
        self.contents = _Contents(self)
        self.merging_windows = self.backend.get_partitioned_state(ValueStateDescriptor("merging-window-set"))
        self.trigger_ctx = _TriggerContext(self)
        self.assigner_ctx = _AssignerContext(self)
        self.process_ctx = _WindowProcessContext(self)
        self.num_late_records_dropped = 0
        self._out_values: list = []
        self._out_ts: list = []
        self._late: tuple[list, list] = ([], [])

    def user_functions(self):
        spec = self.spec
        return [spec.reduce_function, spec.aggregate_function, spec.window_function]

    # ---- records -----------------------------------------------------------------------

    def process_batch(self, values, timestamps, input_index):
        i = 0
        keys = self.keys_of(values)
        try:
            for i, (v, t) in enumerate(zip(values, timestamps)):
                self._process_element(v, t, keys[i])
        except UserCodeException:
            raise
        except Exception as e:
            self.fail(e, values[i], values, i)
        self._flush()

    def _process_element(self, value, timestamp, key) -> None:
        self.backend.set_current_key(key)
        self.assigner_ctx.timestamp = timestamp
        windows = self.assigner.assign_windows(value, timestamp, self.assigner_ctx)
        skipped = True
        mapping = stored = None
        if self.merging:
            stored = self.merging_windows.value() or {}
            mapping = dict(stored)
        for window in windows:
            state_window = window
            if self.merging:
                window = self._add_merging_window(mapping, window)
                if self._is_window_late(window):
                    mapping.pop(window, None)
                    continue
                state_window = mapping[window]
            elif self._is_window_late(window):
                continue
            skipped = False
            self.contents.state.set_current_namespace(state_window)
            self.contents.add(value, timestamp)
            result = self.trigger.on_element(value, timestamp, window, self.trigger_ctx.at(key, window))
            self._apply_trigger_result(result, key, window, state_window)
            self._register_cleanup_timer(window)
        if self.merging:
            self._persist_merging_windows(stored, mapping)
        if skipped and self._is_element_late(timestamp):
            if self.late_tag is not None:
                self._late[0].append(value)
                self._late[1].append(timestamp)
            else:
                self.num_late_records_dropped += 1

    def _apply_trigger_result(self, result, key, window, state_window) -> None:
        if result.is_fire():
            self._fire(key, window, state_window)
        if result.is_purge():
            self.contents.state.set_current_namespace(state_window)
            self.contents.state.clear()

    # ---- merging windows (Flink's MergingWindowSet) -------------------------------------

    def _add_merging_window(self, mapping: dict, new_window):
        merges: list = []
        self.assigner.merge_windows(list(mapping) + [new_window],
                                    lambda to_merge, result: merges.append((list(to_merge), result)))
        result_window, merged_new = new_window, False
        for merged, merge_result in merges:
            if new_window in merged:
                merged.remove(new_window)
                merged_new = True
                result_window = merge_result
            if not merged:
                continue
            kept_state_window = mapping[merged[0]]
            merged_state_windows = [mapping.pop(w) for w in merged if w in mapping]
            mapping[merge_result] = kept_state_window
            merged_state_windows.remove(kept_state_window)
            if not (len(merged) == 1 and merged[0] == merge_result):
                self._on_merge(merge_result, merged, kept_state_window, merged_state_windows)
        if not merges or (result_window == new_window and not merged_new):
            mapping[result_window] = result_window
        return result_window

    def _persist_merging_windows(self, stored: dict, mapping: dict) -> None:
        """Flink's MergingWindowSet.persist: written only when changed, and removed once the key
        has no window left (an empty set would stay in every checkpoint for good)."""
        if mapping != stored:
            self.merging_windows.update(mapping or None)

    def _on_merge(self, merge_result, merged_windows, state_window, merged_state_windows) -> None:
        if self.event_time and merge_result.max_timestamp() + self.allowed_lateness <= self.current_watermark:
            raise RuntimeError(
                f"{self.name}: The end timestamp of an event-time window cannot become earlier than the "
                f"current watermark by merging. Current watermark: {self.current_watermark} window: "
                f"{merge_result}")
        key = self.backend.current_key
        self.trigger.on_merge(merge_result, self.trigger_ctx.at(key, merge_result, merged_windows))
        for w in merged_windows:
            self.trigger.clear(w, self.trigger_ctx.at(key, w))
            self._delete_cleanup_timer(w)
        self.contents.state.merge_namespaces(state_window, merged_state_windows)

    # ---- time --------------------------------------------------------------------------

    def _cleanup_time(self, window) -> int:
        if self.event_time:
            t = window.max_timestamp() + self.allowed_lateness
            return t if t >= window.max_timestamp() and t < MAX_WATERMARK else MAX_WATERMARK
        return window.max_timestamp()

    def _is_window_late(self, window) -> bool:
        return self.event_time and self._cleanup_time(window) <= self.current_watermark

    def _is_element_late(self, timestamp) -> bool:
        return (self.event_time and timestamp is not None
                and timestamp + self.allowed_lateness <= self.current_watermark)

    def _register_cleanup_timer(self, window) -> None:
        t = self._cleanup_time(window)
        if t == MAX_WATERMARK:
            return      # GlobalWindow: never cleaned up
        if self.event_time:
            self.timers.register_event_time_timer(window, t)
        else:
            self.timers.register_processing_time_timer(window, t)

    def _delete_cleanup_timer(self, window) -> None:
        t = self._cleanup_time(window)
        if t == MAX_WATERMARK:
            return
        if self.event_time:
            self.timers.delete_event_time_timer(window, t)
        else:
            self.timers.delete_processing_time_timer(window, t)

    def process_watermark(self, watermark, input_index):
        super().process_watermark(watermark, input_index)
        self._flush()

    def advance_processing_time(self, time):
        super().advance_processing_time(time)
        self._flush()

    def on_event_time(self, timestamp, key, window):
        self._on_timer(timestamp, key, window, self.trigger.on_event_time, cleanup=self.event_time)

    def on_processing_time(self, timestamp, key, window):
        self._on_timer(timestamp, key, window, self.trigger.on_processing_time, cleanup=not self.event_time)

    def _on_timer(self, timestamp, key, window, trigger_method, cleanup: bool) -> None:
        mapping = stored = None
        state_window = window
        if self.merging:
            stored = self.merging_windows.value() or {}
            mapping = dict(stored)
            state_window = mapping.get(window)
            if state_window is None:
                return      # merged away; its timers are stale
        self.contents.state.set_current_namespace(state_window)
        result = trigger_method(timestamp, window, self.trigger_ctx.at(key, window))
        self._apply_trigger_result(result, key, window, state_window)
        if cleanup and timestamp == self._cleanup_time(window):
            self.contents.state.set_current_namespace(state_window)
            self.contents.state.clear()
            self.trigger.clear(window, self.trigger_ctx.at(key, window))
            self.process_ctx.window_ = window
            clear = getattr(self.spec.window_function, "clear", None)
            if self.spec.window_function_kind == "process" and clear is not None:
                self._call(clear, f"clear of window {window}", self.process_ctx)
            if mapping is not None:
                mapping.pop(window, None)
        if mapping is not None:
            self._persist_merging_windows(stored, mapping)

    # ---- emitting ----------------------------------------------------------------------

    def _fire(self, key, window, state_window) -> None:
        state = self.contents.state
        state.set_current_namespace(state_window)
        contents = state.get()
        if contents is None or (self.contents.kind == "list" and not contents):
            return
        is_list = self.contents.kind == "list"
        if self.contents.evicting:
            contents, is_list = self._evict_and_reduce(contents, window, state)
            if contents is None:
                return
        spec = self.spec
        kind = spec.window_function_kind
        if kind is None:
            results = [contents]
        else:
            elements = contents if is_list else [contents]
            f = spec.window_function
            where = f"window {window} of key {key!r}"
            if kind == "apply":
                args = (window, elements) if spec.non_keyed else (key, window, elements)
                results = self._call_drained(f.apply, where, *args)
            else:
                self.process_ctx.window_ = window
                args = (self.process_ctx, elements) if spec.non_keyed else (key, self.process_ctx, elements)
                results = self._call_drained(f.process, where, *args)
        self.process_ctx.side_outputs.split(results, window.max_timestamp(), self._out_values, self._out_ts)

    def _evict_and_reduce(self, stamped: list, window, state):
        """EvictingWindowOperator: evict, then reduce/aggregate what is left, then evict after."""
        spec = self.spec
        elements = list(stamped)
        evictor = spec.evictor
        evictor.evict_before(elements, len(elements), window, self.trigger_ctx)
        values = [e.value for e in elements]
        pane, is_list = values, True
        if spec.reduce_function is not None or spec.aggregation is not None:
            reduce = spec.reduce_function.reduce if spec.reduce_function else aggregator(spec.aggregation)
            pane, is_list = (values[0] if values else None), False
            for v in values[1:]:
                pane = reduce(pane, v)
        elif spec.aggregate_function is not None:
            agg = spec.aggregate_function
            acc = agg.create_accumulator()
            for v in values:
                acc = agg.add(v, acc)
            pane, is_list = (agg.get_result(acc) if values else None), False
        evictor.evict_after(elements, len(elements), window, self.trigger_ctx)
        state.update(elements)
        if not values:
            return None, is_list
        return pane, is_list

    def _flush(self) -> None:
        if self._out_values:
            values, ts = self._out_values, self._out_ts
            self._out_values, self._out_ts = [], []
            self.output.collect(values, ts)
        if self._late[0]:
            late, self._late = self._late, ([], [])
            self.output.collect_side(self.late_tag, late[0], late[1])
        self.process_ctx.side_outputs.flush(self.output)


class _TriggerContext(Trigger.OnMergeContext):
    def __init__(self, op: WindowOperator):
        self.op = op
        self.key = None
        self.window = None
        self.merged_windows: list = []

    def at(self, key, window, merged_windows=()) -> "_TriggerContext":
        self.key, self.window, self.merged_windows = key, window, list(merged_windows)
        return self

    def get_current_processing_time(self) -> int:
        return self.op.ctx.processing_time

    def get_current_watermark(self) -> int:
        return self.op.current_watermark

    def register_processing_time_timer(self, time: int) -> None:
        self.op.timers.register_processing_time_timer(self.window, time)

    def register_event_time_timer(self, time: int) -> None:
        self.op.timers.register_event_time_timer(self.window, time)

    def delete_processing_time_timer(self, time: int) -> None:
        self.op.timers.delete_processing_time_timer(self.window, time)

    def delete_event_time_timer(self, time: int) -> None:
        self.op.timers.delete_event_time_timer(self.window, time)

    def get_partitioned_state(self, state_descriptor):
        state = self.op.backend.get_partitioned_state(state_descriptor)
        state.set_current_namespace(self.window)
        return state

    def merge_partitioned_state(self, state_descriptor) -> None:
        state = self.op.backend.get_partitioned_state(state_descriptor)
        state.merge_namespaces(self.window, self.merged_windows)


class _AssignerContext(WindowAssigner.WindowAssignerContext):
    def __init__(self, op: WindowOperator):
        self.op = op
        self.timestamp = None

    def get_current_processing_time(self) -> int:
        return self.op.ctx.processing_time

    def get_runtime_context(self):
        return StreamingRuntimeContext(self.op)


class _WindowProcessContext(fn.ProcessWindowFunction.Context):
    def __init__(self, op: WindowOperator):
        self.op = op
        self.window_ = None
        self.side_outputs = SideOutputs()

    def window(self):
        return self.window_

    def current_processing_time(self) -> int:
        return self.op.ctx.processing_time

    def current_watermark(self) -> int:
        return self.op.current_watermark

    def window_state(self):
        if self.op.merging:
            # Flink's MergingWindowStateStore: a merged-away window's state would never be cleared.
            return _MergingWindowStateStore(self.op)
        return _ScopedStateStore(self.op, self.window_)

    def global_state(self):
        return _ScopedStateStore(self.op, None)

    def output(self, output_tag, value) -> None:
        self.side_outputs.add(output_tag, value, self.window_.max_timestamp())


class _ScopedStateStore:
    """Keyed state of a ProcessWindowFunction, per window or global to the key."""

    def __init__(self, op: WindowOperator, namespace):
        self.op, self.namespace = op, namespace

    def _state(self, descriptor):
        state = self.op.backend.get_partitioned_state(descriptor)
        state.set_current_namespace(self.namespace)
        return state

    get_state = get_list_state = get_map_state = get_reducing_state = get_aggregating_state = _state


class _MergingWindowStateStore:
    """Per-window state of merging windows: refused, as Flink refuses it."""

    def __init__(self, op: WindowOperator):
        self.op = op

    def _state(self, descriptor):
        raise NotImplementedError(
            f"per-window state is not allowed when using merging windows ({descriptor.name!r} "
            f"of context.window_state() with {type(self.op.assigner).__name__}), as in Flink: a window merged "
            f"into another would keep it for good. Keep it in context.global_state() and clear it yourself.")

    get_state = get_list_state = get_map_state = get_reducing_state = get_aggregating_state = _state
