"""Jobs on real Spark: the seed word count, rolling and windowed aggregations, lateness. A job
of one epoch runs through the task harness without Spark as well (the ``collect`` fixture).

Expected answers are computed here independently of the engine (Counter, loops) or
written out by hand from Flink's semantics.
"""
from collections import Counter, defaultdict

import pytest

from runtime.common import Duration, Row, Time, Types, WatermarkStrategy
from runtime.datastream import (
    EventTimeSessionWindows, OutputTag, SlidingEventTimeWindows, TumblingEventTimeWindows,
    TumblingProcessingTimeWindows, WindowFunction)
from runtime_env import job_env

PAIR = Types.TUPLE([Types.STRING(), Types.LONG()])
TEXT = ["to be or not to be", "that is the question", "whether tis nobler in the mind to suffer",
        "the slings and arrows of outrageous fortune", "or to take arms against a sea of troubles"] * 7


def seed_wordcount(env, lines, window_parallelism, collect):
    counts = (env.from_collection(lines)
              .flat_map(lambda line: line.split(), output_type=Types.STRING())
              .map(lambda w: Row(word=w, count=1),
                   output_type=Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()]))
              .key_by("word")
              .window(TumblingProcessingTimeWindows.of(Time.seconds(5)))
              .sum("count")
              .set_parallelism(window_parallelism))
    return {r.word: r["count"] for r in collect(counts)}


@pytest.mark.parametrize("parallelism", [1, 3])
def test_seed_wordcount_matches_a_counter(collect, tmp_path, parallelism):
    expected = Counter(w for line in TEXT for w in line.split())
    assert seed_wordcount(job_env(tmp_path), TEXT, parallelism, collect) == dict(expected)


def test_rolling_sum_emits_one_update_per_record(collect, tmp_path):
    data = [("a", 1), ("b", 10), ("a", 2), ("c", 5), ("b", 20), ("a", 3)]
    env = job_env(tmp_path, 2)
    out = collect(env.from_collection(data, PAIR).key_by(0).sum(1))
    expected, totals = [], defaultdict(int)
    for k, v in data:
        totals[k] += v
        expected.append((k, totals[k]))
    got = list(out)
    assert sorted(got) == sorted(expected)
    for key in "abc":       # per key, in input order
        assert [r for r in got if r[0] == key] == [r for r in expected if r[0] == key]


def test_rolling_min_max_by_keep_flinks_fields(collect, tmp_path):
    data = [("a", 3, "x"), ("a", 1, "y"), ("a", 2, "z")]
    t = Types.TUPLE([Types.STRING(), Types.LONG(), Types.STRING()])
    env = job_env(tmp_path)
    s = env.from_collection(data, t).key_by(0)
    mins = collect(s.min(1))
    env = job_env(tmp_path)
    min_bys = collect(env.from_collection(data, t).key_by(0).min_by(1))
    # min keeps the first record's other fields; min_by returns the record with the minimum.
    assert mins == [("a", 3, "x"), ("a", 1, "x"), ("a", 1, "x")]
    assert min_bys == [("a", 3, "x"), ("a", 1, "y"), ("a", 1, "y")]


def test_count_window_of_three(collect, tmp_path):
    data = [("a", i) for i in range(1, 8)] + [("b", i) for i in range(10, 14)]
    env = job_env(tmp_path, 2)
    got = sorted(collect(env.from_collection(data, PAIR).key_by(0).count_window(3).sum(1)))
    # a: 1+2+3, 4+5+6 (7 waits for two more); b: 10+11+12 (13 waits)
    assert got == [("a", 6), ("a", 15), ("b", 33)]


def test_sliding_count_window_with_apply_computes_deltas(collect, tmp_path):
    class Delta(WindowFunction):
        def apply(self, key, window, inputs):
            items = list(inputs)
            if len(items) == 2:
                yield key, items[1][1] - items[0][1]

    data = [("g1", 10), ("g2", 5), ("g1", 13), ("g1", 9), ("g2", 7), ("g1", 20)]
    env = job_env(tmp_path, 2)
    got = collect(env.from_collection(data, PAIR).key_by(0).count_window(2, 1).apply(Delta(), PAIR))
    assert sorted(got) == sorted([("g1", 3), ("g1", -4), ("g1", 11), ("g2", 2)])
    assert [d for k, d in got if k == "g1"] == [3, -4, 11]


def events(env, data, out_of_orderness_ms=0):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(out_of_orderness_ms)) \
        .with_timestamp_assigner(lambda e, _: e[2])
    return env.from_collection(data, Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])) \
        .assign_timestamps_and_watermarks(strategy)


def test_sliding_event_time_windows(collect, tmp_path):
    data = [("a", 1, 1000), ("a", 2, 6000), ("b", 5, 7000), ("a", 4, 12000)]
    env = job_env(tmp_path, 2)
    got = sorted(collect(events(env, data).key_by(0)
                         .window(SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5)))
                         .reduce(lambda x, y: (x[0], x[1] + y[1], max(x[2], y[2])))))
    expected = []
    for key in "ab":
        for start in range(-5000, 15000, 5000):
            vals = [v for k, v, t in data if k == key and start <= t < start + 10000]
            if vals:
                expected.append((key, sum(vals), start))
    assert [(k, s) for k, s, _ in got] == [(k, s) for k, s, _ in sorted(expected)]


def test_event_time_session_windows(collect, tmp_path):
    data = [("a", 1, 1000), ("a", 1, 2500), ("a", 1, 9000), ("b", 1, 1000), ("a", 1, 4000), ("b", 1, 3900)]

    class Sessions(WindowFunction):
        def apply(self, key, window, inputs):
            yield key, window.start, window.end, sum(e[1] for e in inputs)

    env = job_env(tmp_path, 2)
    got = sorted(collect(events(env, data, out_of_orderness_ms=5000).key_by(0)
                         .window(EventTimeSessionWindows.with_gap(Time.seconds(2)))
                         .apply(Sessions())))
    # a: 1000, 2500, 4000 chain into [1000, 6000); 9000 alone. b: 1000 and 3900 are 2900 apart.
    assert got == [("a", 1000, 6000, 3), ("a", 9000, 11000, 1), ("b", 1000, 3000, 1), ("b", 3900, 5900, 1)]


def test_out_of_order_with_allowed_lateness_and_late_side_output(spark, tmp_path):
    late = OutputTag("late", Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()]))
    data = [("a", 1, 1000), ("a", 1, 2000), ("a", 1, 6000), ("a", 1, 3000), ("a", 1, 8000), ("a", 1, 4000)]
    # One record per batch: the watermark follows each record, as a per-event generator would.
    env = job_env(tmp_path, 1, task__batch_size=1)
    counts = (events(env, data).key_by(0).window(TumblingEventTimeWindows.of(Time.seconds(5)))
              .allowed_lateness(Time.seconds(2)).side_output_late_data(late)
              .reduce(lambda x, y: (x[0], x[1] + y[1], x[2])))
    counts.print("main")
    counts.get_side_output(late).print("late")
    printed = env.execute("lateness").printed
    # wm 5999 fires [0,5000) with 2; 3000 is within the lateness: a late firing with 3;
    # wm 7999 passes the cleanup time 6999, so 4000 is late; the end fires [5000,10000) with 2.
    # Both streams are typed tuples: printed as Java's Tuple3.toString, as PyFlink prints them.
    assert [line for line in printed if line.startswith("main")] == [
        "main> (a,2,1000)", "main> (a,3,1000)", "main> (a,2,6000)"]
    assert [line for line in printed if line.startswith("late")] == ["late> (a,1,4000)"]


@pytest.mark.parametrize("built_in", [True, False])
@pytest.mark.parametrize("records_per_epoch", [None, 20])     # 20: 5 epochs of 10 s windows of 14 records
def test_event_time_windows_all_fire_at_the_end_of_input(spark, tmp_path, built_in, records_per_epoch):
    # sum() runs as local-global aggregation, reduce() through the WindowOperator; over several
    # epochs, their state is carried in snapshots.
    data = [("k%d" % (i % 5), 1, i * 700) for i in range(100)]
    settings = {"epoch__max_records_per_split": records_per_epoch} if records_per_epoch else {}
    env = job_env(tmp_path, 2, **settings)
    windowed = events(env, data, 1000).key_by(0).window(TumblingEventTimeWindows.of(Time.seconds(10)))
    out = windowed.sum(1) if built_in else windowed.reduce(lambda a, b: (a[0], a[1] + b[1], a[2]))
    got = sorted(out.execute_and_collect())
    expected = Counter((k, t // 10000) for k, _, t in data)
    assert sorted((k, c) for k, c, _ in got) == sorted((k, c) for (k, _), c in expected.items())


def test_window_all_aggregates_everything_in_one_subtask(collect, tmp_path):
    data = [("a", 1, 100), ("b", 2, 200), ("c", 3, 5100)]
    env = job_env(tmp_path, 2)
    got = sorted(collect(events(env, data).window_all(TumblingEventTimeWindows.of(Time.seconds(5))).max(1)))
    assert [(v, t) for _, v, t in got] == [(2, 100), (3, 5100)]


def test_multi_epoch_run_carries_state(spark, tmp_path):
    data = [("a", i) for i in range(1, 11)] + [("b", 100)]
    env = job_env(tmp_path, 2, epoch__max_records_per_split=3)
    result_stream = env.from_collection(data, PAIR).key_by(0).sum(1)
    got = list(result_stream.execute_and_collect())
    assert [v for k, v in got if k == "a"] == [sum(range(1, i + 1)) for i in range(1, 11)]
    assert [v for k, v in got if k == "b"] == [100]


def test_an_idle_source_does_not_hold_back_the_watermark(spark, tmp_path):
    from runtime.datastream.connectors import NumberSequenceSource

    def run(idleness_ms):
        env = job_env(tmp_path, 1, epoch__max_records_per_split=3)
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, _: v * 1000)
        if idleness_ms:
            strategy = strategy.with_idleness(Duration.of_millis(idleness_ms))
        short = env.from_source(NumberSequenceSource(1, 3), strategy, "short")   # done after epoch 0
        long = env.from_source(NumberSequenceSource(1, 9), strategy, "long")     # epochs 0, 1, 2
        counts = (short.union(long).map(lambda v: ("all", 1, v), Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()]))
                  .key_by(0).window(TumblingEventTimeWindows.of(Time.seconds(2))).sum(1))
        counts.add_sink(lambda v: None)
        return [e.records_out for e in env.execute("idle").epochs]

    # Epoch 0: both at 2999, [0, 2000) fires. Then the short source has nothing: without
    # idleness its 2999 holds every later window until the end of input; idle (the epoch
    # clock moves 1000 ms, more than 500 ms), it steps aside and the long one's 5999 fires
    # [2000, 4000) and [4000, 6000) in epoch 1.
    assert run(None) == [1, 0, 4]
    assert run(500) == [1, 2, 2]
