"""Which failures a restart can cure (Flink's ``ThrowableClassifier`` and ``ThrowableType``).

An exception class says it is a ``NonRecoverableError`` with ``throwable_type`` (Flink's
``@ThrowableAnnotation``): a failure caused by one, anywhere in its chain of causes, would fail
again alike after a restart (a restored state whose type cannot become the declared one), so the
run fails without asking its restart strategy (Flink's ``ExecutionFailureHandler``). Every other
failure is a ``RecoverableError``, which the strategy decides on.
"""
from __future__ import annotations

from enum import Enum
from typing import Optional


class ThrowableType(Enum):
    """Whether a restart can cure a failure (Flink's ``ThrowableType``). An exception class set
    ``throwable_type = ThrowableType.NON_RECOVERABLE_ERROR`` fails its run without a restart,
    whatever the job's restart strategy."""

    NON_RECOVERABLE_ERROR = "NonRecoverableError"
    RECOVERABLE_ERROR = "RecoverableError"


def throwable_type(error: BaseException) -> ThrowableType:
    """The exception's own type: its class's ``throwable_type``, or its instance's (a failure
    rebuilt from a task's report carries the type its cause had)."""
    return getattr(error, "throwable_type", ThrowableType.RECOVERABLE_ERROR)


def find_throwable_of_type(error: Optional[BaseException], kind: ThrowableType) -> Optional[BaseException]:
    """The first exception of type ``kind`` in ``error``'s chain of causes (``__cause__``, else
    ``__context__``), or None."""
    seen: set = set()
    while error is not None and id(error) not in seen:
        if throwable_type(error) is kind:
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def is_unrecoverable(error: Optional[BaseException]) -> bool:
    return find_throwable_of_type(error, ThrowableType.NON_RECOVERABLE_ERROR) is not None
