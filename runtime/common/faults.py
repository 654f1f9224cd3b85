"""Named points where a test harness can stop the job with a real process kill.

With ``SLUICE_HALT_AT=<point>:<epoch>`` (``<point>:*``: the first time it is reached) the
process that reaches the point (the driver, or a Spark task's Python worker for ``mid-epoch``)
writes ``SLUICE_HALT_MARKER`` and waits; the harness then kills the whole process group.
Nothing is raised or caught inside the job.

Several points, comma-separated (``after-sink-commit:2,mid-epoch:3``), each halt where they are
reached, each writing its own marker, ``SLUICE_HALT_MARKER`` followed by ``.<point>``: a harness
that waits for all of them kills the job in a state no single point reaches, such as epoch 2's
checkpoint halted in its completion (the driver's background thread) while epoch 3's task is
halted mid-epoch.
"""
from __future__ import annotations

import os
import time

POINTS = ("mid-epoch", "after-state-files", "after-sink-commit", "during-checkpoint-record", "after-checkpoint-record",
          "after-state-commit", "during-retention")
# Inside the sinks' commits of a checkpoint with more than one sink, or a Kafka EXACTLY_ONCE sink:
# after one sink committed and before the next does (runtime.checkpoint.coordinator), and in
# the Kafka transaction, its records flushed and its commit not sent (runtime.connectors.kafka_sink;
# its number is the checkpoint id, which the committer knows, not the epoch).
SINK_POINTS = ("between-sink-commits", "in-kafka-transaction")
# Inside the table maintenance a run does as it goes (runtime.storage.maintenance); reached when
# a table is due, so a harness halts at the first one with ``<point>:*``.
MAINTENANCE_POINTS = ("during-compaction", "during-vacuum", "during-log-cleanup")


def halts(halt_at: str, marker: str) -> dict[str, str]:
    """``SLUICE_HALT_AT``'s "point:epoch" halts, each with the marker file it writes."""
    wanted = [h.strip() for h in halt_at.split(",") if h.strip()]
    if len(wanted) == 1 or not marker:
        return {h: marker for h in wanted}
    return {h: f"{marker}.{h.partition(':')[0]}" for h in wanted}


def fault_point(name: str, epoch: int) -> None:
    want = os.environ.get("SLUICE_HALT_AT")
    if not want:
        return
    wanted = halts(want, os.environ.get("SLUICE_HALT_MARKER", ""))
    here = f"{name}:{epoch}" if f"{name}:{epoch}" in wanted else f"{name}:*"
    marker = wanted.get(here)
    if marker is None:
        return
    if marker:
        # Renamed into place: whoever sees the marker sees it whole (the test kills this pid).
        with open(marker + ".tmp", "w") as f:
            f.write(f"{name}:{epoch}:{os.getpid()}\n")
        os.replace(marker + ".tmp", marker)
    while True:         # until killed
        time.sleep(1)


def fault_point_of_epochs(name: str, epochs: list) -> None:
    """A point of work done for several epochs at once (the checkpoints' housekeeping): reached
    for each of them."""
    for epoch in epochs:
        fault_point(name, epoch)
