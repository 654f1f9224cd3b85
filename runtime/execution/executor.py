"""Running a job: compile, allocate slots, then epochs, each one Spark job.

Per epoch the driver plans every source split's read and the processing time, writes that
plan first (so a replay reads the same input at the same time), runs one Spark job (a
stage per JobVertex, ``parallelism`` tasks, keyed edges shuffled so that partition i is
subtask i), and gathers the tasks' acknowledgements: metrics, the sinks' committables (printed
lines, collected records, staged Delta files), state snapshot handles and the sources' new
positions. Each sink's committer (``runtime.connectors``) commits its committables: print and
collect at once, a Delta sink with the next checkpoint (or after each epoch without them).
"""
from __future__ import annotations

import gc
import json
import logging
import os
import pickle
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from typing import Optional

from runtime.checkpoint.coordinator import CheckpointCoordinator
from runtime.checkpoint.incremental import IncrementalPolicy, StateChains
from runtime.state.snapshot import CorruptStateException
from runtime.checkpoint.storage import CheckpointException, CheckpointStorage
from runtime.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from runtime.connectors import committer_class, create_enumerator, reader_class, writer_class
from runtime.connectors.base import CommitterContext, EnumeratorContext
from runtime.execution.history import FAILED, RUNNING, ExecutionHistory, ExecutionRecord
from runtime.execution.locality import StateLocality
from runtime.execution.python_rdds import PythonRDDs
from runtime.execution.options import ExecutionOptions
from runtime.execution.spark import cancel_requested
from runtime.graph.execution_graph import ExecutionGraph, build_execution_graph
from runtime.graph.execution_state import ExecutionState
from runtime.graph.job_graph import JobGraph, create_job_graph
from runtime.graph.stream_graph import StreamGraph
from runtime.metrics.aggregation import RunMetrics
from runtime.scheduler.slots import SlotPlan, compute_slot_plan, slots_required_per_group
from runtime.state.backend import ROCKSDB, state_backend_type
from runtime.storage.filesystems import StorageException, check_writable, join, remove, rmtree
from runtime.storage.layout import job_dir, slug
from runtime.task.operator_factory import snapshots_incrementally
from runtime.task.stream_task import ACK, TaskDeploymentDescriptor
from runtime.task.watermarks import assign_watermarks, checkpointed


log = logging.getLogger(__name__)


class _AckAccumulatorParam:
    """Collects the tasks' pickled acknowledgements on the driver."""

    def zero(self, value):
        return []

    def addInPlace(self, a, b):
        a.extend(b)
        return a


class JobExecutionException(RuntimeError):
    """The job failed; the message names the operator, subtask and record when user code failed.

    ``failed_tasks`` are the (vertex id, subtask) that failed, when known. The restart strategy's
    decision on the failure is a field of the run's execution record (``restarting``)."""

    def __init__(self, message: str, failed_tasks: tuple = (), damaged_files: Optional[dict] = None):
        super().__init__(message)
        self.failed_tasks = tuple(failed_tasks)
        self.damaged_files = damaged_files or {}    # restored state file -> what is wrong with it


@dataclass
class EpochSummary:
    epoch: int
    processing_time: int
    records_in: int
    records_out: int
    watermark: int
    duration_ms: float                  # from its start until its checkpoint is handed to the completer
    late_records_dropped: int = 0
    checkpoint_id: Optional[int] = None
    checkpoint_ms: float = 0.0          # completing the checkpoint (state, sinks, record), in the background
    state_bytes_written: int = 0        # snapshot files written by the tasks (increments or whole)
    local_stores: int = 0               # subtasks' local stores (state.backend.type: rocksdb) ...
    local_store_hits: int = 0           # ... of which were at the expected version, not rebuilt
    metrics: dict = field(default_factory=dict)     # user metrics by scope (runtime.metrics.aggregation)
    started_at: float = 0.0             # wall clock (s): epochs overlap their checkpoints, so the
                                        # time between two starts is what an epoch costs

    @property
    def local_store_hit_rate(self) -> Optional[float]:
        return self.local_store_hits / self.local_stores if self.local_stores else None

    def progress_line(self, job_name: str) -> str:
        wm = ("none" if self.watermark <= MIN_WATERMARK else
              "end of input" if self.watermark >= MAX_WATERMARK else str(self.watermark))
        cp = f", checkpoint {self.checkpoint_id} ({self.checkpoint_ms:.0f} ms)" if self.checkpoint_id else ""
        local = f", local state {self.local_store_hits}/{self.local_stores}" if self.local_stores else ""
        return (f"[{job_name}] epoch {self.epoch}: {self.records_in} records in, {self.records_out} out, "
                f"watermark {wm}, {self.duration_ms:.0f} ms{cp}{local}")


@dataclass
class _InFlightCheckpoint:
    """A checkpoint completing in the background while the next epoch runs (its epoch's summary)."""
    summary: EpochSummary
    checkpoint_id: int
    handed_at: float
    future: object


@dataclass
class JobExecutionResult:
    job_id: str
    job_name: str
    run_id: str
    net_runtime_ms: float
    epochs: list[EpochSummary]
    execution_graph: ExecutionGraph
    slot_plan: SlotPlan
    collected: dict = field(default_factory=dict)       # collect-sink id -> records
    printed: list = field(default_factory=list)         # lines of print() sinks, in order
    sink_files: dict = field(default_factory=dict)      # Delta sink node id -> the files it committed
    restored_from: Optional[int] = None                 # the checkpoint id the run started from

    def get_job_id(self) -> str:
        return self.job_id

    def get_net_runtime(self) -> float:
        return self.net_runtime_ms

    def get_collected(self, sink_id) -> list:
        return self.collected.get(sink_id, [])


START_OVER = "none"     # restore_from value of a deliberate fresh start


# ---- inside the Spark tasks ------------------------------------------------------------

_JOB_GRAPHS: dict = {}
_KEPT_JOB_GRAPHS = 4        # runs whose job graphs a worker keeps (the latest ones)
_SETTLED_RUNS: set = set()


def _job_graph_in_worker(run_id: str, broadcast) -> JobGraph:
    # Python workers are reused across tasks and epochs: unpickle the job graph once each.
    graph = _JOB_GRAPHS.get(run_id)
    if graph is None:
        while len(_JOB_GRAPHS) >= _KEPT_JOB_GRAPHS:
            _JOB_GRAPHS.pop(next(iter(_JOB_GRAPHS)))
        graph = _JOB_GRAPHS[run_id] = pickle.loads(broadcast.value)
    return graph


def _settle_worker_heap(run_id: str) -> None:
    """Once per run and worker, after its first task: collect, then freeze what survived (the
    modules, the job graph, the state backends' caches) out of the cyclic garbage collector.
    A reused PySpark worker runs a full gc.collect() after every task, before it reads the next
    one: over the 60,000 objects of a worker's imports that took 30-60 ms, between the two stages
    of every epoch (most of the worker's CPU in a small epoch). Frozen objects are still freed by
    reference counting; cycles among them wait for the next run's settling, which unfreezes and
    collects everything first, so a worker serving many runs keeps no garbage of earlier ones."""
    if run_id not in _SETTLED_RUNS:
        _SETTLED_RUNS.add(run_id)
        gc.unfreeze()
        gc.collect()
        gc.freeze()


def _task_function(run_id: str, broadcast, tdds: dict, job_parameters: dict, acks):
    """The body of a Spark task: one subtask. A terminal vertex returns its acknowledgement as
    the task's result; the others (whose rows go on to a shuffle) through ``acks``."""
    def run(index, rows):
        from runtime.task.stream_task import run_task
        for row in run_task(_job_graph_in_worker(run_id, broadcast), tdds[index], job_parameters, rows):
            if row[0] == ACK and acks is not None:
                acks.add([row[1]])
            else:
                yield row
        _settle_worker_heap(run_id)
    return run


def _payloads(index, rows):
    return (row[1] for row in rows)


class _OnEdge:
    """The rows of a vertex's output that travel on one edge (its data set)."""

    def __init__(self, data_set: str) -> None:
        self.data_set = data_set

    def __call__(self, index, rows):
        return (row for row in rows if row[1][0] == self.data_set)


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
        self.job_parameters = dict(stream_graph.settings.job_parameters)
        self.enumerators = {}
        for v in self.job_graph.vertices:
            if v.is_input_vertex:
                self.enumerators[v.id] = create_enumerator(v.head.operator.source, EnumeratorContext(
                    parallelism=v.parallelism,
                    max_records_per_split=None if self.batch else options.max_records_per_split,
                    epoch_interval_ms=options.epoch_interval_ms, work_dir=join(self.job_dir, "sources"),
                    job_name=stream_graph.job_name, operator_id=v.head.operator_id))
        # Whether epochs wait out sluice.epoch.interval: only a source whose epoch is a span of time.
        self._paced = any(e.paced for e in self.enumerators.values())
        try:
            self.restore_point = self._preflight()
        except BaseException:
            for enumerator in self.enumerators.values():
                enumerator.close()
            raise
        configuration = dict(stream_graph.settings.configuration)
        self.spark = spark or get_spark_session(options.master, f"sluice: {stream_graph.job_name}",
                                                dependencies.spark_settings(configuration))
        dependencies.apply(self.spark, configuration)   # add_python_file, add_jars, set_python_requirements
        self.sc = self.spark.sparkContext
        # Fails with Flink's NoResourceAvailableException when the cluster has too few slots.
        required = sum(slots_required_per_group(self.execution_graph).values())
        self.slot_plan = compute_slot_plan(self.execution_graph, task_managers(self.spark, required))
        # Subtasks with keyed state in local stores (rocksdb) each run in a Python worker of their
        # own, which keeps the store open, on the executor where their stores are; in local mode
        # every task runs on the one executor, and the anchors would only cost py4j calls.
        rocksdb = state_backend_type(dict(stream_graph.settings.configuration)) == ROCKSDB
        self.local_stores = frozenset(v.id for v in self.job_graph.vertices
                                      if rocksdb and not v.is_input_vertex and v.is_keyed)
        self.rdds = PythonRDDs(self.sc)
        self.locality = StateLocality(self.rdds, () if self.sc.master.startswith("local") else self.local_stores)
        self.restored: dict = {}            # (vertex id, subtask) -> RestoredState for the next epoch
        self.task_watermarks: dict = {}     # (vertex id, subtask) -> TaskWatermarks for the next epoch
        self.replay: list = []              # logged plans of epochs after the restored checkpoint
        self.first_epoch = 0
        self.watermark = MIN_WATERMARK
        self.committers: dict = {}          # sink node id -> its Committer, for the run
        self.in_flight: Optional[_InFlightCheckpoint] = None   # the last epoch's checkpoint, completing
        self.pending: dict = {}             # sink node id -> committables waiting for a checkpoint
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

    def _preflight(self):
        """Misuse fails here, before Spark starts or anything is written: the job's inputs, where
        its sinks write, another run holding the job, and the restore point (which must fit the job)."""
        from runtime.checkpoint.restore import NoUsableCheckpointException, check_compatibility, choose
        from runtime.checkpoint.storage import JobAlreadyRunningException, already_running
        for enumerator in self.enumerators.values():
            enumerator.check()
        check_sink_locations(self.job_graph)
        holder = self.storage.running_holder(self.options.lease_timeout_s)
        if holder is not None:
            raise JobAlreadyRunningException(already_running(self.job_dir, holder))
        if self.batch:
            if self.options.restore_from not in (None, "latest", START_OVER):
                raise CheckpointException(
                    f"Job '{self.job_graph.job_name}' runs in BATCH mode, which takes no checkpoints and "
                    f"restores none (restore from {self.options.restore_from!r} asked): run it with "
                    "execution.runtime-mode STREAMING to restore.")
            return None
        if self.options.restore_from == START_OVER:
            return None
        try:
            point = choose(self.storage, self.options.restore_from or "latest")
        except NoUsableCheckpointException as e:
            raise e.naming(self.job_graph.job_name, committed_sinks(self.job_graph)) from None
        if point is not None:
            check_compatibility(point, self.job_graph, self.options.allow_non_restored_state)
        return point

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
            self._warn_start_over()
        self.storage.log_start(self.run_id, self.coordinator.next_id)

    def _warn_start_over(self) -> None:
        """``--restore-from none``: say which sinks already hold what this run writes again."""
        sinks = committed_sinks(self.job_graph)
        completed = self.storage.latest_lineage()
        what = f"checkpoint {completed[-1].checkpoint_id} is not restored" if completed else "nothing is restored"
        again = (f"; these sinks already hold this job's committed output and will receive everything "
                 f"again: {', '.join(sinks)}" if sinks else "")
        log.warning("[%s] starting over (restore_from=none): %s%s", self.job_graph.job_name, what, again)

    def _say(self, message: str) -> None:
        if not self.options.quiet:
            log.info("[%s] %s", self.job_graph.job_name, message)

    def _restore(self, point) -> None:
        from runtime.checkpoint.restore import assign_state, source_positions
        record = point.record
        known = {n.operator_id for v in self.job_graph.vertices for n in v.operators}
        files = [f for f in point.files() if f["operator_id"] in known and not f.get("source_state")]
        parallelism = {op["operator_id"]: op["parallelism"] for op in record.operators}
        self.restored = assign_state(files, parallelism, self.job_graph)
        self.states.restored(files)
        self.state_version = None       # local stores are rebuilt from the restored files
        self.restores += 1
        positions = source_positions(point)
        for vid, enumerator in self.enumerators.items():
            uid = self.job_graph.vertex(vid).head.operator_id
            if uid in positions:
                enumerator.restore(positions[uid])
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
        from runtime.checkpoint.restore import (
            NoUsableCheckpointException, choose, damaged_checkpoints, invalidate, print_warning)
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
            self.restored, self.task_watermarks, self.pending, self.replay = {}, {}, {}, []
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
        self.committers = self._committers(result)
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
                    break
                pause = self.options.epoch_interval_ms / 1000 - (time.time() - epoch_started)
                if pause > 0 and not self.replay and self._paced:
                    time.sleep(pause)
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
            self.locality.release()
            if broadcast is not None:
                try:
                    broadcast.unpersist()
                except Exception:
                    if status != "CANCELED":    # after a cancel the JVM may be gone already
                        raise
            for enumerator in self.enumerators.values():
                enumerator.close()
            self.storage.release(self.run_id, status)
            rmtree(self.run_dir)
            result.restored_from = self.restored_from       # after a fallback, the checkpoint it took
            result.execution_graph = self.execution_graph
            result.net_runtime_ms = (time.time() - started) * 1000
            if status != "FAILED":
                self._record_execution(self._progress(execution, result, status))
        return result

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
        uids = {vid: self.job_graph.vertex(vid).head.operator_id for vid in self.enumerators}
        if self.replay:
            logged = self.replay.pop(0)
            processing_time, end_of_input = logged["processing_time"], logged["end_of_input"]
            source_plans = {}
            for vid in self.enumerators:
                reads = logged["plan"].get(uids[vid], ())
                p = self.job_graph.vertex(vid).parallelism
                source_plans[vid] = {s: tuple(reads[s::p]) for s in range(p)}
            checkpoint_id = (self.coordinator.take_id(logged["checkpoint_id"])
                             if logged["checkpoint_id"] is not None else None)
        else:
            processing_time = self._processing_time(epoch)
            source_plans = {vid: e.plan_epoch(epoch) for vid, e in self.enumerators.items()}
            end_of_input = all(e.input_ends_with_plan for e in self.enumerators.values())
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
        flat = {uids[vid]: [r for s in sorted(plan) for r in plan[s]] for vid, plan in source_plans.items()}
        logged = self.storage.log_epoch_async(self.run_id, epoch, checkpoint_id, processing_time,
                                              self.watermark, end_of_input, flat)
        if checkpoint_id is not None:
            snapshot_dir = self.storage.checkpoint_dir(checkpoint_id)
        elif self.coordinator.enabled and not end_of_input:
            # Into the next checkpoint's partition: an increment of this epoch is part of the
            # chain that checkpoint lists, and is committed with it where it lies.
            snapshot_dir = self.storage.checkpoint_dir(self.coordinator.next_id)
        elif not end_of_input:
            snapshot_dir = join(self.run_dir, "state", f"epoch-{epoch:06d}", "{table}")
        else:
            snapshot_dir = None     # the last epoch of a bounded job: its state is not needed
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
                    source_reader=reader_class(v.head.operator.source) if v.id in self.enumerators else None,
                    sink_writers={n.id: writer_class(n.operator.sink) for n in v.operators if n.kind == "sink"})
        return tdds, end_of_input, checkpoint_id, logged

    def _run_epoch(self, epoch: int, broadcast, result: JobExecutionResult):
        started = time.time()
        tdds, end_of_input, checkpoint_id, logged = self._plan(epoch)
        sc, py = self.sc, self.rdds
        # Acknowledgements of vertices that feed a shuffle travel in an accumulator, so their data
        # rows are never read twice; terminal vertices return theirs as the job's result.
        acks_accumulator = sc.accumulator([], _AckAccumulatorParam())
        stages, terminal, cached = {}, [], []
        for v in self.job_graph.vertices:
            outputs = self.job_graph.outputs_of(v.id)
            task = _task_function(self.run_id, broadcast, {s: tdds[(v.id, s)] for s in range(v.parallelism)},
                                  self.job_parameters, acks_accumulator if outputs else None)
            if v.is_input_vertex:
                stage = py.source(v.parallelism)
            else:
                parts = [stages[je.source_vertex].then(_OnEdge(je.data_set)) for je in self.job_graph.inputs_of(v.id)]
                shuffled = self.locality.anchored(v.id, v.parallelism, py.partition_by(parts, v.parallelism))
                stage = py.rows(shuffled, pinned=v.parallelism if v.id in self.local_stores else 0)
            stage = stage.then(task)
            if len(outputs) > 1:
                # Several consumers: without caching each shuffle would run the vertex again.
                cached.append(py.persist(py.materialize(stage)))
                stage = py.rows(cached[-1])
            if not outputs:
                terminal.append(stage.then(_payloads))
            stages[v.id] = stage
        sc.setJobGroup(f"sluice-{self.run_id}-{epoch}", f"{self.job_graph.job_name} epoch {epoch}")
        try:
            collected = py.collect(terminal)
        finally:
            for rdd in cached:
                rdd.unpersist(False)
        logged.result()     # the epoch's plan is committed before anything it produced is
        # A recomputed task (a retry, a cache miss) acknowledges twice, with the same content,
        # unless one of the computations failed: then the epoch failed.
        raw = {}
        for payload in list(acks_accumulator.value) + collected:
            ack = pickle.loads(payload)
            key = (ack.job_vertex_id, ack.subtask_index)
            if key not in raw or ack.failure:
                raw[key] = ack
        acks = [raw[k] for k in sorted(raw)]
        if os.environ.get("SLUICE_DEBUG"):
            for a in acks:
                log.info("  task %s/%s: +%.0f ms, %.0f ms, %s in", a.job_vertex_id, a.subtask_index,
                         (a.started_at - started) * 1000, a.duration_ms, a.records_in)
            log.info("  acks in driver at +%.0f ms", (time.time() - started) * 1000)
        failed = [a for a in acks if a.failure]
        if failed:
            if checkpoint_id is not None:
                self.coordinator.fail(checkpoint_id, epoch, started, failed[0].failure.split("\n", 1)[0])
            # The cause first (operator, subtask, reason, record), then where: epoch and job.
            cause, _, trace = failed[0].failure.partition("\n")
            raise JobExecutionException(f"{cause} in epoch {epoch} of job '{self.job_graph.job_name}'"
                                        + (f"\n{trace}" if trace else ""),
                                        tuple((a.job_vertex_id, a.subtask_index) for a in failed),
                                        {p: what for a in failed for p, what in a.damaged_files.items()})
        if self.execution_graph.all_execution_vertices[0].execution_state == ExecutionState.DEPLOYING:
            self._transition_all(ExecutionState.RUNNING)     # the first epoch done, after a fallback too
        # The last epoch's checkpoint completed while this epoch ran: its files are committed
        # before the chains move on (or it failed, and so does this epoch).
        self._settle_checkpoint()
        order = {v.id: i for i, v in enumerate(self.job_graph.vertices)}
        for a in sorted(acks, key=lambda a: (order[a.job_vertex_id], a.subtask_index)):
            for node_id, committable in a.committables.items():
                committer = self.committers[node_id]
                if committer.at_checkpoint:
                    self.pending.setdefault(node_id, []).append(committable)
                else:       # printed lines, collected records: delivered in order as they come
                    committer.commit([committable], epoch + 1)
        for vid, enumerator in self.enumerators.items():
            states = {}
            for a in acks:
                if a.job_vertex_id == vid:
                    states.update(a.split_states)
            enumerator.complete_epoch(states)
        sinks = [a for a in acks if not self.job_graph.outputs_of(a.job_vertex_id)]
        self.watermark = min((a.watermark for a in sinks), default=MIN_WATERMARK)
        self.task_watermarks = {(a.job_vertex_id, a.subtask_index): a.task_watermarks for a in acks}
        state_files = [f for a in acks for f in a.state_files]
        superseded = self.states.after_epoch(state_files, tdds[next(iter(tdds))].incremental)
        completion = None
        if checkpoint_id is not None:
            watermarks = checkpointed([(a.job_vertex_id, a.subtask_index, a.task_watermarks, a.watermark) for a in acks],
                                      {v.id: v.head.operator_id for v in self.job_graph.vertices})
            # The checkpoint starts when the tasks' snapshots do (their barrier is the epoch's end).
            snapshot_started = time.time() - max((a.snapshot_ms for a in acks), default=0) / 1000
            completion = self.coordinator.complete_async(
                checkpoint_id, epoch, snapshot_started, self.states.to_commit(checkpoint_id), self.enumerators,
                watermarks, self._staged(), chains=self.states.listing())
        elif not self.coordinator.enabled:
            # Without checkpoints each epoch commits its sinks' staged output on its own (per run).
            for committer, committables in self._staged():
                committer.commit(committables, epoch + 1)
        self._hand_over(tdds[next(iter(tdds))].next_state_version, superseded)
        sources = [a for a in acks if a.job_vertex_id in self.enumerators]
        metrics = self.metrics.epoch([(a.job_vertex_id, a.subtask_index, a.metrics) for a in acks],
                                     time.time() - started)
        summary = EpochSummary(
            epoch=epoch, processing_time=tdds[next(iter(tdds))].processing_time,
            records_in=sum(a.records_in for a in sources),
            records_out=sum(a.records_written for a in acks),
            watermark=self.watermark,
            duration_ms=(time.time() - started) * 1000,
            late_records_dropped=sum(a.late_records_dropped for a in acks),
            state_bytes_written=sum(f.size for f in state_files),
            local_stores=sum(a.store_hits + a.store_misses for a in acks),
            local_store_hits=sum(a.store_hits for a in acks),
            metrics=metrics, started_at=started)
        if completion is not None:
            self.in_flight = _InFlightCheckpoint(summary, checkpoint_id, time.time(), completion)
        return summary, end_of_input

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
        from runtime.checkpoint.restore import assign_state
        parallelism = {n.operator_id: v.parallelism for v in self.job_graph.vertices for n in v.operators}
        self.restored = assign_state(self.states.files(), parallelism, self.job_graph)
        self.state_version = version
        for path in superseded:     # uncommitted snapshot files no chain reads any more
            remove(path)

    def _committers(self, result: JobExecutionResult) -> dict:
        """A committer per sink, for this run; without checkpoints their transactions are the run's."""
        per_run = "" if self.coordinator.enabled else f"-{self.run_id}"
        return {n.id: committer_class(n.operator.sink)(n.operator.sink, CommitterContext(
                    self.job_graph.job_name, n.id, n.operator_id, sink_app_id(self.job_graph, n) + per_run, result))
                for n in sink_nodes(self.job_graph)}

    def _staged(self) -> list[tuple]:
        """(committer, committables staged since the last commit) of each sink that commits with
        checkpoints (Delta sinks: their staged files), taken out of the pending ones."""
        return [(c, self.pending.pop(node_id, [])) for node_id, c in self.committers.items() if c.at_checkpoint]


def sink_nodes(job_graph: JobGraph) -> list:
    return [n for v in job_graph.vertices for n in v.operators if n.kind == "sink"]


def sink_app_id(job_graph: JobGraph, node) -> str:
    """The id of a sink's transactions: its commits carry it, which makes them exactly once."""
    return f"sluice-{slug(job_graph.job_name)}-{node.operator_id}"


def _failure_text(error: BaseException) -> str:
    """A failure as the history keeps it: a job's failure as it says itself (its cause first), any
    other error with its type."""
    return str(error) if isinstance(error, JobExecutionException) else f"{type(error).__name__}: {error}"


def check_sink_locations(job_graph: JobGraph) -> None:
    """Every sink's table or base folder in an object store is probed as the warehouse is (a local
    one costs nothing): a missing bucket, refused credentials or an unreachable endpoint fail
    before the first epoch, naming the sink, the URI and the setting to fix."""
    for node in sink_nodes(job_graph):
        where = committer_class(node.operator.sink).output_location(node.operator.sink)
        if where is None:
            continue
        try:
            check_writable(*where)
        except StorageException as e:
            raise StorageException(f"the sink '{node.operator_name}' cannot write its output: {e}") from None


def committed_sinks(job_graph: JobGraph) -> list[str]:
    """Where the job's sinks already hold output it committed (a Delta table holding its app
    transaction), as each sink's committer tells."""
    found = (committer_class(n.operator.sink).committed_output(n.operator.sink, sink_app_id(job_graph, n))
             for n in sink_nodes(job_graph))
    return [where for where in found if where is not None]


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
