"""Waiting for something to happen: the tests' one poll loop.

A test that waits for a server to answer, a file to appear or a job to reach a state calls
``wait_until`` with the condition instead of sleeping a fixed time: it goes on as soon as the
condition holds, and when it never does the failure names what did not happen and shows the end
of the log that says why.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, TypeVar, Union

import pytest

T = TypeVar("T")
Log = Union[str, Path, Callable[[], str], None]


def log_tail(log: Log, chars: int = 3000) -> str:
    """The last ``chars`` characters of ``log`` (a path, or a function that returns the text)."""
    if log is None:
        return ""
    if callable(log):
        text = log()
    else:
        try:
            text = Path(log).read_text(errors="replace")
        except OSError as e:
            text = f"({log}: {e})"
    return text[-chars:]


def wait_until(condition: Callable[[], T], timeout: float, what: str, *, interval: float = 0.2,
               log: Log = None, proc=None, ignoring: tuple = ()) -> T:
    """Call ``condition()`` every ``interval`` s until it returns something true, and return that.

    Fails the test with "``what`` did not happen within ``timeout`` s" and the tail of ``log``
    when the time is up, or at once when ``proc`` (a Popen) exited first. Exceptions of the
    types in ``ignoring`` (say OSError, while a server starts) count as "not yet"."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except ignoring:
            value = None
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"{what}: the process exited with {proc.returncode} first\n{log_tail(log)}")
        if time.monotonic() >= deadline:
            pytest.fail(f"{what} did not happen within {timeout} s\n{log_tail(log)}")
        time.sleep(interval)
