"""The life cycle of one execution attempt of a subtask (Flink's ExecutionState).

    CREATED -> SCHEDULED -> DEPLOYING -> RUNNING -> FINISHED
       |           |            |           |
       |           |            +-----+-----+
       |           |                  v
       |           +-----------> CANCELING -> CANCELED
       +--> CANCELED (not yet scheduled)
       +--> RECONCILING -> RUNNING | FINISHED | CANCELED | FAILED
    any non-terminal state -> FAILED
"""
from __future__ import annotations

import enum


class ExecutionState(enum.Enum):
    CREATED = "CREATED"
    SCHEDULED = "SCHEDULED"
    DEPLOYING = "DEPLOYING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELING = "CANCELING"
    CANCELED = "CANCELED"
    FAILED = "FAILED"
    RECONCILING = "RECONCILING"

    @property
    def is_terminal(self) -> bool:
        return self in (ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED)


_S = ExecutionState
_TRANSITIONS: dict[ExecutionState, frozenset[ExecutionState]] = {
    _S.CREATED: frozenset({_S.SCHEDULED, _S.CANCELED, _S.RECONCILING, _S.FAILED}),
    _S.SCHEDULED: frozenset({_S.DEPLOYING, _S.CANCELED, _S.FAILED}),
    _S.DEPLOYING: frozenset({_S.RUNNING, _S.CANCELING, _S.FAILED}),
    _S.RUNNING: frozenset({_S.FINISHED, _S.CANCELING, _S.FAILED}),
    _S.CANCELING: frozenset({_S.CANCELED, _S.FAILED}),
    _S.RECONCILING: frozenset({_S.RUNNING, _S.FINISHED, _S.CANCELED, _S.FAILED}),
    _S.FINISHED: frozenset(),
    _S.CANCELED: frozenset(),
    _S.FAILED: frozenset(),
}


class IllegalExecutionStateTransition(RuntimeError):
    pass


def can_transition(current: ExecutionState, target: ExecutionState) -> bool:
    return target in _TRANSITIONS[current]


def check_transition(current: ExecutionState, target: ExecutionState, what: str) -> None:
    if not can_transition(current, target):
        allowed = ", ".join(s.value for s in sorted(_TRANSITIONS[current], key=lambda s: s.value)) or "none"
        raise IllegalExecutionStateTransition(
            f"{what}: illegal transition {current.value} -> {target.value} "
            f"(from {current.value} the allowed states are: {allowed}).")
