"""State time-to-live, as Flink applies it: measured in processing time from the entry's last
write (or access, with OnReadAndWrite); an expired value is never returned under
NeverReturnExpired, is returned once (then removed) under ReturnExpiredIfNotCleanedUp, and is
not checkpointed. Processing time is pinned: epoch n runs at CLOCK_START + n * 1000 ms, and
each record here is an epoch of its own, so the answers follow by hand from those rules.
"""
import pytest

from runtime.common import Time, Types
from runtime.datastream import KeyedProcessFunction, RuntimeContext
from runtime.datastream.state import ListStateDescriptor, StateTtlConfig, ValueStateDescriptor
from runtime.state.backend import STATE_BACKEND
from runtime_env import job_env as runtime_job_env

_backend = {"type": "hashmap"}


@pytest.fixture(autouse=True, params=["hashmap", "rocksdb"])
def state_backend(request):
    """Each test runs on both keyed state backends (state.backend.type)."""
    _backend["type"] = request.param
    yield request.param
    _backend["type"] = "hashmap"


def job_env(tmp_path, **settings):
    env = runtime_job_env(tmp_path, **settings)
    env.get_configuration().set_string(STATE_BACKEND, _backend["type"])
    return env

# Record i arrives at processing time CLOCK_START + i * 1000 (one record per epoch).
KEYS = ["a", "b", "b", "a", "a", "b", "b", "b"]


class PreviousCount(KeyedProcessFunction):
    """Emits (key, the count before this record or None when absent or expired)."""

    def __init__(self, ttl: StateTtlConfig):
        self.ttl = ttl

    def open(self, runtime_context: RuntimeContext):
        descriptor = ValueStateDescriptor("count", Types.LONG())
        descriptor.enable_time_to_live(self.ttl)
        self.count = runtime_context.get_state(descriptor)

    def process_element(self, value, ctx):
        before = self.count.value()
        self.count.update((before or 0) + 1)
        yield value, before


def run(tmp_path, ttl: StateTtlConfig, stop_after=None) -> list:
    runs = [dict(epoch__max_epochs=stop_after), dict()] if stop_after else [dict()]
    out = []
    for settings in runs:
        env = job_env(tmp_path, epoch__max_records_per_split=1,
                      **{k: v for k, v in settings.items() if v is not None})
        env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
        stream = env.from_collection(KEYS, type_info=Types.STRING()).key_by(lambda k: k)
        out.extend(stream.process(PreviousCount(ttl)).execute_and_collect("ttl"))
    return out


ttl_2500 = StateTtlConfig.new_builder(Time.milliseconds(2500))


@pytest.mark.parametrize("stop_after", [None, 4])
def test_a_value_expires_2500_ms_after_its_last_write(spark, tmp_path, stop_after):
    got = run(tmp_path, ttl_2500.build(), stop_after)
    # a@0 -; b@1000 -; b@2000 1 (1000+2500 > 2000); a@3000 expired (0+2500 <= 3000); a@4000 1;
    # b@5000 expired (2000+2500 <= 5000); b@6000 1; b@7000 2. Across a restore after epoch 4 too:
    # the entries' times are checkpointed with their values.
    assert got == [("a", None), ("b", None), ("b", 1), ("a", None), ("a", 1), ("b", None), ("b", 1), ("b", 2)]


class ReadOnlyAfterFirst(KeyedProcessFunction):
    """Writes a key's state on its first record only, then reads it: OnReadAndWrite keeps it alive."""

    def __init__(self, ttl: StateTtlConfig):
        self.ttl = ttl

    def open(self, runtime_context: RuntimeContext):
        descriptor = ValueStateDescriptor("seen", Types.LONG())
        descriptor.enable_time_to_live(self.ttl)
        self.seen = runtime_context.get_state(descriptor)

    def process_element(self, value, ctx):
        seen = self.seen.value()
        if seen is None:
            self.seen.update(1)
        yield value, seen


def test_reads_refresh_the_ttl_only_with_on_read_and_write(spark, tmp_path):
    keys = ["a", "a", "a", "a"]      # at 0, 1000, 2000, 3000 with a TTL of 1500 ms

    def run_with(ttl, folder):
        env = job_env(tmp_path / folder, epoch__max_records_per_split=1)
        stream = env.from_collection(keys, type_info=Types.STRING()).key_by(lambda k: k)
        return list(stream.process(ReadOnlyAfterFirst(ttl)).execute_and_collect("ttl"))

    on_write = StateTtlConfig.new_builder(Time.milliseconds(1500)).build()
    on_read = StateTtlConfig.new_builder(Time.milliseconds(1500)).update_ttl_on_read_and_write().build()
    # Written at 0: alive at 1000, expired at 2000 (written again), alive at 3000.
    assert run_with(on_write, "write") == [("a", None), ("a", 1), ("a", None), ("a", 1)]
    # Read at 1000, 2000, 3000: each read moves the expiry on.
    assert run_with(on_read, "read") == [("a", None), ("a", 1), ("a", 1), ("a", 1)]


def test_an_expired_value_is_returned_once_when_the_visibility_allows_it(spark, tmp_path):
    keys = ["a", "a", "a"]           # at 0, 1000, 2000 with a TTL of 500 ms
    ttl = StateTtlConfig.new_builder(Time.milliseconds(500)).return_expired_if_not_cleaned_up().build()
    env = job_env(tmp_path, epoch__max_records_per_split=1)
    stream = env.from_collection(keys, type_info=Types.STRING()).key_by(lambda k: k)
    # Each read finds the value expired: returned all the same (then removed), so the count goes on;
    # under NeverReturnExpired (the default) each read would find nothing.
    assert list(stream.process(PreviousCount(ttl)).execute_and_collect("ttl")) == [
        ("a", None), ("a", 1), ("a", 2)]


class RecentItems(KeyedProcessFunction):
    """Adds each record to its key's list, which has a TTL, and emits (key, the list's live items)."""

    def open(self, runtime_context: RuntimeContext):
        descriptor = ListStateDescriptor("items", Types.STRING())
        descriptor.enable_time_to_live(ttl_2500.build())
        self.items = runtime_context.get_list_state(descriptor)

    def process_element(self, value, ctx):
        self.items.add(value)
        yield value[0], ",".join(self.items.get())


@pytest.mark.parametrize("stop_after", [None, 3])
def test_each_list_element_expires_2500_ms_after_it_was_added(spark, tmp_path, stop_after):
    items = ["a0", "b1", "a2", "a3", "b4", "a5"]     # item i at CLOCK_START + i * 1000
    runs = [dict(epoch__max_epochs=stop_after), dict()] if stop_after else [dict()]
    got = []
    for settings in runs:
        env = job_env(tmp_path, epoch__max_records_per_split=1, **settings)
        env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
        stream = env.from_collection(items, type_info=Types.STRING()).key_by(lambda item: item[0])
        got.extend(stream.process(RecentItems()).execute_and_collect("ttl"))
    # Each element by its own time (Flink's TtlListState): a3@3000 finds a0 (0 + 2500 <= 3000) gone
    # and a2 live; b4@4000 finds b1 (3500 <= 4000) gone; a5@5000 finds a2 (4500) gone, a3 (5500)
    # live. After a restore at epoch 3 too: each element's time is checkpointed with it, so a0 and
    # a2 (restored together) expire apart.
    assert got == [("a", "a0"), ("b", "b1"), ("a", "a0,a2"), ("a", "a2,a3"), ("b", "b4"), ("a", "a3,a5")]
