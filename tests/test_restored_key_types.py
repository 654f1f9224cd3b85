"""Keyed state restored into a job whose key_by serializes its keys otherwise than the state's
writer did (a SavepointWriter bootstrap keyed with key_type, a job keyed without one, or the job's
key_type changed between runs): each key's state comes back wherever the key values are equal,
on the heap and RocksDB backends alike, at another parallelism too."""
import os

import pyarrow as pa
import pytest

from runtime.common import Types
from runtime.datastream.functions import KeyedProcessFunction
from runtime.datastream.state import ValueStateDescriptor
from runtime.checkpoint.checkpoint_record import CheckpointException
from runtime.checkpoint.storage import CheckpointStorage
from runtime.state.backend import STATE_BACKEND
from runtime.state_processor.bootstrap import KeyedStateBootstrapFunction, OperatorTransformation
from runtime.state_processor.writer import SavepointWriter
from runtime_env import job_env

USERS = [f"user{i}" for i in range(40)]


class Count(KeyedProcessFunction):
    """Each record of a user: (user, how many records of the user so far, the restored count included)."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield ctx.get_current_key(), n


class StartFrom(KeyedStateBootstrapFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        self.count.update(value["n"])


def run(tmp_path, lines, backend, parallelism=2, key_type=None, restore_from=None, selector=lambda u: u) -> dict:
    """The counting job over the new ``lines`` (one user each), keyed by ``selector`` (and
    ``key_type``): each user's last count. A run restores the last one's checkpoint."""
    os.makedirs(tmp_path / "in", exist_ok=True)
    (tmp_path / "in" / f"part-{len(os.listdir(tmp_path / 'in'))}.txt").write_text("\n".join(lines) + "\n")
    env = job_env(tmp_path, parallelism)
    env.get_configuration().set_string(STATE_BACKEND, backend)
    if restore_from:
        env.get_configuration().set_string("execution.savepoint.path", restore_from)
    env.enable_checkpointing(10)
    source = env.read_text_file(str(tmp_path / "in")).uid("users")
    keyed = source.key_by(selector) if key_type is None else source.key_by(selector, key_type)
    return dict(keyed.process(Count()).uid("counter").execute_and_collect("count-users"))


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_savepoint_bootstrapped_with_a_string_key_type_restores_into_a_job_keyed_without_one(
        spark, tmp_path, backend):
    start = {u: 100 * i for i, u in enumerate(USERS)}
    path = (SavepointWriter.new_savepoint(128)
            .with_operator("counter", OperatorTransformation.bootstrap_with(
                pa.table({"key": USERS, "n": list(start.values())}))
                .key_by("key", Types.STRING()).transform(StartFrom()).set_parallelism(3))
            .write(str(tmp_path / "savepoint")))
    assert run(tmp_path, USERS, backend, restore_from=path) == {u: n + 1 for u, n in start.items()}
    # The next run restores the job's own checkpoint, its keys hashed as the job hashes them.
    assert run(tmp_path, USERS, backend, parallelism=3) == {u: n + 2 for u, n in start.items()}


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_job_keyed_without_key_type_restores_every_key_at_other_parallelisms_and_backends(
        spark, tmp_path, backend):
    other = {"hashmap": "rocksdb", "rocksdb": "hashmap"}[backend]
    assert run(tmp_path, USERS, backend, parallelism=2) == dict.fromkeys(USERS, 1)
    assert run(tmp_path, USERS, other, parallelism=3) == dict.fromkeys(USERS, 2)
    assert run(tmp_path, USERS, backend, parallelism=1) == dict.fromkeys(USERS, 3)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_job_that_declares_a_key_type_between_runs_keeps_every_key_state(spark, tmp_path, backend):
    assert run(tmp_path, USERS, backend, parallelism=2) == dict.fromkeys(USERS, 1)
    assert run(tmp_path, USERS, backend, parallelism=3, key_type=Types.STRING()) == dict.fromkeys(USERS, 2)
    assert run(tmp_path, USERS[:10], backend, parallelism=3, key_type=Types.STRING()) == dict.fromkeys(USERS[:10], 3)
    assert run(tmp_path, USERS, backend, parallelism=2) == {u: 4 if u in USERS[:10] else 3 for u in USERS}


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_keys_that_are_not_values_of_the_new_key_type_are_refused_before_the_first_epoch(spark, tmp_path, backend):
    ids = [str(i) for i in range(20)]
    assert run(tmp_path, ids, backend) == dict.fromkeys(ids, 1)
    # The state's keys are the strings "0".."19"; the job now keys by int: none would be found.
    with pytest.raises(CheckpointException) as refused:
        run(tmp_path, ids, backend, key_type=Types.INT(), selector=int)
    message = str(refused.value)
    for named in ("KeyedProcess", "state 'count'", "PickledByteArray", "Integer", "key_by(selector) without key_type"):
        assert named in message, message
    assert CheckpointStorage(str(tmp_path / "warehouse" / "count-users")).checkpoints.completed()[-1].epoch == 0
