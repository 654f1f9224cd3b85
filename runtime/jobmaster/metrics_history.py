"""A job's metrics over epochs and across runs, shaped for the web view's charts (and its JSON
API): from the epoch log's metrics rows (every run the log keeps, oldest first) and the
checkpoints table. Pure functions of those rows: no I/O, no Airflow.

Epoch charts put each logged epoch at its position in the log (runs one after the other, each
run's start marked), so a restore that runs an epoch number again does not fold over the run
before. A log of thousands of epochs is cut into at most MAX_POINTS buckets of consecutive
epochs, each drawn as its highest value: a spike stays visible, a chart stays small.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional

from runtime.checkpoint.checkpoint_record import CHECKPOINT, COMPLETED, DISCARDED, FAILED, CheckpointRecord
from runtime.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from runtime.metrics.epoch_timings import stack_rank, stacked

MAX_POINTS = 200        # per series: a chart 600-odd pixels wide has no room for more
MAX_SPLIT_SERIES = 8    # lines per split-lag chart: more are not told apart (the table has every split)
SPLIT_EPOCHS = 20       # the recent epochs in a source's per-split table ...
SPLIT_ROWS = 200        # ... fewer when it has many splits (a row per epoch and split)
RECORDS, MS, BYTES = "records", "ms", "bytes"
UNIT_NAMES = {RECORDS: "records", MS: "time", BYTES: "bytes"}     # what a chart's values count, said once


def split_unit(figures: dict) -> str:
    """What a split's offset and lag count: its figures' ``unit`` (a file's bytes), else records
    (Kafka's offsets)."""
    return BYTES if figures.get("unit") == BYTES else RECORDS


@dataclass(frozen=True)
class Point:
    x: int          # an epoch's position in the log (oldest first), or a checkpoint's id
    y: float
    tick: str       # what the x axis says there: the epoch's number, the checkpoint's id


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    unit: str               # RECORDS, MS or BYTES
    x_title: str            # "epoch" or "checkpoint"
    series: tuple
    runs: tuple = ()        # (x, run id) where each run's first point is
    note: str = ""          # how the points were downsampled
    empty: str = ""         # what the chart would show, said when it has no points
    stacked: bool = False   # its series are parts of one whole per x (a bar each), not lines


@dataclass(frozen=True)
class Bar:
    label: str              # e.g. "Window (1/2)": the operator or vertex, then ``subtask`` in brackets
    value: float            # the whole bar
    part: float             # its darker part (what the checkpoint itself wrote)
    title: str              # the bar's details, on hover
    name: str = ""          # the label's operator or vertex, which a short label may cut ...
    subtask: str = ""       # ... and which of its subtasks ("1/2", "driver"), which it keeps whole


@dataclass(frozen=True)
class BarChart:
    id: str
    title: str
    unit: str
    bars: tuple
    legend: tuple = ()      # (what the dark part is, what the light part is)
    empty: str = ""


def _epoch_axis(rows: list[dict]) -> tuple:
    """What every chart over epochs shares: the bucket size, its note, where runs start, the ticks."""
    k = max(1, math.ceil(len(rows) / MAX_POINTS))
    note = f"Each point is the highest of {k} consecutive epochs." if k > 1 else ""
    runs = tuple((i, r["run_id"]) for i, r in enumerate(rows) if i == 0 or r["run_id"] != rows[i - 1]["run_id"])
    return k, note, runs, [str(r["epoch"]) for r in rows]


def epoch_charts(rows: list[dict]) -> list[Chart]:
    """The charts over epochs of the epoch log's metrics ``rows`` (``epoch_metrics(every_run=True)``)."""
    k, note, runs, ticks = _epoch_axis(rows)

    def chart(id: str, title: str, unit: str, values: dict, empty: str) -> Chart:
        series = tuple(Series(name, _bucketed(points, k, ticks)) for name, points in values.items())
        return Chart(id, title, unit, "epoch", series, runs, note, empty)

    records_in, records_out, watermark_lag = {}, {}, {}
    source_lag: dict = {}       # unit -> vertex -> points: a file source's lag is bytes, Kafka's records
    for i, row in enumerate(rows):
        for name, v in (row.get("vertices") or {}).items():
            records_in.setdefault(name, []).append((i, v["records_in"]))
            records_out.setdefault(name, []).append((i, v["records_out"]))
            if v.get("watermark") is not None and MIN_WATERMARK < v["watermark"] < MAX_WATERMARK:
                watermark_lag.setdefault(name, []).append((i, row["processing_time"] - v["watermark"]))
            lags = [(split_unit(s), s["lag"]) for s in (v.get("splits") or {}).values() if s.get("lag") is not None]
            if lags:
                unit = lags[0][0]
                source_lag.setdefault(unit, {}).setdefault(name, []).append((i, sum(lag for _, lag in lags)))
    durations = {"epoch": [(i, r["duration_ms"]) for i, r in enumerate(rows)]} if rows else {}
    # One source-lag chart per unit (records first): lines of bytes and of records share no axis.
    lag_units = sorted(source_lag, key=lambda u: u != RECORDS) or [RECORDS]
    return [
        chart("records-in", "Records in per vertex", RECORDS, records_in,
              "No epoch logged with its vertices' records yet."),
        chart("records-out", "Records out per vertex: sent on, plus written by its sinks (a record counts once "
              "for each output and each sink it goes to)", RECORDS, records_out,
              "No epoch logged with its vertices' records yet."),
        *timing_charts(rows),       # side by side, in the second row of two columns
        chart("epoch-duration", "Epoch duration", MS, durations, "No epoch logged yet."),
        chart("watermark-lag", "Watermark lag (the epoch's processing time minus the vertex's watermark)", MS,
              watermark_lag, "No vertex has a watermark yet (event time: assign_timestamps_and_watermarks)."),
        *(chart("source-lag" if n == 0 else f"source-lag-{unit}",
                f"Source lag in {UNIT_NAMES[unit]} (how far its splits are behind the newest input, summed)", unit,
                source_lag.get(unit, {}), "No source of this job reports its lag: a source that knows how much "
                "input is waiting reports `lag` per split (its enumerator's split_metrics()).")
          for n, unit in enumerate(lag_units)),
    ]


def timing_charts(rows: list[dict]) -> list[Chart]:
    """Where each epoch's time went, stacked (``runtime.metrics.epoch_timings``), beside its
    records' latency percentiles. A bucket of epochs shows the one that took longest, with all its
    parts: a stack of each part's highest would be no epoch's. Rows logged before epochs were
    timed have no ``timings``: they are left out."""
    k, note, runs, ticks = _epoch_axis(rows)
    longest: dict = {}      # bucket -> (position, timings)
    for i, r in enumerate(rows):
        t = r.get("timings")
        if t and (i // k not in longest or t["total_ms"] > longest[i // k][1]["total_ms"]):
            longest[i // k] = (i, t)
    parts: dict = {}        # part -> [(position, ms)], in the order parts first come
    for i, t in sorted(longest.values(), key=lambda it: it[0]):
        for name, ms in stacked(t):
            parts.setdefault(name, []).append((i, ms))
    drawn = {name: parts[name] for name in sorted(parts, key=stack_rank) if any(ms > 0 for _, ms in parts[name])}
    positions = sorted(i for i, _ in longest.values())
    series = tuple(Series(name, tuple(Point(i, dict(points).get(i, 0.0), ticks[i]) for i in positions))
                   for name, points in drawn.items())
    latency: dict = {}
    for i, r in enumerate(rows):
        figures = (r.get("timings") or {}).get("latency")
        for q in ("p50", "p90", "p99", "max"):
            if figures:
                latency.setdefault(q, []).append((i, figures[q]))
    return [
        Chart("epoch-phases", "Where each epoch's time goes: from the epoch before to its results being visible",
              MS, "epoch", series, runs, f"Each bar is the longest of {k} consecutive epochs." if k > 1 else "",
              "No epoch logged with its timings yet.", stacked=True),
        Chart("epoch-latency", "Latency: a record's timestamp to its results being visible (its checkpoint)", MS,
              "epoch", tuple(Series(q, _bucketed(points, k, ticks)) for q, points in latency.items()), runs, note,
              "No epoch made records with timestamps visible yet (a Kafka source's, or a source's "
              "WatermarkStrategy's)."),
    ]


def checkpoint_charts(checkpoints: list[CheckpointRecord]) -> list[Chart]:
    """Duration and size of each checkpoint the checkpoints table lists (those discarded since too)."""
    taken = sorted((r for r in checkpoints if r.kind == CHECKPOINT and r.status != FAILED),
                   key=lambda r: r.checkpoint_id)
    k = max(1, math.ceil(len(taken) / MAX_POINTS))
    note = f"Each point is the highest of {k} consecutive checkpoints." if k > 1 else ""
    ticks = [str(r.checkpoint_id) for r in taken]
    runs = tuple((r.checkpoint_id, r.run_id) for i, r in enumerate(taken) if i == 0 or r.run_id != taken[i - 1].run_id)

    def series(name: str, values: Iterable[float]) -> Series:
        return Series(name, tuple(Point(taken[p.x].checkpoint_id, p.y, p.tick)
                                  for p in _bucketed(list(enumerate(values)), k, ticks)))

    empty = "No checkpoint completed yet."
    return [
        Chart("checkpoint-duration", "Checkpoint duration (from the tasks' snapshots to its record)", MS,
              "checkpoint", (series("duration", (r.duration_ms for r in taken)),) if taken else (), runs, note, empty),
        Chart("checkpoint-size", "Checkpoint size: all its state, and what it wrote itself", BYTES, "checkpoint",
              (series("state size", (r.state_bytes for r in taken)),
               series("written", (written_bytes(r) for r in taken))) if taken else (), runs, note, empty),
    ]


def written_bytes(record: CheckpointRecord) -> int:
    """The bytes of the files in the checkpoint's own partition: what it wrote (the rest of its
    state, with incremental checkpoints, are files earlier checkpoints wrote)."""
    own = f"checkpoint_id={record.checkpoint_id}/"
    return sum(f["size"] for op in record.operators for f in op.get("files", ()) if f["path"].startswith(own))


@dataclass(frozen=True)
class SplitFigures:
    split: str
    offset: Optional[int]           # the position after the epoch
    latest: Optional[int]           # the newest position there was when the epoch was planned
    lag: Optional[int]
    checkpointed: Optional[int]     # its offset in checkpoint SplitEpoch.checkpointed_id (None: not in it)


@dataclass(frozen=True)
class SplitEpoch:
    run_id: str
    epoch: int
    checkpoint_id: Optional[int]        # the checkpoint the epoch ends in, if any
    checkpoint_status: Optional[str]    # its status; None: no record (still completing, or lost with its run)
    checkpointed_id: Optional[int]      # the last completed checkpoint at or before the epoch: where a restore resumes
    splits: tuple                       # SplitFigures, by split id


@dataclass(frozen=True)
class SourceSplits:
    """One source vertex's splits over epochs: its lag chart (a series per split) and the recent
    epochs' figures per split, newest first."""
    source: str
    lag: Chart
    epochs: tuple
    note: str               # which epochs the table shows


def split_history(rows: list[dict], checkpoints: list[CheckpointRecord],
                  restored_from: Optional[dict] = None) -> list[SourceSplits]:
    """Each source's per-split figures (its enumerator's ``split_metrics``) over the epoch log's
    ``rows``, with the checkpointed offset: an epoch's offset is its position after the epoch, which
    a restore resumes from only if the epoch's checkpoint completed; otherwise the last completed
    one before it holds the split. ``restored_from`` (run id -> the checkpoint it restored, None
    for a fresh start) says where each run began; a run it does not name follows the one before."""
    status = {r.checkpoint_id: r.status for r in checkpoints if r.kind == CHECKPOINT}
    offsets: dict = {}          # completed checkpoint id -> {source: {split: offset}}
    current: Optional[int] = None
    reported: dict = {}         # source -> [(position in the log, SplitEpoch)]
    units: dict = {}            # source -> what its splits' offsets count
    for i, row in enumerate(rows):
        if (i == 0 or row["run_id"] != rows[i - 1]["run_id"]) and row["run_id"] in (restored_from or {}):
            current = restored_from[row["run_id"]]
        splits = {name: v["splits"] for name, v in (row.get("vertices") or {}).items() if v.get("splits")}
        checkpoint_id = row.get("checkpoint_id")
        # DISCARDED: completed, then subsumed by a later one (INVALID ones a restore skips).
        if checkpoint_id is not None and status.get(checkpoint_id) in (COMPLETED, DISCARDED):
            current = checkpoint_id
            offsets[checkpoint_id] = {name: {sid: f.get("offset") for sid, f in s.items()} for name, s in splits.items()}
        for name, figures in splits.items():
            units[name] = split_unit(next(iter(figures.values())))
            held = offsets.get(current, {}).get(name, {})
            reported.setdefault(name, []).append((i, SplitEpoch(
                row["run_id"], row["epoch"], checkpoint_id, status.get(checkpoint_id), current,
                tuple(SplitFigures(sid, f.get("offset"), f.get("latest"), f.get("lag"), held.get(sid))
                      for sid, f in sorted(figures.items())))))
    k, note, _, ticks = _epoch_axis(rows)
    out = []
    for n, (name, epochs) in enumerate(reported.items(), 1):
        # Only the runs in which this vertex reported (a chain renamed between runs is another vertex).
        runs = tuple((i, e.run_id) for j, (i, e) in enumerate(epochs) if j == 0 or e.run_id != epochs[j - 1][1].run_id)
        lags: dict = {}
        for i, e in epochs:
            for f in e.splits:
                if f.lag is not None:
                    lags.setdefault(f.split, []).append((i, f.lag))
        unit = units.get(name, RECORDS)
        # The splits furthest behind now (then at their worst) are the lines worth drawing.
        now = {f.split: f.lag or 0 for f in epochs[-1][1].splits}
        drawn = sorted(lags, key=lambda sid: (-now.get(sid, 0), -max(y for _, y in lags[sid]), sid))[:MAX_SPLIT_SERIES]
        notes = [note] if note else []
        if len(drawn) < len(lags):
            notes.append(f"The {len(drawn)} of {len(lags)} splits with the highest lag at the latest epoch "
                         "(the table lists them all).")
        chart = Chart(f"split-lag-{n}", f"Lag per split of {name}, in {UNIT_NAMES[unit]}", unit, "epoch",
                      tuple(Series(sid, _bucketed(lags[sid], k, ticks)) for sid in drawn), runs, " ".join(notes),
                      "Its splits report no lag.")
        shown = max(1, min(SPLIT_EPOCHS, SPLIT_ROWS // max(1, len(epochs[-1][1].splits))))
        recent = tuple(e for _, e in reversed(epochs[-shown:]))
        out.append(SourceSplits(name, chart, recent, f"The last {len(recent)} of {len(epochs)} epochs that "
                                f"reported its splits, newest first." if len(recent) < len(epochs) else
                                "Every epoch that reported its splits, newest first."))
    return out


def checkpoint_breakdown(record: Optional[CheckpointRecord], rows: list[dict]) -> list[BarChart]:
    """A checkpoint per operator and subtask: the state it lists (and what of it the checkpoint
    wrote), and each subtask's snapshot time from its epoch's metrics row."""
    if record is None:
        return []
    own = f"checkpoint_id={record.checkpoint_id}/"
    state = []
    for op in record.operators:
        by_subtask: dict = {}
        for f in op.get("files", ()):
            total, written = by_subtask.get(f["subtask"], (0, 0))
            by_subtask[f["subtask"]] = (total + f["size"], written + (f["size"] if f["path"].startswith(own) else 0))
        for subtask, (total, written) in sorted(by_subtask.items()):
            where = "the sources' positions (driver)" if subtask < 0 else f"{subtask + 1}/{op['parallelism']}"
            state.append(Bar(f"{op['name']} ({where})", total, written,
                             f"{op['name']} (uid {op['uid']}) in {op['vertex']}, {where}: {total} bytes, "
                             f"{written} written by checkpoint {record.checkpoint_id}",
                             op["name"], "driver" if subtask < 0 else where))
    row = next((r for r in reversed(rows) if r.get("checkpoint_id") == record.checkpoint_id), None)
    snapshots = []
    for name, v in ((row or {}).get("vertices") or {}).items():
        n = len(v.get("snapshot_ms") or ())
        for i, ms in enumerate(v.get("snapshot_ms") or ()):
            snapshots.append(Bar(f"{name} ({i + 1}/{n})", ms, ms, f"{name} ({i + 1}/{n}): snapshot {ms} ms",
                                 name, f"{i + 1}/{n}"))
    which = f"checkpoint {record.checkpoint_id} (epoch {record.epoch})"
    return [
        BarChart("checkpoint-state", f"State of {which} per operator and subtask", BYTES, tuple(state),
                 (f"written by checkpoint {record.checkpoint_id}", "written by an earlier checkpoint"),
                 "The checkpoint holds no state."),
        BarChart("checkpoint-snapshots", f"Snapshot time of {which} per subtask", MS, tuple(snapshots), (),
                 "Its epoch's metrics row (with the subtasks' snapshot times) is not in the epoch log."),
    ]


def _bucketed(points: list, k: int, ticks: list) -> tuple:
    """``points`` (position, value), in order, as the highest value of each bucket of ``k``
    positions, placed at the bucket's last position that has one."""
    out: dict = {}
    for x, y in points:
        _, top = out.get(x // k, (x, y))
        out[x // k] = (x, max(top, y))
    return tuple(Point(x, y, ticks[x]) for x, y in out.values())
