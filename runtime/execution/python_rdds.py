"""An epoch's Spark RDDs of Python functions, built with a handful of py4j calls.

PySpark's RDD API builds each PythonRDD with about 17 round trips to the JVM (the environment
map, include list and broadcast list converted again for every function, classes looked up by
reflection, the broadcast threshold and barrier flag asked each time), and an epoch builds
several: 40-odd round trips of ~0.5 ms, a tenth of a small epoch. A ``PythonRDDs`` keeps these
Java objects for the job run that made it and makes the same RDDs as PySpark's
``mapPartitionsWithIndex`` / ``partitionBy`` / ``union`` / ``persist`` / ``collect`` (a
``SimplePythonFunction`` in a ``PythonRDD``; a ``PairwiseRDD`` partitioned by a
``PythonPartitioner``) with one or two calls each.

It rests on what PySpark's own ``RDD._jrdd`` and ``_prepare_for_python_RDD`` use
(``sc._jvm``, ``sc._javaAccumulator``, ``sc._pickled_broadcast_vars``, ``sc._python_includes``),
held to the pinned pyspark by the test suite, which runs every job through it.

A ``Stage`` is a Python function over a JVM RDD's rows not built yet, so that functions chain in
one Python worker pass (as PySpark pipelines them); ``materialize`` makes it a JVM RDD.

A *pinned* stage runs each of its partitions in a Python worker pool of its own: Spark keeps a
pool of workers per environment, so partition i's function carries ``SLUICE_SLOT=g-i`` in its
environment (g: the stage's pool group: ``SLOT_POOLS`` for the slots' pools, which the session
starts, or one of a keyed vertex's own, so that two stages running at once never share a pool
and each pool needs one worker; execution/epoch_job.py chooses), over partition i of the input
alone (a ``PartitionPruningRDD``), and the stage is their union. A reused worker then sees the
same subtask every epoch, and keeps its local state store open between tasks
(runtime.state.kept_stores); PySpark otherwise gives a task the first idle worker.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from pyspark.serializers import (AutoBatchedSerializer, BatchedSerializer, CloudPickleSerializer,
                                 CPickleSerializer, NoOpSerializer, pack_long)

# Rows travel as pickled lists: written in batches sized by PySpark's AutoBatchedSerializer,
# read (from a PythonRDD or a shuffle's batches) one list at a time.
_ROWS_OUT = AutoBatchedSerializer(CPickleSerializer())
_ROWS_IN = BatchedSerializer(CPickleSerializer())
SHUFFLE_BATCH = 1024        # rows per pickled batch a shuffle writes (PySpark's default batch)
SLOT = "SLUICE_SLOT"        # a pinned stage's pool ("group-partition"), in its Python workers' environment
SLOT_POOLS = 0              # the pool group of the slots' pools (slot i: pool "0-i"), started with the session


def channel(c):
    """The partition function of every shuffle: rows are keyed by their channel, the target
    subtask (``_ShuffleKeys`` applies it inline). Its id names the shuffle's PythonPartitioner,
    which equals another only for the same id, and ``union`` needs equal partitioners (see
    execution/locality.py): one function per process."""
    return c


class _Chain:
    """``second`` over the rows ``first`` yields, in the same pass (PySpark's pipelining)."""

    def __init__(self, first: Callable, second: Callable) -> None:
        self.first, self.second = first, second

    def __call__(self, index: int, rows: Iterator):
        return self.second(index, self.first(index, rows))


class _Pinned:
    """``func`` of a pinned stage: partition i runs over an RDD of that partition alone (index
    0), in the worker pool whose environment says ``SLUICE_SLOT=g-i``."""

    def __init__(self, func: Callable) -> None:
        self.func = func

    def __call__(self, index: int, rows: Iterator):
        return self.func(int(os.environ[SLOT].rsplit("-", 1)[1]), rows)


def read_to_end(index: int, rows: Iterator) -> Iterator:
    """Nothing, once ``rows`` are read (a source stage's empty input, a stage whose rows are not
    needed): a Python worker that leaves input unread is not given back to Spark's pool but
    replaced."""
    for _ in rows:
        pass
    return iter(())


class _ShuffleKeys:
    """Rows ``(channel, value)`` as a PairwiseRDD reads them: the target partition packed as a
    long, then a pickled batch of that partition's rows (PySpark's ``add_shuffle_key``)."""

    def __init__(self, parallelism: int) -> None:
        self.parallelism = parallelism

    def __call__(self, index: int, rows: Iterator) -> Iterator[bytes]:
        dumps = CPickleSerializer().dumps
        buckets: dict = {}
        for row in rows:
            p = row[0] % self.parallelism
            bucket = buckets.setdefault(p, [])
            bucket.append(row)
            if len(bucket) >= SHUFFLE_BATCH:
                yield pack_long(p)
                yield dumps(bucket)
                buckets[p] = []
        for p, bucket in buckets.items():
            if bucket:
                yield pack_long(p)
                yield dumps(bucket)


@dataclass(frozen=True)
class Stage:
    """``func(partition index, rows)`` over the rows of the JVM RDD ``parent`` (read with
    ``deserializer``), not built yet."""
    parent: object
    func: Callable
    deserializer: object = _ROWS_IN
    pinned: int = 0         # > 0: the parent's partitions, each run in a worker pool of its own
    pool_group: int = 0     # which pools (a pinned stage's partition i runs in pool (group, i))

    def then(self, func: Callable) -> "Stage":
        return Stage(self.parent, _Chain(self.func, func), self.deserializer, self.pinned, self.pool_group)


class _JavaSide:
    """What every run of a SparkContext builds its RDDs with: the Java classes, the Python workers'
    environment and includes, the broadcast threshold, the empty RDDs of source stages, the
    shuffles' partitioners and the pinned stages' pools; made once (40-odd py4j calls, 20-90 ms)
    and only read afterwards."""

    def __init__(self, sc, key: tuple) -> None:
        self.sc, self.key = sc, key
        jvm = self.jvm = sc._jvm
        self.python_rdd = jvm.org.apache.spark.api.python.PythonRDD
        self.python_function = jvm.org.apache.spark.api.python.SimplePythonFunction
        self.pairwise = jvm.org.apache.spark.api.python.PairwiseRDD
        self.partition_pruning = jvm.org.apache.spark.rdd.PartitionPruningRDD
        self.value_of_pair = self.python_rdd.valueOfPair
        self.env = jvm.java.util.HashMap()
        for k, v in sc.environment.items():
            self.env.put(k, v)
        self.includes = jvm.java.util.ArrayList()
        for path in sc._python_includes:
            self.includes.add(path)
        self.threshold = jvm.org.apache.spark.api.python.PythonUtils.getBroadcastThreshold(sc._jsc)
        self.partitioners: dict = {}    # parallelism -> PythonPartitioner (setdefault: any thread)
        self.empty: dict = {}           # parallelism -> an empty RDD of that many partitions
        self.slots: dict = {}           # (pool group, partition index) -> (its environment, the set of it alone)


_JAVA_SIDE: Optional[_JavaSide] = None     # of the one live SparkContext (a stopped one's objects go)


def _java_side(sc) -> _JavaSide:
    """The context's Java side, made again for another context, or when its workers' environment
    or includes changed (an object store's variables, a job's add_python_file)."""
    global _JAVA_SIDE
    key = (tuple(sorted(sc.environment.items())), tuple(sc._python_includes))
    if _JAVA_SIDE is None or _JAVA_SIDE.sc is not sc or _JAVA_SIDE.key != key:
        _JAVA_SIDE = _JavaSide(sc, key)
    return _JAVA_SIDE


def prepare(sc) -> None:
    """Make the context's Java side now (as its session starts)."""
    _java_side(sc)


class PythonRDDs:
    """Builds one SparkContext's RDDs of Python functions (not thread-safe: one builder per
    thread that builds)."""

    def __init__(self, sc) -> None:
        self.sc = sc
        self._java = _java_side(sc)
        self._broadcast_lists: dict = {}
        self._pickler = CloudPickleSerializer()
        # spark.python.profile: the per-RDD profiles PySpark's show_profiles() prints.
        self._profiling = (sc.profiler_collector is not None
                           and sc.getConf().get("spark.python.profile", "false") == "true")

    def source(self, parallelism: int, pinned: int = 0, pool_group: int = 0) -> Stage:
        """A stage of ``parallelism`` partitions without input rows; ``pinned`` as for ``rows``."""
        empty = self._java.empty.get(parallelism)
        if empty is None:
            empty = self._java.empty.setdefault(parallelism, self.sc.parallelize([], parallelism)._jrdd.rdd())
        return Stage(empty, read_to_end, pinned=pinned, pool_group=pool_group)

    def rows(self, rdd, pinned: int = 0, pool_group: int = 0) -> Stage:
        """A stage over the rows of a JVM RDD made here (pickled batches); ``pinned``: its
        number of partitions, each to run in a Python worker pool of its own (of ``pool_group``)."""
        return Stage(rdd, _pass, pinned=pinned, pool_group=pool_group)

    def materialize(self, stage: Stage, serializer=_ROWS_OUT):
        """The stage as a JVM RDD (a PythonRDD, or for a pinned stage the union of one per
        partition) whose rows ``serializer`` writes."""
        profiler = self.sc.profiler_collector.new_profiler(self.sc) if self._profiling else None
        func = _Pinned(stage.func) if stage.pinned else stage.func
        command = self._command((func, profiler, stage.deserializer, serializer))
        if stage.pinned:
            rdd = self.union([self._slot_rdd(stage.parent, command, stage.pool_group, i)
                              for i in range(stage.pinned)])
        else:
            rdd = self._java.python_rdd(stage.parent, self._function(command, self._java.env), False, False)
        if profiler is not None:
            self.sc.profiler_collector.add_profiler(rdd.id(), profiler)
        return rdd

    def partition_by(self, stages: list, parallelism: int):
        """The rows ``(channel, value)`` of the stages shuffled into ``parallelism`` partitions,
        partition i holding channel i's rows (PySpark's ``partitionBy`` with ``channel``), in one
        shuffle."""
        keys = _ShuffleKeys(parallelism)
        keyed = self.union([self.materialize(s.then(keys), NoOpSerializer()) for s in stages])
        partitioner = self._java.partitioners.get(parallelism)
        if partitioner is None:
            partitioner = self._java.partitioners.setdefault(
                parallelism, self._java.jvm.org.apache.spark.api.python.PythonPartitioner(parallelism, id(channel)))
        pairs = self._java.pairwise(keyed).asJavaPairRDD().partitionBy(partitioner)
        return self._java.value_of_pair(pairs).rdd()

    def union(self, rdds: list):
        """One RDD of the rows of all (with equal partitioners, partition i of each together:
        Spark's PartitionerAwareUnionRDD)."""
        union = rdds[0]
        for rdd in rdds[1:]:
            union = union.union(rdd)
        return union

    def persist(self, rdd):
        rdd.persist(self._java.jvm.org.apache.spark.storage.StorageLevel.MEMORY_AND_DISK())
        return rdd

    def collect(self, stages: list) -> list:
        """The rows of the stages, in one Spark job. As PySpark's ``RDD.collect`` without its call
        site: the job's result stage keeps the name the caller set (``setCallSite``)."""
        from pyspark.util import _load_from_socket
        rdds = [self.materialize(s) for s in stages]
        with _load_from_socket(self.sc._jvm.PythonRDD.collectAndServe(self.union(rdds)), _ROWS_OUT) as rows:
            return list(rows)

    def _slot(self, group: int, index: int) -> tuple:
        slot = self._java.slots.get((group, index))
        if slot is None:
            env = self._java.jvm.java.util.HashMap(self._java.env)
            env.put(SLOT, f"{group}-{index}")
            only = self._java.jvm.java.util.HashSet()
            only.add(index)
            # A Scala Set is an Int => Boolean: the partition filter of a PartitionPruningRDD.
            converters = self._java.jvm.scala.jdk.javaapi.CollectionConverters
            slot = self._java.slots.setdefault((group, index), (env, converters.asScala(only)))
        return slot

    def _slot_rdd(self, parent, command: tuple, group: int, index: int):
        """The command over partition ``index`` of ``parent`` alone (a PartitionPruningRDD, which
        keeps the partition's preferred locations), in pool (``group``, ``index``)'s workers."""
        env, only = self._slot(group, index)
        return self._java.python_rdd(self._java.partition_pruning.create(parent, only), self._function(command, env),
                                False, False)

    def _command(self, command: tuple) -> tuple:
        """The pickled command and the Java list of the broadcasts it refers to."""
        sc = self.sc
        try:
            pickled = self._pickler.dumps(command)
            if len(pickled) > self._java.threshold:
                # As PySpark does: a large command travels as a broadcast (freed with the RDD).
                pickled = self._pickler.dumps(sc.broadcast(pickled))
            used = tuple(sc._pickled_broadcast_vars)    # the broadcasts the command refers to
        finally:
            sc._pickled_broadcast_vars.clear()          # a failed pickling leaves none behind
        key = tuple(id(b) for b in used)
        if key not in self._broadcast_lists:
            if len(self._broadcast_lists) > 64:         # a command sent as a broadcast: new each time
                self._broadcast_lists.clear()
            java_list = self._java.jvm.java.util.ArrayList()
            for b in used:
                java_list.add(b._jbroadcast)
            self._broadcast_lists[key] = (java_list, used)     # ``used`` keeps the ids unique
        return bytearray(pickled), self._broadcast_lists[key][0]

    def _function(self, command: tuple, env):
        pickled, broadcasts = command
        sc = self.sc
        return self._java.python_function(pickled, env, self._java.includes, sc.pythonExec, sc.pythonVer, broadcasts,
                                     sc._javaAccumulator)


def _pass(index: int, rows: Iterator) -> Iterator:
    return rows
