"""Chunks of records pickled for a shuffle (runtime.common.pickling.dumps_unshared): without the
pickler's memo, as independent values; with it where that would not do (cycles, a shared object
written once per record past the limit, a class pickled by value)."""
import pickle

import pytest

from runtime.common import pickling
from runtime.common.pickling import dumps_unshared


def test_records_come_back_equal_and_each_shared_object_as_a_copy_of_its_own():
    shared = ["a", 1]
    records = [("k", 1, 2.5, None, b"x", True), ("é" * 3, -2 ** 63, float("inf"), shared, shared)]
    back = pickle.loads(dumps_unshared(records))
    assert back == records
    assert back[1][3] == back[1][4] and back[1][3] is not back[1][4]     # as Flink's serializers give them


def test_a_cycle_goes_with_the_memo():
    looped = []
    looped.append(looped)
    back = pickle.loads(dumps_unshared([looped]))
    assert back[0][0] is back[0]


def test_a_chunk_past_the_limit_goes_with_the_memo_which_writes_a_shared_object_once(monkeypatch):
    monkeypatch.setattr(pickling, "UNSHARED_LIMIT", 1 << 20)
    big = "x" * (64 << 10)
    records = [(i, big) for i in range(100)]        # 6.4 MB written once each, 64 KB with the memo
    blob = dumps_unshared(records)
    assert len(blob) < 100_000
    back = pickle.loads(blob)
    assert back == records and back[0][1] is back[99][1]


def test_a_class_of_the_job_goes_by_value():
    class Local:
        def __init__(self, v):
            self.v = v

        def __eq__(self, other):
            return type(other).__name__ == "Local" and other.v == self.v
    assert pickle.loads(dumps_unshared([Local(3)])) == [Local(3)]


@pytest.mark.parametrize("chunk", [[], [()], [(1,)] * 3])
def test_small_chunks(chunk):
    assert pickle.loads(dumps_unshared(chunk)) == chunk
