"""Where an epoch's time goes, and how late its records became visible: what the driver records
per epoch in the epoch log (``EpochSummary.timings``) and the web view stacks per epoch.

An epoch's time runs from the end of the epoch before (when it starts waiting for its boundary)
to the moment its results are visible: its checkpoint's record committed (the sinks that commit
with checkpoints, Delta tables and Kafka transactions, show its output then), or, for an epoch
that takes no checkpoint, its hand-off (the sinks that write at once, and the sinks of a job
without checkpoints, have committed by then). The phases, in order::

    boundary wait        waiting for input, at most until sluice.epoch.interval (sluice.epoch.trigger)
    planning             the sources' reads, the checkpoint id, the task descriptors
    Spark job            the epoch's tasks, from submitting the job to its result; per stage
                         (Spark's own submission and completion times), each stage's longest
                         subtask snapshot counted as "state snapshot", the rest of the job
                         (submitting, scheduling, fetching results) as "Spark scheduling"
    acknowledgements     waiting for the plan's write-ahead record, reading the tasks' replies
    previous checkpoint  waiting for the epoch before's checkpoint to complete
    hand-off             commits of sinks that write at once, the state chains, the checkpoint handed over
    checkpoint queue     the checkpoint waiting for the background thread (the completion before it)
    source positions     the sources' positions written as the source operators' state
    sink commits         each sink's commit (a Delta transaction) ...
    Kafka transaction    ... a Kafka EXACTLY_ONCE sink's transaction apart; the sinks commit
                         while the positions are written, and the phases share the time they
                         overlap (the state tables' commits follow the record, off the epoch's
                         path: runtime.checkpoint.coordinator)
    checkpoint record    the checkpoints table's commit: the checkpoint exists
    other                what none of these covers (the gaps between them)

Latency: the records' timestamps as first known (a source's: Kafka's record timestamps, those
its WatermarkStrategy assigns; else those the first ``assign_timestamps_and_watermarks`` gives)
travel as a systematic sample with the tasks' acknowledgements (``RecordTimes``, at most
``RecordTimes.LIMIT`` per subtask and epoch); a record's latency is the time its epoch's results
became visible minus its timestamp. Records of epochs that take no checkpoint become visible with
the next checkpoint, and are counted there.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

# The checkpoint's phases are named where they are timed, below the layers that time them.
from runtime.common.phase_timer import (CHECKPOINT_QUEUE, CHECKPOINT_RECORD, HAND_OFF, KAFKA_TRANSACTION,
                                        SINK_COMMITS, SOURCE_POSITIONS)

BOUNDARY_WAIT = "boundary wait"
PLANNING = "planning"
SPARK_JOB = "Spark job"
ACKNOWLEDGEMENTS = "acknowledgements"
PREVIOUS_CHECKPOINT = "previous checkpoint"
# Only in the stack the web view draws: parts of the Spark job, and the rest.
STATE_SNAPSHOT = "state snapshot"
SPARK_SCHEDULING = "Spark scheduling"
OTHER = "other"
STAGE = "stage: "       # a stage's series: "stage: " and the vertices it runs

# The order of the stack (stages go where the Spark job is).
_BEFORE_JOB = (BOUNDARY_WAIT, PLANNING)
_AFTER_JOB = (ACKNOWLEDGEMENTS, PREVIOUS_CHECKPOINT, HAND_OFF, CHECKPOINT_QUEUE, SOURCE_POSITIONS, SINK_COMMITS,
              KAFKA_TRANSACTION, CHECKPOINT_RECORD)


@dataclass(frozen=True)
class StageTiming:
    """One Spark stage of the epoch's job: ``name`` is the vertices it runs, ``submitted`` and
    ``completed`` Spark's times (ms since the epoch), ``snapshot_ms`` the longest snapshot of a
    subtask it ran, ``share_ms`` its part of the job's time (stages running at once share it)."""
    stage_id: int
    name: str
    tasks: int
    submitted: int
    completed: int
    snapshot_ms: float = 0.0
    share_ms: float = 0.0

    @property
    def ms(self) -> int:
        return self.completed - self.submitted


@dataclass(frozen=True)
class SinkCommit:
    sink: str           # the sink's operator name
    phase: str          # SINK_COMMITS, or KAFKA_TRANSACTION
    ms: float


@dataclass(frozen=True)
class LatencyPercentiles:
    """Milliseconds from a record's timestamp to its results being visible, over ``records``
    records (estimated from ``sampled`` of them); ``max`` is exact (the oldest record's)."""
    p50: float
    p90: float
    p99: float
    max: float
    records: int
    sampled: int


@dataclass(frozen=True)
class EpochTimings:
    total_ms: float                     # from the end of the epoch before to its results being visible
    phases: dict                        # phase -> ms, in the order they first ran (the constants above)
    stages: tuple = ()                  # StageTiming of its Spark job, by stage id
    sinks: tuple = ()                   # SinkCommit of each sink its checkpoint committed
    latency: Optional[LatencyPercentiles] = None
    checkpoint_id: Optional[int] = None     # the checkpoint its results became visible with

    def biggest(self, n: int = 2) -> list[tuple[str, float]]:
        """The ``n`` largest parts of its stack (the progress line names them)."""
        return sorted(((k, v) for k, v in stacked(self.to_json()) if v > 0), key=lambda kv: -kv[1])[:n]

    def to_json(self) -> dict:
        return asdict(self)


def stacked(timings: dict) -> list[tuple[str, float]]:
    """An epoch's logged timings (``EpochTimings`` as JSON) as the parts the web view stacks,
    in order, summing to its ``total_ms``: the phases, the Spark job cut into its stages, the
    state snapshots and Spark's scheduling, and ``other`` for the rest. Unknown phases (a newer
    driver's) count in ``other``."""
    phases = timings.get("phases") or {}
    parts = [(name, phases.get(name, 0.0)) for name in _BEFORE_JOB]
    job = phases.get(SPARK_JOB, 0.0)
    in_stages = snapshots = 0.0
    by_name: dict = {}      # a vertex feeding two shuffles runs in two stages of one name: one part
    for s in timings.get("stages") or ():
        snapshot = min(s.get("snapshot_ms") or 0.0, s.get("share_ms") or 0.0)
        by_name[STAGE + s["name"]] = by_name.get(STAGE + s["name"], 0.0) + (s.get("share_ms") or 0.0) - snapshot
        in_stages += s.get("share_ms") or 0.0
        snapshots += snapshot
    parts.extend(by_name.items())
    parts.append((STATE_SNAPSHOT, snapshots))
    parts.append((SPARK_SCHEDULING, max(0.0, job - in_stages)))
    parts.extend((name, phases.get(name, 0.0)) for name in _AFTER_JOB)
    parts.append((OTHER, max(0.0, (timings.get("total_ms") or 0.0) - sum(v for _, v in parts))))
    return [(name, round(max(0.0, v), 1)) for name, v in parts]


def stack_rank(part: str) -> int:
    """Where a part of ``stacked`` goes in the stack, bottom up: what is the same part in every
    epoch keeps its place when epochs have different stages (a run of another job graph)."""
    order = [*_BEFORE_JOB, STAGE, STATE_SNAPSHOT, SPARK_SCHEDULING, *_AFTER_JOB, OTHER]
    return order.index(STAGE if part.startswith(STAGE) else part) if (part.startswith(STAGE) or part in order) \
        else order.index(OTHER)


def shares(spans: list[tuple[float, float]]) -> list[float]:
    """Each (start, end) span's share of the time: each instant goes in equal parts to the spans
    running then, so the shares add up to the time some span ran (stages that run at once, a
    checkpoint's state and sink commits)."""
    bounds = sorted({t for span in spans for t in span})
    out = [0.0] * len(spans)
    for a, b in zip(bounds, bounds[1:]):
        running = [i for i, (start, end) in enumerate(spans) if start <= a and end >= b]
        for i in running:
            out[i] += (b - a) / len(running)
    return out


def stage_shares(stages: list[StageTiming], job_started: float, job_ended: float) -> list[StageTiming]:
    """Each stage's share of the job's time (ms; ``job_*`` wall clock in s), never more than the
    job took (``shares`` of the stages' times within the job's)."""
    lo, hi = job_started * 1000, job_ended * 1000
    within = [(min(max(s.submitted, lo), hi), min(max(s.completed, lo), hi)) for s in stages]
    return [StageTiming(s.stage_id, s.name, s.tasks, s.submitted, s.completed, s.snapshot_ms, round(share, 1))
            for s, share in zip(stages, shares(within))]


@dataclass
class RecordTimes:
    """A source subtask's sample of its records' timestamps in one epoch (in the task, sent with
    its acknowledgement): every ``stride``-th record that has a timestamp, the stride doubling
    whenever the sample would pass ``LIMIT``, so each kept time stands for ``stride`` records; and
    the oldest timestamp exactly."""
    LIMIT = 1024

    stride: int = 1
    seen: int = 0                       # records offered (with or without a timestamp)
    oldest: Optional[int] = None
    sample: list = field(default_factory=list)

    def add(self, timestamps) -> None:
        """A batch's timestamps: a list (None: no timestamp) or an Arrow int64 array (null)."""
        n = len(timestamps)
        if not n:
            return
        first = (-self.seen) % self.stride
        self.seen += n
        if isinstance(timestamps, (list, tuple)):
            picked = [t for t in timestamps[first::self.stride] if t is not None]
            if not picked:      # none sampled has a time (a source without timestamps): nothing to learn
                return
            try:
                oldest = min(timestamps)
            except TypeError:   # some records have none: the oldest sampled, not read one by one
                oldest = min(picked)
        else:
            import pyarrow.compute as pc
            picked = [t for t in timestamps[first::self.stride].to_pylist() if t is not None]
            oldest = pc.min(timestamps).as_py()
        if oldest is None:
            return
        self.oldest = oldest if self.oldest is None else min(self.oldest, oldest)
        self.sample.extend(picked)
        while len(self.sample) > self.LIMIT:
            self.sample = self.sample[::2]
            self.stride *= 2

    def __bool__(self) -> bool:
        return self.oldest is not None


def latency_percentiles(samples: list[RecordTimes], visible_ms: float) -> Optional[LatencyPercentiles]:
    """The latencies of the sampled records, whose results became visible at ``visible_ms`` (ms
    since the epoch), as percentiles weighted by what each sampled time stands for; None when no
    record had a timestamp."""
    weighted = sorted((visible_ms - t, s.stride) for s in samples if s for t in s.sample)
    oldest = min((s.oldest for s in samples if s), default=None)
    if oldest is None or not weighted:
        return None
    total = sum(w for _, w in weighted)

    def at(q: float) -> float:
        rank, seen = q * total, 0
        for value, w in weighted:
            seen += w
            if seen >= rank:
                return round(value, 1)
        return round(weighted[-1][0], 1)
    return LatencyPercentiles(at(0.5), at(0.9), at(0.99), round(visible_ms - oldest, 1), total, len(weighted))


def last_epoch_timings(rows: list[dict]) -> dict:
    """The JobManager's scalar metrics of the latest timed epoch of the epoch log's metrics ``rows``
    (oldest first): its time from the epoch before to its results being visible, and its records'
    p99 latency, in ms (-1: no epoch timed, or none made records with timestamps visible)."""
    timed = [r["timings"] for r in rows if r.get("timings")]
    latency = [t["latency"] for t in timed if t.get("latency")]
    return {"lastEpochTime": round(timed[-1]["total_ms"]) if timed else -1,
            "lastEpochLatencyP99": round(latency[-1]["p99"]) if latency else -1}
