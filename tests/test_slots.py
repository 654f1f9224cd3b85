"""Slot plan: slot sharing, placement over TaskManagers, the shortage error."""
import json
import pytest

from runtime.client import compile_job
from runtime.graph.execution_graph import build_execution_graph
from runtime.graph.job_graph import create_job_graph
from runtime.scheduler.slots import (
    NoResourceAvailableException, TaskManager, compute_slot_plan, local_task_managers)

from seed import ROOT, SEED_PARALLELISM, WINDOW, WORDCOUNT


def test_seed_job_needs_three_shared_slots():
    graph = compile_job(WORDCOUNT, parallelism=SEED_PARALLELISM).execution_graph
    plan = compute_slot_plan(graph, local_task_managers(4))
    assert plan.slots_required == 3
    assert [(s.slot_sharing_group, s.index, s.task_manager_id, s.slot_number, s.subtasks)
            for s in plan.shared_slots] == [
        ("default", 0, "driver", 0, ("Source: Socket Stream -> Flat Map -> Map (1/1)",
                                     f"{WINDOW} (1/3)", "Sink: Print to Std. Out (1/1)")),
        ("default", 1, "driver", 1, (f"{WINDOW} (2/3)",)),
        ("default", 2, "driver", 2, (f"{WINDOW} (3/3)",)),
    ]
    assert plan.slot_of(f"{WINDOW} (3/3)").slot_number == 2


def test_slots_fill_task_managers_in_order():
    graph = compile_job(WORDCOUNT, parallelism=SEED_PARALLELISM).execution_graph
    tms = [TaskManager("1", "host-a", 2), TaskManager("2", "host-b", 2)]
    plan = compute_slot_plan(graph, tms)
    assert [(s.index, s.task_manager_id, s.slot_number) for s in plan.shared_slots] == [
        (0, "1", 0), (1, "1", 1), (2, "2", 0)]
    assert json.loads(plan.to_json())["slots_available"] == 4


def test_each_slot_sharing_group_needs_its_own_slots(env):
    s = env.from_collection([1, 2]).map(lambda x: x).set_parallelism(2)
    s.rebalance().map(lambda x: x).set_parallelism(3).slot_sharing_group("heavy").print()
    graph = build_execution_graph(create_job_graph(env.get_stream_graph()))
    plan = compute_slot_plan(graph, local_task_managers(5))
    assert plan.slots_required == 5
    assert dict(plan.slots_per_group) == {"default": 2, "heavy": 3}
    groups = [(s.slot_sharing_group, s.index, s.slot_number) for s in plan.shared_slots]
    assert groups == [("default", 0, 0), ("default", 1, 1), ("heavy", 0, 2), ("heavy", 1, 3), ("heavy", 2, 4)]


def test_too_few_slots_fails_with_flinks_message():
    graph = compile_job(WORDCOUNT, parallelism=SEED_PARALLELISM).execution_graph
    with pytest.raises(NoResourceAvailableException) as e:
        compute_slot_plan(graph, [TaskManager("1", "h", 1), TaskManager("2", "h", 1)])
    msg = str(e.value)
    assert "Could not allocate all requires slots" in msg
    assert "Slots required: 3, slots allocated: 2" in msg
    assert "Lower the parallelism" in msg


def test_a_task_manager_needs_a_slot():
    with pytest.raises(ValueError, match="at least one slot"):
        TaskManager("1", "h", 0)
