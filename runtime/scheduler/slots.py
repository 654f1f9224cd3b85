"""Slot plan: where each subtask runs (Flink's slot sharing over TaskManagers).

A TaskManager is a Spark executor and a slot one of its cores. Subtasks of the same slot
sharing group share slots: subtask i of every vertex in the group joins the group's
shared slot i, so a group needs as many slots as its highest parallelism, and a job the
sum over its groups. Shared slots fill TaskManagers in order, as Flink's default does.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable

from runtime.graph.execution_graph import ExecutionGraph


class NoResourceAvailableException(RuntimeError):
    """Not enough slots for the job (Flink's NoResourceAvailableException)."""


@dataclass(frozen=True)
class TaskManager:
    id: str                         # the Spark executor id ("driver" in local mode)
    host: str
    number_of_slots: int

    def __post_init__(self):
        if self.number_of_slots < 1:
            raise ValueError(f"TaskManager {self.id} must offer at least one slot, got {self.number_of_slots}")


@dataclass(frozen=True)
class SharedSlot:
    slot_sharing_group: str
    index: int                      # shared slot i of the group holds subtask i of each vertex
    task_manager_id: str
    slot_number: int                # the slot's number within its TaskManager
    subtasks: tuple[str, ...]       # "Name (i/p)" of the subtasks sharing it


@dataclass(frozen=True)
class SlotPlan:
    job_name: str
    slots_required: int
    slots_per_group: tuple[tuple[str, int], ...]
    task_managers: tuple[TaskManager, ...]
    shared_slots: tuple[SharedSlot, ...]

    @property
    def slots_available(self) -> int:
        return sum(tm.number_of_slots for tm in self.task_managers)

    def slot_of(self, subtask_name: str) -> SharedSlot:
        for slot in self.shared_slots:
            if subtask_name in slot.subtasks:
                return slot
        raise KeyError(f"no slot holds subtask {subtask_name!r}")

    def to_json(self) -> str:
        return json.dumps({
            "job": self.job_name,
            "slots_required": self.slots_required,
            "slots_available": self.slots_available,
            "slots_per_group": dict(self.slots_per_group),
            "task_managers": [{"id": tm.id, "host": tm.host, "slots": tm.number_of_slots}
                              for tm in self.task_managers],
            "shared_slots": [{"group": s.slot_sharing_group, "index": s.index,
                              "task_manager": s.task_manager_id, "slot": s.slot_number,
                              "subtasks": list(s.subtasks)} for s in self.shared_slots],
        })


def slots_required_per_group(graph: ExecutionGraph) -> dict[str, int]:
    need: dict[str, int] = {}
    for v in graph.job_vertices:
        group = v.job_vertex.slot_sharing_group
        need[group] = max(need.get(group, 0), v.parallelism)
    return need


def local_task_managers(cores: int, host: str = "localhost") -> tuple[TaskManager, ...]:
    """Local mode: the driver is the only executor, with one slot per core."""
    return (TaskManager("driver", host, cores),)


def compute_slot_plan(graph: ExecutionGraph, task_managers: Iterable[TaskManager]) -> SlotPlan:
    """Place every subtask in a shared slot on a TaskManager, or fail with the shortage."""
    task_managers = tuple(task_managers)
    need = slots_required_per_group(graph)
    required = sum(need.values())
    available = sum(tm.number_of_slots for tm in task_managers)
    if required > available:
        groups = ", ".join(f"{g}={n}" for g, n in need.items())
        raise NoResourceAvailableException(
            f"Could not allocate all requires slots for job '{graph.job_name}'. "
            f"Slots required: {required}, slots allocated: {available}. The job needs the highest "
            f"parallelism of each slot sharing group, summed over the groups ({groups}); the "
            f"cluster offers {available} slot(s) on {len(task_managers)} TaskManager(s). Lower the "
            f"parallelism, share slots (one slot sharing group), or give Spark more executor cores.")

    free = [(tm.id, n) for tm in task_managers for n in range(tm.number_of_slots)]
    members: dict[tuple[str, int], list[str]] = {}
    for v in graph.job_vertices:
        for ev in v.task_vertices:
            members.setdefault((v.job_vertex.slot_sharing_group, ev.subtask_index), []).append(
                ev.task_name_with_subtask_index)
    slots = []
    for (group, index), (tm_id, slot_number) in zip(
            ((g, i) for g, n in need.items() for i in range(n)), free):
        slots.append(SharedSlot(group, index, tm_id, slot_number, tuple(members[(group, index)])))
    return SlotPlan(graph.job_name, required, tuple(need.items()), task_managers, tuple(slots))
