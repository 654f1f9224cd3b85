"""The rolling reduce and aggregations of a keyed stream (Flink's StreamGroupedReduceOperator,
and in BATCH mode its BatchGroupedReduceOperator): ``reduce``, ``sum``, ``min``, ``max``,
``min_by``, ``max_by``, one value per key in keyed state."""
from __future__ import annotations

from runtime.common.watermark_strategy import MAX_WATERMARK
from runtime.datastream.state import ValueStateDescriptor
from runtime.state.backend import VOID_NAMESPACE
from runtime.state.snapshot_format import ROLLING_AGGREGATE
from runtime.task.operators import TaskOperator, UserCodeException
from runtime.task.record_helpers import aggregator


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
