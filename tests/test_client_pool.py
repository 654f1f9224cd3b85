"""KeyedClientPool: the mechanics the Kafka source's consumer pool and the sink's producer pool
share (kept by key, least recently used disposed of past capacity, a forked child starts empty,
all disposed of at close). Their own rules are tested with a broker in test_kafka_source.py and
test_kafka_sink.py."""
import multiprocessing

from runtime.connectors.client_pool import KeyedClientPool


class Recording(KeyedClientPool):
    def __init__(self, capacity):
        super().__init__(capacity)
        self.disposed = []

    def dispose(self, client):
        self.disposed.append(client)


def test_a_kept_client_serves_its_key_again_and_the_least_recently_used_goes_past_capacity():
    pool = Recording(2)
    a = pool.take("a", lambda: "client-a")
    pool.keep("a", a)
    pool.keep("b", pool.take("b", lambda: "client-b"))
    assert pool.take("a", lambda: "new-a") == "client-a"        # kept, and out until kept again
    assert pool.take("a", lambda: "new-a") == "new-a"
    pool.keep("a", "client-a")                                   # now the most recently used
    pool.keep("c", "client-c")
    assert pool.disposed == ["client-b"]
    assert (pool.opened, pool.reused) == (3, 1)
    pool.close()
    assert pool.disposed == ["client-b", "client-a", "client-c"]
    assert pool.take("a", lambda: "new-a") == "new-a"


def test_a_kept_client_its_pool_finds_unusable_is_disposed_of_for_a_new_one():
    pool = Recording(4)
    pool.keep("a", "stale")
    assert pool.take("a", lambda: "fresh", usable=lambda client: client != "stale") == "fresh"
    assert pool.disposed == ["stale"]
    assert (pool.opened, pool.reused) == (1, 0)


def _take_in_child(pool, out):
    out.put(pool.take("a", lambda: "child's own"))
    pool.close()                     # the parent's clients are not the child's to dispose of
    out.put(list(pool.disposed))


def test_a_forked_child_takes_none_of_its_parents_clients():
    pool = Recording(4)
    pool.keep("a", "parent's")
    fork = multiprocessing.get_context("fork")
    out = fork.Queue()
    child = fork.Process(target=_take_in_child, args=(pool, out))
    child.start()
    assert out.get(timeout=30) == "child's own"
    assert out.get(timeout=30) == []
    child.join(30)
    assert pool.take("a", lambda: "new") == "parent's"
