"""Event time does not depend on where the input is cut into epochs.

A subtask lives for one epoch, so its input valves and its operators' watermarks travel to the
next epoch and into checkpoints (runtime.task.watermarks). Each job here runs three ways that
must agree: in one epoch with one record per batch, with one record per epoch, and with one
record per epoch stopped and restored from its checkpoint between the late record and its
window. PyFlink's periodic watermarks make its own output depend on timing, so the answers are
derived by hand from Flink's rules with a watermark after every record
(``for_bounded_out_of_orderness(1 s)``: the largest timestamp so far - 1000 - 1).
"""
import pytest
from deltalake import DeltaTable

from runtime.common import Duration, Row, Time, Types, WatermarkStrategy
from runtime.datastream import (
    KeyedProcessFunction, OutputTag, ProcessWindowFunction, SlidingEventTimeWindows, TumblingEventTimeWindows)
from runtime.datastream.connectors.delta import DeltaSink
from runtime_env import job_env

MIN = -9223372036854775808
EVENTS = [("k", 1000), ("k", 4000), ("k", 12000), ("k", 3000), ("k", 14000), ("k", 2000)]
PAIR = Types.TUPLE([Types.STRING(), Types.LONG()])
LATE = OutputTag("late", PAIR)

# One record per batch, one record per epoch, and one record per epoch across a restore
# after the third epoch (the window [0, 10000) has fired; the late record 3000 comes next).
WAYS = {"one epoch, batches of 1": dict(batch_size=1),
        "an epoch per record": dict(records_per_epoch=1),
        "an epoch per record, restored": dict(records_per_epoch=1, stop_after=3),
        "an epoch per record, restored at parallelism 2": dict(records_per_epoch=1, stop_after=3, rescale_to=2)}


def environment(tmp_path, batch_size=None, records_per_epoch=None, max_epochs=None, restore=None, parallelism=1):
    settings = {"task__batch_size": batch_size, "epoch__max_records_per_split": records_per_epoch,
                "epoch__max_epochs": max_epochs}
    env = job_env(tmp_path, parallelism, **{k: v for k, v in settings.items() if v is not None})
    if restore is not None:
        env.get_configuration().set_string("execution.savepoint.path", restore)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    return env


def timestamped(env):
    return (env.from_collection(EVENTS, type_info=PAIR)
            .assign_timestamps_and_watermarks(
                WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1))
                .with_timestamp_assigner(lambda e, _: e[1]))
            .set_parallelism(1))     # one watermark generator: a rescale changes only what is keyed


def run(tmp_path, build, batch_size=None, records_per_epoch=None, stop_after=None, rescale_to=1) -> list:
    """The job's collected output (``build(env)`` returns what to collect), over one run or two
    (stopped after ``stop_after`` epochs, then restored at parallelism ``rescale_to``)."""
    runs = ([dict(max_epochs=stop_after), dict(restore="latest", parallelism=rescale_to)] if stop_after
            else [{}])
    out = []
    for options in runs:
        env = environment(tmp_path, batch_size, records_per_epoch, **options)
        out.extend(build(env).execute_and_collect("event time"))
    return out


class CurrentWatermark(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield value[1], ctx.timer_service().current_watermark()


@pytest.mark.parametrize("way", list(WAYS))
def test_a_keyed_operator_sees_the_watermark_of_earlier_epochs(spark, tmp_path, way):
    got = run(tmp_path, lambda env: timestamped(env).key_by(lambda e: e[0]).process(CurrentWatermark()),
              **WAYS[way])
    # Each record sees the watermark the records before it made (none before the first).
    assert got == [(1000, MIN), (4000, -1), (12000, 2999), (3000, 10999), (14000, 10999), (2000, 12999)]


class Contents(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield key, w.start, w.end, len(elements), [e[1] for e in elements]


def sliding(env, lateness_ms: int):
    windows = (timestamped(env).key_by(lambda e: e[0])
               .window(SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5)))
               .allowed_lateness(lateness_ms)
               .side_output_late_data(LATE)
               .process(Contents()))
    return windows


@pytest.mark.parametrize("way", list(WAYS))
def test_late_records_across_epochs_follow_flinks_rules(spark, tmp_path, way):
    """Sliding 10 s windows every 5 s, 2 s allowed lateness. 12000 moves the watermark to 10999:
    [-5000, 5000) and [0, 10000) fire. 3000 is then too late for [-5000, 5000) (cleaned up at
    6999: it must not come back) but within the lateness of [0, 10000), which fires again with
    it. 14000 moves the watermark to 12999, past [0, 10000)'s cleanup at 11999, so 2000 is late
    for every window it belongs to and goes to the late side output."""
    late = []

    def build(env):
        windows = sliding(env, 2000)
        late.append(windows.get_side_output(LATE).map(lambda e: ("late",) + tuple(e)))
        return windows.union(late[-1])

    got = run(tmp_path, build, **WAYS[way])
    assert sorted(r for r in got if r[0] == "k") == sorted([
        ("k", -5000, 5000, 2, [1000, 4000]),
        ("k", 0, 10000, 2, [1000, 4000]),
        ("k", 0, 10000, 3, [1000, 4000, 3000]),      # the late firing
        ("k", 5000, 15000, 2, [12000, 14000]),
        ("k", 10000, 20000, 2, [12000, 14000]),
    ])
    assert [r for r in got if r[0] == "late"] == [("late", "k", 2000)]


@pytest.mark.parametrize("way", list(WAYS))
def test_the_vectorised_window_sum_drops_records_late_in_a_later_epoch(spark, tmp_path, way):
    """Tumbling 5 s sums run as local-global aggregation: 3000 and 2000 arrive after the
    watermark passed [0, 5000) (fired at 10999), so they are dropped, not summed in a new pane."""
    got = run(tmp_path, lambda env: timestamped(env).key_by(lambda e: e[0])
              .window(TumblingEventTimeWindows.of(Time.seconds(5))).sum(1), **WAYS[way])
    assert got == [("k", 5000), ("k", 26000)]


WINDOW_ROW = Types.ROW_NAMED(["key", "start", "end", "count"], [Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()])


@pytest.mark.parametrize("way", list(WAYS))
def test_a_delta_sink_gets_one_row_per_window_and_late_records_aside(spark, tmp_path, way):
    """No allowed lateness: 3000 and 2000 come after the watermark passed both their windows."""
    table = str(tmp_path / "windows")

    def build(env):
        windows = sliding(env, 0)
        (windows.map(lambda r: Row(key=r[0], start=r[1], end=r[2], count=r[3]), output_type=WINDOW_ROW)
         .sink_to(DeltaSink.for_row_data(table)).uid("windows-sink"))
        return windows.get_side_output(LATE)

    late = run(tmp_path, build, **WAYS[way])
    rows = DeltaTable(table).to_pyarrow_table().to_pylist()
    assert sorted((r["start"], r["end"], r["count"]) for r in rows) == [
        (-5000, 5000, 2), (0, 10000, 2), (5000, 15000, 2), (10000, 20000, 2)]
    assert late == [("k", 3000), ("k", 2000)]


# ---- the valve and the rescale rule, without Spark -------------------------------------------

def test_a_restored_valve_remembers_each_channel():
    from runtime.task.watermarks import GateWatermarks, StatusWatermarkValve
    valve = StatusWatermarkValve([("e", 0), ("e", 1)])
    assert valve.on_watermark(("e", 0), 10_999) is None         # channel 1 still at MIN
    assert valve.on_watermark(("e", 1), 5_000) == 5_000
    # The next epoch: only channel 1 moves on; the gate goes to channel 0's 10999, not to MIN.
    restored = GateWatermarks.of(valve).valve([("e", 0), ("e", 1)])
    assert restored.on_watermark(("e", 1), 12_000) == 10_999
    assert restored.on_watermark(("e", 1), 13_000) is None


def test_an_idle_channel_stays_idle_until_it_sends_a_watermark():
    from runtime.task.watermarks import GateWatermarks, StatusWatermarkValve
    valve = StatusWatermarkValve([("e", 0), ("e", 1)])
    valve.on_idle(("e", 1))
    assert valve.on_watermark(("e", 0), 7_000) == 7_000
    restored = GateWatermarks.of(valve).valve([("e", 0), ("e", 1)])
    assert restored.on_watermark(("e", 0), 8_000) == 8_000     # channel 1 does not hold it back
    assert restored.on_watermark(("e", 1), 1_000) is None      # active again, behind the gate


def test_after_a_rescale_time_starts_at_the_lowest_watermark_of_the_old_subtasks():
    from runtime.task.watermarks import GateWatermarks, TaskWatermarks, rescaled
    old = [TaskWatermarks({1: GateWatermarks({("e", 0): 9_000, ("e", 1): 7_000}, frozenset(), 7_000)},
                          {"op": (7_000, MIN, MIN)}),
           TaskWatermarks({1: GateWatermarks({("e", 0): 9_000, ("e", 1): 6_000}, frozenset(), 6_000)},
                          {"op": (6_000, MIN, MIN)})]
    new = TaskWatermarks.from_json(rescaled(old).to_json())
    assert new.operators == {"op": (6_000, MIN, MIN)}
    valve = new.gates[1].valve([("e", 0), ("e", 1), ("e", 2)])   # three producers now
    assert valve.watermarks == {("e", 0): 6_000, ("e", 1): 6_000, ("e", 2): 6_000}
    assert valve.on_watermark(("e", 0), 5_000) is None          # never back in time
