"""Running a job: compile, allocate slots, then epochs, each one Spark job; the JobRunner
coordinates the parts that do the work (Flink's JobMaster).

Per epoch: the planner (``epoch_planner``) plans every source split's read (through the source
coordinator, ``source_coordinator``) and the processing time and writes that plan ahead to the
epoch log; the epoch's Spark job runs the tasks (``epoch_job``); the checkpoint coordinator
(``runtime.checkpoint.coordinator``) takes their acknowledgements, de-duplicates them and routes
the sinks' committables; the state assignment (``state_assignment``) moves the state chains on;
the epoch's checkpoint completes in the background while the next epoch runs
(``checkpoint_completion``). Where a run starts and falls back to is ``recovery``; its rows in
the execution history, ``history``; whether a failed run restarts, ``failure_handler``. The parts
share one frozen ``job_context``; of the checkpoint storage each takes the parts it uses (the
epoch log, the job lease, the completed-checkpoint store, the state tables).
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import asdict
from functools import partial
from typing import Optional

from pyspark import SparkContext

from runtime.checkpoint.coordinator import CheckpointCoordinator
from runtime.checkpoint.incremental import IncrementalPolicy, StateChains
from runtime.checkpoint.storage import CheckpointStorage
from runtime.common.logs import utc_time
from runtime.common.watermark_strategy import MIN_WATERMARK
from runtime.execution import dependencies
from runtime.execution.checkpoint_completion import CheckpointCompletion
from runtime.execution.epoch_job import EpochJob, shares_slots
from runtime.execution.epoch_planner import EpochPlanner
from runtime.execution.epoch_stats import EpochStatsTracker
from runtime.execution.failure_handler import handle_failure, restart_configuration
from runtime.execution.history import RUNNING, ExecutionRecord, RunRecorder
from runtime.execution.job_context import JobContext
from runtime.execution.long_running_tasks import LongRunningTasks, check_free_slots, slots_held
from runtime.execution.job_execution_result import EpochSummary, JobExecutionException, JobExecutionResult
from runtime.execution.options import ExecutionOptions
from runtime.execution.preflight import preflight
from runtime.execution.recovery import Recovery, StartingPoint
from runtime.execution.restarts import run_attempts
from runtime.execution.source_coordinator import SourceCoordinator
from runtime.execution.stop_request import StopRequest, clear_request, pending_request
from runtime.execution.spark import cancel_requested, get_spark_session, session_active, task_managers
from runtime.execution.state_assignment import TaskStates
from runtime.graph.execution_graph import build_execution_graph
from runtime.graph.execution_state import ExecutionState
from runtime.graph.job_graph import create_job_graph
from runtime.graph.stream_graph import StreamGraph
from runtime.metrics.aggregation import RunMetrics
from runtime.metrics.epoch_timings import ACKNOWLEDGEMENTS, HAND_OFF, PLANNING, PREVIOUS_CHECKPOINT, SPARK_JOB
from runtime.metrics.vertex_metrics import epoch_vertex_metrics
from runtime.scheduler.slots import compute_slot_plan, slots_required_per_group
from runtime.state.snapshot_reader import CorruptStateException
from runtime.storage.filesystems import check_writable, join, rmtree
from runtime.storage.layout import job_dir
from runtime.task.operator_factory import snapshots_incrementally

log = logging.getLogger(__name__)
# An epoch still running after this long says when it started (its line comes when it ends).
SLOW_EPOCH_S = 5.0


class JobRunner:
    def __init__(self, stream_graph: StreamGraph, options: ExecutionOptions, spark=None,
                 restart_attempt: bool = False):
        """``restart_attempt``: a restart attempt of a run (``restarts``), whose preflight runs in ``run``."""
        settings = stream_graph.settings
        configuration = dict(settings.configuration)
        self.stream_graph = stream_graph
        self.options = options
        self.stop = threading.Event()       # set: the run ends after its current epoch (JobClient.cancel)
        self.job_graph = job_graph = create_job_graph(stream_graph)
        self.execution_graph = build_execution_graph(job_graph)
        if options.subtask_attempts:
            attempts = {tuple(int(x) for x in k.split("/")): n for k, n in json.loads(options.subtask_attempts).items()}
            self.execution_graph = self.execution_graph.with_attempt_numbers(attempts)
        self.run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + os.urandom(3).hex()
        # Per job: checkpoints, epoch log, state tables, source logs; per run: scratch snapshots.
        self.job_dir = job_dir(options.warehouse, stream_graph.job_name)
        self.run_dir = join(self.job_dir, "runs", self.run_id)
        self.storage = CheckpointStorage(self.job_dir, options.compact_after_files, options.log_retention_s)
        # The first thing a run reads is the warehouse: a store it cannot reach fails here, naming
        # the URI and the setting to fix, before anything reads or writes (the preflight's start).
        check_writable(options.warehouse, "sluice.warehouse (--warehouse, SLUICE_WAREHOUSE)")
        # BATCH (Flink's execution.runtime-mode): the whole bounded input is one epoch, with no
        # checkpoint and no restore; a failure reruns the job.
        self.batch = settings.runtime_mode == "BATCH"
        self.states = TaskStates(job_graph, StateChains(
            IncrementalPolicy.from_config(configuration),
            {n.operator_id for v in job_graph.vertices for n in v.operators if snapshots_incrementally(n)}),
            self.run_id)
        self.coordinator = CheckpointCoordinator(self.storage, job_graph,
                                                 {} if self.batch else dict(settings.checkpoint_config), self.run_id)
        self.sources = SourceCoordinator(job_graph, options, self.job_dir, self.batch)
        # A first attempt's misuse fails here, before Spark starts; a restart attempt's preflight
        # (a broker still down) is a failed attempt, recorded and decided on in run(), as Flink
        # restarts a job whose tasks failed to deploy.
        self.context = JobContext(job_graph, options, self.run_id, self.run_dir, self.batch, self.storage,
                                  self.coordinator, self.sources, self.states)
        self.restart_attempt = restart_attempt
        self.restore_point = None if restart_attempt else self._preflight()
        self.recovery = Recovery(self.context, self._say)
        self.planner = EpochPlanner(self.context)
        self.checkpoints = CheckpointCompletion(self.context, self._report)
        long_running = options.epoch_tasks == "long-running"
        if slots_held():        # before this run's session calls: they would wait behind those tasks
            check_free_slots(job_graph, SparkContext._active_spark_context.defaultParallelism, long_running)
        asked = time.time()
        starts_session = spark is None and not session_active()
        self.spark = spark or get_spark_session(options.master, f"sluice: {stream_graph.job_name}",
                                                dependencies.spark_settings(configuration),
                                                slot_pools=partial(shares_slots, job_graph))
        if starts_session:      # the first thing a run waits for: say it is over
            self._say(f"Spark session up in {time.time() - asked:.1f} s ({self.spark.sparkContext.master}, "
                      f"Spark {self.spark.version})")
        dependencies.apply(self.spark, configuration)   # add_python_file, add_jars, set_python_requirements
        # Fails with Flink's NoResourceAvailableException when the cluster has too few slots.
        required = sum(slots_required_per_group(self.execution_graph).values())
        self.slot_plan = compute_slot_plan(self.execution_graph, task_managers(self.spark, required))
        check_free_slots(job_graph, self.spark.sparkContext.defaultParallelism, long_running)
        if long_running:
            self.epoch_job = LongRunningTasks(self.spark.sparkContext, job_graph, self.run_id,
                                              dict(settings.job_parameters))
        else:
            self.epoch_job = EpochJob(self.spark.sparkContext, job_graph, self.run_id, dict(settings.job_parameters))
        self.stats = EpochStatsTracker(self.spark.sparkContext, job_graph, self.run_id, self.epoch_job.stage_vertices,
                                       self.coordinator.enabled)      # where each epoch's time goes
        self.start = StartingPoint()
        self.watermark = MIN_WATERMARK      # the job's: the minimum over its sinks' subtasks
        self.metrics = RunMetrics()         # user metrics: not checkpointed, they start with the run
        self.decision = None                # the restart strategy's decision on this run's failure
        self.earlier_attempts: tuple = ()   # ... the run ids of the driver's earlier attempts, outside Airflow
        self.stopping: Optional[StopRequest] = None     # a stop with savepoint, seen at an epoch boundary

    def _preflight(self):
        try:
            return preflight(self.context)
        except BaseException:
            self.sources.close()
            raise

    @property
    def restored_from(self) -> Optional[int]:
        return self.start.restored_from

    def _transition_all(self, state: ExecutionState, failure: Optional[str] = None) -> None:
        self.execution_graph = self.execution_graph.transition_all(state, time.time(), failure)

    def _cancel(self) -> str:
        self._transition_all(ExecutionState.CANCELING)
        self._transition_all(ExecutionState.CANCELED)
        return "CANCELED"

    def _canceled(self, result: JobExecutionResult) -> str:
        """A cancel: one line says so (the Spark jobs' teardown is kept quiet, runtime.execution.spark),
        naming the job's latest completed checkpoint: the one completing as the cancel came is taken
        first (a run that completed none names the one it restored)."""
        self.checkpoints.settle(failing=True)
        try:
            completed = self.storage.checkpoints.completed()
            latest = completed[-1].checkpoint_id if completed else "none"
        except Exception as e:      # the checkpoints' table out of reach: the cancel goes on
            latest = f"unknown: {type(e).__name__}: {e}"
        log.warning("[%s] canceled after %s epoch(s) of attempt %s; its completed checkpoints stay (latest: %s)",
                    self.job_graph.job_name, result.epoch_count, self.options.attempt, latest)
        return self._cancel()

    def _say(self, message: str) -> None:
        if not self.options.quiet:
            log.info("[%s] %s", self.job_graph.job_name, message)

    def _begin(self, start: StartingPoint) -> None:
        self.start, self.watermark = start, start.watermark

    def _fall_back(self, error) -> bool:
        """Damaged state files of completed checkpoints: restore the checkpoint before (recovery)."""
        self.checkpoints.settle(failing=True)
        start = self.recovery.fall_back(error.damaged_files, self.restored_from)
        if start is None:
            return False
        self.metrics = RunMetrics()     # redeployed from a checkpoint: Flink's tasks restart their metrics
        self.stats.restarted()
        self._begin(start)
        return True

    # ---- the run -------------------------------------------------------------------------

    def run(self) -> JobExecutionResult:
        started = time.time()
        result = JobExecutionResult(self.job_graph.job_id, self.job_graph.job_name, self.run_id, 0.0, [],
                                    self.execution_graph, self.slot_plan)
        if self.restart_attempt:
            try:
                self.restore_point = self._preflight()
            except Exception as e:
                self._transition_all(ExecutionState.FAILED, str(e))
                self._failed(self._recorder(started), result, e)
                raise
        self.coordinator.open_sinks(result)
        if isinstance(self.epoch_job, LongRunningTasks):    # a sink's writer is known once its committer is
            try:
                check_free_slots(self.job_graph, self.epoch_job.sc.defaultParallelism, True,
                                 self.coordinator.spark_committers())
            except ValueError:
                self.coordinator.close()
                self.sources.close()
                raise
        self.storage.lease.claim(self.run_id, self.options.lease_timeout_s)
        status = "FAILED"
        broadcast = None
        recorder = self._recorder(started)
        try:
            try:
                self._begin(self.recovery.start(self.restore_point, self.run_id))
            except CorruptStateException as e:      # a source's position, read on the driver
                if not self._fall_back(e):
                    raise
            broadcast = self.epoch_job.sc.broadcast(dependencies.dumps_by_value(self.job_graph))
            self._transition_all(ExecutionState.SCHEDULED)
            self._transition_all(ExecutionState.DEPLOYING)
            self._run_epochs(broadcast, result)
            self.checkpoints.settle()
            if self.stop.is_set():      # canceled (JobClient.cancel): its checkpoints stay
                status = self._cancel()
            else:   # the input ended, max_epochs were run (a bounded run), or a stop with savepoint
                if self.stopping is not None:
                    result.savepoint = self._savepoint(self.stopping)
                self._transition_all(ExecutionState.FINISHED)
                status = "FINISHED"
        except KeyboardInterrupt:
            status = self._canceled(result)     # stopped by the user: Flink's cancel; checkpoints stay
            raise
        except Exception as e:
            self.checkpoints.settle(failing=True)
            if cancel_requested():      # canceled while running: what failed is the cancel's doing
                status = self._canceled(result)
                raise KeyboardInterrupt(f"job '{self.job_graph.job_name}' canceled") from e
            self._transition_all(ExecutionState.FAILED, str(e))
            self._failed(recorder, result, e)
            raise
        finally:
            self.coordinator.close()
            self.stats.close()
            try:
                self.epoch_job.release()
                if broadcast is not None:
                    broadcast.unpersist()
            except Exception:
                if status == "FINISHED":    # after a cancel or a failure the JVM may be gone already
                    raise
            self.sources.close()
            clear_request(self.job_dir, self.options.dag_run_id)    # done, or too late for this run
            self.storage.lease.release(self.run_id, status)
            rmtree(self.run_dir)
            result.restored_from = self.restored_from       # after a fallback, the checkpoint it took
            result.execution_graph = self.execution_graph
            result.net_runtime_ms = (time.time() - started) * 1000
            if status != "FAILED":
                recorder.ended(status, result, self.restored_from)
        return result

    def _recorder(self, started: float) -> RunRecorder:
        """The run's rows in the execution history, from its RUNNING row on."""
        return RunRecorder(self.job_dir, ExecutionRecord(
            self.run_id, self.job_graph.job_name, RUNNING, started, self.options.dag_run_id or "",
            self.options.attempt, parallelism={v.name: v.parallelism for v in self.job_graph.vertices},
            application_id=self.spark.sparkContext.applicationId),
            self.options.compact_after_files, self.options.log_retention_s, self.restore_point)

    def _run_epochs(self, broadcast, result: JobExecutionResult) -> None:
        """Epoch after epoch until the input ends, max_epochs were run, a stop with savepoint or a
        cancel; a failed epoch falls back to a checkpoint when it can. A Ctrl-C
        (runtime.execution.spark) between two epochs ends the run there."""
        epoch = self.start.first_epoch
        while True:
            if cancel_requested():
                raise KeyboardInterrupt(f"job '{self.job_graph.job_name}' canceled")
            epoch_started = time.time()
            try:
                summary, end_of_input = self._run_epoch(epoch, broadcast)
            except JobExecutionException as e:
                if not self._fall_back(e):
                    raise
                epoch = self.start.first_epoch
                continue
            result.add_epoch(summary)
            if not self.checkpoints.holds(summary):
                self._report(summary)       # else once its checkpoint completed
            epoch += 1
            if end_of_input or self.planner.last_epoch(epoch - 1, self.start) or self.stop.is_set():
                return
            deadline = epoch_started + self.options.epoch_interval_ms / 1000
            if time.time() < deadline and not self.start.replay and self.sources.paced:
                with self.stats.boundary_wait():
                    self.sources.await_input(deadline, lambda: self.stop.is_set() or cancel_requested())
                if self.stop.is_set():      # canceled while it waited: no epoch after the last
                    return

    def _run_epoch(self, epoch: int, broadcast) -> tuple[EpochSummary, bool]:
        started = time.time()
        timer = self.stats.begin(epoch, started)
        if self.stopping is None and not self.start.replay and not self.batch:     # an epoch boundary
            self.stopping = pending_request(self.job_dir, self.options.dag_run_id)
            if self.stopping is not None:
                self.planner.stopping = True
                self._say(f"stop with savepoint requested{' by ' + self.stopping.requested_by if self.stopping.requested_by else ''}"
                          f": epoch {epoch} is the last, ending in a checkpoint")
        plan = self.planner.plan(epoch, self.start, self.watermark, self.execution_graph, self.metrics)
        timer.lap(PLANNING)
        slow = threading.Timer(SLOW_EPOCH_S, self._say, (f"epoch {epoch} started at {utc_time(started * 1000)}, "
                                                         f"running for {SLOW_EPOCH_S:.0f} s",))
        slow.daemon = True
        slow.start()
        try:
            payloads = self.epoch_job.run(epoch, broadcast, plan.descriptors)
        finally:
            slow.cancel()
        timer.lap(SPARK_JOB)
        plan.logged.result()    # the epoch's plan is committed before anything it produced is
        acks = self.coordinator.receive_acknowledgements(payloads)
        if os.environ.get("SLUICE_DEBUG"):
            for a in acks:
                log.info("  task %s/%s: +%.0f ms, %.0f ms, %s in", a.job_vertex_id, a.subtask_index,
                         (a.started_at - started) * 1000, a.duration_ms, a.records_in)
        self._raise_failure(acks, epoch, started, plan.checkpoint_id)
        if self.execution_graph.all_execution_vertices[0].execution_state == ExecutionState.DEPLOYING:
            self._transition_all(ExecutionState.RUNNING)     # the first epoch done, after a fallback too
        timer.lap(ACKNOWLEDGEMENTS)
        # The last epoch's checkpoint completed while this epoch ran: its files are committed
        # before the chains move on (or it failed, and so does this epoch).
        self.checkpoints.settle()
        timer.lap(PREVIOUS_CHECKPOINT)
        self.coordinator.route_committables(acks, epoch)
        self.sources.complete_epoch(acks)
        sinks = [a for a in acks if not self.job_graph.outputs_of(a.job_vertex_id)]
        self.watermark = min((a.watermark for a in sinks), default=MIN_WATERMARK)
        state_files = self.states.after_epoch(acks, plan.incremental, plan.next_state_version)
        timer.lap(HAND_OFF)
        completion = self.checkpoints.trigger(plan.checkpoint_id, epoch, acks, timer)
        self.stats.handed_over(epoch, acks)
        summary = self._summary(plan, started, acks, state_files)
        if completion is not None:
            self.checkpoints.hold(summary, plan.checkpoint_id, completion)
        return summary, plan.end_of_input

    def _raise_failure(self, acks: list, epoch: int, started: float, checkpoint_id: Optional[int]) -> None:
        """A subtask failed: the epoch fails (and its checkpoint), naming the first failure."""
        failed = [a for a in acks if a.failure]
        if not failed:
            return
        if checkpoint_id is not None:
            self.coordinator.fail(checkpoint_id, epoch, started, failed[0].failure.split("\n", 1)[0])
        # The cause first (operator, subtask, reason, record), then where: epoch and job.
        cause, _, trace = failed[0].failure.partition("\n")
        raise JobExecutionException(f"{cause} in epoch {epoch} of job '{self.job_graph.job_name}'"
                                    + (f"\n{trace}" if trace else ""),
                                    tuple((a.job_vertex_id, a.subtask_index) for a in failed),
                                    {p: what for a in failed for p, what in a.damaged_files.items()},
                                    any(a.unrecoverable for a in failed))

    def _summary(self, plan, started: float, acks: list, state_files: list) -> EpochSummary:
        sources = [a for a in acks if a.job_vertex_id in self.sources.enumerators]
        metrics = self.metrics.epoch([(a.job_vertex_id, a.subtask_index, a.metrics) for a in acks],
                                     time.time() - started)
        return EpochSummary(
            epoch=plan.epoch, processing_time=plan.processing_time,
            records_in=sum(a.records_in for a in sources),
            records_out=sum(a.records_written for a in acks),
            watermark=self.watermark,
            duration_ms=(time.time() - started) * 1000,
            late_records_dropped=sum(a.late_records_dropped for a in acks),
            state_bytes_written=sum(f.size for f in state_files),
            local_stores=sum(a.store_hits + a.store_misses for a in acks),
            local_store_hits=sum(a.store_hits for a in acks),
            metrics=metrics, started_at=started,
            vertices=epoch_vertex_metrics({v.id: v.name for v in self.job_graph.vertices}, acks,
                                          {vid: e.split_metrics() for vid, e in self.sources.enumerators.items()}))

    def _savepoint(self, request: StopRequest) -> Optional[str]:
        """The stop's savepoint: a copy of the last epoch's checkpoint (Flink's stop --savepointPath:
        a new folder under the asked directory)."""
        from runtime.checkpoint.savepoint import take_savepoint
        latest = self.storage.checkpoints.completed()
        if not self.coordinator.enabled or not latest:
            log.warning("[%s] stopped without a savepoint: the job takes no checkpoints (enable_checkpointing)",
                        self.job_graph.job_name)
            return None
        target = (join(request.savepoint_dir, f"savepoint-{latest[-1].checkpoint_id}-{time.strftime('%Y%m%dT%H%M%S')}")
                  if request.savepoint_dir else None)
        path = take_savepoint(self.storage, target, latest[-1].checkpoint_id)
        log.info("[%s] stopped with savepoint %s (checkpoint %s); restore it with restore_from=%s",
                 self.job_graph.job_name, path, latest[-1].checkpoint_id, path)
        return path

    def _report(self, summary: EpochSummary) -> None:
        """An epoch's metrics row (committed with the next commit of the epoch log) and progress line."""
        summary.timings = self.stats.finish(summary.epoch, summary.checkpoint_id)
        self.storage.epoch_log.log_metrics(self.run_id, summary.epoch, summary.checkpoint_id, asdict(summary))
        if not self.options.quiet:
            log.info("%s", summary.progress_line(self.job_graph.job_name))

    def _failed(self, recorder: RunRecorder, result: JobExecutionResult, error: Exception) -> None:
        """Record the failure with the restart strategy's decision on it and say both at once: the
        control plane acts on the record."""
        names = tuple(self.execution_graph.vertex(v, s).task_name_with_subtask_index
                      for v, s in getattr(error, "failed_tasks", ()))
        text = str(error) if isinstance(error, JobExecutionException) else f"{type(error).__name__}: {error}"
        decision = handle_failure(error, restart_configuration(self.stream_graph.settings, self.coordinator.enabled),
                                  recorder.history, recorder.execution, time.time(), self.earlier_attempts)
        self.decision = recorder.failed(text, names, result, self.restored_from, decision)
        # A control plane or the driver (restarts.run_attempts) acts on this decision: say it now. The
        # failure that ends a run outside Airflow is its caller's to report (sluice run's line), after why
        # (a strategy that would have restarted and was not asked, too).
        if self.options.dag_run_id or decision.restart:
            log.error("[%s] attempt %s failed: %s", self.job_graph.job_name, self.options.attempt, error)
        if self.options.dag_run_id or decision.restart or self.earlier_attempts or decision.unrecoverable:
            (log.warning if decision.restart else log.error)("[%s] %s", self.job_graph.job_name, decision.describe())


def execute_stream_graph(stream_graph: StreamGraph, options: Optional[ExecutionOptions] = None,
                         stop: Optional[threading.Event] = None) -> JobExecutionResult:
    """Run a compiled job on Spark; ``stop`` set ends it after its current epoch (a JobClient's cancel).
    A failed attempt restarts in the same session as the job's restart strategy says, whoever runs
    it (``runtime.execution.restarts``)."""
    from runtime.common.logs import console_logging
    console_logging()       # the progress lines on stderr, unless the program configured logging
    options = options or ExecutionOptions.from_configuration(dict(stream_graph.settings.configuration))
    return run_attempts(JobRunner, stream_graph, options, stop)


class SparkPipelineExecutor:
    """What ``env.execute()`` finds for ``execution.target: spark`` (the default)."""

    def __init__(self, **overrides):
        self.overrides = overrides      # ExecutionOptions fields a client sets (sluice run's flags)

    def execute(self, stream_graph: StreamGraph, stop: Optional[threading.Event] = None) -> JobExecutionResult:
        options = ExecutionOptions.from_configuration(dict(stream_graph.settings.configuration))
        return execute_stream_graph(stream_graph, options.with_overrides(**self.overrides), stop)
