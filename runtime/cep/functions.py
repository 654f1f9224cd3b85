"""The user functions of a pattern stream (Flink's ``PatternProcessFunction``,
``TimedOutPartialMatchHandler``, ``PatternSelectFunction``...), Python style: functions
return or yield their results instead of filling a Collector."""
from __future__ import annotations

from typing import Iterable

from runtime.datastream.functions import Function


class PatternProcessFunction(Function):
    """``process_match(match, ctx)``: yields the results of one match, ``match`` being
    ``{pattern name: [events]}``. ``ctx.timestamp()`` is the match's time (the event that
    completed it, or the processing time); yielding ``(output_tag, value)`` writes a side
    output, as ``ctx.output(output_tag, value)`` does."""

    def process_match(self, match: dict, ctx) -> Iterable | None:
        raise NotImplementedError(f"{type(self).__name__} must implement process_match(match, ctx)")


class TimedOutPartialMatchHandler:
    """Mixed into a PatternProcessFunction: ``process_timed_out_match(match, ctx)`` is called for
    each partial match that ran past ``within``; it reports to side outputs only, yielding
    ``(output_tag, value)`` or calling ``ctx.output(output_tag, value)``, ``ctx.timestamp()``
    being the moment it timed out (start + within)."""

    def process_timed_out_match(self, match: dict, ctx) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement process_timed_out_match(match, ctx)")


class PatternSelectFunction(Function):
    def select(self, match: dict):
        raise NotImplementedError


class PatternFlatSelectFunction(Function):
    def flat_select(self, match: dict) -> Iterable:
        raise NotImplementedError


class PatternTimeoutFunction(Function):
    def timeout(self, match: dict, timeout_timestamp: int):
        raise NotImplementedError


class PatternFlatTimeoutFunction(Function):
    def timeout(self, match: dict, timeout_timestamp: int) -> Iterable:
        raise NotImplementedError


def _method(f, interface: type, method: str, call: str):
    if isinstance(f, interface):
        return getattr(f, method)
    if isinstance(f, Function) or not callable(f):
        raise TypeError(f"PatternStream.{call}: expected a {interface.__name__} or a function, got {f!r}")
    return f


class SelectAdapter(PatternProcessFunction, TimedOutPartialMatchHandler):
    """``select`` / ``flat_select`` with an optional timeout function, as a process function
    (Flink's PatternSelectAdapter / PatternFlatSelectAdapter)."""

    def __init__(self, select_fn, flat: bool, timeout_tag=None, timeout_fn=None):
        call = "flat_select" if flat else "select"
        if (timeout_tag is None) != (timeout_fn is None):
            raise ValueError(f"PatternStream.{call}: give both timeout_tag and timeout_fn, or neither")
        self.flat = flat
        self.function = select_fn
        self.select_fn = _method(select_fn, PatternFlatSelectFunction if flat else PatternSelectFunction,
                                 call, call)
        self.timeout_tag = timeout_tag
        self.timeout_function = timeout_fn
        self.timeout_fn = None if timeout_fn is None else _method(
            timeout_fn, PatternFlatTimeoutFunction if flat else PatternTimeoutFunction, "timeout", call)

    def open(self, runtime_context):
        for f in (self.function, self.timeout_function):
            if isinstance(f, Function):
                f.open(runtime_context)

    def close(self):
        for f in (self.function, self.timeout_function):
            if isinstance(f, Function):
                f.close()

    def process_match(self, match, ctx):
        result = self.select_fn(match)
        return (result or ()) if self.flat else (result,)

    def process_timed_out_match(self, match, ctx):
        if self.timeout_fn is None:
            return
        result = self.timeout_fn(match, ctx.timestamp())
        for value in ((result or ()) if self.flat else (result,)):
            ctx.output(self.timeout_tag, value)
