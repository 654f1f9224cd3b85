"""Count windows as PyFlink 2.3 runs them (pyflink/datastream/window.py): ``count_window(n)``
puts a key's i-th element (from 0) into ``CountWindow(i // n)``; ``count_window(n, s)`` into
every ``CountWindow(k)`` with ``k*s <= i <= k*s + n - 1``; each window fires once, when it holds
``n`` elements (CountTrigger(n)), so no partial window ever fires; ``count_window(n, 0)`` is the
tumbling one. The answers below follow from those rules by hand. Each job runs through the task
harness without Spark, in one epoch, with one record per epoch, and stopped in the middle of a window and restored from its
checkpoint: the per-key counts and the windows' contents are keyed state.
"""
import pytest

from runtime.common import Types
from runtime.datastream import ProcessAllWindowFunction, ProcessWindowFunction, WindowFunction
from runtime.datastream.window import CountWindow
from runtime_env import job_env
from task_harness import collect_in_tasks

PAIR = Types.TUPLE([Types.STRING(), Types.LONG()])
DATA = [("a", 1), ("b", 100), ("a", 2), ("a", 10), ("b", 200), ("a", 20), ("a", 30), ("a", 40), ("a", 50)]
WAYS = {"in tasks": dict(in_tasks=True), "one epoch": dict(), "an epoch per record": dict(records_per_epoch=1),
        "restored mid-window": dict(records_per_epoch=1, stop_after=4)}


class Contents(WindowFunction):
    def apply(self, key, window, inputs):
        assert type(window) is CountWindow
        yield key, window.id, [v for _, v in inputs]


class ProcessContents(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield key, context.window().id, [v for _, v in elements]


class AllContents(ProcessAllWindowFunction):
    def process(self, context, elements):
        yield context.window().id, [v for _, v in elements]


def run(tmp_path, build, records_per_epoch=None, stop_after=None, in_tasks=False) -> list:
    if in_tasks:
        return sorted(collect_in_tasks(build(job_env(tmp_path).from_collection(DATA, type_info=PAIR))))
    runs = [dict(epoch__max_epochs=stop_after), dict()] if stop_after else [dict()]
    out = []
    for settings in runs:
        if records_per_epoch:
            settings["epoch__max_records_per_split"] = records_per_epoch
        env = job_env(tmp_path, **settings)
        env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
        out.extend(build(env.from_collection(DATA, type_info=PAIR)).execute_and_collect("count windows"))
    return sorted(out)


@pytest.mark.parametrize("way", list(WAYS))
def test_tumbling_count_windows_fire_full_windows_only(spark, tmp_path, way):
    got = run(tmp_path, lambda s: s.key_by(lambda e: e[0]).count_window(3).apply(Contents()), **WAYS[way])
    # a: 1 2 10 | 20 30 40 | 50 (never full); b: 100 200 (never full).
    assert got == [("a", 0, [1, 2, 10]), ("a", 1, [20, 30, 40])]


@pytest.mark.parametrize("way", list(WAYS))
def test_sliding_count_windows_fire_when_full(spark, tmp_path, way):
    got = run(tmp_path, lambda s: s.key_by(lambda e: e[0]).count_window(4, 2).process(ProcessContents()),
              **WAYS[way])
    # a's elements 0..6 = 1 2 10 20 30 40 50: window k holds elements 2k .. 2k+3. Windows 0 and 1
    # fill; 2 holds 30 40 50 and 3 holds 50: never full, never fired (the Java shape would fire
    # [1, 2] and [10, 20]-style partial windows every 2 elements).
    assert got == [("a", 0, [1, 2, 10, 20]), ("a", 1, [10, 20, 30, 40])]


def test_a_slide_of_zero_is_the_tumbling_window_and_sums_work(spark, tmp_path):
    got = run(tmp_path, lambda s: s.key_by(lambda e: e[0]).count_window(2, 0).sum(1))
    # a: (1+2) (10+20) (30+40), 50 left; b: (100+200).
    assert got == [("a", 3), ("a", 30), ("a", 70), ("b", 300)]


@pytest.mark.parametrize("way", list(WAYS))
def test_count_windows_over_the_whole_stream(spark, tmp_path, way):
    got = run(tmp_path, lambda s: s.count_window_all(4).process(AllContents()), **WAYS[way])
    assert got == [(0, [1, 100, 2, 10]), (1, [200, 20, 30, 40])]


def test_bad_sizes_are_refused_when_the_job_is_built(env):
    keyed = env.from_collection(DATA, type_info=PAIR).key_by(lambda e: e[0])
    with pytest.raises(ValueError, match=r"count_window\(\): the size must be a positive number of records, got 0"):
        keyed.count_window(0)
    with pytest.raises(ValueError, match=r"count_window\(\): the slide must be a positive number of records "
                                         r"\(or 0: tumbling\), got -1"):
        keyed.count_window(3, -1)
