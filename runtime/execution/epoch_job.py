"""An epoch's Spark job: built from the job graph and the epoch's deployment descriptors, run,
and its tasks' pickled acknowledgements gathered.

Its own module because it is the one place that knows Spark's side of an epoch: a stage per
JobVertex, ``parallelism`` tasks, keyed edges shuffled so that partition i is subtask i, the
functions the Spark tasks run (which unpickle the job graph once per worker), and how the
acknowledgements come back. What the acknowledgements mean is the coordinators' business.
"""
from __future__ import annotations

import gc
import pickle

from pyspark import accumulators

from runtime.common.memory import return_freed_memory
from runtime.execution.locality import StateLocality
from runtime.execution.python_rdds import SLOT_POOLS, PythonRDDs
from runtime.graph.job_graph import JobGraph
from runtime.task.operator_factory import snapshots_incrementally
from runtime.task.stream_task import ACK


class _AckAccumulatorParam:
    """Collects the tasks' pickled acknowledgements on the driver."""

    def zero(self, value):
        return []

    def addInPlace(self, a, b):
        a.extend(b)
        return a


# ---- inside the Spark tasks ------------------------------------------------------------

_JOB_GRAPHS: dict = {}
_KEPT_JOB_GRAPHS = 4        # runs whose job graphs a worker keeps (the latest ones)
_SETTLED_RUNS: set = set()
_settled_since_unfreeze = 0     # runs settled since the last full collection


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
    reference counting; cycles among them wait for a full collection, which unfreezes and collects
    everything first (40-60 ms, in the task's time): every ``_KEPT_JOB_GRAPHS`` runs, so a worker
    serving many runs keeps the cyclic garbage of a few at most, and its next run's first stage
    does not wait for it. A worker's first run has only the imports frozen before it (the
    session's warm-up, spark.py), which are not garbage: it collects what came since."""
    global _settled_since_unfreeze
    if run_id not in _SETTLED_RUNS:
        _SETTLED_RUNS.add(run_id)
        if _settled_since_unfreeze >= _KEPT_JOB_GRAPHS:
            gc.unfreeze()
            _settled_since_unfreeze = 0
        _settled_since_unfreeze += 1
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
        # What the task freed (its input's and output's buffers, a settled state's old pages) goes
        # back to the system: the worker's peak is then its largest task's, not their sum.
        return_freed_memory()
    return run


def _payloads(index, rows):
    return (row[1] for row in rows)


class _OnEdge:
    """The rows of a vertex's output that travel on one edge (its data set)."""

    def __init__(self, data_set: str) -> None:
        self.data_set = data_set

    def __call__(self, index, rows):
        return (row for row in rows if row[1][0] == self.data_set)


# ---- on the driver -----------------------------------------------------------------------

def local_store_vertices(job_graph: JobGraph) -> frozenset:
    """The vertices whose subtasks keep their keyed state with them, each in a Python worker of
    its own, which keeps it (a heap in memory, a RocksDB store open) between epochs. A vertex whose
    state is restored every epoch (a vectorised window's panes) has no pools of its own: they
    would only cost workers."""
    return frozenset(v.id for v in job_graph.vertices
                     if not v.is_input_vertex and v.is_keyed and any(snapshots_incrementally(n) for n in v.operators))


def shares_slots(job_graph: JobGraph, slots: int) -> bool:
    """Flink's slot sharing: slot i runs subtask i of every vertex, here in the Python worker pool
    of slot i (started with the session, spark.py). A job that is one pipeline with no more
    subtasks than slots runs its stages one after another, so each pool keeps one worker, and a
    keyed subtask's state stays in it beside the stateless subtasks of its slot: two Python workers
    on two cores, not four (bench/README.md, issue 35). Only a job with local stores gains (the
    others keep Spark's shared pool: one Python daemon, not one per slot). Elsewhere two stages
    may run at once: a keyed vertex has pools of its own (by its place among the job's keyed
    vertices, so the next job of the session uses them again) and the other vertices run in
    Spark's shared pool, so that the slots' pools keep one worker each."""
    return (job_graph.is_one_pipeline() and bool(local_store_vertices(job_graph))
            and max(v.parallelism for v in job_graph.vertices) <= slots)


class EpochJob:
    """Builds and runs each epoch's Spark job for one job run."""

    def __init__(self, sc, job_graph: JobGraph, run_id: str, job_parameters: dict):
        self.sc = sc
        self.job_graph = job_graph
        self.run_id = run_id
        self.job_parameters = job_parameters
        self.local_stores = local_store_vertices(job_graph)
        self.slots = sc.defaultParallelism
        self.shares_slots = shares_slots(job_graph, self.slots)
        keyed = [v.id for v in job_graph.vertices if v.id in self.local_stores]
        self.pool_groups = {v: SLOT_POOLS if self.shares_slots else SLOT_POOLS + 1 + g for g, v in enumerate(keyed)}
        self.rdds = PythonRDDs(sc)
        # Each Spark stage named by the vertices it runs (its call site), for the epoch's timings
        # (epoch_stats): a shuffle's map stage runs the vertices that feed it, the result stage the
        # terminal ones.
        terminal = [v for v in job_graph.vertices if not job_graph.outputs_of(v.id)]
        feeds = {v.id: [job_graph.vertex(je.source_vertex) for je in job_graph.inputs_of(v.id)]
                 for v in job_graph.vertices if not v.is_input_vertex}
        self.stage_names = {vid: ", ".join(dict.fromkeys(u.name for u in us)) for vid, us in feeds.items()}
        self.result_stage = ", ".join(v.name for v in terminal)
        self.stage_vertices = {self.result_stage: tuple(v.id for v in terminal)}
        for vid, us in feeds.items():
            self.stage_vertices[self.stage_names[vid]] = tuple(u.id for u in us)
        # In local mode every task runs on the one executor: anchors would only cost py4j calls.
        self.locality = StateLocality(self.rdds, () if sc.master.startswith("local") else self.local_stores)

    def run(self, epoch: int, broadcast, tdds: dict) -> list:
        """Run the epoch's tasks (``tdds``: (vertex id, subtask) -> its deployment descriptor);
        returns their pickled acknowledgements, a recomputed task's more than once."""
        sc, py, job_graph = self.sc, self.rdds, self.job_graph
        # Acknowledgements of vertices that feed a shuffle travel in an accumulator, so their data
        # rows are never read twice; terminal vertices return theirs as the job's result.
        acks_accumulator = sc.accumulator([], _AckAccumulatorParam())
        stages, terminal, cached = {}, [], []
        for v in job_graph.vertices:
            outputs = job_graph.outputs_of(v.id)
            task = _task_function(self.run_id, broadcast, {s: tdds[(v.id, s)] for s in range(v.parallelism)},
                                  self.job_parameters, acks_accumulator if outputs else None)
            if v.is_input_vertex:
                stage = py.source(v.parallelism, *self._pools(v))
            else:
                parts = [stages[je.source_vertex].then(_OnEdge(je.data_set)) for je in job_graph.inputs_of(v.id)]
                sc._jsc.setCallSite(self.stage_names[v.id])
                shuffled = self.locality.anchored(v.id, v.parallelism, py.partition_by(parts, v.parallelism))
                stage = py.rows(shuffled, *self._pools(v))
            stage = stage.then(task)
            if len(outputs) > 1:
                # Several consumers: without caching each shuffle would run the vertex again.
                cached.append(py.persist(py.materialize(stage)))
                stage = py.rows(cached[-1], *self._pools(v))
            if not outputs:
                terminal.append(stage.then(_payloads))
            stages[v.id] = stage
        sc.setJobGroup(f"sluice-{self.run_id}-{epoch}", f"{job_graph.job_name} epoch {epoch}")
        sc._jsc.setCallSite(self.result_stage)
        try:
            collected = py.collect(terminal)
        finally:
            sc._jsc.setCallSite(None)
            for rdd in cached:
                rdd.unpersist(False)
        acks = list(acks_accumulator.value)
        # PySpark registers every accumulator, value included, for the driver's life: an epoch's
        # acknowledgements would stay in memory forever. Its tasks' updates are all merged once
        # its job returned.
        accumulators._accumulatorRegistry.pop(acks_accumulator.aid, None)
        return acks + collected

    def _pools(self, v) -> tuple[int, int]:
        """(pinned, pool group) of the vertex's stage (see __init__): (0, 0) for Spark's pool."""
        if v.id in self.pool_groups:
            return v.parallelism, self.pool_groups[v.id]
        return (v.parallelism, SLOT_POOLS) if self.shares_slots else (0, 0)

    def release(self) -> None:
        """The run ends: the local stores' anchors go."""
        self.locality.release()
