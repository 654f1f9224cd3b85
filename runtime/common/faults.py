"""Named points where a test harness can stop the job with a real process kill.

With ``SLUICE_HALT_AT=<point>:<epoch>`` (``<point>:*``: the first time it is reached) the
process that reaches the point (the driver, or a Spark task's Python worker for ``mid-epoch``) writes ``SLUICE_HALT_MARKER`` and waits; the
harness then kills the whole process group. Nothing is raised or caught inside the job.
"""
from __future__ import annotations

import os
import time

POINTS = ("mid-epoch", "after-state-files", "after-state-commit", "after-sink-commit", "during-checkpoint-record",
          "during-retention")
# Inside the table maintenance a run does as it goes (runtime.storage.maintenance); reached when
# a table is due, so a harness halts at the first one with ``<point>:*``.
MAINTENANCE_POINTS = ("during-compaction", "during-vacuum", "during-log-cleanup")


def fault_point(name: str, epoch: int) -> None:
    want = os.environ.get("SLUICE_HALT_AT")
    if want != f"{name}:{epoch}" and want != f"{name}:*":
        return
    marker = os.environ.get("SLUICE_HALT_MARKER")
    if marker:
        # Renamed into place: whoever sees the marker sees it whole (the test kills this pid).
        with open(marker + ".tmp", "w") as f:
            f.write(f"{name}:{epoch}:{os.getpid()}\n")
        os.replace(marker + ".tmp", marker)
    while True:         # until killed
        time.sleep(1)
