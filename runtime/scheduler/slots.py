"""Slot plan: where each subtask runs (Flink's slot sharing over TaskManagers).

A TaskManager is a Spark executor and a slot one of its cores. Subtasks of the same slot
sharing group share slots: subtask i of every vertex in the group joins the group's
shared slot i, so a group needs as many slots as its highest parallelism, and a job the
sum over its groups. Shared slots fill TaskManagers in order, as Flink's default does.

A group may declare the resources of its slots (a SlotSharingGroup with cpu cores, memory,
external resources). A slot here is one Spark task slot, one core (spark.task.cpus = 1 for the
whole session): a group asking up to one core gets a slot each; one asking more cores, or an
external resource such as a GPU, is refused, as Flink's ResourceManager refuses a slot no
TaskManager can offer, rather than run on less than declared. Memory is carried into the plan
as declared (Spark's executors share their memory among their tasks, per slot is not enforced).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable

from runtime.graph.execution_graph import ExecutionGraph


SLOT_CPU_CORES = 1.0                # the cores of one slot: a Spark task's


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
    # (group, its declared resources) of the groups that declare some: what each of its slots has.
    slot_resources: tuple[tuple[str, dict], ...] = ()

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
            "slot_resources": dict(self.slot_resources),
        })


def slots_required_per_group(graph: ExecutionGraph) -> dict[str, int]:
    need: dict[str, int] = {}
    for v in graph.job_vertices:
        group = v.job_vertex.slot_sharing_group
        need[group] = max(need.get(group, 0), v.parallelism)
    return need


def declared_slot_resources(graph: ExecutionGraph, groups) -> tuple[tuple[str, dict], ...]:
    """The resources the slots of ``groups`` declare, checked against what a slot offers."""
    declared = []
    for name in groups:
        group = graph.job_graph.stream_graph.slot_sharing_group(name)
        if group is None:
            continue
        if group.get_cpu_cores() > SLOT_CPU_CORES or group.get_external_resources():
            raise NoResourceAvailableException(
                f"Could not allocate the slots of slot sharing group '{name}' for job '{graph.job_name}': "
                f"it declares {group.get_cpu_cores()} cpu cores and external resources "
                f"{group.get_external_resources() or 'none'} per slot, but a slot is one Spark task slot: "
                f"{SLOT_CPU_CORES} core and no external resources. Declare set_cpu_cores({SLOT_CPU_CORES}) "
                f"or less and no external resource, and give the group more parallelism instead.")
        declared.append((name, {
            "cpu_cores": group.get_cpu_cores(),
            "task_heap_memory": str(group.get_task_heap_memory()),
            "task_off_heap_memory": str(group.get_task_off_heap_memory()),
            "managed_memory": str(group.get_managed_memory()),
        }))
    return tuple(declared)


def local_task_managers(cores: int, host: str = "localhost") -> tuple[TaskManager, ...]:
    """Local mode: the driver is the only executor, with one slot per core."""
    return (TaskManager("driver", host, cores),)


def compute_slot_plan(graph: ExecutionGraph, task_managers: Iterable[TaskManager]) -> SlotPlan:
    """Place every subtask in a shared slot on a TaskManager, or fail with the shortage."""
    task_managers = tuple(task_managers)
    need = slots_required_per_group(graph)
    required = sum(need.values())
    available = sum(tm.number_of_slots for tm in task_managers)
    resources = declared_slot_resources(graph, need)
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
    return SlotPlan(graph.job_name, required, tuple(need.items()), task_managers, tuple(slots), resources)
