"""The built-in metrics of an epoch per job vertex (Flink's task metrics numRecordsIn,
numRecordsOut and currentOutputWatermark, summed or taken over the vertex's subtasks), with each
subtask's snapshot time and a source's per-split figures: what the epoch log keeps beside the
job's own metrics, for the web view's charts.

One entry per vertex, by its name (a second vertex of the same name gets `` [id]``)::

    {"records_in": n,          # read from its splits (a source) or received from its inputs
     "records_out": n,         # sent to the next vertices plus written by its sinks
     "watermark": ms | None,   # the lowest of its subtasks' (None: none yet)
     "snapshot_ms": [ms, ...], # each subtask's snapshot, by subtask index: the checkpoint's per-subtask time
     "splits": {split id: {"offset": ..., "latest": ..., "lag": ...}}}   # a source's, if it reports any

``splits`` are what the source's enumerator reports (``SplitEnumerator.split_metrics``): by
convention ``offset`` (the position reached), ``latest`` (the newest position there was) and
``lag`` (how far behind the newest: what the source-lag chart draws). Everything is JSON-able.
"""
from __future__ import annotations

from runtime.common.watermark_strategy import MIN_WATERMARK


def epoch_vertex_metrics(vertex_names: dict, acks: list, splits: dict) -> dict:
    """``vertex_names``: vertex id -> name, in the graph's order; ``acks``: the epoch's
    acknowledgements (``records_in``, ``records_out``, ``records_written``, ``watermark``,
    ``snapshot_ms`` per subtask); ``splits``: source vertex id -> {split id: figures}."""
    by_vertex: dict = {}
    for a in acks:
        by_vertex.setdefault(a.job_vertex_id, []).append(a)
    out: dict = {}
    for vid, name in vertex_names.items():
        subtasks = sorted(by_vertex.get(vid, ()), key=lambda a: a.subtask_index)
        watermark = min((a.watermark for a in subtasks), default=MIN_WATERMARK)
        entry = {"records_in": sum(a.records_in for a in subtasks),
                 "records_out": sum(a.records_out + a.records_written for a in subtasks),
                 "watermark": None if watermark <= MIN_WATERMARK else watermark,
                 "snapshot_ms": [round(a.snapshot_ms, 1) for a in subtasks]}
        if splits.get(vid):
            entry["splits"] = splits[vid]
        out[name if name not in out else f"{name} [{vid}]"] = entry
    return out
