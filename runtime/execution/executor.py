"""Running a job: compile, allocate slots, then epochs, each one Spark job.

Per epoch the driver plans every source split's read and the processing time, writes that
plan first (so a replay reads the same input at the same time), runs one Spark job (a
stage per JobVertex, ``parallelism`` tasks, keyed edges shuffled so that partition i is
subtask i), and gathers the tasks' acknowledgements: metrics, printed lines, collected
records, state snapshot handles and the sources' new positions.
"""
from __future__ import annotations

import os
import pickle
import re
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Optional

from runtime.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from runtime.connectors import create_enumerator
from runtime.connectors.base import EnumeratorContext
from runtime.execution.options import ExecutionOptions
from runtime.graph.execution_graph import ExecutionGraph, build_execution_graph
from runtime.graph.execution_state import ExecutionState
from runtime.graph.job_graph import JobGraph, create_job_graph
from runtime.graph.stream_graph import StreamGraph
from runtime.scheduler.slots import SlotPlan, compute_slot_plan, slots_required_per_group
from runtime.task.stream_task import ACK, TaskDeploymentDescriptor


class _AckAccumulatorParam:
    """Collects the tasks' pickled acknowledgements on the driver."""

    def zero(self, value):
        return []

    def addInPlace(self, a, b):
        a.extend(b)
        return a


class JobExecutionException(RuntimeError):
    """The job failed; the message names the operator, subtask and record when user code failed."""


@dataclass
class EpochSummary:
    epoch: int
    processing_time: int
    records_in: int
    records_out: int
    watermark: int
    duration_ms: float
    late_records_dropped: int = 0

    def progress_line(self, job_name: str) -> str:
        wm = ("none" if self.watermark <= MIN_WATERMARK else
              "end of input" if self.watermark >= MAX_WATERMARK else str(self.watermark))
        return (f"[{job_name}] epoch {self.epoch}: {self.records_in} records in, {self.records_out} out, "
                f"watermark {wm}, {self.duration_ms:.0f} ms")


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
    sink_files: dict = field(default_factory=dict)      # sink node id -> staged files

    def get_job_id(self) -> str:
        return self.job_id

    def get_net_runtime(self) -> float:
        return self.net_runtime_ms

    def get_collected(self, sink_id) -> list:
        return self.collected.get(sink_id, [])


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-").lower() or "job"


# ---- inside the Spark tasks ------------------------------------------------------------

_JOB_GRAPHS: dict = {}


def _job_graph_in_worker(run_id: str, broadcast) -> JobGraph:
    # Python workers are reused across tasks and epochs: unpickle the job graph once each.
    graph = _JOB_GRAPHS.get(run_id)
    if graph is None:
        graph = _JOB_GRAPHS[run_id] = pickle.loads(broadcast.value)
    return graph


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
    return run


def _payload(row):
    return row[1]


def _on_edge(data_set: str):
    return lambda row: row[1][0] == data_set


def _channel(c):
    return c


# ---- the driver ------------------------------------------------------------------------

class JobRunner:
    def __init__(self, stream_graph: StreamGraph, options: ExecutionOptions, spark=None):
        from runtime.execution.spark import get_spark_session, task_managers
        self.stream_graph = stream_graph
        self.options = options
        self.job_graph = create_job_graph(stream_graph)
        self.execution_graph = build_execution_graph(self.job_graph)
        self.spark = spark or get_spark_session(options.master, f"sluice: {stream_graph.job_name}")
        self.sc = self.spark.sparkContext
        # Fails with Flink's NoResourceAvailableException when the cluster has too few slots.
        required = sum(slots_required_per_group(self.execution_graph).values())
        self.slot_plan = compute_slot_plan(self.execution_graph, task_managers(self.spark, required))
        self.run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
        # Per job: what a later run may need (source write-ahead logs); per run: the rest.
        self.job_dir = os.path.join(options.warehouse, slug(stream_graph.job_name))
        self.run_dir = os.path.join(self.job_dir, "runs", self.run_id)
        self.job_parameters = dict(stream_graph.settings.job_parameters)
        self.enumerators = {}
        for v in self.job_graph.vertices:
            if v.is_input_vertex:
                self.enumerators[v.id] = create_enumerator(v.head.operator.source, EnumeratorContext(
                    parallelism=v.parallelism, max_records_per_split=options.max_records_per_split,
                    epoch_interval_ms=options.epoch_interval_ms, work_dir=os.path.join(self.job_dir, "sources"),
                    job_name=stream_graph.job_name, operator_id=v.head.operator_id))
        self.snapshots: dict[tuple[int, int], str] = {}

    def _transition_all(self, state: ExecutionState, failure: Optional[str] = None) -> None:
        self.execution_graph = self.execution_graph.transition_all(state, time.time(), failure)

    def _processing_time(self, epoch: int) -> int:
        if self.options.clock_start_ms is not None:
            return self.options.clock_start_ms + epoch * self.options.clock_step_ms
        return int(time.time() * 1000)

    def run(self) -> JobExecutionResult:
        started = time.time()
        result = JobExecutionResult(self.job_graph.job_id, self.job_graph.job_name, self.run_id, 0.0, [],
                                    self.execution_graph, self.slot_plan)
        broadcast = self.sc.broadcast(_dumps(self.job_graph))
        self._transition_all(ExecutionState.SCHEDULED)
        self._transition_all(ExecutionState.DEPLOYING)
        try:
            epoch = 0
            while True:
                epoch_started = time.time()
                summary, end_of_input = self._run_epoch(epoch, broadcast, result)
                result.epochs.append(summary)
                if not self.options.quiet:
                    print(summary.progress_line(self.job_graph.job_name), file=sys.stderr, flush=True)
                epoch += 1
                if end_of_input or (self.options.max_epochs is not None and epoch >= self.options.max_epochs):
                    break
                pause = self.options.epoch_interval_ms / 1000 - (time.time() - epoch_started)
                if pause > 0:
                    time.sleep(pause)
            self._transition_all(ExecutionState.FINISHED if end_of_input else ExecutionState.CANCELING)
            if not end_of_input:
                self._transition_all(ExecutionState.CANCELED)
        except KeyboardInterrupt:
            # Stopped by the user: Flink's cancel, CANCELING then CANCELED.
            self._transition_all(ExecutionState.CANCELING)
            self._transition_all(ExecutionState.CANCELED)
            raise
        except Exception as e:
            self._transition_all(ExecutionState.FAILED, str(e))
            raise
        finally:
            broadcast.unpersist()
            for enumerator in self.enumerators.values():
                enumerator.close()
            result.execution_graph = self.execution_graph
            result.net_runtime_ms = (time.time() - started) * 1000
        return result

    def _plan(self, epoch: int) -> tuple[dict, bool]:
        processing_time = self._processing_time(epoch)
        source_plans = {vid: e.plan_epoch(epoch) for vid, e in self.enumerators.items()}
        end_of_input = all(e.input_ends_with_plan for e in self.enumerators.values())
        keep_state = not end_of_input
        tdds = {}
        for v in self.job_graph.vertices:
            for s in range(v.parallelism):
                tdds[(v.id, s)] = TaskDeploymentDescriptor(
                    job_vertex_id=v.id, subtask_index=s,
                    attempt_number=self.execution_graph.vertex(v.id, s).current_execution.attempt_number,
                    epoch=epoch, processing_time=processing_time, end_of_input=end_of_input,
                    splits=tuple(source_plans.get(v.id, {}).get(s, ())),
                    restored_state=self.snapshots.get((v.id, s)),
                    snapshot_path=(os.path.join(self.run_dir, "state", f"epoch-{epoch:06d}",
                                                f"{v.vertex_id}-{s}.pkl") if keep_state else None),
                    batch_size=self.options.batch_size)
        # The write-ahead record of the epoch: what it reads and at which processing time.
        plan_dir = os.path.join(self.run_dir, "epochs")
        os.makedirs(plan_dir, exist_ok=True)
        with open(os.path.join(plan_dir, f"epoch-{epoch:06d}.plan"), "wb") as f:
            pickle.dump({"epoch": epoch, "processing_time": processing_time, "end_of_input": end_of_input,
                         "splits": {vid: plan for vid, plan in source_plans.items()}}, f)
        return tdds, end_of_input

    def _run_epoch(self, epoch: int, broadcast, result: JobExecutionResult):
        from pyspark import StorageLevel
        started = time.time()
        tdds, end_of_input = self._plan(epoch)
        sc = self.sc
        # Acknowledgements of vertices that feed a shuffle travel in an accumulator, so their data
        # rows are never read twice; terminal vertices return theirs as the job's result.
        acks_accumulator = sc.accumulator([], _AckAccumulatorParam())
        rdds, terminal = {}, []
        for v in self.job_graph.vertices:
            outputs = self.job_graph.outputs_of(v.id)
            task = _task_function(self.run_id, broadcast, {s: tdds[(v.id, s)] for s in range(v.parallelism)},
                                  self.job_parameters, acks_accumulator if outputs else None)
            if v.is_input_vertex:
                rdd = sc.parallelize(range(v.parallelism), v.parallelism).mapPartitionsWithIndex(task)
            else:
                parts = [rdds[je.source_vertex].filter(_on_edge(je.data_set))
                         for je in self.job_graph.inputs_of(v.id)]
                inputs = parts[0] if len(parts) == 1 else sc.union(parts)
                rdd = inputs.partitionBy(v.parallelism, _channel).mapPartitionsWithIndex(task)
            if len(outputs) > 1:
                # Several consumers: without caching each shuffle would run the vertex again.
                rdd = rdd.persist(StorageLevel.MEMORY_AND_DISK)
            if not outputs:
                terminal.append(rdd)
            rdds[v.id] = rdd
        sc.setJobGroup(f"sluice-{self.run_id}-{epoch}", f"{self.job_graph.job_name} epoch {epoch}")
        try:
            collected = (terminal[0] if len(terminal) == 1 else sc.union(terminal)).map(_payload).collect()
            if os.environ.get("SLUICE_DEBUG"):
                print(f"  collect done at +{(time.time() - started) * 1000:.0f} ms", file=sys.stderr)
        finally:
            for r in rdds.values():
                if r.is_cached:
                    r.unpersist(blocking=False)
        # A recomputed task (a retry, a cache miss) acknowledges twice, with the same content.
        raw = {}
        for payload in list(acks_accumulator.value) + collected:
            ack = pickle.loads(payload)
            raw[(ack.job_vertex_id, ack.subtask_index)] = ack
        acks = [raw[k] for k in sorted(raw)]
        if os.environ.get("SLUICE_DEBUG"):
            for a in acks:
                print(f"  task {a.job_vertex_id}/{a.subtask_index}: +{(a.started_at - started) * 1000:.0f} ms, "
                      f"{a.duration_ms:.0f} ms, {a.records_in} in", file=sys.stderr)
            print(f"  acks in driver at +{(time.time() - started) * 1000:.0f} ms", file=sys.stderr)
        failures = [a.failure for a in acks if a.failure]
        if failures:
            raise JobExecutionException(f"Job '{self.job_graph.job_name}' failed in epoch {epoch}: {failures[0]}")
        if epoch == 0:
            self._transition_all(ExecutionState.RUNNING)
        order = {v.id: i for i, v in enumerate(self.job_graph.vertices)}
        for a in sorted(acks, key=lambda a: (order[a.job_vertex_id], a.subtask_index)):
            for line in a.print_lines:
                print(line, flush=False)
            result.printed.extend(a.print_lines)
            for sink_id, records in a.collected.items():
                result.collected.setdefault(sink_id, []).extend(records)
            for node_id, files in a.sink_files.items():
                result.sink_files.setdefault(node_id, []).extend(files)
            if a.snapshot_path:
                self.snapshots[(a.job_vertex_id, a.subtask_index)] = a.snapshot_path
        sys.stdout.flush()
        # Delta sinks: this epoch's staged files in one transaction; a replayed commit is a no-op.
        for node in (n for v in self.job_graph.vertices for n in v.operators):
            if node.kind == "sink" and getattr(node.operator, "kind", None) == "delta":
                from runtime.connectors.delta import commit_sink_files
                commit_sink_files(node.operator.sink.table_path,
                                  [h for a in acks for h in a.sink_files.get(node.id, ())], None,
                                  # Per run until checkpoint ids number commits across runs.
                                  f"sluice-{self.job_graph.job_name}-{node.operator_id}-{self.run_id}",
                                  epoch + 1)
        for vid, enumerator in self.enumerators.items():
            states = {}
            for a in acks:
                if a.job_vertex_id == vid:
                    states.update(a.split_states)
            enumerator.complete_epoch(states)
        sources = [a for a in acks if a.job_vertex_id in self.enumerators]
        sinks = [a for a in acks if not self.job_graph.outputs_of(a.job_vertex_id)]
        summary = EpochSummary(
            epoch=epoch, processing_time=tdds[next(iter(tdds))].processing_time,
            records_in=sum(a.records_in for a in sources),
            records_out=sum(a.records_written for a in acks),
            watermark=min((a.watermark for a in sinks), default=MIN_WATERMARK),
            duration_ms=(time.time() - started) * 1000,
            late_records_dropped=sum(a.late_records_dropped for a in acks))
        return summary, end_of_input


def _user_modules() -> list:
    """Modules of the job's own code (job scripts, test modules): not importable on executors."""
    import sysconfig
    runtime_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    installed = {os.path.realpath(p) for p in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["stdlib"],
                                               sysconfig.get_paths()["platlib"], sys.prefix, sys.base_prefix)}
    found = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not path or name == "__main__" or name.startswith("runtime"):
            continue
        real = os.path.realpath(path)
        if real.startswith(runtime_dir + os.sep) or any(real.startswith(p + os.sep) for p in installed):
            continue
        found.append(module)
    return found


def _dumps(obj) -> bytes:
    # Ship the job's own classes and functions by value, as PyFlink ships the job's files.
    from pyspark import cloudpickle
    registered = []
    for module in _user_modules():
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


def execute_stream_graph(stream_graph: StreamGraph, options: Optional[ExecutionOptions] = None) -> JobExecutionResult:
    """Run a compiled job on Spark (what ``env.execute()`` calls)."""
    options = options or ExecutionOptions.from_configuration(dict(stream_graph.settings.configuration))
    return JobRunner(stream_graph, options).run()
