"""A run's restart attempts inside its driver, as Flink's JobMaster restarts a job's tasks without
restarting the cluster (DefaultScheduler's failover with a RestartBackoffTimeStrategy): the
driver process and its SparkSession survive a failed attempt; after the strategy's delay the next
attempt restores the latest completed checkpoint in the same session, so a restart costs the
delay and the restore, not a cold Spark start.

Each attempt is a JobRunner of its own with a row of its own in the execution history (attempt
number, failure, the strategy's decision, the Spark application); the strategy decides from
those rows (``RunRecorder.failed``), so a control plane that restarts a whole driver (an Airflow
retry after the driver's JVM died under spark-submit) continues the same count. A restart
attempt whose preflight fails (its Kafka broker still down) is a failed attempt like any other, as
Flink restarts a job whose tasks failed to deploy; only a driver's first attempt fails fast on it.

A failure that left the session unusable (its JVM died, or it was stopped) restarts in a fresh
session when this process started the JVM; under spark-submit the JVM is the process's parent, so
the attempt's failure stands with its decision and the control plane submits a new driver.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from typing import Optional

from runtime.execution.history import FAILED, ExecutionHistory, ExecutionRecord
from runtime.execution.options import ExecutionOptions
from runtime.execution.spark import cancel_requested, discard_session, session_usable
from runtime.graph.execution_graph import ExecutionGraph
from runtime.scheduler.failover import FAILOVER_STRATEGY_KEY, REGION, tasks_to_restart
from runtime.storage.layout import job_dir

log = logging.getLogger(__name__)


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


def run_attempts(job_runner, stream_graph, options: ExecutionOptions, stop: Optional[threading.Event] = None):
    """Run the job (each attempt a ``job_runner(stream_graph, options, spark, restart_attempt)``: the
    JobRunner), and while the restart strategy says so, run it again in the same session after its
    delay, whoever started it (a control plane, ``sluice run``, a program's ``env.execute()``), as
    Flink applies a job's strategy however it was submitted. A job that sets no strategy and takes
    no checkpoints fails at its first failure (Flink's default); one that checkpoints restarts with
    exponential delay (``runtime.scheduler.restart.effective_configuration``)."""
    stop = stop or threading.Event()
    spark = None
    restart_attempt = False
    run_ids: tuple = ()     # this driver's attempts: the strategy's count outside Airflow
    while True:
        runner = job_runner(stream_graph, options, spark, restart_attempt)
        runner.stop = stop
        runner.earlier_attempts = run_ids
        try:
            return runner.run()
        except Exception as error:
            decision = runner.decision
            if decision is None or not decision.restart or cancel_requested():
                raise
            run_ids += (runner.run_id,)
            spark = runner.spark
            if not session_usable(spark):
                if not discard_session(spark):      # the JVM is spark-submit's: the control plane restarts
                    raise
                log.warning("[%s] the Spark session did not survive attempt %s (%s): the next attempt starts "
                            "a fresh one", runner.job_graph.job_name, options.attempt, type(error).__name__)
                spark = None
            backoff = decision.backoff_ms / 1000
            options = options.with_overrides(**attempt_overrides(
                runner.execution_graph, dict(stream_graph.settings.configuration), options.warehouse,
                runner.job_graph.job_name, options.dag_run_id, options.restore_from, run_ids))
            log.info("[%s] attempt %s starts in %.1f s (the restart strategy's delay), from the latest completed "
                     "checkpoint%s", runner.job_graph.job_name, options.attempt, backoff,
                     " in the same Spark session" if spark is not None else "")
            deadline = time.time() + backoff
            while time.time() < deadline and not cancel_requested():      # a Ctrl-C ends the wait too
                if stop.wait(min(0.2, max(0.0, deadline - time.time()))):      # stopped or canceled while waiting
                    raise
            if cancel_requested():
                raise KeyboardInterrupt(f"job '{runner.job_graph.job_name}' canceled while waiting to restart") from error
            restart_attempt = True      # its preflight's failure is a failed attempt, restarted as any
