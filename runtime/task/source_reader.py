"""The source side of a source task (Flink's SourceOperator driving its SourceReader): reads
the epoch's splits round-robin, a batch of each at a time, assigns timestamps, runs a watermark
generator per split and emits the minimum over the splits that are not idle, and returns each
split's state (reader position, generator, idleness clock) for the next epoch. Its own module:
the task loop only asks it to run.

A reader yields each batch as (values, timestamps) lists, or as an ``ArrowBatch`` of the source's
produced type (a reader that makes columns in one go, as the Kafka reader's strings): it goes down
the chain as it is, so an Arrow-batch function takes it without a record object per value, and
a per-record operator gets it decoded once (``Output``).
"""
from __future__ import annotations

from typing import Callable

from runtime.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from runtime.metrics.epoch_timings import RecordTimes
from runtime.task.arrow_batch import ArrowBatch
from runtime.task.deployment import TaskDeploymentDescriptor
from runtime.task.operators import UserCodeException
from runtime.task.record_helpers import extreme
from runtime.task.timestamps_and_watermarks import assign_timestamps


class SourceInput:
    """One epoch of a source subtask: the chain's head is the source operator."""

    def __init__(self, head, tdd: TaskDeploymentDescriptor, ctx, batch: bool):
        self.head = head
        self.tdd = tdd
        self.ctx = ctx
        self.batch = batch      # BATCH execution mode
        self.record_times = RecordTimes()   # a sample of the timestamps read: the epoch's latency

    def run(self) -> tuple[int, dict]:
        """Reads the splits to their end this epoch: (records read, each split's state)."""
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
        declared = self.head.node.output_type
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
                if type(batch) is not ArrowBatch:
                    values, timestamps = batch
                elif assigner is not None or batch.type_info != declared:
                    values, timestamps = batch.rows()       # records for the assigner, or of another type
                else:
                    values, timestamps = batch, batch.timestamps
                if not len(values):
                    continue
                active_this_epoch.add(split.split_id)
                records += len(values)
                try:
                    if assigner is not None:
                        timestamps = assign_timestamps(self.head, assigner, values, timestamps)
                    gen = generators[split.split_id]
                    if gen is None:
                        latest = None
                    elif type(values) is ArrowBatch:
                        latest = values.max_timestamp()
                    else:
                        latest = extreme(max, timestamps)
                    if latest is not None:
                        gen.on_event(latest)
                    self.record_times.add(timestamps)
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


def _with_origin(error: UserCodeException, batch, origin: Callable[[int], str]) -> UserCodeException:
    """The failure with its record's origin when the failed operator's input was the very batch
    the source read (chained to the source, or after a timestamp assigner that passes it on):
    the record's index there is its index in the read. Past a filter, a map or a shuffle the
    position is lost: nothing is said rather than something wrong (records are not compared,
    equal or interned values would name the wrong line). An ArrowBatch's records are the list a
    per-record operator got from it."""
    if type(batch) is ArrowBatch:
        batch = batch.rows()[0]
    return error.at(origin(error.index)) if error.batch is batch and error.index is not None else error
