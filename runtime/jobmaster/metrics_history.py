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

from runtime.checkpoint.storage import CHECKPOINT, FAILED, CheckpointRecord
from runtime.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK

MAX_POINTS = 200        # per series: a chart 600-odd pixels wide has no room for more
RECORDS, MS, BYTES = "records", "ms", "bytes"


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


@dataclass(frozen=True)
class Bar:
    label: str
    value: float            # the whole bar
    part: float             # its darker part (what the checkpoint itself wrote)
    title: str              # the bar's details, on hover


@dataclass(frozen=True)
class BarChart:
    id: str
    title: str
    unit: str
    bars: tuple
    legend: tuple = ()      # (what the dark part is, what the light part is)
    empty: str = ""


def epoch_charts(rows: list[dict]) -> list[Chart]:
    """The charts over epochs of the epoch log's metrics ``rows`` (``epoch_metrics(every_run=True)``)."""
    k = max(1, math.ceil(len(rows) / MAX_POINTS))
    note = f"Each point is the highest of {k} consecutive epochs." if k > 1 else ""
    runs = tuple((i, r["run_id"]) for i, r in enumerate(rows) if i == 0 or r["run_id"] != rows[i - 1]["run_id"])
    ticks = [str(r["epoch"]) for r in rows]

    def chart(id: str, title: str, unit: str, values: dict, empty: str) -> Chart:
        series = tuple(Series(name, _bucketed(points, k, ticks)) for name, points in values.items())
        return Chart(id, title, unit, "epoch", series, runs, note, empty)

    records_in, records_out, watermark_lag, source_lag = {}, {}, {}, {}
    for i, row in enumerate(rows):
        for name, v in (row.get("vertices") or {}).items():
            records_in.setdefault(name, []).append((i, v["records_in"]))
            records_out.setdefault(name, []).append((i, v["records_out"]))
            if v.get("watermark") is not None and MIN_WATERMARK < v["watermark"] < MAX_WATERMARK:
                watermark_lag.setdefault(name, []).append((i, row["processing_time"] - v["watermark"]))
            lags = [s["lag"] for s in (v.get("splits") or {}).values() if s.get("lag") is not None]
            if lags:
                source_lag.setdefault(name, []).append((i, sum(lags)))
    durations = {"epoch": [(i, r["duration_ms"]) for i, r in enumerate(rows)]} if rows else {}
    return [
        chart("records-in", "Records in per vertex", RECORDS, records_in,
              "No epoch logged with its vertices' records yet."),
        chart("records-out", "Records out per vertex (sent on, or written by its sinks)", RECORDS, records_out,
              "No epoch logged with its vertices' records yet."),
        chart("epoch-duration", "Epoch duration", MS, durations, "No epoch logged yet."),
        chart("watermark-lag", "Watermark lag (the epoch's processing time minus the vertex's watermark)", MS,
              watermark_lag, "No vertex has a watermark yet (event time: assign_timestamps_and_watermarks)."),
        chart("source-lag", "Source lag (how far its splits are behind the newest input, summed)", RECORDS,
              source_lag, "No source of this job reports its lag: a source that knows how much input is "
              "waiting reports `lag` per split (its enumerator's split_metrics())."),
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


def latest_splits(rows: list[dict]) -> dict:
    """Source vertex -> {split: figures} as the latest epoch that had any reported them."""
    for row in reversed(rows):
        splits = {name: v["splits"] for name, v in (row.get("vertices") or {}).items() if v.get("splits")}
        if splits:
            return splits
    return {}


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
                             f"{written} written by checkpoint {record.checkpoint_id}"))
    row = next((r for r in reversed(rows) if r.get("checkpoint_id") == record.checkpoint_id), None)
    snapshots = []
    for name, v in ((row or {}).get("vertices") or {}).items():
        n = len(v.get("snapshot_ms") or ())
        for i, ms in enumerate(v.get("snapshot_ms") or ()):
            snapshots.append(Bar(f"{name} ({i + 1}/{n})", ms, ms, f"{name} ({i + 1}/{n}): snapshot {ms} ms"))
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
