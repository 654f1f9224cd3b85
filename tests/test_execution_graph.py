"""ExecutionGraph: subtasks, intermediate results, pointwise wiring, the ExecutionState machine."""
import pytest

from runtime.client import compile_job
from runtime.graph.execution_graph import Execution, build_execution_graph, consumed_partitions
from runtime.graph.execution_state import (
    ExecutionState as S, IllegalExecutionStateTransition, can_transition)
from runtime.graph.job_graph import DistributionPattern, create_job_graph

from seed import ROOT, SEED_PARALLELISM, WINDOW, WORDCOUNT


def test_seed_job_has_three_job_vertices_and_five_executions():
    graph = compile_job(WORDCOUNT, parallelism=SEED_PARALLELISM).execution_graph
    assert [(v.name, v.parallelism) for v in graph.job_vertices] == [
        ("Source: Socket Stream -> Flat Map -> Map", 1), (WINDOW, 3), ("Sink: Print to Std. Out", 1)]
    assert [str(ev.current_execution) for ev in graph.all_execution_vertices] == [
        "Attempt #0 (Source: Socket Stream -> Flat Map -> Map (1/1)) - [CREATED]",
        f"Attempt #0 ({WINDOW} (1/3)) - [CREATED]",
        f"Attempt #0 ({WINDOW} (2/3)) - [CREATED]",
        f"Attempt #0 ({WINDOW} (3/3)) - [CREATED]",
        "Attempt #0 (Sink: Print to Std. Out (1/1)) - [CREATED]",
    ]
    window = graph.job_vertices[1]
    assert [(ev.key_group_range.start_key_group, ev.key_group_range.end_key_group)
            for ev in window.task_vertices] == [(0, 42), (43, 85), (86, 127)]
    assert graph.job_vertices[0].task_vertices[0].key_group_range is None
    results = graph.intermediate_results
    assert [(r.producer, r.consumer, r.number_of_partitions, r.distribution_pattern) for r in results] == [
        (1, 5, 1, DistributionPattern.ALL_TO_ALL), (5, 6, 3, DistributionPattern.ALL_TO_ALL)]
    assert [p.partition_number for p in results[1].partitions] == [0, 1, 2]


@pytest.mark.parametrize("producers, consumers, expected", [
    (3, 3, [(0,), (1,), (2,)]),
    (4, 2, [(0, 1), (2, 3)]),
    (5, 2, [(0, 1), (2, 3, 4)]),
    (2, 4, [(0,), (0,), (1,), (1,)]),
    (2, 3, [(0,), (0,), (1,)]),
])
def test_pointwise_connections_follow_flink(producers, consumers, expected):
    class Edge:
        distribution_pattern = DistributionPattern.POINTWISE
    assert [consumed_partitions(Edge, producers, consumers, i) for i in range(consumers)] == expected


def test_all_to_all_consumers_read_every_partition():
    class Edge:
        distribution_pattern = DistributionPattern.ALL_TO_ALL
    assert consumed_partitions(Edge, 3, 2, 1) == (0, 1, 2)


def test_execution_state_happy_path_and_timestamps():
    e = Execution("Map (1/1)")
    for i, state in enumerate([S.SCHEDULED, S.DEPLOYING, S.RUNNING, S.FINISHED]):
        e = e.transition_to(state, timestamp=float(i))
    assert e.state == S.FINISHED
    assert e.state_timestamps == ((S.SCHEDULED, 0.0), (S.DEPLOYING, 1.0), (S.RUNNING, 2.0), (S.FINISHED, 3.0))


@pytest.mark.parametrize("path", [
    [S.SCHEDULED, S.DEPLOYING, S.RUNNING, S.CANCELING, S.CANCELED],
    [S.SCHEDULED, S.DEPLOYING, S.CANCELING, S.CANCELED],
    [S.SCHEDULED, S.CANCELED],
    [S.CANCELED],
    [S.RECONCILING, S.RUNNING, S.FINISHED],
    [S.RECONCILING, S.FAILED],
    [S.FAILED],
    [S.SCHEDULED, S.FAILED],
    [S.SCHEDULED, S.DEPLOYING, S.FAILED],
    [S.SCHEDULED, S.DEPLOYING, S.RUNNING, S.FAILED],
    [S.SCHEDULED, S.DEPLOYING, S.RUNNING, S.CANCELING, S.FAILED],
])
def test_legal_paths(path):
    e = Execution("t (1/1)")
    for state in path:
        e = e.transition_to(state)
    assert e.state == path[-1]


@pytest.mark.parametrize("path, bad", [
    ([], S.RUNNING),                                   # must be scheduled and deployed first
    ([], S.DEPLOYING),
    ([], S.FINISHED),
    ([S.SCHEDULED], S.RUNNING),
    ([S.SCHEDULED, S.DEPLOYING], S.FINISHED),
    ([S.SCHEDULED, S.DEPLOYING, S.RUNNING], S.CANCELED),   # cancel goes through CANCELING
    ([S.SCHEDULED, S.DEPLOYING, S.RUNNING, S.FINISHED], S.FAILED),   # terminal
    ([S.CANCELED], S.SCHEDULED),
    ([S.FAILED], S.RUNNING),
    ([S.SCHEDULED], S.RECONCILING),
])
def test_illegal_transitions_are_refused(path, bad):
    e = Execution("Map (2/3)")
    for state in path:
        e = e.transition_to(state)
    with pytest.raises(IllegalExecutionStateTransition) as err:
        e.transition_to(bad)
    assert f"illegal transition {e.state.value} -> {bad.value}" in str(err.value)
    assert "Map (2/3)" in str(err.value)


def test_terminal_states_have_no_way_out():
    for terminal in (S.FINISHED, S.CANCELED, S.FAILED):
        assert terminal.is_terminal
        assert not any(can_transition(terminal, s) for s in S)
    assert not any(s.is_terminal for s in (S.CREATED, S.SCHEDULED, S.DEPLOYING, S.RUNNING,
                                           S.CANCELING, S.RECONCILING))


def test_graph_transitions_and_restart_attempts():
    graph = compile_job(WORDCOUNT, parallelism=SEED_PARALLELISM).execution_graph
    for state in (S.SCHEDULED, S.DEPLOYING, S.RUNNING):
        graph = graph.transition_all(state, timestamp=1.0)
    graph = graph.transition(5, 1, S.FAILED, failure_cause="boom")
    assert graph.vertex(5, 1).current_execution.failure_cause == "boom"
    assert graph.vertex(5, 0).execution_state == S.RUNNING
    with pytest.raises(RuntimeError, match="must be FINISHED, CANCELED or FAILED first"):
        graph.reset_for_new_execution()
    for ev in graph.all_execution_vertices:
        if ev.execution_state == S.RUNNING:
            graph = graph.transition(ev.job_vertex_id, ev.subtask_index, S.CANCELING)
            graph = graph.transition(ev.job_vertex_id, ev.subtask_index, S.CANCELED)
    restarted = graph.reset_for_new_execution()
    v = restarted.vertex(5, 1)
    assert str(v.current_execution) == f"Attempt #1 ({WINDOW} (2/3)) - [CREATED]"
    assert [p.state for p in v.prior_executions] == [S.FAILED]
    assert [str(ev.current_execution).split(" (")[0] for ev in restarted.all_execution_vertices] == \
        ["Attempt #1"] * 5
