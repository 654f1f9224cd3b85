"""The task state manager (runtime.task.task_state_manager, Flink's TaskStateManager and
StreamTaskStateInitializer): the one place that creates keyed state backends, restores and
snapshots them and versions a subtask's local stores; the task loop and the operators do not
touch state files. Spark-free: a StreamTask of a keyed vertex, run through the manager's API."""
import ast
import os
import re

import pytest

from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.state import ValueStateDescriptor
from runtime.common.typeinfo import Types
from runtime.graph.job_graph import create_job_graph
from runtime.state.key_groups import KeyGroupRange
from runtime.task.stream_task import Acknowledgement, RestoredState, StreamTask, TaskDeploymentDescriptor
from seed import ROOT

RUNTIME = os.path.join(ROOT, "runtime")
BACKENDS = {"HeapKeyedStateBackend", "RocksDBKeyedStateBackend"}
STATE_FILES = {"read_state_file", "write_state_file", "snapshot_to_table", "table_to_snapshot"}


def _calls_and_imports(path):
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            # HeapKeyedStateBackend(...), RocksDBKeyedStateBackend(...), RocksDBKeyedStateBackend.open(...)
            name = func.id if isinstance(func, ast.Name) else \
                func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else None
            if name in BACKENDS:
                yield "creates", name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                yield "imports", alias.name, node.lineno


def test_only_the_task_state_manager_creates_backends_and_touches_state_files():
    manager = os.path.join(RUNTIME, "task", "task_state_manager.py")
    found = []
    for folder, _, files in os.walk(RUNTIME):
        if os.path.join(RUNTIME, "state") in (folder, os.path.dirname(folder)):
            continue        # the backends themselves
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(".py") or path == manager:
                continue
            for what, name_, line in _calls_and_imports(path):
                if (what == "creates" and os.sep + "task" + os.sep in path) or \
                        (what == "imports" and name_ in STATE_FILES and os.sep + "task" + os.sep in path):
                    found.append(f"{os.path.relpath(path, ROOT)}:{line} {what} {name_}")
    assert found == []


def test_only_the_task_state_manager_hands_kept_stores_over():
    """Which store a process keeps open between tasks, and taking it back, is decided in one
    place; the RocksDB store only deregisters itself on close and asks a keeper to release it."""
    users = {}
    for folder, _, files in os.walk(RUNTIME):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path) as f:
                    calls = set(re.findall(r"kept_stores\.(\w+)\(", f.read()))
                if calls:
                    users[os.path.relpath(path, RUNTIME)] = calls
    assert users == {os.path.join("task", "task_state_manager.py"): {"take", "keeps_stores", "keep"},
                     os.path.join("state", "rocksdb_store.py"): {"request_release", "withdraw_request"},
                     os.path.join("state", "rocksdb.py"): {"discard"}}


def _counts_job(backend: str):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_configuration().set_string("state.backend.type", backend)
    env.set_parallelism(1)
    env.from_collection([("a", 1)]).key_by(lambda r: r[0]).reduce(lambda x, y: (x[0], x[1] + y[1])).print()
    return create_job_graph(env.get_stream_graph("counts"))


def _task(job_graph, **deployment):
    keyed = next(v for v in job_graph.vertices if v.is_keyed)
    tdd = TaskDeploymentDescriptor(keyed.id, 0, 0, epoch=0, processing_time=0, end_of_input=False, **deployment)
    return StreamTask(job_graph, tdd, {})


def _count(op, key, value=None):
    op.backend.set_current_key(key)
    state = op.backend.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    if value is not None:
        state.update(value)
    return state.value()


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_snapshot_written_by_the_manager_is_restored_by_it(tmp_path, backend):
    job_graph = _counts_job(backend)
    writer = _task(job_graph, snapshot_dir=str(tmp_path / "snapshots" / "{table}"))
    op = writer.head
    _count(op, "a", 3)
    _count(op, "b", 5)
    ack = Acknowledgement(writer.vertex.id, 0)
    writer.state.snapshot([op], ack)   # the reduce (its chained print sink is not opened)
    writer.chain.dispose()
    assert [f.operator_id for f in ack.state_files] == [op.node.operator_id]

    files = {f.operator_id: (f.path,) for f in ack.state_files}
    reader = _task(job_graph, restored_state=RestoredState(files, {op.node.operator_id: 1}))
    restored = Acknowledgement(reader.vertex.id, 0)
    reader.state.restore([reader.head], restored)
    try:
        op = reader.head
        assert (_count(op, "a"), _count(op, "b"), _count(op, "c")) == (3, 5, None)
        assert restored.damaged_files == {}
    finally:
        reader.chain.dispose()


def test_a_local_store_at_the_expected_version_is_used_as_it_is_else_rebuilt(tmp_path):
    job_graph = _counts_job("rocksdb")
    local = dict(state_dir=str(tmp_path / "local"))
    first = _task(job_graph, snapshot_dir=str(tmp_path / "snapshots" / "{table}"), next_state_version="v1", **local)
    _count(first.head, "a", 3)
    ack = Acknowledgement(first.vertex.id, 0)
    first.state.snapshot([first.head], ack)
    first.chain.dispose()
    files = {f.operator_id: (f.path,) for f in ack.state_files}
    operator_id = next(iter(files))

    for version, hits, misses in (("v1", 1, 0), ("v0", 0, 1)):
        task = _task(job_graph, state_version=version, restored_state=RestoredState(files, {operator_id: 1}), **local)
        ack = Acknowledgement(task.vertex.id, 0)
        task.state.restore([task.head], ack)
        try:
            assert (ack.store_hits, ack.store_misses) == (hits, misses)
            assert _count(task.head, "a") == 3     # kept, or rebuilt from the file
        finally:
            task.chain.dispose()


def test_a_heap_stays_in_its_worker_only_when_its_task_left_it_at_a_new_version(tmp_path, monkeypatch):
    """The default backend's heap is kept in the (reused) worker between epochs, as a RocksDB
    store is kept open: used as it is at the expected version; a task that failed halfway leaves
    nothing behind; a rescaled subtask (other key groups) never takes it."""
    from runtime.state import kept_stores
    monkeypatch.setattr(kept_stores, "keeps_stores", lambda: True)     # as in a reused PySpark worker
    job_graph = _counts_job("hashmap")
    local = dict(state_dir=str(tmp_path / "local"))
    snapshots = str(tmp_path / "snapshots" / "{table}")
    first = _task(job_graph, snapshot_dir=snapshots, next_state_version="v1", **local)
    heap = first.head.backend
    _count(first.head, "a", 3)
    ack = Acknowledgement(first.vertex.id, 0)
    first.state.snapshot([first.head], ack)
    first.chain.dispose()
    files = {f.operator_id: (f.path,) for f in ack.state_files}
    restored = RestoredState(files, {next(iter(files)): 1})

    def next_task(version, fail_after=None):
        task = _task(job_graph, state_version=version, restored_state=restored, snapshot_dir=snapshots,
                     next_state_version="v2", **local)
        ack = Acknowledgement(task.vertex.id, 0)
        task.state.restore([task.head], ack)
        if fail_after is not None:
            _count(task.head, "a", fail_after)      # then the task fails: no snapshot, no version
        return task, ack

    task, ack = next_task("v1", fail_after=99)
    assert task.head.backend is heap and (ack.store_hits, ack.store_misses) == (1, 0)
    task.chain.dispose()
    task, ack = next_task("v1")                     # the failed task's heap was dropped: rebuilt
    assert task.head.backend is not heap and (ack.store_hits, ack.store_misses) == (0, 1)
    assert _count(task.head, "a") == 3
    task.chain.dispose()                            # no version set: not kept either
    task, ack = next_task("v0")                     # another version expected: rebuilt
    assert (ack.store_hits, ack.store_misses) == (0, 1) and _count(task.head, "a") == 3
    ack = Acknowledgement(task.vertex.id, 0)
    task.state.snapshot([task.head], ack)           # left at v2: kept
    kept = task.head.backend
    task.chain.dispose()
    assert kept.path.startswith(local["state_dir"]) and kept.path.endswith(task.head.node.operator_id)
    assert kept_stores.take(kept.path) is kept and kept.version == "v2"
    kept_stores.keep(kept)
    assert not kept.resume("counts", KeyGroupRange(0, 63), 128)      # rescaled: other key groups
    assert kept.resume("counts", kept.key_group_range, 128)
    kept.clear()
    assert kept.version is None and all(not t for by_ns in kept.tables.values() for t in by_ns.values())
