"""Where the runtime's own lines go.

The runtime logs through ``logging``, under the logger ``runtime``: an epoch's progress and a
restore at INFO, fallbacks and fresh starts at WARNING, failures at ERROR, Spark's JVM at the
level its own line says (``runtime.spark``). An orchestrator that configures logging (Airflow's
task log) shows each line at its level. A program that configures none (the ``sluice`` CLI, a
job script run with ``python``) gets them on stderr: INFO as the line itself, WARNING and above
prefixed with the level, as before.
"""
from __future__ import annotations

import logging
import sys
import time

RUNTIME_LOGGER = "runtime"


def utc_time(ms: int) -> str:
    """Epoch milliseconds (an event time, a watermark) as a person reads them: ``2026-11-28 06:13:28.123 UTC``."""
    seconds, millis = divmod(int(ms), 1000)
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(seconds))}.{millis:03d} UTC"


class _ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = record.getMessage()
        return line if record.levelno < logging.WARNING else f"{record.levelname}: {line}"


def console_logging(level: int = logging.INFO) -> None:
    """Send the runtime's lines to stderr, unless logging is configured already (a root handler,
    or one of the runtime's own): idempotent, and a no-op under Airflow or pytest."""
    logger = logging.getLogger(RUNTIME_LOGGER)
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_ConsoleFormatter())
    logger.addHandler(handler)
    logger.setLevel(level)
    # Not to the root logger as well: a library that logs through it (py4j's logging.exception)
    # gives it a handler of its own (logging.basicConfig), and each line would print twice.
    logger.propagate = False
