"""State that stays with its task (issues 15 and 35): a subtask's RocksDB store stays on the
executor's disk between epochs, its heap in its worker's memory, and either is used as it is
when it is at the version the epoch expects; checkpoints write only what changed (incremental), list the whole
chain, and restore, rescale and ``sluice state`` see the full state. Answers are counted here
from the input, not taken from the engine."""
import logging
from collections import Counter
from types import SimpleNamespace

import pytest

from runtime.checkpoint.savepoint import read_state
from runtime.checkpoint.storage import CheckpointStorage
from runtime.common import Types, WatermarkStrategy
from runtime.datastream import KeyedProcessFunction, MapFunction
from runtime.datastream.state import ValueStateDescriptor
from runtime.state.backend import HEAP_COMPACT_AFTER, STATE_BACKEND
from runtime.state.key_groups import KeyGroupRange
from runtime_env import job_env

WORDS = [f"w{(i * 7) % 11}" for i in range(120)]


class RunningCount(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(None if n == 5 else n)       # a deletion in some increment
        yield value, n


@pytest.mark.parametrize("backend", ["rocksdb", "hashmap", "hashmap-compact"])
def test_state_stays_with_its_task_and_checkpoints_hold_only_changes(spark, tmp_path, backend):
    """hashmap-compact: the heap's maps pack their entries into columns after 2 (runtime.state.
    state_map), as a large state's do after 262,144: kept so between epochs, read, changed and
    deleted there, snapshotted whole from the columns."""
    env = job_env(tmp_path, 2, epoch__max_records_per_split=10)
    conf = env.get_configuration()
    conf.set_string(STATE_BACKEND, backend.split("-")[0])
    if backend == "hashmap-compact":
        conf.set_string(HEAP_COMPACT_AFTER, "2")
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    counted = (env.from_collection(WORDS, type_info=Types.STRING()).key_by(lambda w: w)
               .process(RunningCount(), Types.TUPLE([Types.STRING(), Types.LONG()])).uid("counts"))
    got = counted.execute_and_collect("local-state")
    # A count of 5 is deleted (state cleared), so the next record of the word counts 1 again.
    want = []
    seen = Counter()
    for w in WORDS:
        seen[w] = 1 if seen[w] == 5 else seen[w] + 1
        want.append((w, seen[w]))
    assert sorted(got) == sorted(want)
    storage = CheckpointStorage(str(tmp_path / "warehouse" / "local-state"))
    records = storage.checkpoints.completed()
    assert len(records) >= 3
    state = {r["key"]: r["value"] for r in read_state(storage, "counts") if r["kind"] == "keyed"}
    assert state == {w: n for w, n in seen.items() if n != 5}
    # Every 11 records each word is seen once, so after 10 of them every count was cleared:
    # the state of the checkpoint after record 110 is empty, and the chain starts again.
    chains = [next(op["files"] for op in r.operators if op["uid"] == "counts") for r in records]
    with_increments = [c for c in chains if any(f["increment"] for f in c)]
    assert with_increments
    for chain in with_increments:
        assert chain[0]["increment"] is False       # a full snapshot, then increments
        assert len({f["path"].split("/")[0] for f in chain}) > 1    # partitions of earlier checkpoints
    # Each checkpoint's whole state, composed from its chain, is the state after its epoch.
    for record in records:
        upto = WORDS[:10 * (record.epoch + 1)]
        state = {r["key"]: r["value"] for r in read_state(storage, "counts", str(record.checkpoint_id))
                 if r["kind"] == "keyed"}
        assert state == {w: n % 5 for w, n in Counter(upto).items() if n % 5}


@pytest.mark.parametrize("backend", ["rocksdb", "hashmap", None])
def test_a_subtasks_state_is_used_again_in_the_next_epoch(spark, tmp_path, backend):
    # A RocksDB store stays open, a heap (the default) stays in its worker's memory.
    env = job_env(tmp_path, 2, epoch__max_records_per_split=10)
    if backend:
        env.get_configuration().set_string(STATE_BACKEND, backend)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    (env.from_collection(WORDS[:40], type_info=Types.STRING()).key_by(lambda w: w)
     .process(RunningCount(), Types.TUPLE([Types.STRING(), Types.LONG()])).uid("counts").print())
    result = env.execute("stores")
    epochs = result.epochs
    assert len(epochs) >= 4
    assert epochs[0].local_stores == 2 and epochs[0].local_store_hits == 0      # built in epoch 0
    assert all(e.local_stores == 2 and e.local_store_hits == 2 for e in epochs[1:])
    assert "local state 2/2" in epochs[1].progress_line("stores")


class _SourceSlot(MapFunction):
    def open(self, runtime_context):
        import os
        self.where = (runtime_context.get_index_of_this_subtask(), os.getpid())

    def map(self, value):
        return value, self.where


class _KeyedSlot(KeyedProcessFunction):
    def open(self, runtime_context):
        import os
        self.where = (runtime_context.get_index_of_this_subtask(), os.getpid())
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        yield value[1], self.where


def test_a_pipeline_runs_each_slots_subtasks_in_one_python_worker(spark, tmp_path):
    """Flink's slot sharing (epoch_job.py): in a job that is one pipeline, slot i's source subtask
    and keyed subtask run in the same Python worker every epoch, where the keyed one's state
    stays: as many workers as slots (test_a_subtasks_state_is_used_again: the state kept)."""
    from runtime.datastream.connectors import NumberSequenceSource
    env = job_env(tmp_path, 2, epoch__max_records_per_split=10)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    numbers = env.from_source(NumberSequenceSource(1, 80), WatermarkStrategy.no_watermarks(), "numbers")
    pairs = list(numbers.map(_SourceSlot()).key_by(lambda v: v[0] % 7)
                 .process(_KeyedSlot()).uid("counts").execute_and_collect("slots"))
    assert len(pairs) == 80
    workers = {}        # slot -> the pids its source and keyed subtasks ran in, over 4 epochs
    for source, keyed in pairs:
        workers.setdefault(source[0], set()).add(source[1])
        workers.setdefault(keyed[0], set()).add(keyed[1])
    assert sorted(workers) == [0, 1] and all(len(pids) == 1 for pids in workers.values()), workers
    assert len(set.union(*workers.values())) == 2           # a worker per slot, both stages in it


def test_only_a_pipeline_with_local_stores_within_the_slots_shares_them():
    """A stateless pipeline, or a vectorised window (its panes restored every epoch), keeps Spark's
    shared pool (one Python daemon, not one per slot); a keyed pipeline with more subtasks than
    slots has its keyed vertex's own pools, and the session starts its workers where its job runs."""
    from runtime.common import Time
    from runtime.datastream import StreamExecutionEnvironment, TumblingEventTimeWindows
    from runtime.execution.epoch_job import shares_slots
    from runtime.graph.job_graph import create_job_graph

    def graph(build, parallelism=2):
        env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(parallelism)
        build(env.from_collection([(1, 2)]))
        return create_job_graph(env.get_stream_graph())
    keyed_sum = graph(lambda s: s.key_by(lambda v: v[0]).sum(1).print())
    assert shares_slots(keyed_sum, 2) and not shares_slots(keyed_sum, 1)
    assert not shares_slots(graph(lambda s: s.key_by(lambda v: v[0]).sum(1).print(), 3), 2)
    assert not shares_slots(graph(lambda s: s.map(lambda v: v).print()), 2)
    windowed = graph(lambda s: s.key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(Time.seconds(5))).sum(1)
                     .print())
    assert windowed.is_one_pipeline() and not shares_slots(windowed, 2)


def test_a_damaged_local_store_is_rebuilt_not_trusted(tmp_path, caplog):
    from runtime.task.task_state_manager import create_keyed_state_backend
    node = SimpleNamespace(operator_name="Counts", operator_id="op1")
    ctx = SimpleNamespace(state_backend="rocksdb", state_dir=str(tmp_path), key_group_range=KeyGroupRange(0, 127),
                          max_parallelism=128, subtask_label="(1/1)")
    backend = create_keyed_state_backend(node, ctx, clock=lambda: 0)
    backend.set_current_key("a")
    backend.get_partitioned_state(ValueStateDescriptor("count", Types.LONG())).update(3)
    backend.version = "v1"
    backend.dispose()
    for f in (tmp_path / "op1").iterdir():
        if f.name.startswith("CURRENT") or f.name.startswith("MANIFEST"):
            f.write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING):
        backend = create_keyed_state_backend(node, ctx, clock=lambda: 0)
    try:
        assert backend.version is None         # not at any version: the task rebuilds it
        assert "rebuilding it from the checkpoint" in caplog.text and str(tmp_path / "op1") in caplog.text
    finally:
        backend.dispose()


def test_a_reused_python_worker_leaves_the_collector_little_to_scan(spark, tmp_path):
    """PySpark runs a full gc.collect() in a reused worker after every task, before it reads
    the next one (between an epoch's two stages). The worker's long-lived objects (modules, the
    job graph) are frozen out of it after a run's first task, so it scans only what later tasks
    left, not the 60,000 objects of the imports."""
    env = job_env(tmp_path, 2, epoch__max_records_per_split=10)
    (env.from_collection(WORDS, type_info=Types.STRING()).key_by(lambda w: w)
     .process(RunningCount(), Types.TUPLE([Types.STRING(), Types.LONG()])).uid("counts")
     .execute_and_collect("settled-workers"))

    def collectable(_, rows):
        import gc
        import os
        return [(os.getpid(), gc.get_freeze_count(), len(gc.get_objects()))]
    # The job ran in the slots' worker pools (one pipeline: epoch_job.py): ask their workers.
    from runtime.execution.python_rdds import SLOT_POOLS, PythonRDDs
    py = PythonRDDs(spark.sparkContext)
    workers = py.collect([py.source(2, pinned=2, pool_group=SLOT_POOLS).then(collectable)])
    ran_tasks = [w for w in workers if w[1] > 0]
    assert ran_tasks, workers
    assert all(objects < 15_000 for _, _, objects in ran_tasks), workers


def test_a_worker_keeps_no_garbage_of_earlier_runs_frozen(spark):
    """Cycles that became garbage after a run's settling (an evicted job graph, a first task's
    closure) are collected within the next few runs' settling of the worker (as many as it keeps
    job graphs of)."""
    from runtime.execution import epoch_job

    def settle_twice(_):
        import gc
        import weakref

        class Node:
            pass
        first = Node()
        first.me = first        # a cycle: only the collector frees it
        alive = weakref.ref(first)
        epoch_job._settle_worker_heap("run-a-of-this-test")
        del first               # garbage now, but frozen
        freed = []
        for run in range(epoch_job._KEPT_JOB_GRAPHS):
            epoch_job._settle_worker_heap(f"run-{run}-of-this-test")
            freed.append(alive() is None)
        return [freed[-1] and gc.get_freeze_count() > 0]
    assert spark.sparkContext.parallelize([0], 1).mapPartitions(settle_twice).collect() == [True]
