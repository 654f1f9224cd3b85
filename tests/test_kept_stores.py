"""Local stores a reused Python worker keeps open between its tasks (runtime.state.kept_stores),
with real processes: a worker keeps its store, another process that needs it gets it released,
a store in use is never taken, and a kept store whose directory went away is not trusted."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.common import Types
from runtime.datastream import KeyedProcessFunction
from runtime.datastream.state import ValueStateDescriptor
from runtime.state.backend import STATE_BACKEND
from runtime.state.key_groups import KeyGroupRange
from runtime.state.rocksdb import RocksDBKeyedStateBackend, StateStoreInUseException
from runtime.state.rocksdb_store import RELEASE_WAIT_S
from runtime_env import job_env
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]

# A stand-in for a PySpark worker: it waits for its next command on stdin as a worker waits for
# its next task on its socket, and opens, updates and releases a store as a task's state manager
# does (runtime.task.task_state_manager).
WORKER = r"""
import os, sys
from types import SimpleNamespace
from runtime.common import Types
from runtime.datastream.state import ValueStateDescriptor
from runtime.state.key_groups import KeyGroupRange
from runtime.task.task_state_manager import create_keyed_state_backend, release_keyed_state_backend
path, backend = sys.argv[1], None
node = SimpleNamespace(operator_name="Counts", operator_id=os.path.basename(path))
ctx = SimpleNamespace(state_backend="rocksdb", state_dir=os.path.dirname(path), key_group_range=KeyGroupRange(0, 127),
                      max_parallelism=128, subtask_label="(1/1)")
for line in sys.stdin:
    command, *arg = line.split()
    if command == "open":
        backend = create_keyed_state_backend(node, ctx, clock=None)
        backend.set_current_key("a")
        state = backend.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
        print("opened", backend.version, state.value(), flush=True)
    elif command == "update":
        state.update(int(arg[0]))
        backend.version = "v" + arg[0]
        release_keyed_state_backend(backend)
        print("disposed", flush=True)
    elif command == "exit":
        break
"""


class Worker:
    def __init__(self, path, reused: bool):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("SPARK_REUSE_WORKER", None)
        if reused:
            env["SPARK_REUSE_WORKER"] = "1"
        self.process = subprocess.Popen([sys.executable, "-c", WORKER, str(path)], env=env, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def ask(self, command: str) -> str:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def exit(self) -> int:
        self.process.stdin.write("exit\n")
        self.process.stdin.close()
        code = self.process.wait(timeout=30)
        self.stderr = self.process.stderr.read()
        return code


def _backend(path):
    return RocksDBKeyedStateBackend("Counts", KeyGroupRange(0, 127), 128, str(path))


def _count(backend):
    backend.set_current_key("a")
    return backend.get_partitioned_state(ValueStateDescriptor("count", Types.LONG())).value()


def test_a_worker_keeps_its_store_open_and_releases_it_when_another_process_asks(tmp_path):
    path = tmp_path / "store"
    worker = Worker(path, reused=True)
    try:
        assert worker.ask("open") == "opened None None"
        assert worker.ask("update 3") == "disposed"
        assert worker.ask("open") == "opened v3 3"          # kept open: at the version it set
        assert worker.ask("update 4") == "disposed"
        assert (path / "SLUICE-KEPT-BY").read_text() == str(worker.process.pid)
        backend = _backend(path)        # RocksDB's lock is the worker's: it is asked to let go
        try:
            assert backend.version == "v4" and _count(backend) == 4
        finally:
            backend.close()
        assert not (path / "SLUICE-RELEASE").exists()
        # The worker opens it again for its next task; this process's open left no version.
        assert worker.ask("open") == "opened None 4"
        assert worker.process.poll() is None
    finally:
        assert worker.exit() == 0


def test_a_store_in_use_by_a_task_is_never_taken_from_it(tmp_path):
    path = tmp_path / "store"
    worker = Worker(path, reused=False)     # not a reused worker: it keeps nothing, and is never signalled
    try:
        assert worker.ask("open") == "opened None None"
        started = time.monotonic()
        with pytest.raises(StateStoreInUseException, match=str(path)):
            _backend(path)
        assert time.monotonic() - started < RELEASE_WAIT_S
        assert worker.ask("update 5") == "disposed"         # its task goes on and closes the store
        backend = _backend(path)
        try:
            assert backend.version == "v5" and _count(backend) == 5
        finally:
            backend.close()
    finally:
        assert worker.exit() == 0


def test_a_kept_store_whose_directory_was_removed_is_not_trusted(tmp_path):
    import shutil
    path = tmp_path / "store"
    worker = Worker(path, reused=True)
    try:
        worker.ask("open")
        assert worker.ask("update 3") == "disposed"
        # The kept store's background threads (flush, compaction) may still add a file while the
        # folder is removed: remove until it is gone.
        wait_until(lambda: shutil.rmtree(path, ignore_errors=True) or not path.exists(), 30,
                   "the kept store's folder removed", interval=0.05)
        assert worker.ask("open") == "opened None None"     # a new, empty store: rebuilt by its task
    finally:
        assert worker.exit() == 0
    assert "was removed while this process kept it open" in worker.stderr and str(path) in worker.stderr


class WorkerOfSubtask(KeyedProcessFunction):
    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield self.index, os.getpid(), value, n


def test_each_subtask_runs_in_one_worker_that_keeps_its_store_open_across_epochs(spark, tmp_path):
    words = [f"w{i % 7}" for i in range(80)]
    env = job_env(tmp_path, 2, epoch__max_records_per_split=10)
    env.get_configuration().set_string(STATE_BACKEND, "rocksdb")
    env.get_configuration().set_string("state.backend.rocksdb.localdir", str(tmp_path / "local"))
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    got = list(env.from_collection(words, type_info=Types.STRING()).key_by(lambda w: w)
               .process(WorkerOfSubtask(), Types.PICKLED_BYTE_ARRAY()).execute_and_collect("kept-stores"))
    assert sorted((w, n) for _, _, w, n in got) == sorted(
        (w, words[:i + 1].count(w)) for i, w in enumerate(words))
    workers = {index: {pid for i, pid, _, _ in got if i == index} for index in range(2)}
    assert all(len(pids) == 1 for pids in workers.values()), workers    # one worker per subtask
    assert workers[0] != workers[1]
    # Opened once each: RocksDB starts a new info LOG at every open (and keeps 3 old ones).
    stores = [p.parent for p in (tmp_path / "local").rglob("CURRENT")]
    assert len(stores) == 2
    assert all(not list(store.glob("LOG.old.*")) for store in stores), [sorted(os.listdir(s)) for s in stores]
