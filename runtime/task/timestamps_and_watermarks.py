"""Timestamps and watermarks assigned mid-stream (Flink's TimestampsAndWatermarksOperator), and
the timestamp assignment a source chain also uses (runtime.task.stream_task)."""
from __future__ import annotations

from array import array
from datetime import date, datetime
from itertools import repeat

from runtime.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from runtime.task.arrow_batch import ArrowBatch
from runtime.task.operators import TaskOperator
from runtime.metrics.epoch_timings import RecordTimes
from runtime.task.record_helpers import extreme, no_timestamps


def assign_timestamps(op: TaskOperator, assigner, values: list, timestamps: list) -> list:
    """The assigner's timestamp of each record (its previous timestamp, or Long.MIN_VALUE).

    Each must be an int of epoch milliseconds, as PyFlink's assigner returns a Java long: anything
    else (None, a float, a datetime, a string) fails here, naming the record (and, chained to the
    source, where it came from) instead of leaving a window or timer to fail later on a record
    without time. Checked by the types of the batch's timestamps, a pass in C."""
    previous = repeat(MIN_WATERMARK) if no_timestamps(timestamps) else \
        [MIN_WATERMARK if t is None else t for t in timestamps]
    assigned = op.each(assigner.extract_timestamp, values, previous)
    if set(map(type, assigned)) != _INT:        # anything but ints: checked one by one
        failed = next(((i, p) for i, p in enumerate(map(_not_a_timestamp, assigned)) if p), None)
        if failed is not None:
            index, (kind, problem) = failed
            try:
                raise kind(f"the timestamp assigner returned {problem}; it must return the event time as an "
                           f"int of epoch milliseconds") from None
            except kind as e:
                op.fail(e, values[index], values, index)
    return assigned


_INT = {int}


def _not_a_timestamp(t) -> tuple:
    """What is wrong with ``t`` as a timestamp (the error's class, what it is and the fix), or ()
    for a long (a bool, a numpy integer)."""
    try:
        array("q", (t,))
        return ()
    except OverflowError:
        return ValueError, f"{t!r}, outside Java's long range (milliseconds, not micro- or nanoseconds?)"
    except TypeError:
        pass
    if t is None:
        what = "None (a record without an event time: filter such records out before the assigner)"
    elif isinstance(t, float):
        what = f"the float {t!r} (int(...) of it; time.time() counts seconds, * 1000 for milliseconds)"
    elif isinstance(t, (datetime, date)):
        what = f"the {type(t).__name__} {t!r} (int(dt.timestamp() * 1000) for a datetime)"
    elif isinstance(t, (str, bytes)):
        what = f"the {type(t).__name__} {t!r} (parse it, e.g. int(datetime.fromisoformat(s).timestamp() * 1000))"
    else:
        what = f"{t!r} of type {type(t).__name__}"
    return TypeError, what


class TimestampsAndWatermarksOperator(TaskOperator):
    """Assigns timestamps and generates watermarks mid-stream (``assign_timestamps_and_watermarks``).

    Upstream watermarks are dropped, except the final MAX_WATERMARK, as in Flink.
    """

    def __init__(self, node, ctx):
        super().__init__(node, ctx)     # state is restored before open(), as in Flink
        self.strategy = self.spec.watermark_strategy
        self.generator = self.strategy.create_generator()
        self.assigner = self.strategy.timestamp_assigner
        self.record_times = RecordTimes()   # a sample of the timestamps it assigned: the epoch's latency

    @property
    def takes_arrow(self) -> bool:
        # Without a timestamp assigner the records' own timestamps stay (Flink's
        # RecordTimestampAssigner): an Arrow batch passes through as it is.
        return self.assigner is None

    def process_batch(self, values, timestamps, input_index):
        if type(values) is ArrowBatch:
            latest = values.max_timestamp()
        else:
            if self.assigner is not None:
                timestamps = assign_timestamps(self, self.assigner, values, timestamps)
                self.record_times.add(timestamps)
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
