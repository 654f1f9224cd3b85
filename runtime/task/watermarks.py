"""A subtask's event time: its input valves and its operators' watermarks, kept across epochs.

Flink's StatusWatermarkValve takes a gate's watermark as the minimum over its active channels;
in a long-running TaskManager it remembers each channel's watermark for as long as the job
runs. Here a subtask lives for one epoch, so what the valve and the operators have seen goes
back to the driver with the acknowledgement (``TaskWatermarks``) and comes with the next
epoch's deployment, or with the checkpoint record after a restore. Without it, a record
behind the watermark of an earlier epoch would not be late, and purged windows would fire
again (the answer would depend on where the input was cut into epochs).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from runtime.common.watermark_strategy import MIN_WATERMARK


class StatusWatermarkValve:
    """The watermark of one input gate: the minimum over its active (non-idle) channels."""

    def __init__(self, channels: list, restored: Optional[dict] = None, idle=(), emitted: int = MIN_WATERMARK):
        restored = restored or {}
        # A channel the restored state does not know (the producer was rescaled) starts at the
        # lowest restored watermark: no record becomes late because of a rescale.
        floor = min(restored.values(), default=emitted)
        self.watermarks = {c: restored.get(c, floor) for c in channels}
        self.idle: set = {c for c in idle if c in self.watermarks}
        self.emitted = emitted

    def on_watermark(self, channel, watermark: int) -> Optional[int]:
        """The gate's new watermark if it advanced, else None."""
        self.idle.discard(channel)
        if watermark > self.watermarks[channel]:
            self.watermarks[channel] = watermark
        return self._advance()

    def on_idle(self, channel) -> Optional[int]:
        self.idle.add(channel)
        return self._advance()

    @property
    def all_idle(self) -> bool:
        return len(self.idle) == len(self.watermarks)

    def _advance(self) -> Optional[int]:
        active = [w for c, w in self.watermarks.items() if c not in self.idle]
        if not active:
            return None
        current = min(active)
        if current > self.emitted:
            self.emitted = current
            return current
        return None


@dataclass(frozen=True)
class GateWatermarks:
    """One gate's valve: each channel's watermark ((data set, producer) -> ms), the idle channels
    and what the gate last emitted."""

    channels: dict = field(default_factory=dict)
    idle: frozenset = frozenset()
    emitted: int = MIN_WATERMARK

    @staticmethod
    def of(valve: StatusWatermarkValve) -> "GateWatermarks":
        return GateWatermarks(dict(valve.watermarks), frozenset(valve.idle), valve.emitted)

    def valve(self, channels: list) -> StatusWatermarkValve:
        return StatusWatermarkValve(channels, self.channels, self.idle, self.emitted)


@dataclass(frozen=True)
class TaskWatermarks:
    """What a subtask knows of event time at the end of an epoch.

    ``gates``: input index -> GateWatermarks; ``operators``: operator id -> (current watermark,
    watermark of input 1, watermark of input 2), the last two for two-input operators."""

    gates: dict = field(default_factory=dict)
    operators: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"gates": {str(i): {"channels": [[d, p, w] for (d, p), w in sorted(g.channels.items())],
                                   "idle": sorted([d, p] for d, p in g.idle), "emitted": g.emitted}
                          for i, g in self.gates.items()},
                "operators": {op: list(w) for op, w in self.operators.items()}}

    @staticmethod
    def from_json(data: dict) -> "TaskWatermarks":
        gates = {int(i): GateWatermarks({(d, p): w for d, p, w in g["channels"]},
                                        frozenset((d, p) for d, p in g["idle"]), g["emitted"])
                 for i, g in data.get("gates", {}).items()}
        return TaskWatermarks(gates, {op: tuple(w) for op, w in data.get("operators", {}).items()})


def rescaled(subtasks: list) -> TaskWatermarks:
    """The event time of a subtask of a vertex whose parallelism changed: for every operator and
    gate the lowest watermark any old subtask had (Flink's rule for a union of inputs), so time
    never runs ahead of what every old subtask had seen; idleness is forgotten."""
    operators: dict = {}
    for t in subtasks:
        for op, marks in t.operators.items():
            operators[op] = tuple(map(min, zip(operators[op], marks))) if op in operators else tuple(marks)
    gates: dict = {}
    for t in subtasks:
        for i, g in t.gates.items():
            low = min([*g.channels.values(), g.emitted])
            gates[i] = min(gates.get(i, low), low)
    return TaskWatermarks({i: GateWatermarks({}, frozenset(), low) for i, low in gates.items()}, operators)


def checkpointed(acks: list, head_ids: dict) -> dict:
    """The event time of a checkpoint, per vertex (by its head's operator id): the lowest
    watermark of its subtasks, for people, and every subtask's TaskWatermarks, for a restore.
    ``acks`` are (vertex id, subtask, TaskWatermarks, watermark)."""
    out: dict = {}
    for vid, subtask, marks, watermark in sorted(acks, key=lambda a: (a[0], a[1])):
        entry = out.setdefault(head_ids[vid], {"watermark": watermark, "subtasks": []})
        entry["watermark"] = min(entry["watermark"], watermark)
        entry["subtasks"].append((marks or TaskWatermarks()).to_json())
    return out


def assign_watermarks(stored: dict, vertices) -> dict:
    """(vertex id, subtask) -> TaskWatermarks from a checkpoint's ``watermarks``: each subtask its
    own at the same parallelism, the rescaled (lowest) event time otherwise."""
    out: dict = {}
    for v in vertices:
        entry = stored.get(v.head.operator_id)
        if not isinstance(entry, dict):
            continue        # a checkpoint of an older version: a watermark without its valves
        subtasks = [TaskWatermarks.from_json(s) for s in entry["subtasks"]]
        for s in range(v.parallelism):
            out[(v.id, s)] = subtasks[s] if len(subtasks) == v.parallelism else rescaled(subtasks)
    return out
