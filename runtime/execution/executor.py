"""Running a job: compile, allocate slots, then epochs, each one Spark job; the JobRunner
coordinates the parts that do the work.

Per epoch the driver plans every source split's read (the source coordinator,
``source_coordinator``) and the processing time, writes that plan first (so a replay reads the
same input at the same time), runs the epoch's Spark job (``epoch_job``), and hands the tasks'
acknowledgements to the checkpoint coordinator (``runtime.checkpoint.coordinator``): it
de-duplicates them and routes the sinks' committables to their committers (print and collect at
once, a Delta sink with the next checkpoint, or after each epoch without them), and completes
the epoch's checkpoint when one was triggered. This module also holds what a run gives back
(``JobExecutionResult``, ``EpochSummary``) and how it fails (``JobExecutionException``).
"""
from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, replace
from typing import Optional

from runtime.checkpoint.coordinator import CheckpointCoordinator
from runtime.checkpoint.incremental import IncrementalPolicy, StateChains
from runtime.checkpoint.restore import (NoUsableCheckpointException, assign_state, choose, damaged_checkpoints,
                                        invalidate, print_warning, source_positions)
from runtime.checkpoint.sink_committers import committed_sinks
from runtime.state.snapshot import CorruptStateException
from runtime.checkpoint.storage import CheckpointException, CheckpointStorage
from runtime.common.watermark_strategy import MIN_WATERMARK
from runtime.connectors import reader_class, writer_class
from runtime.execution.epoch_job import EpochJob
from runtime.execution.job_execution_result import EpochSummary, JobExecutionException, JobExecutionResult
from runtime.execution.history import FAILED, RUNNING, ExecutionHistory, ExecutionRecord
from runtime.execution.options import ExecutionOptions
from runtime.execution.preflight import START_OVER, preflight, warn_start_over
from runtime.execution.source_coordinator import SourceCoordinator
from runtime.execution.spark import cancel_requested
from runtime.graph.execution_graph import build_execution_graph
from runtime.graph.execution_state import ExecutionState
from runtime.graph.job_graph import create_job_graph
from runtime.graph.stream_graph import StreamGraph
from runtime.metrics.aggregation import RunMetrics
from runtime.scheduler.slots import compute_slot_plan, slots_required_per_group
from runtime.storage.filesystems import check_writable, join, remove, rmtree
from runtime.storage.layout import job_dir
from runtime.task.operator_factory import snapshots_incrementally
from runtime.task.stream_task import TaskDeploymentDescriptor
from runtime.task.watermarks import assign_watermarks, checkpointed


log = logging.getLogger(__name__)


@dataclass
class _InFlightCheckpoint:
    """A checkpoint completing in the background while the next epoch runs (its epoch's summary)."""
    summary: EpochSummary
    checkpoint_id: int
    handed_at: float
    future: object



# ---- the driver ------------------------------------------------------------------------

class JobRunner:
    def __init__(self, stream_graph: StreamGraph, options: ExecutionOptions, spark=None):
        from runtime.execution import dependencies
        from runtime.execution.spark import get_spark_session, task_managers
        self.stream_graph = stream_graph
        self.options = options
        self.stop = threading.Event()       # set: the run ends after its current epoch (JobClient.cancel)
        self.job_graph = create_job_graph(stream_graph)
        self.execution_graph = build_execution_graph(self.job_graph)
        if options.subtask_attempts:
            attempts = {tuple(int(x) for x in k.split("/")): n for k, n in json.loads(options.subtask_attempts).items()}
            self.execution_graph = self.execution_graph.with_attempt_numbers(attempts)
        self.run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
        # Per job: checkpoints, epoch log, state tables, source logs; per run: scratch snapshots.
        self.job_dir = job_dir(options.warehouse, stream_graph.job_name)
        self.run_dir = join(self.job_dir, "runs", self.run_id)
        self.storage = CheckpointStorage(self.job_dir)
        # The first thing a run reads is the warehouse: a store it cannot reach fails here, naming
        # the URI and the setting to fix, before anything reads or writes (the preflight's start).
        check_writable(options.warehouse, "sluice.warehouse (--warehouse, SLUICE_WAREHOUSE)")
        # BATCH (Flink's execution.runtime-mode): the whole bounded input is one epoch, with no
        # checkpoint and no restore; a failure reruns the job.
        self.batch = stream_graph.settings.runtime_mode == "BATCH"
        self.states = StateChains(IncrementalPolicy.from_config(dict(stream_graph.settings.configuration)),
                                  {n.operator_id for v in self.job_graph.vertices for n in v.operators
                                   if snapshots_incrementally(n)})
        self.state_version: Optional[str] = None    # where the last epoch left the local stores
        self.restores = 0                           # restores in this run: part of each version
        self.coordinator = CheckpointCoordinator(self.storage, self.job_graph,
                                                 {} if self.batch else dict(stream_graph.settings.checkpoint_config),
                                                 self.run_id)
        self.sources = SourceCoordinator(self.job_graph, options, self.job_dir, self.batch)
        try:
            self.restore_point = preflight(self.job_graph, self.sources, self.storage, self.options, self.batch)
        except BaseException:
            self.sources.close()
            raise
        configuration = dict(stream_graph.settings.configuration)
        self.spark = spark or get_spark_session(options.master, f"sluice: {stream_graph.job_name}",
                                                dependencies.spark_settings(configuration))
        dependencies.apply(self.spark, configuration)   # add_python_file, add_jars, set_python_requirements
        self.sc = self.spark.sparkContext
        # Fails with Flink's NoResourceAvailableException when the cluster has too few slots.
        required = sum(slots_required_per_group(self.execution_graph).values())
        self.slot_plan = compute_slot_plan(self.execution_graph, task_managers(self.spark, required))
        self.epoch_job = EpochJob(self.sc, self.job_graph, self.run_id, configuration,
                                  dict(stream_graph.settings.job_parameters))
        self.restored: dict = {}            # (vertex id, subtask) -> RestoredState for the next epoch
        self.task_watermarks: dict = {}     # (vertex id, subtask) -> TaskWatermarks for the next epoch
        self.replay: list = []              # logged plans of epochs after the restored checkpoint
        self.first_epoch = 0
        self.watermark = MIN_WATERMARK
        self.in_flight: Optional[_InFlightCheckpoint] = None   # the last epoch's checkpoint, completing
        self.restored_from = None
        self.metrics = RunMetrics()         # user metrics: not checkpointed, they start with the run

    def _transition_all(self, state: ExecutionState, failure: Optional[str] = None) -> None:
        self.execution_graph = self.execution_graph.transition_all(state, time.time(), failure)

    def _last_epoch(self, epoch: int) -> bool:
        """Whether ``epoch`` is the last this run may take (max_epochs)."""
        return self.options.max_epochs is not None and epoch - self.first_epoch + 1 >= self.options.max_epochs

    def _processing_time(self, epoch: int) -> int:
        if self.options.clock_start_ms is not None:
            return self.options.clock_start_ms + epoch * self.options.clock_step_ms
        return int(time.time() * 1000)

    # ---- before anything runs ------------------------------------------------------------

    # ---- restore -------------------------------------------------------------------------

    def _start(self) -> None:
        """Restore the chosen checkpoint, or replay the epochs a fresh start logged before its
        first checkpoint completed (their sink commits are then no-ops), or start fresh."""
        if self.restore_point is not None:
            self._restore(self.restore_point)
            return
        if self.batch:
            pass    # a fresh run of the whole input: nothing to replay
        elif self.options.restore_from != START_OVER:
            logged = self.storage.logged_epochs(-1, None)
            if any(e["checkpoint_id"] is not None for e in logged):
                self.replay = logged
                self._say(f"no completed checkpoint since the job started: replaying its {len(logged)} "
                          f"logged epoch(s) from the start")
                return
        else:
            warn_start_over(self.job_graph, self.storage)
        self.storage.log_start(self.run_id, self.coordinator.next_id)

    def _say(self, message: str) -> None:
        if not self.options.quiet:
            log.info("[%s] %s", self.job_graph.job_name, message)

    def _restore(self, point) -> None:
        record = point.record
        known = {n.operator_id for v in self.job_graph.vertices for n in v.operators}
        files = [f for f in point.files() if f["operator_id"] in known and not f.get("source_state")]
        parallelism = {op["operator_id"]: op["parallelism"] for op in record.operators}
        self.restored = assign_state(files, parallelism, self.job_graph)
        self.states.restored(files)
        self.state_version = None       # local stores are rebuilt from the restored files
        self.restores += 1
        self.sources.restore(source_positions(point))
        self.coordinator.restored(record)
        self.first_epoch = record.epoch + 1
        self.task_watermarks = assign_watermarks(record.watermarks, self.job_graph.vertices)
        self.watermark = min((w["watermark"] if isinstance(w, dict) else w for w in record.watermarks.values()),
                             default=MIN_WATERMARK)
        self.restored_from = record.checkpoint_id
        if point.root == self.job_dir:
            self.replay = self.storage.logged_epochs(record.epoch, record.checkpoint_id)
        what = f"savepoint {point.root}" if record.kind == "SAVEPOINT" else f"checkpoint {record.checkpoint_id}"
        replay = f", replaying {len(self.replay)} logged epoch(s)" if self.replay else ""
        self._say(f"restored {what} (epoch {record.epoch}){replay}")

    def _fall_back(self, error) -> bool:
        """State files of completed checkpoints found damaged as they were read (their checksum,
        or gone): mark those checkpoints INVALID and restore the one ``latest`` now picks, then
        replay the logged epochs after it (their sink commits are no-ops). False when the files
        are no checkpoint's of this job (a savepoint's, a scratch snapshot's): the failure stands.
        A checkpoint restored by its id is never swapped for another: that fails."""
        self._settle_checkpoint(failing=True)
        self.coordinator.await_retention()      # it chooses among the checkpoints retention keeps
        while True:
            found = damaged_checkpoints(self.storage, error.damaged_files)
            if not found:
                return False
            pinned = str(self.options.restore_from or "")
            for record, what in found:
                if pinned.isdigit() and record.checkpoint_id == int(pinned) == self.restored_from:
                    invalidate(self.storage, record, what)
                    raise CheckpointException(f"checkpoint {pinned} is damaged, now marked INVALID: "
                                              + "; ".join(what)) from None
                invalidate(self.storage, record, what, print_warning)
            try:
                point = choose(self.storage, "latest")
            except NoUsableCheckpointException as e:
                raise e.naming(self.job_graph.job_name, committed_sinks(self.job_graph)) from None
            if point is None:
                return False
            self.restored, self.task_watermarks, self.coordinator.pending, self.replay = {}, {}, {}, []
            self.metrics = RunMetrics()     # redeployed from a checkpoint: Flink's tasks restart their metrics
            try:
                self._restore(point)
                return True
            except CorruptStateException as e:
                error = e

    # ---- the run -------------------------------------------------------------------------

    def run(self) -> JobExecutionResult:
        started = time.time()
        result = JobExecutionResult(self.job_graph.job_id, self.job_graph.job_name, self.run_id, 0.0, [],
                                    self.execution_graph, self.slot_plan)
        self.coordinator.open_sinks(result)
        self.storage.claim(self.run_id, self.options.lease_timeout_s)
        status = "FAILED"
        broadcast = None
        execution = self._record_execution(ExecutionRecord(
            self.run_id, self.job_graph.job_name, RUNNING, started, self.options.dag_run_id or "",
            self.options.attempt, parallelism={v.name: v.parallelism for v in self.job_graph.vertices}))
        try:
            try:
                self._start()
            except CorruptStateException as e:      # a source's position, read on the driver
                if not self._fall_back(e):
                    raise
            broadcast = self.sc.broadcast(dumps_by_value(self.job_graph))
            self._transition_all(ExecutionState.SCHEDULED)
            self._transition_all(ExecutionState.DEPLOYING)
            end_of_input = self._run_epochs(broadcast, result)
            self._settle_checkpoint()
            self._transition_all(ExecutionState.FINISHED if end_of_input else ExecutionState.CANCELING)
            if not end_of_input:
                self._transition_all(ExecutionState.CANCELED)
            status = "FINISHED" if end_of_input else "CANCELED"
        except KeyboardInterrupt:
            # Stopped by the user: Flink's cancel, CANCELING then CANCELED. Checkpoints stay.
            self._transition_all(ExecutionState.CANCELING)
            self._transition_all(ExecutionState.CANCELED)
            status = "CANCELED"
            raise
        except Exception as e:
            self._settle_checkpoint(failing=True)
            if cancel_requested():      # canceled while running: what failed is the cancel's doing
                self._transition_all(ExecutionState.CANCELING)
                self._transition_all(ExecutionState.CANCELED)
                status = "CANCELED"
                raise KeyboardInterrupt(f"job '{self.job_graph.job_name}' canceled") from e
            self._transition_all(ExecutionState.FAILED, str(e))
            self._failed(execution, result, e)
            raise
        finally:
            self.coordinator.close()
            self.epoch_job.release()
            if broadcast is not None:
                try:
                    broadcast.unpersist()
                except Exception:
                    if status != "CANCELED":    # after a cancel the JVM may be gone already
                        raise
            self.sources.close()
            self.storage.release(self.run_id, status)
            rmtree(self.run_dir)
            result.restored_from = self.restored_from       # after a fallback, the checkpoint it took
            result.execution_graph = self.execution_graph
            result.net_runtime_ms = (time.time() - started) * 1000
            if status != "FAILED":
                self._record_execution(self._progress(execution, result, status))
        return result

    def _run_epochs(self, broadcast, result: JobExecutionResult) -> bool:
        """Epoch after epoch until the input ends (True), max_epochs or a cancel (False); a failed
        epoch falls back to a checkpoint when it can."""
        epoch = self.first_epoch
        while True:
            epoch_started = time.time()
            try:
                summary, end_of_input = self._run_epoch(epoch, broadcast, result)
            except JobExecutionException as e:
                if not self._fall_back(e):
                    raise
                epoch = self.first_epoch
                continue
            result.epochs.append(summary)
            if self.in_flight is None or self.in_flight.summary is not summary:
                self._report(summary)       # else once its checkpoint completed
            epoch += 1
            if end_of_input or self._last_epoch(epoch - 1) or self.stop.is_set():
                return end_of_input
            pause = self.options.epoch_interval_ms / 1000 - (time.time() - epoch_started)
            if pause > 0 and not self.replay and self.sources.paced:
                time.sleep(pause)

    # ---- the execution history -----------------------------------------------------------

    def _record_execution(self, record: ExecutionRecord) -> ExecutionRecord:
        return ExecutionHistory(self.job_dir).record(record)

    def _progress(self, execution: ExecutionRecord, result: JobExecutionResult, state: str, **more) -> ExecutionRecord:
        last = max((e.checkpoint_id for e in result.epochs if e.checkpoint_id), default=None)
        return replace(execution, state=state, ended_at=time.time(), epochs=len(result.epochs),
                       records_in=sum(e.records_in for e in result.epochs), last_checkpoint=last,
                       restored_from=self.restored_from, **more)

    def _failed(self, execution: ExecutionRecord, result: JobExecutionResult, error: Exception) -> None:
        """Record the failure with the restart strategy's decision on it (Flink's JobMaster asks its
        RestartBackoffTimeStrategy; here the history of this Airflow run is the strategy's memory),
        and say both at once: the control plane acts on the record."""
        from runtime.scheduler.restart import decide, effective_configuration
        settings = self.stream_graph.settings
        config = effective_configuration(settings.restart_strategy, dict(settings.configuration),
                                         self.coordinator.enabled)
        now = time.time()
        earlier = ExecutionHistory(self.job_dir).attempts(self.options.dag_run_id) if self.options.dag_run_id else []
        times = [int((r.ended_at or r.recorded_at or now) * 1000) for r in earlier
                 if r.state == FAILED and r.run_id != self.run_id]
        decision = decide(config, times + [int(now * 1000)])
        names = [self.execution_graph.vertex(v, s).task_name_with_subtask_index
                 for v, s in getattr(error, "failed_tasks", ())]
        self._record_execution(self._progress(
            execution, result, FAILED, failure=_failure_text(error)[:4000], failed_tasks=tuple(names),
            restart=decision.describe(), backoff_ms=decision.backoff_ms, restarting=decision.restart))
        if self.options.dag_run_id:     # a control plane restarts on this decision: say it now
            log.error("[%s] attempt %s failed: %s", self.job_graph.job_name, self.options.attempt, error)
            (log.warning if decision.restart else log.error)("[%s] %s", self.job_graph.job_name, decision.describe())

    def _plan(self, epoch: int) -> tuple[dict, bool, Optional[int], object]:
        """The epoch's deployment descriptors and the future of its write-ahead record (committed
        while the tasks run); replays take the logged plan."""
        if self.replay:
            logged = self.replay.pop(0)
            processing_time, end_of_input = logged["processing_time"], logged["end_of_input"]
            source_plans = self.sources.replayed_plan(logged)
            checkpoint_id = (self.coordinator.take_id(logged["checkpoint_id"])
                             if logged["checkpoint_id"] is not None else None)
        else:
            processing_time = self._processing_time(epoch)
            source_plans, end_of_input = self.sources.plan_epoch(epoch)
            if self.batch and not end_of_input:
                raise JobExecutionException(
                    f"Job '{self.job_graph.job_name}' runs in BATCH mode but its input cannot be read in one "
                    "epoch (a rate-limited generator?): run it in STREAMING mode.")
            # The last epoch a run may take (max_epochs) ends in a checkpoint too, so the next run
            # (a scheduled one) starts where this one stopped instead of replaying.
            checkpoint_id = (self.coordinator.take_id()
                             if self.coordinator.should_trigger(epoch, end_of_input or self._last_epoch(epoch))
                             else None)
        # The write-ahead record of the epoch: what it reads, at which processing time.
        logged = self.storage.log_epoch_async(self.run_id, epoch, checkpoint_id, processing_time,
                                              self.watermark, end_of_input, self.sources.logged_plan(source_plans))
        snapshot_dir = self._snapshot_dir(epoch, checkpoint_id, end_of_input)
        tdds = self._deployment_descriptors(epoch, processing_time, end_of_input, checkpoint_id,
                                            source_plans, snapshot_dir)
        return tdds, end_of_input, checkpoint_id, logged

    def _snapshot_dir(self, epoch: int, checkpoint_id: Optional[int], end_of_input: bool) -> Optional[str]:
        """Where the epoch's tasks write their snapshots (``{table}`` is each state table's name)."""
        if checkpoint_id is not None:
            return self.storage.checkpoint_dir(checkpoint_id)
        if self.coordinator.enabled and not end_of_input:
            # Into the next checkpoint's partition: an increment of this epoch is part of the
            # chain that checkpoint lists, and is committed with it where it lies.
            return self.storage.checkpoint_dir(self.coordinator.next_id)
        if not end_of_input:
            return join(self.run_dir, "state", f"epoch-{epoch:06d}", "{table}")
        return None     # the last epoch of a bounded job: its state is not needed

    def _deployment_descriptors(self, epoch: int, processing_time: int, end_of_input: bool,
                                checkpoint_id: Optional[int], source_plans: dict,
                                snapshot_dir: Optional[str]) -> dict:
        """(vertex id, subtask) -> what the subtask runs this epoch with."""
        tdds = {}
        incremental = self.states.incremental()
        next_version = f"{self.run_id}:{self.restores}:{epoch}" if snapshot_dir else None
        for v in self.job_graph.vertices:
            for s in range(v.parallelism):
                tdds[(v.id, s)] = TaskDeploymentDescriptor(
                    job_vertex_id=v.id, subtask_index=s,
                    attempt_number=self.execution_graph.vertex(v.id, s).current_execution.attempt_number,
                    epoch=epoch, processing_time=processing_time, end_of_input=end_of_input,
                    splits=tuple(source_plans.get(v.id, {}).get(s, ())),
                    restored_state=self.restored.get((v.id, s)),
                    snapshot_dir=snapshot_dir, batch_size=self.options.batch_size,
                    watermarks=self.task_watermarks.get((v.id, s)),
                    state_version=self.state_version, next_state_version=next_version,
                    state_dir=self.options.state_local_dir, incremental=incremental,
                    barrier=checkpoint_id is not None or not self.coordinator.enabled,
                    metric_counts=self.metrics.counts_of(v.id, s),
                    source_reader=reader_class(v.head.operator.source) if v.is_input_vertex else None,
                    sink_writers={n.id: writer_class(n.operator.sink) for n in v.operators if n.kind == "sink"})
        return tdds

    def _run_epoch(self, epoch: int, broadcast, result: JobExecutionResult):
        started = time.time()
        tdds, end_of_input, checkpoint_id, logged = self._plan(epoch)
        payloads = self.epoch_job.run(epoch, broadcast, tdds)
        logged.result()     # the epoch's plan is committed before anything it produced is
        acks = self.coordinator.receive_acknowledgements(payloads)
        if os.environ.get("SLUICE_DEBUG"):
            for a in acks:
                log.info("  task %s/%s: +%.0f ms, %.0f ms, %s in", a.job_vertex_id, a.subtask_index,
                         (a.started_at - started) * 1000, a.duration_ms, a.records_in)
            log.info("  acks in driver at +%.0f ms", (time.time() - started) * 1000)
        self._raise_failure(acks, epoch, started, checkpoint_id)
        if self.execution_graph.all_execution_vertices[0].execution_state == ExecutionState.DEPLOYING:
            self._transition_all(ExecutionState.RUNNING)     # the first epoch done, after a fallback too
        # The last epoch's checkpoint completed while this epoch ran: its files are committed
        # before the chains move on (or it failed, and so does this epoch).
        self._settle_checkpoint()
        self.coordinator.route_committables(acks, epoch)
        self.sources.complete_epoch(acks)
        sinks = [a for a in acks if not self.job_graph.outputs_of(a.job_vertex_id)]
        self.watermark = min((a.watermark for a in sinks), default=MIN_WATERMARK)
        self.task_watermarks = {(a.job_vertex_id, a.subtask_index): a.task_watermarks for a in acks}
        first = tdds[next(iter(tdds))]      # what every subtask's descriptor says alike
        state_files = [f for a in acks for f in a.state_files]
        superseded = self.states.after_epoch(state_files, first.incremental)
        completion = self._trigger_checkpoint(checkpoint_id, epoch, acks)
        self._hand_over(first.next_state_version, superseded)
        summary = self._summary(epoch, started, first.processing_time, acks, state_files)
        if completion is not None:
            self.in_flight = _InFlightCheckpoint(summary, checkpoint_id, time.time(), completion)
        return summary, end_of_input

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
                                    {p: what for a in failed for p, what in a.damaged_files.items()})

    def _trigger_checkpoint(self, checkpoint_id: Optional[int], epoch: int, acks: list):
        """Hand the epoch's checkpoint to the coordinator, which completes it in the background
        (the future of its completion); without checkpoints each epoch commits its sinks' staged
        output on its own (per run)."""
        if checkpoint_id is not None:
            watermarks = checkpointed([(a.job_vertex_id, a.subtask_index, a.task_watermarks, a.watermark) for a in acks],
                                      {v.id: v.head.operator_id for v in self.job_graph.vertices})
            # The checkpoint starts when the tasks' snapshots do (their barrier is the epoch's end).
            snapshot_started = time.time() - max((a.snapshot_ms for a in acks), default=0) / 1000
            return self.coordinator.complete_async(
                checkpoint_id, epoch, snapshot_started, self.states.to_commit(checkpoint_id), self.sources.enumerators,
                watermarks, self.coordinator.staged(), chains=self.states.listing())
        if not self.coordinator.enabled:
            for committer, committables in self.coordinator.staged():
                committer.commit(committables, epoch + 1)
        return None

    def _summary(self, epoch: int, started: float, processing_time: int, acks: list, state_files: list) -> EpochSummary:
        sources = [a for a in acks if a.job_vertex_id in self.sources.enumerators]
        metrics = self.metrics.epoch([(a.job_vertex_id, a.subtask_index, a.metrics) for a in acks],
                                     time.time() - started)
        return EpochSummary(
            epoch=epoch, processing_time=processing_time,
            records_in=sum(a.records_in for a in sources),
            records_out=sum(a.records_written for a in acks),
            watermark=self.watermark,
            duration_ms=(time.time() - started) * 1000,
            late_records_dropped=sum(a.late_records_dropped for a in acks),
            state_bytes_written=sum(f.size for f in state_files),
            local_stores=sum(a.store_hits + a.store_misses for a in acks),
            local_store_hits=sum(a.store_hits for a in acks),
            metrics=metrics, started_at=started)

    def _settle_checkpoint(self, failing: bool = False) -> None:
        """Wait for the checkpoint completing in the background and take its outcome: its files
        are committed, its epoch is reported. A failed completion fails the epoch that waited
        for it (the run falls back to the checkpoint before, as a crash would), or, when the run
        is failing already, is recorded and logged."""
        pending, self.in_flight = self.in_flight, None
        if pending is None:
            return
        epoch = pending.summary.epoch
        try:
            record, ended = pending.future.result()
        except Exception as e:
            cause = f"{type(e).__name__}: {e}"
            message = (f"Checkpoint {pending.checkpoint_id} failed: {cause} (epoch {epoch} of job "
                       f"'{self.job_graph.job_name}')")
            try:
                self.coordinator.fail(pending.checkpoint_id, epoch, pending.summary.started_at, cause)
            except Exception as recording:
                message += f"; recording it failed too: {recording}"
            if failing:     # the run's own failure is the one to report
                log.error("%s", message)
                return
            raise JobExecutionException(message) from e
        self.states.committed(pending.checkpoint_id)
        pending.summary.checkpoint_id = record.checkpoint_id
        pending.summary.checkpoint_ms = (ended - pending.handed_at) * 1000
        self._report(pending.summary)

    def _report(self, summary: EpochSummary) -> None:
        """An epoch's metrics row (committed with the next commit of the epoch log) and progress line."""
        self.storage.log_metrics(self.run_id, summary.epoch, summary.checkpoint_id, asdict(summary))
        if not self.options.quiet:
            log.info("%s", summary.progress_line(self.job_graph.job_name))

    def _hand_over(self, version: Optional[str], superseded: list[str]) -> None:
        """The next epoch's subtasks use their local stores if they are at ``version``, else
        rebuild from the chains' files (same parallelism: their own key groups)."""
        parallelism = {n.operator_id: v.parallelism for v in self.job_graph.vertices for n in v.operators}
        self.restored = assign_state(self.states.files(), parallelism, self.job_graph)
        self.state_version = version
        for path in superseded:     # uncommitted snapshot files no chain reads any more
            remove(path)


def _failure_text(error: BaseException) -> str:
    """A failure as the history keeps it: a job's failure as it says itself (its cause first), any
    other error with its type."""
    return str(error) if isinstance(error, JobExecutionException) else f"{type(error).__name__}: {error}"


def _user_modules() -> list:
    """Modules of the job's own code (job scripts, test modules): not importable on executors."""
    import sysconfig
    runtime_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = sysconfig.get_paths()
    roots = (paths["purelib"], paths["stdlib"], paths["platlib"], sys.prefix, sys.base_prefix)
    installed = tuple(p + os.sep for p in {*roots, *map(os.path.realpath, roots)})
    found = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        # The plain prefix test spares most modules a realpath (0.1 s for 800 modules).
        if not path or name == "__main__" or name.startswith("runtime") or path.startswith(installed):
            continue
        real = os.path.realpath(path)
        if real.startswith(runtime_dir + os.sep) or real.startswith(installed):
            continue
        found.append(module)
    return found


def dumps_by_value(obj) -> bytes:
    # Ship the job's own classes and functions by value, as PyFlink ships the job's files.
    from pyspark import cloudpickle
    registered = []
    # Modules the program registered itself stay registered after the job's pickling.
    already = cloudpickle.list_registry_pickle_by_value()
    for module in _user_modules():
        if module.__name__ in already:
            continue
        try:
            cloudpickle.register_pickle_by_value(module)
            registered.append(module)
        except (ValueError, TypeError):
            pass
    try:
        return cloudpickle.dumps(obj)
    finally:
        for module in registered:
            cloudpickle.unregister_pickle_by_value(module)


def execute_stream_graph(stream_graph: StreamGraph, options: Optional[ExecutionOptions] = None,
                         stop: Optional[threading.Event] = None) -> JobExecutionResult:
    """Run a compiled job on Spark; ``stop`` set ends it after its current epoch (a JobClient's cancel)."""
    from runtime.common.logs import console_logging
    console_logging()       # the progress lines on stderr, unless the program configured logging
    options = options or ExecutionOptions.from_configuration(dict(stream_graph.settings.configuration))
    runner = JobRunner(stream_graph, options)
    runner.stop = stop or runner.stop
    return runner.run()


class SparkPipelineExecutor:
    """What ``env.execute()`` finds for ``execution.target: spark`` (the default)."""

    def __init__(self, **overrides):
        self.overrides = overrides      # ExecutionOptions fields a client sets (sluice run's flags)

    def execute(self, stream_graph: StreamGraph, stop: Optional[threading.Event] = None) -> JobExecutionResult:
        options = ExecutionOptions.from_configuration(dict(stream_graph.settings.configuration))
        return execute_stream_graph(stream_graph, options.with_overrides(**self.overrides), stop)
