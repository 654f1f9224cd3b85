"""Runtime execution mode (issue 18, part 4): ``set_runtime_mode(RuntimeExecutionMode.BATCH)`` and the
``execution.runtime-mode`` key honoured as Flink's "Execution Mode (Batch/Streaming)" says: a rolling
reduce or sum gives each key's final value only; watermark generators are ignored and event-time
windows fire at the end of input (so nothing is late); processing-time timers fire at the end of
input; the whole bounded input is one epoch with no checkpoint; AUTOMATIC is BATCH when every source
is bounded; an unbounded source in BATCH is refused when the job compiles. Answers worked by hand."""
import pytest
from deltalake import DeltaTable

from runtime.common import Configuration, Duration, Time, Types, WatermarkStrategy
from runtime.datastream import (
    KeyedProcessFunction, RuntimeExecutionMode, StreamExecutionEnvironment, TumblingEventTimeWindows)
from runtime.graph.stream_graph import StreamGraphError
from runtime.storage.layout import job_dir
from runtime_env import job_env

SALES = [("a", 1), ("b", 2), ("a", 3), ("b", 4), ("a", 5)]
TYPE = Types.TUPLE([Types.STRING(), Types.INT()])


def rolling_sum(env, name):
    return sorted(env.from_collection(SALES, type_info=TYPE).key_by(lambda r: r[0]).sum(1)
                  .execute_and_collect(name))


def test_a_rolling_sum_gives_one_final_line_per_key_in_batch(spark, tmp_path):
    streaming = job_env(tmp_path, 2)
    assert rolling_sum(streaming, "rolling-streaming") == [
        ("a", 1), ("a", 4), ("a", 9), ("b", 2), ("b", 6)]
    batch = job_env(tmp_path, 2, epoch__max_records_per_split=1)   # ignored: one epoch
    batch.enable_checkpointing(10)                                  # ignored: no checkpoints
    batch.set_runtime_mode(RuntimeExecutionMode.BATCH)
    assert rolling_sum(batch, "rolling-batch") == [("a", 9), ("b", 6)]
    log = DeltaTable(job_dir(str(tmp_path / "warehouse"), "rolling-batch") + "/epoch_log").to_pyarrow_table()
    epochs = [r for r in log.to_pylist() if r["kind"] == "epoch"]
    assert [(r["epoch"], r["checkpoint_id"], r["end_of_input"]) for r in epochs] == [(0, None, True)]
    # A second run reads the whole input again: nothing is restored.
    again = job_env(tmp_path, 2)
    again.set_runtime_mode(RuntimeExecutionMode.BATCH)
    assert rolling_sum(again, "rolling-batch") == [("a", 9), ("b", 6)]


def test_the_configuration_key_and_automatic(spark, tmp_path):
    conf = Configuration()
    conf.set_string("execution.runtime-mode", "batch")
    conf.set_string("sluice.warehouse", str(tmp_path / "warehouse"))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    assert rolling_sum(env, "rolling-conf") == [("a", 9), ("b", 6)]
    auto = job_env(tmp_path, 1)
    auto.set_runtime_mode(RuntimeExecutionMode.AUTOMATIC)       # every source bounded: BATCH
    assert rolling_sum(auto, "rolling-auto") == [("a", 9), ("b", 6)]


def test_event_time_windows_fire_at_the_end_with_nothing_late(spark, tmp_path):
    # Batches of one record: in STREAMING the watermark passes 7000 before the 2000 and the 4000
    # arrive, so both are late for [0, 5000) and dropped; BATCH has no watermark before the end.
    events = [("a", 1000), ("a", 7000), ("a", 2000), ("b", 4000)]
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0))
                .with_timestamp_assigner(lambda e, _: e[1]))

    def counts(mode, name):
        env = job_env(tmp_path, 1, task__batch_size=1)
        env.set_runtime_mode(mode)
        return sorted(env.from_collection(events).assign_timestamps_and_watermarks(strategy)
                      .map(lambda e: (e[0], 1)).key_by(lambda e: e[0])
                      .window(TumblingEventTimeWindows.of(Time.seconds(5)))
                      .reduce(lambda x, y: (x[0], x[1] + y[1])).execute_and_collect(name))

    assert counts(RuntimeExecutionMode.STREAMING, "windows-streaming") == [("a", 1), ("a", 1)]
    assert counts(RuntimeExecutionMode.BATCH, "windows-batch") == [("a", 1), ("a", 2), ("b", 1)]


class Reminder(KeyedProcessFunction):
    """A processing-time timer an hour ahead: in BATCH it fires at the end of input."""

    def process_element(self, value, ctx):
        ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 3_600_000)

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), "reminded"


def test_processing_time_timers_fire_at_the_end_of_input(spark, tmp_path):
    env = job_env(tmp_path, 1)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    out = env.from_collection(["x", "y", "x"]).key_by(lambda v: v).process(Reminder())
    assert sorted(out.execute_and_collect("reminders")) == [("x", "reminded"), ("y", "reminded")]


def test_an_unbounded_source_is_refused_in_batch_and_automatic_picks_streaming():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.socket_text_stream("localhost", 9999).print()
    with pytest.raises(StreamGraphError, match=r"UNBOUNDED source with the 'execution.runtime-mode' set to "
                                               r"'BATCH'.*Source: Socket Stream is unbounded"):
        env.get_stream_graph("socket")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.AUTOMATIC)
    env.socket_text_stream("localhost", 9999).print()
    assert env.get_stream_graph("socket").settings.runtime_mode == "STREAMING"
    with pytest.raises(TypeError, match="RuntimeExecutionMode"):
        env.set_runtime_mode("BATCH")
    conf = Configuration()
    conf.set_string("execution.runtime-mode", "FAST")
    with pytest.raises(ValueError, match="must be STREAMING, BATCH or AUTOMATIC"):
        StreamExecutionEnvironment.get_execution_environment(conf)


def test_only_a_source_whose_epoch_is_a_span_of_time_waits_out_the_interval():
    """sluice.epoch.interval paces unbounded sources (an epoch collects input for it) and rate
    limits; a bounded input cut into epochs is there already, as for Flink and Structured
    Streaming's AvailableNow trigger."""
    from runtime.connectors import create_enumerator
    from runtime.connectors.base import EnumeratorContext
    from runtime.datastream.connectors import DataGeneratorSource, RateLimiterStrategy

    def paced(source):
        return create_enumerator(source, EnumeratorContext(parallelism=2, max_records_per_split=5)).paced

    assert not paced(DataGeneratorSource(str, count=100))
    assert paced(DataGeneratorSource(str))
    assert paced(DataGeneratorSource(str, count=100, rate_limiter=RateLimiterStrategy.per_second(10)))


def test_a_bounded_input_cut_into_epochs_runs_them_one_after_the_other(spark, tmp_path):
    import time
    interval_ms = 60_000
    env = job_env(tmp_path, 1, epoch__interval=interval_ms, epoch__max_records_per_split=2)
    started = time.monotonic()
    assert rolling_sum(env, "back-to-back")[-2:] == [("b", 2), ("b", 6)]
    # Three epochs: waiting out the interval between them would take two minutes.
    assert time.monotonic() - started < interval_ms / 1000
    log = DeltaTable(job_dir(str(tmp_path / "warehouse"), "back-to-back") + "/epoch_log").to_pyarrow_table()
    assert sorted(r["epoch"] for r in log.to_pylist() if r["kind"] == "epoch") == [0, 1, 2]
