"""The one owner of a run's restart decisions (Flink's ExecutionFailureHandler and its
FailureHandlingResult): whether a failed attempt restarts, after how long, which subtasks get a
new attempt and what the next attempt restores. The driver (``restarts.run_attempts``) and the
control plane (a JobManager recording a driver that died) act on its answers; the strategies
themselves are ``runtime.scheduler.restart``, the failover strategy ``runtime.scheduler.failover``.

The memory of a strategy is the execution history: each decision replays the run's earlier
failed attempts into a fresh strategy (``failure_decision``), so a control plane that restarts a
whole driver (an Airflow retry) continues the same count.
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Optional

from runtime.checkpoint.job_lease import JobAlreadyRunningException
from runtime.common.restart_strategy import RestartStrategies
from runtime.common.throwables import is_unrecoverable
from runtime.execution.history import FAILED, ExecutionHistory, ExecutionRecord
from runtime.graph.execution_graph import ExecutionGraph
from runtime.scheduler.failover import FAILOVER_STRATEGY_KEY, REGION, tasks_to_restart
from runtime.scheduler.restart import RestartDecision, decide, effective_configuration
from runtime.storage.layout import job_dir


def restart_configuration(settings, checkpointing_enabled: bool):
    """The strategy a job's run restarts under (``effective_configuration``): its own, its
    configuration's, else Flink's default for a job with or without checkpoints."""
    return effective_configuration(settings.restart_strategy, dict(settings.configuration), checkpointing_enabled)


def handle_failure(error: BaseException, configuration, history: ExecutionHistory, execution: ExecutionRecord,
                   now: float, earlier_run_ids: tuple = ()) -> RestartDecision:
    """The decision on ``execution`` failing with ``error`` at ``now``. Another run holds the job (it
    took it over, or was there first): this run stands down, as a JobMaster that lost its
    leadership does, instead of restarting against it. A failure caused by a non-recoverable error
    (``runtime.common.throwables``) fails the run without a restart, as Flink's handler does."""
    if isinstance(error, JobAlreadyRunningException):
        configuration = RestartStrategies.no_restart()
    decision = failure_decision(history, execution, configuration, now, earlier_run_ids)
    if is_unrecoverable(error):
        return replace(decision, restart=False, backoff_ms=0, unrecoverable=True)
    return decision


def failure_decision(history: ExecutionHistory, execution: ExecutionRecord, restart_configuration, now: float,
                     earlier_run_ids: tuple = ()) -> RestartDecision:
    """The restart strategy's decision on ``execution`` failing at ``now``: its run's earlier failed
    attempts (its Airflow run's, else those of ``earlier_run_ids``) and this one, replayed into the
    strategy. A driver's own failures and a JobManager's record of a driver that died both ask here."""
    earlier = history.attempts(execution.dag_run_id, earlier_run_ids)
    times = [int((r.ended_at or r.recorded_at or now) * 1000) for r in earlier
             if r.state == FAILED and r.run_id != execution.run_id]
    return decide(restart_configuration, times + [int(now * 1000)])


def subtask_attempts(graph: ExecutionGraph, failover_strategy: str, attempts: list[ExecutionRecord]) -> dict:
    """Each subtask's attempt number after the earlier failures of this run: a failure gives a
    new attempt to the subtasks the failover strategy restarts ("vertex/subtask" -> n)."""
    by_name = {ev.task_name_with_subtask_index: (ev.job_vertex_id, ev.subtask_index)
               for ev in graph.all_execution_vertices}
    counts: dict = {}
    for record in attempts:
        if record.state == FAILED:
            failed = [by_name[n] for n in record.failed_tasks if n in by_name]
            for vid, s in tasks_to_restart(graph, failover_strategy, failed):
                counts[f"{vid}/{s}"] = counts.get(f"{vid}/{s}", 0) + 1
    return counts


def attempt_overrides(graph: ExecutionGraph, configuration: dict, warehouse: str, job_name: str,
                      dag_run_id: str, restore_from: Optional[str], run_ids: tuple = ()) -> dict:
    """The options of the run's next attempt: its number (after those in the history: the Airflow
    run's, else those of ``run_ids``), what it restores (the run's ask the first time; after a
    failure the latest completed checkpoint, Flink's failover) and its subtasks' attempt numbers."""
    earlier = ExecutionHistory(job_dir(warehouse, job_name)).attempts(dag_run_id, run_ids)
    failover = configuration.get(FAILOVER_STRATEGY_KEY, REGION)
    restarted = any(r.state == FAILED for r in earlier)
    return {"restore_from": "latest" if restarted else restore_from,
            "attempt": max((r.attempt for r in earlier), default=0) + 1,
            "subtask_attempts": json.dumps(subtask_attempts(graph, failover, earlier))}
