"""The operators that call a user function once per record, one or two inputs (Flink's
StreamMap, StreamFlatMap, StreamFilter, CoStreamMap, CoStreamFlatMap), and the source chain's
head. Keyed, they run each record with its key current (``TaskOperator.each_keyed``)."""
from __future__ import annotations

from itertools import compress

from runtime.datastream import functions as fn
from runtime.task.operators import TaskOperator


class SourceOperator(TaskOperator):
    """The head of a source chain: the task reads the splits and pushes their batches here."""

    def process_batch(self, values, timestamps, input_index):
        self.output.collect(values, timestamps)


class StreamMap(TaskOperator):
    def process_batch(self, values, timestamps, input_index):
        self.output.collect(self.each_keyed(fn.method_of(self.spec.function, "map"), values, input_index),
                            timestamps)


class StreamFlatMap(TaskOperator):
    def process_batch(self, values, timestamps, input_index):
        self.flat_map(fn.method_of(self.spec.function, "flat_map"), values, timestamps, input_index)


class StreamFilter(TaskOperator):
    def process_batch(self, values, timestamps, input_index):
        keep = self.each_keyed(fn.method_of(self.spec.function, "filter"), values, input_index)
        self.output.collect(list(compress(values, keep)), list(compress(timestamps, keep)))


class CoStreamMap(TaskOperator):
    def process_batch(self, values, timestamps, input_index):
        f = self.spec.function.map1 if input_index == 1 else self.spec.function.map2
        self.output.collect(self.each_keyed(f, values, input_index), timestamps)


class CoStreamFlatMap(TaskOperator):
    def process_batch(self, values, timestamps, input_index):
        f = self.spec.function.flat_map1 if input_index == 1 else self.spec.function.flat_map2
        self.flat_map(f, values, timestamps, input_index)
