"""A run's restart attempts inside its driver, as Flink's JobMaster restarts a job's tasks without
restarting the cluster (DefaultScheduler's failover with a RestartBackoffTimeStrategy): the
driver process and its SparkSession survive a failed attempt; after the strategy's delay the next
attempt restores the latest completed checkpoint in the same session, so a restart costs the
delay and the restore, not a cold Spark start.

Each attempt is a JobRunner of its own with a row of its own in the execution history (attempt
number, failure, the strategy's decision, the Spark application); the decision and the next
attempt's options are the failure handler's (``failure_handler``), from those rows, so a control
plane that restarts a whole driver (an Airflow retry after the driver's JVM died under
spark-submit) continues the same count. A restart
attempt whose preflight fails (its Kafka broker still down) is a failed attempt like any other, as
Flink restarts a job whose tasks failed to deploy; only a driver's first attempt fails fast on it.

A failure that left the session unusable (its JVM died, or it was stopped) restarts in a fresh
session when this process started the JVM; under spark-submit the JVM is the process's parent, so
the attempt's failure stands with its decision and the control plane submits a new driver.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Optional

from runtime.execution.failure_handler import attempt_overrides
from runtime.execution.options import ExecutionOptions
from runtime.execution.spark import cancel_requested, discard_session, session_usable

log = logging.getLogger(__name__)


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
