"""What the state tests share (test_state_descriptors.py, test_state_backends.py): an aggregate
function and keyed state backends of either kind."""
from runtime.state.heap import HeapKeyedStateBackend
from runtime.state.key_groups import KeyGroupRange
from runtime.state.rocksdb import RocksDBKeyedStateBackend

ALL = KeyGroupRange(0, 127)         # every key group at max parallelism 128
# state.backend.type; "hashmap-settled": the heap whose maps settle into columns after every key
# (runtime.state.state_map), which a large state does past 262,144 entries
BACKENDS = ["hashmap", "rocksdb", "hashmap-settled"]


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
    if kind == "hashmap-settled":
        return HeapKeyedStateBackend("op", key_group_range, 128, clock=clock, settle_after=1, settle_every=1)
    return RocksDBKeyedStateBackend("op", key_group_range, 128, str(directory), clock=clock)
