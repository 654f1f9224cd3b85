"""An epoch's RDDs as ``runtime.execution.python_rdds`` builds them: the rows PySpark's
``mapPartitionsWithIndex`` / ``partitionBy`` / ``union`` would give, with Python workers given
back to Spark's pool, in a few round trips to the JVM."""
import sys
import threading

import pytest
from pyspark import cloudpickle

from runtime.execution.python_rdds import SHUFFLE_BATCH, PythonRDDs

cloudpickle.register_pickle_by_value(sys.modules[__name__])     # the workers cannot import tests


def _numbers(count):
    def rows(index, _):
        import os
        for i in range(count):
            yield i % 3, (index, i, os.getpid())
    return rows


def _received(index, rows):
    return [(index, row) for row in rows]


def _two_stages(py, count=2 * SHUFFLE_BATCH + 5):
    shuffled = py.partition_by([py.source(2).then(_numbers(count))], 3)
    return py.collect([py.rows(shuffled).then(_received)])


def test_rows_reach_the_partition_of_their_channel_as_with_partition_by(spark):
    py = PythonRDDs(spark.sparkContext)
    count = 2 * SHUFFLE_BATCH + 5       # more than one batch per channel
    got = _two_stages(py, count)
    assert sorted((p, c, (src, i)) for p, (c, (src, i, _)) in got) == sorted(
        (i % 3, i % 3, (src, i)) for src in range(2) for i in range(count))
    # The same rows through PySpark's own API.
    sc = spark.sparkContext
    from runtime.execution.python_rdds import channel
    expected = (sc.parallelize(range(2), 2).mapPartitionsWithIndex(lambda s, _: _numbers(count)(s, None))
                .partitionBy(3, channel).mapPartitionsWithIndex(_received).collect())
    assert sorted((p, c, v[:2]) for p, (c, v) in got) == sorted((p, c, v[:2]) for p, (c, v) in expected)


def test_several_inputs_are_shuffled_together_and_several_outputs_cached(spark):
    py = PythonRDDs(spark.sparkContext)
    both = py.partition_by([py.source(2).then(_numbers(10)), py.source(1).then(_numbers(4))], 2)
    cached = py.persist(py.materialize(py.rows(both).then(_received)))
    try:
        once = py.collect([py.rows(cached)])
        twice = py.collect([py.rows(cached), py.rows(cached)])
    finally:
        cached.unpersist(False)
    assert len(once) == 2 * 10 + 4
    assert all(p == c % 2 for p, (c, _) in once)
    assert sorted(twice) == sorted(once + once)


def _worker(index, rows):
    import os
    return [(index, os.getpid(), sum(1 for _ in rows))]


def _to_one_channel(index, rows):
    return [(0, row) for row in _worker(index, rows)]


def _values(index, rows):
    return [value for _, value in rows]


@pytest.fixture
def fresh_pools(spark):
    """Worker pools of this test's own: Spark keeps a pool per environment, and the slot pools of
    the session's earlier jobs may still hold several idle workers (Spark stops them after a
    minute), any of which would take a task of slot i."""
    import uuid
    environment = spark.sparkContext.environment
    environment["SLUICE_TEST_POOLS"] = uuid.uuid4().hex
    yield spark
    del environment["SLUICE_TEST_POOLS"]


def test_a_pinned_stage_runs_each_partition_in_a_worker_of_its_own_every_time(fresh_pools):
    """Partition i of a pinned stage runs in the Python worker pool of slot i, so one worker
    sees partition i epoch after epoch (where PySpark gives a task the first idle worker), and
    its function is told its partition, also when it feeds a shuffle or is collected with
    another stage."""
    py = PythonRDDs(fresh_pools.sparkContext)
    rounds = []
    for _ in range(4):
        pinned = py.rows(py.partition_by([py.source(2).then(_numbers(30))], 3), pinned=3)
        again = py.partition_by([pinned.then(_to_one_channel)], 1)
        rows = py.collect([py.rows(again).then(_values), pinned.then(_worker)])
        assert sorted((i, n) for i, _, n in rows) == [(i, 20) for i in range(3) for _ in range(2)]
        workers = {i: {pid for j, pid, _ in rows if j == i} for i in range(3)}
        assert all(len(pids) == 1 for pids in workers.values()), workers     # both times in one worker
        rounds.append(workers)
    assert all(r == rounds[0] for r in rounds), rounds      # the same worker for a partition each time
    assert len(set.union(*rounds[0].values())) == 3         # and a worker of its own


def test_a_source_stage_gives_its_python_workers_back(spark):
    """A worker that leaves its (empty) input unread is not reused by Spark but replaced by a
    new process: then every stage of every epoch forked workers."""
    py = PythonRDDs(spark.sparkContext)
    pids = set()
    for _ in range(4):
        pids |= {pid for _, (_, (_, _, pid)) in _two_stages(py, 10)}
    assert len(pids) <= 4, f"{len(pids)} Python workers for 8 source tasks: workers were not reused"


def test_an_epoch_is_built_with_a_few_jvm_round_trips(spark, monkeypatch):
    from py4j import clientserver
    py = PythonRDDs(spark.sparkContext)
    py.materialize(py.rows(py.partition_by([py.source(2).then(_numbers(3))], 2)).then(_received))
    calls = []
    send = clientserver.ClientServerConnection.send_command
    me = threading.get_ident()

    def counted(self, command):
        if threading.get_ident() == me:
            calls.append(command.split("\n")[:3])
        return send(self, command)
    monkeypatch.setattr(clientserver.ClientServerConnection, "send_command", counted)
    py.materialize(py.rows(py.partition_by([py.source(2).then(_numbers(3))], 2)).then(_received))
    # Two functions and PythonRDDs, the pairwise RDD, its partitioning and values: PySpark's
    # API took 30-odd for the same.
    assert len(calls) <= 10, calls


@pytest.mark.parametrize("size", [0, 1])
def test_a_large_function_travels_as_a_broadcast(spark, size):
    """As PySpark does: a command over ``spark.broadcast.UDFCompressionThreshold`` goes as a broadcast."""
    py = PythonRDDs(spark.sparkContext)
    ballast = b"x" * (size * ((1 << 20) + 1))     # spark.broadcast.UDFCompressionThreshold: 1 MiB

    def rows(index, _):
        yield index, len(ballast)
    got = py.collect([py.source(2).then(rows)])
    assert sorted(got) == [(0, len(ballast)), (1, len(ballast))]


def test_a_module_the_program_ships_by_value_stays_registered_after_a_job(spark, tmp_path):
    """A job ships the program's own modules by value for its pickling and then stops: a module
    the program registered itself (this one, above) stays registered, as these tests need."""
    from runtime.common import Types
    from runtime_env import job_env
    env = job_env(tmp_path, 1)
    assert sorted(env.from_collection([3, 1, 2], type_info=Types.INT()).map(lambda x: x * 2).execute_and_collect("shipped")) \
        == [2, 4, 6]
    assert __name__ in cloudpickle.list_registry_pickle_by_value()
