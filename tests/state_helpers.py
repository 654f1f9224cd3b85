"""What the state tests share (test_state_descriptors.py, test_state_backends.py): an aggregate
function and keyed state backends of either kind."""
from runtime.state.heap import HeapKeyedStateBackend
from runtime.state.key_groups import KeyGroupRange
from runtime.state.rocksdb import RocksDBKeyedStateBackend

ALL = KeyGroupRange(0, 127)         # every key group at max parallelism 128
BACKENDS = ["hashmap", "rocksdb"]   # state.backend.type


class Average:
    """An AggregateFunction-like object: the mean of the values added (module level so it pickles)."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return acc[0] + value, acc[1] + 1

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


def keyed_backend(kind: str, directory, key_group_range=ALL, clock=None):
    """The keyed state backend of ``kind`` of an operator "op" at max parallelism 128; RocksDB keeps
    its store in ``directory``. The caller disposes it."""
    if kind == "hashmap":
        return HeapKeyedStateBackend("op", key_group_range, 128, clock=clock)
    return RocksDBKeyedStateBackend("op", key_group_range, 128, str(directory), clock=clock)
