"""After-match skip strategies (Flink's ``AfterMatchSkipStrategy``): which partial matches
and held-back matches a found match discards.

Event ids are ``(timestamp, sequence)`` pairs, ordered as Flink's ``EventId``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class AfterMatchSkipStrategy:
    kind: str = "NO_SKIP"               # NO_SKIP, SKIP_TO_NEXT, SKIP_PAST_LAST_EVENT, SKIP_TO_FIRST, SKIP_TO_LAST
    pattern_name: Optional[str] = None  # for SKIP_TO_FIRST / SKIP_TO_LAST
    throw_on_miss: bool = False

    @staticmethod
    def no_skip() -> "AfterMatchSkipStrategy":
        return AfterMatchSkipStrategy("NO_SKIP")

    @staticmethod
    def skip_to_next() -> "AfterMatchSkipStrategy":
        return AfterMatchSkipStrategy("SKIP_TO_NEXT")

    @staticmethod
    def skip_past_last_event() -> "AfterMatchSkipStrategy":
        return AfterMatchSkipStrategy("SKIP_PAST_LAST_EVENT")

    @staticmethod
    def skip_to_first(pattern_name: str) -> "AfterMatchSkipStrategy":
        return AfterMatchSkipStrategy("SKIP_TO_FIRST", _name(pattern_name))

    @staticmethod
    def skip_to_last(pattern_name: str) -> "AfterMatchSkipStrategy":
        return AfterMatchSkipStrategy("SKIP_TO_LAST", _name(pattern_name))

    def throw_exception_on_miss(self) -> "AfterMatchSkipStrategy":
        if self.pattern_name is None:
            raise ValueError(f"throw_exception_on_miss applies to skip_to_first/skip_to_last, not {self.kind}")
        return AfterMatchSkipStrategy(self.kind, self.pattern_name, True)

    def get_pattern_name(self) -> Optional[str]:
        return self.pattern_name

    def is_skip_strategy(self) -> bool:
        return self.kind != "NO_SKIP"

    def pruning_id(self, match_ids: dict):
        """The event id partial matches are pruned against, from a match given as
        ``{pattern name: [event id, ...]}``; None prunes nothing."""
        if self.kind == "SKIP_TO_NEXT":
            return min((ids[0] for ids in match_ids.values() if ids), default=None)
        if self.kind == "SKIP_PAST_LAST_EVENT":
            return max((ids[-1] for ids in match_ids.values() if ids), default=None)
        if self.kind in ("SKIP_TO_FIRST", "SKIP_TO_LAST"):
            ids = match_ids.get(self.pattern_name)
            if not ids:
                if self.throw_on_miss:
                    raise RuntimeError(f"Could not skip to {self.pattern_name}. No such element in the found "
                                       f"match {match_ids}")
                return None
            return ids[0] if self.kind == "SKIP_TO_FIRST" else ids[-1]
        return None

    def should_prune(self, start_id, pruning_id) -> bool:
        # Skipping to an element keeps the matches starting at it; the others discard them too.
        if self.kind in ("SKIP_TO_FIRST", "SKIP_TO_LAST"):
            return start_id < pruning_id
        return start_id <= pruning_id

    def __str__(self) -> str:
        return f"{self.kind}[{self.pattern_name}]" if self.pattern_name else self.kind


def _name(pattern_name) -> str:
    if not isinstance(pattern_name, str) or not pattern_name:
        raise ValueError(f"the pattern name to skip to must be a non-empty string, got {pattern_name!r}")
    return pattern_name
