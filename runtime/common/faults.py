"""Named points where a test harness can stop the job with a real process kill.

With ``SLUICE_HALT_AT=<point>:<epoch>`` the process that reaches the point (the driver, or
a Spark task's Python worker for ``mid-epoch``) writes ``SLUICE_HALT_MARKER`` and waits; the
harness then kills the whole process group. Nothing is raised or caught inside the job.
"""
from __future__ import annotations

import os
import time

POINTS = ("mid-epoch", "after-state-files", "after-state-commit", "after-sink-commit", "during-checkpoint-record",
          "during-retention")


def fault_point(name: str, epoch: int) -> None:
    if os.environ.get("SLUICE_HALT_AT") != f"{name}:{epoch}":
        return
    marker = os.environ.get("SLUICE_HALT_MARKER")
    if marker:
        # Renamed into place: whoever sees the marker sees it whole (the test kills this pid).
        with open(marker + ".tmp", "w") as f:
            f.write(f"{name}:{epoch}:{os.getpid()}\n")
        os.replace(marker + ".tmp", marker)
    while True:         # until killed
        time.sleep(1)
