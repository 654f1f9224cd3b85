"""``CEP.pattern(stream, pattern)``: a stream of the pattern's matches, per key.

The matching runs in ``CepOperator`` (runtime.cep.cep_operator): per key, the NFA's state in a
ValueState and, in event time, the events waiting for the watermark, fed to the NFA in timestamp
order when it passes them, so out-of-order input matches as if ordered; events at or behind the
watermark are late (dropped, or side output). Being plain keyed state and timers, checkpoints,
restore and rescaling by key groups need nothing more.
"""
from __future__ import annotations

from typing import Optional

from runtime.datastream.data_stream import DataStream, KeyedStream, NullByteKeySelector
from runtime.datastream.functions import KeyedProcessFunction
from runtime.datastream.output_tag import OutputTag

from .cep_operator import EVENT_QUEUE, NFA_STATE, CepOperator
from .functions import PatternProcessFunction, SelectAdapter
from .nfa import compile_pattern
from .pattern import Pattern

__all__ = ["CEP", "CepFunction", "EVENT_QUEUE", "NFA_STATE", "PatternStream"]


class CEP:
    @staticmethod
    def pattern(input_stream: DataStream, pattern: Pattern) -> "PatternStream":
        if not isinstance(input_stream, DataStream):
            raise TypeError(f"CEP.pattern needs a DataStream or KeyedStream, got {input_stream!r}")
        compile_pattern(pattern)  # a malformed pattern fails here, when the job is built
        return PatternStream(input_stream, pattern)


class PatternStream:
    """A stream of matches of ``pattern``; event time unless ``in_processing_time()``."""

    def __init__(self, stream: DataStream, pattern: Pattern, event_time: bool = True,
                 late_data_tag: Optional[OutputTag] = None):
        self._stream, self._pattern = stream, pattern
        self._event_time, self._late_data_tag = event_time, late_data_tag

    def in_processing_time(self) -> "PatternStream":
        return PatternStream(self._stream, self._pattern, False, self._late_data_tag)

    def in_event_time(self) -> "PatternStream":
        return PatternStream(self._stream, self._pattern, True, self._late_data_tag)

    def side_output_late_data(self, output_tag: OutputTag) -> "PatternStream":
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"side_output_late_data needs an OutputTag, got {output_tag!r}")
        return PatternStream(self._stream, self._pattern, self._event_time, output_tag)

    def process(self, pattern_process_function: PatternProcessFunction, output_type=None) -> DataStream:
        if not isinstance(pattern_process_function, PatternProcessFunction):
            raise TypeError(f"PatternStream.process needs a PatternProcessFunction, got {pattern_process_function!r}")
        operator = CepFunction(self._pattern, pattern_process_function, self._event_time, self._late_data_tag)
        stream = self._stream
        if isinstance(stream, KeyedStream):
            return stream.process(operator, output_type).name("CepOperator")
        # As Flink: a plain stream is matched as one, by a single subtask under a constant key.
        return (stream.key_by(NullByteKeySelector()).process(operator, output_type)
                .name("GlobalCepOperator").force_non_parallel())

    def select(self, pattern_select_function, timeout_tag: Optional[OutputTag] = None, timeout_fn=None,
               output_type=None) -> DataStream:
        """``pattern_select_function(match) -> result``; with ``timeout_tag`` and
        ``timeout_fn(match, timeout_timestamp) -> result``, timed-out partial matches go to that
        side output."""
        return self.process(SelectAdapter(pattern_select_function, False, timeout_tag, timeout_fn), output_type)

    def flat_select(self, pattern_flat_select_function, timeout_tag: Optional[OutputTag] = None,
                    timeout_fn=None, output_type=None) -> DataStream:
        """As ``select``, the functions returning or yielding any number of results."""
        return self.process(SelectAdapter(pattern_flat_select_function, True, timeout_tag, timeout_fn),
                            output_type)


class CepFunction(KeyedProcessFunction):
    """What ``CEP.pattern`` runs on a keyed stream: the pattern, the user's function, the time
    domain and the late-data tag. Its executing operator is ``CepOperator`` (Flink's, a stream
    operator of its own rather than a process function): ``operator_class`` names it."""
    operator_class = CepOperator

    def __init__(self, pattern: Pattern, function: PatternProcessFunction, event_time: bool,
                 late_data_tag: Optional[OutputTag]):
        self.pattern, self.function = pattern, function
        self.event_time, self.late_data_tag = event_time, late_data_tag
