"""ExecutionGraph: the JobGraph expanded to subtasks (Flink's ExecutionGraph).

One ExecutionJobVertex per JobVertex, one ExecutionVertex per subtask (``Name (i/p)``),
one IntermediateResult per data set with a partition per producer subtask, and an
Execution per attempt. Everything is immutable: a state change returns a new graph, so
the history of attempts is a value that can be stored and shown.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Optional

from runtime.graph.execution_state import ExecutionState, check_transition
from runtime.graph.job_graph import DistributionPattern, JobEdge, JobGraph, JobVertex
from runtime.state.key_groups import KeyGroupRange, compute_key_group_range_for_operator_index


def task_name_with_subtask(name: str, subtask_index: int, parallelism: int) -> str:
    return f"{name} ({subtask_index + 1}/{parallelism})"


@dataclass(frozen=True)
class Execution:
    """One attempt to run a subtask, with the time it entered each state."""

    task_name: str                  # "Name (i/p)"
    attempt_number: int = 0
    state: ExecutionState = ExecutionState.CREATED
    state_timestamps: tuple[tuple[ExecutionState, float], ...] = ()
    failure_cause: Optional[str] = None

    def transition_to(self, target: ExecutionState, timestamp: Optional[float] = None,
                      failure_cause: Optional[str] = None) -> "Execution":
        check_transition(self.state, target, str(self))
        return replace(
            self, state=target,
            state_timestamps=self.state_timestamps + ((target, time.time() if timestamp is None else timestamp),),
            failure_cause=failure_cause if target == ExecutionState.FAILED else self.failure_cause)

    def __str__(self) -> str:
        return f"Attempt #{self.attempt_number} ({self.task_name}) - [{self.state.value}]"


@dataclass(frozen=True)
class ExecutionVertex:
    job_vertex_id: int
    subtask_index: int
    parallelism: int
    task_name: str
    current_execution: Execution
    prior_executions: tuple[Execution, ...] = ()
    # Keyed vertices own a contiguous range of key groups.
    key_group_range: Optional[KeyGroupRange] = None

    @property
    def task_name_with_subtask_index(self) -> str:
        return task_name_with_subtask(self.task_name, self.subtask_index, self.parallelism)

    @property
    def execution_state(self) -> ExecutionState:
        return self.current_execution.state

    def with_state(self, target: ExecutionState, timestamp: Optional[float] = None,
                   failure_cause: Optional[str] = None) -> "ExecutionVertex":
        return replace(self, current_execution=self.current_execution.transition_to(
            target, timestamp, failure_cause))

    def reset_for_new_execution(self) -> "ExecutionVertex":
        """A fresh CREATED attempt after a terminal one (a restart)."""
        current = self.current_execution
        if not current.state.is_terminal:
            raise RuntimeError(
                f"Cannot restart {current}: the attempt must be FINISHED, CANCELED or FAILED first.")
        return replace(
            self, prior_executions=self.prior_executions + (current,),
            current_execution=Execution(self.task_name_with_subtask_index, current.attempt_number + 1))

    def __str__(self) -> str:
        return self.task_name_with_subtask_index


@dataclass(frozen=True)
class IntermediateResultPartition:
    result_id: str
    partition_number: int


@dataclass(frozen=True)
class IntermediateResult:
    id: str
    producer: int                   # JobVertex id
    consumer: int                   # JobVertex id
    number_of_partitions: int
    distribution_pattern: DistributionPattern

    @property
    def partitions(self) -> tuple[IntermediateResultPartition, ...]:
        return tuple(IntermediateResultPartition(self.id, i) for i in range(self.number_of_partitions))


@dataclass(frozen=True)
class ExecutionJobVertex:
    job_vertex: JobVertex
    task_vertices: tuple[ExecutionVertex, ...]
    produced_results: tuple[IntermediateResult, ...]

    @property
    def name(self) -> str:
        return self.job_vertex.name

    @property
    def parallelism(self) -> int:
        return self.job_vertex.parallelism

    @property
    def id(self) -> int:
        return self.job_vertex.id


@dataclass(frozen=True)
class ExecutionGraph:
    job_graph: JobGraph = field(repr=False)
    job_vertices: tuple[ExecutionJobVertex, ...]

    @property
    def job_id(self) -> str:
        return self.job_graph.job_id

    @property
    def job_name(self) -> str:
        return self.job_graph.job_name

    @cached_property
    def _by_id(self) -> dict[int, ExecutionJobVertex]:
        return {v.id: v for v in self.job_vertices}

    def job_vertex(self, job_vertex_id: int) -> ExecutionJobVertex:
        return self._by_id[job_vertex_id]

    def vertex(self, job_vertex_id: int, subtask_index: int) -> ExecutionVertex:
        return self._by_id[job_vertex_id].task_vertices[subtask_index]

    @property
    def all_execution_vertices(self) -> tuple[ExecutionVertex, ...]:
        return tuple(ev for v in self.job_vertices for ev in v.task_vertices)

    @property
    def intermediate_results(self) -> tuple[IntermediateResult, ...]:
        return tuple(r for v in self.job_vertices for r in v.produced_results)

    def _replace_vertex(self, new: ExecutionVertex) -> "ExecutionGraph":
        ejv = self._by_id[new.job_vertex_id]
        tasks = list(ejv.task_vertices)
        tasks[new.subtask_index] = new
        vertices = tuple(replace(v, task_vertices=tuple(tasks)) if v.id == ejv.id else v
                         for v in self.job_vertices)
        return replace(self, job_vertices=vertices)

    def transition(self, job_vertex_id: int, subtask_index: int, target: ExecutionState,
                   timestamp: Optional[float] = None, failure_cause: Optional[str] = None) -> "ExecutionGraph":
        vertex = self.vertex(job_vertex_id, subtask_index).with_state(target, timestamp, failure_cause)
        return self._replace_vertex(vertex)

    def transition_all(self, target: ExecutionState, timestamp: Optional[float] = None,
                       failure_cause: Optional[str] = None) -> "ExecutionGraph":
        """Move every attempt that is not finished, canceled or failed yet to ``target``."""
        graph = self
        for ev in self.all_execution_vertices:
            if not ev.execution_state.is_terminal:
                graph = graph.transition(ev.job_vertex_id, ev.subtask_index, target, timestamp, failure_cause)
        return graph

    def reset_for_new_execution(self, job_vertex_ids: Optional[set[int]] = None) -> "ExecutionGraph":
        """New attempts for the given vertices (all of them: restart-all failover)."""
        graph = self
        for ev in self.all_execution_vertices:
            if job_vertex_ids is None or ev.job_vertex_id in job_vertex_ids:
                graph = graph._replace_vertex(ev.reset_for_new_execution())
        return graph

    def with_attempt_numbers(self, attempts: dict) -> "ExecutionGraph":
        """Start subtasks at the given attempt numbers ((vertex id, subtask) -> n): a restarted
        job's subtasks carry on counting from the attempts before the restart."""
        graph = self
        for (vid, s), n in attempts.items():
            ev = graph.vertex(vid, s)
            graph = graph._replace_vertex(replace(ev, current_execution=replace(ev.current_execution,
                                                                                attempt_number=n)))
        return graph


def consumed_partitions(edge: JobEdge, producer_parallelism: int, consumer_parallelism: int,
                        consumer_index: int) -> tuple[int, ...]:
    """Which producer partitions consumer subtask ``consumer_index`` reads over ``edge``.

    ALL_TO_ALL: all of them. POINTWISE as Flink connects it: 1:1 when the parallelism
    matches, contiguous groups of producers when there are more producers, and each
    producer feeding a contiguous group of consumers when there are fewer.
    """
    n, m = producer_parallelism, consumer_parallelism
    if edge.distribution_pattern == DistributionPattern.ALL_TO_ALL:
        return tuple(range(n))
    if n == m:
        return (consumer_index,)
    if n > m:
        return tuple(range(consumer_index * n // m, (consumer_index + 1) * n // m))
    return tuple(p for p in range(n)
                 if (p * m + n - 1) // n <= consumer_index < ((p + 1) * m + n - 1) // n)


def build_execution_graph(job_graph: JobGraph) -> ExecutionGraph:
    """Expand every JobVertex to its subtasks, each with a CREATED attempt #0."""
    vertices = []
    for jv in job_graph.vertices:
        tasks = tuple(
            ExecutionVertex(
                job_vertex_id=jv.id, subtask_index=i, parallelism=jv.parallelism, task_name=jv.name,
                current_execution=Execution(task_name_with_subtask(jv.name, i, jv.parallelism)),
                key_group_range=(compute_key_group_range_for_operator_index(
                    jv.max_parallelism, jv.parallelism, i) if jv.is_keyed else None))
            for i in range(jv.parallelism))
        results = tuple(
            IntermediateResult(e.data_set, jv.id, e.target_vertex, jv.parallelism, e.distribution_pattern)
            for e in job_graph.outputs_of(jv.id))
        vertices.append(ExecutionJobVertex(jv, tasks, results))
    return ExecutionGraph(job_graph, tuple(vertices))
