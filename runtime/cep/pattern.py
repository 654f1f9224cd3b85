"""Flink's Pattern API: small immutable descriptions of a pattern sequence.

Every method returns a new ``Pattern``; ``previous`` links a pattern to the one before it, so
the last pattern of a sequence describes all of it (as in Flink). Wrong use fails here, with
Flink's ``MalformedPatternException`` messages.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Optional

from runtime.common.time import to_millis

from .after_match_skip_strategy import AfterMatchSkipStrategy
from .conditions import OrCondition, SubtypeCondition, and_, to_condition


class MalformedPatternException(ValueError):
    """A pattern that cannot be compiled (Flink's ``MalformedPatternException``)."""


class ConsumingStrategy(Enum):
    STRICT = "STRICT"                  # next, consecutive
    SKIP_TILL_NEXT = "SKIP_TILL_NEXT"  # followed_by, the default inside loops
    SKIP_TILL_ANY = "SKIP_TILL_ANY"    # followed_by_any, allow_combinations
    NOT_FOLLOW = "NOT_FOLLOW"
    NOT_NEXT = "NOT_NEXT"


_NOT = (ConsumingStrategy.NOT_FOLLOW, ConsumingStrategy.NOT_NEXT)


@dataclass(frozen=True)
class Quantifier:
    """How often a pattern matches and how its events may be spread (Flink's ``Quantifier``)."""
    consuming_strategy: ConsumingStrategy
    inner_consuming_strategy: ConsumingStrategy = ConsumingStrategy.SKIP_TILL_NEXT
    kind: str = "SINGLE"  # SINGLE, LOOPING, TIMES
    optional: bool = False
    greedy: bool = False

    def __str__(self) -> str:
        props = [self.kind] + (["OPTIONAL"] if self.optional else []) + (["GREEDY"] if self.greedy else [])
        return (f"Quantifier{{properties={props}, consumingStrategy={self.consuming_strategy.value}, "
                f"innerConsumingStrategy={self.inner_consuming_strategy.value}}}")


@dataclass(frozen=True)
class Times:
    from_: int
    to: int

    @staticmethod
    def of(from_: int, to: int) -> "Times":
        if from_ < 0:
            raise MalformedPatternException("The from should be a non-negative number greater than or equal to 0.")
        if to < from_:
            raise MalformedPatternException(f"The to should be a number greater than or equal to from: {from_}.")
        if from_ == to == 0:
            raise MalformedPatternException("The from and to should not be both equal to 0.")
        return Times(from_, to)


@dataclass(frozen=True, eq=False)
class Pattern:
    """One step of a pattern sequence; ``group`` is set on a group pattern (Flink's
    ``GroupPattern``), whose events are those of the inner sequence ending in ``group``."""
    name: str
    previous: Optional["Pattern"]
    quantifier: Quantifier
    skip_strategy: AfterMatchSkipStrategy
    condition: object = None
    until_condition: object = None
    times_range: Optional[Times] = None
    window_ms: Optional[int] = None
    group: Optional["Pattern"] = None

    # -- starting and extending a sequence -------------------------------------------------------
    @staticmethod
    def begin(name_or_pattern, after_match_skip_strategy: Optional[AfterMatchSkipStrategy] = None) -> "Pattern":
        skip = after_match_skip_strategy or AfterMatchSkipStrategy.no_skip()
        return _new(name_or_pattern, None, ConsumingStrategy.STRICT, skip)

    def next(self, name_or_pattern) -> "Pattern":
        return _new(name_or_pattern, self, ConsumingStrategy.STRICT, self.skip_strategy)

    def followed_by(self, name_or_pattern) -> "Pattern":
        return _new(name_or_pattern, self, ConsumingStrategy.SKIP_TILL_NEXT, self.skip_strategy)

    def followed_by_any(self, name_or_pattern) -> "Pattern":
        return _new(name_or_pattern, self, ConsumingStrategy.SKIP_TILL_ANY, self.skip_strategy)

    def not_next(self, name: str) -> "Pattern":
        self._check_no_optional_before_not()
        return _new(name, self, ConsumingStrategy.NOT_NEXT, self.skip_strategy, allow_group=False)

    def not_followed_by(self, name: str) -> "Pattern":
        self._check_no_optional_before_not()
        return _new(name, self, ConsumingStrategy.NOT_FOLLOW, self.skip_strategy, allow_group=False)

    # -- conditions ------------------------------------------------------------------------------
    def where(self, condition) -> "Pattern":
        self._check_not_group("where")
        return replace(self, condition=and_(self.condition, to_condition(condition, "where")))

    def or_(self, condition) -> "Pattern":
        self._check_not_group("or_")
        cond = to_condition(condition, "or_")
        return replace(self, condition=cond if self.condition is None else OrCondition(self.condition, cond))

    def subtype(self, subtype_class: type) -> "Pattern":
        self._check_not_group("subtype")
        if not isinstance(subtype_class, type):
            raise TypeError(f"Pattern.subtype of '{self.name}': expected a class, got {subtype_class!r}")
        return replace(self, condition=and_(self.condition, SubtypeCondition(subtype_class)))

    def until(self, condition) -> "Pattern":
        if self.until_condition is not None:
            raise MalformedPatternException("Only one until condition can be applied.")
        if self.quantifier.kind != "LOOPING":
            raise MalformedPatternException("The until condition is only applicable to looping states.")
        return replace(self, until_condition=to_condition(condition, "until"))

    def within(self, window_time) -> "Pattern":
        ms = to_millis(window_time, "Pattern.within")
        if ms <= 0:
            raise MalformedPatternException(f"Pattern.within of '{self.name}': the window must be positive, got {ms} ms")
        return replace(self, window_ms=ms)

    # -- quantifiers -----------------------------------------------------------------------------
    def one_or_more(self) -> "Pattern":
        self._check_quantifiable()
        return replace(self, quantifier=replace(self.quantifier, kind="LOOPING"), times_range=Times.of(1, 1))

    def times_or_more(self, times: int) -> "Pattern":
        self._check_quantifiable()
        q = replace(self.quantifier, kind="LOOPING")
        if times == 0:  # zero or more: an optional loop
            q, times = replace(q, optional=True), 1
        return replace(self, quantifier=q, times_range=Times.of(times, times))

    def times(self, from_: int, to: Optional[int] = None) -> "Pattern":
        self._check_quantifiable()
        q = replace(self.quantifier, kind="TIMES")
        if to is None:
            if from_ <= 0:
                raise MalformedPatternException("You should give a positive number greater than 0.")
            return replace(self, quantifier=q, times_range=Times.of(from_, from_))
        times = Times.of(from_, to)
        if times.from_ == 0:  # times(0, n) is an optional times(1, n)
            q, times = replace(q, optional=True), Times(1, times.to)
        return replace(self, quantifier=q, times_range=times)

    def optional(self) -> "Pattern":
        if self.previous is not None and self.previous.quantifier.greedy:
            raise MalformedPatternException("Optional pattern cannot be preceded by greedy pattern")
        if self.quantifier.consuming_strategy in _NOT:
            raise MalformedPatternException("NOT pattern cannot be optional")
        if self.quantifier.optional:
            raise MalformedPatternException("Optional already applied!")
        return replace(self, quantifier=replace(self.quantifier, optional=True))

    def greedy(self) -> "Pattern":
        self._check_not_not("greedy")
        if self.group is not None:
            raise MalformedPatternException("Option not applicable to group pattern")
        if self.quantifier.kind == "SINGLE":
            raise MalformedPatternException(f"greedy applies to looping or times patterns, not to '{self.name}' "
                                            f"({self.quantifier}); add one_or_more()/times() first")
        return replace(self, quantifier=replace(self.quantifier, greedy=True))

    def consecutive(self) -> "Pattern":
        if self.quantifier.kind == "SINGLE":
            raise MalformedPatternException("Consecutive applicable only to looping or times patterns.")
        return replace(self, quantifier=replace(self.quantifier,
                                                inner_consuming_strategy=ConsumingStrategy.STRICT))

    def allow_combinations(self) -> "Pattern":
        q = self.quantifier
        if q.kind == "SINGLE":
            raise MalformedPatternException(f"Combinations not applicable to {q}!")
        if q.inner_consuming_strategy == ConsumingStrategy.STRICT:
            raise MalformedPatternException("You can apply either combinations or consecutive, not both!")
        if q.inner_consuming_strategy == ConsumingStrategy.SKIP_TILL_ANY:
            raise MalformedPatternException("Combinations already applied!")
        return replace(self, quantifier=replace(q, inner_consuming_strategy=ConsumingStrategy.SKIP_TILL_ANY))

    # -- accessors as in Flink -------------------------------------------------------------------
    def get_name(self) -> str:
        return self.name

    def get_previous(self) -> Optional["Pattern"]:
        return self.previous

    def get_window_time(self) -> Optional[int]:
        return self.window_ms

    def get_after_match_skip_strategy(self) -> AfterMatchSkipStrategy:
        return self.skip_strategy

    def is_not(self) -> bool:
        return self.quantifier.consuming_strategy in _NOT

    def __repr__(self) -> str:
        steps, p = [], self
        while p is not None:
            steps.append(f"{p.quantifier.consuming_strategy.value}:{p.name}"
                         + (f"[{p.quantifier.kind}]" if p.quantifier.kind != "SINGLE" else ""))
            p = p.previous
        return f"Pattern({' -> '.join(reversed(steps))})"

    # -- checks ----------------------------------------------------------------------------------
    def _check_quantifiable(self) -> None:
        self._check_not_not("quantifier")
        if self.quantifier.kind != "SINGLE":
            raise MalformedPatternException(f"Already applied quantifier to this Pattern. Current quantifier "
                                            f"is: {self.quantifier}")

    def _check_not_not(self, what: str) -> None:
        if self.is_not():
            raise MalformedPatternException(f"Option not applicable to NOT pattern ('{self.name}': {what})")

    def _check_not_group(self, call: str) -> None:
        if self.group is not None:
            raise MalformedPatternException(f"Option not applicable to group pattern ({call}); put the condition "
                                            f"on a pattern inside the group")

    def _check_no_optional_before_not(self) -> None:
        if self.quantifier.optional:
            raise MalformedPatternException(
                "Specifying a pattern with an optional path to NOT condition is not supported yet. You can "
                "simulate such pattern with two independent patterns, one with and the other without the "
                "optional part.")


GROUP_PATTERN_NAME = "GroupPattern"


def _new(name_or_pattern, previous, strategy, skip, allow_group: bool = True) -> Pattern:
    quantifier = Quantifier(strategy)
    if isinstance(name_or_pattern, Pattern):
        if not allow_group:
            raise MalformedPatternException("A NOT pattern takes a name, not a group pattern")
        return Pattern(GROUP_PATTERN_NAME, previous, quantifier, skip, group=name_or_pattern)
    if not isinstance(name_or_pattern, str) or not name_or_pattern:
        raise MalformedPatternException(f"A pattern needs a non-empty name or a group Pattern, got {name_or_pattern!r}")
    if ":" in name_or_pattern:
        raise MalformedPatternException(f"Pattern name '{name_or_pattern}' contains ':', which the NFA reserves "
                                        f"for its internal state names")
    return Pattern(name_or_pattern, previous, quantifier, skip)
