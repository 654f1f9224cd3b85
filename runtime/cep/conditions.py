"""Conditions of a pattern (Flink's ``SimpleCondition``, ``IterativeCondition`` and the rich
and/or/not combinators the NFACompiler builds).

Every condition can be called as ``condition(value, ctx)``; a ``SimpleCondition`` or a
one-argument function ignores the context, and the NFA calls those (and their and/or/not) on the
value alone (``event_test``). Conditions are shipped to Spark executors inside the job
(cloudpickle); they never live in state, only the NFA's state names do.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable


class IterativeCondition:
    """``filter(value, ctx)``: ``ctx.get_events_for_pattern(name)`` gives the events already
    accepted for ``name`` in this partial match (Flink's ``IterativeCondition.Context``)."""

    def filter(self, value, ctx) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must implement filter(value, ctx)")

    def __call__(self, value, ctx) -> bool:
        return self.filter(value, ctx)


class SimpleCondition(IterativeCondition):
    """``filter(value)``: a condition on the event alone."""

    def filter(self, value) -> bool:  # type: ignore[override]
        raise NotImplementedError(f"{type(self).__name__} must implement filter(value)")

    def __call__(self, value, ctx) -> bool:
        return self.filter(value)


@dataclass(frozen=True)
class _Simple:
    """A plain one-argument function used as a condition."""
    fn: Callable[[Any], bool]

    def __call__(self, value, ctx) -> bool:
        return self.fn(value)


@dataclass(frozen=True)
class AndCondition:
    left: Any
    right: Any

    def __call__(self, value, ctx) -> bool:
        return bool(self.left(value, ctx)) and bool(self.right(value, ctx))


@dataclass(frozen=True)
class OrCondition:
    left: Any
    right: Any

    def __call__(self, value, ctx) -> bool:
        return bool(self.left(value, ctx)) or bool(self.right(value, ctx))


@dataclass(frozen=True)
class NotCondition:
    inner: Any

    def __call__(self, value, ctx) -> bool:
        return not self.inner(value, ctx)


@dataclass(frozen=True)
class SubtypeCondition:
    subtype: type

    def __call__(self, value, ctx) -> bool:
        return isinstance(value, self.subtype)


def to_condition(condition, call: str):
    """A condition object from a condition class instance or a function of (value) or (value, ctx)."""
    if isinstance(condition, IterativeCondition):
        return condition
    if not callable(condition):
        raise TypeError(f"Pattern.{call}: expected a SimpleCondition, an IterativeCondition or a function "
                        f"of (value) or (value, ctx), got {condition!r}")
    try:
        params = [p for p in inspect.signature(condition).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    except (TypeError, ValueError):  # builtins without a signature take the value alone
        return _Simple(condition)
    if len(params) == 2:
        return condition
    if len(params) == 1:
        return _Simple(condition)
    raise TypeError(f"Pattern.{call}: a condition function takes (value) or (value, ctx); "
                    f"{condition!r} takes {len(params)} arguments")


def and_(left, right):
    if left is None:
        return right
    if right is None:
        return left
    return AndCondition(left, right)


def not_(condition):
    return NotCondition(condition)


def event_test(condition) -> tuple:
    """``(test, with_ctx)``: ``condition`` as a call of the event alone when it reads no context
    (a SimpleCondition, a function of the value, and their and/or/not/subtype), which spares the
    NFA a context per partial match and a wrapper call per edge; else ``(condition, True)``, called
    as ``condition(value, ctx)``. ``(None, False)``: no condition, always true."""
    if condition is None:
        return None, False
    if isinstance(condition, _Simple):
        return condition.fn, False
    if isinstance(condition, SimpleCondition):
        return condition.filter, False
    if isinstance(condition, SubtypeCondition):
        subtype = condition.subtype
        return (lambda value: isinstance(value, subtype)), False
    if isinstance(condition, NotCondition):
        inner, with_ctx = event_test(condition.inner)
        if not with_ctx and inner is not None:
            return (lambda value: not inner(value)), False
    if isinstance(condition, (AndCondition, OrCondition)):
        (left, left_ctx), (right, right_ctx) = event_test(condition.left), event_test(condition.right)
        if not (left_ctx or right_ctx) and left is not None and right is not None:
            if isinstance(condition, AndCondition):
                return (lambda value: bool(left(value)) and bool(right(value))), False
            return (lambda value: bool(left(value)) or bool(right(value))), False
    return condition, True
