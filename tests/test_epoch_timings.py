"""Where each epoch's time goes and how late its records became visible (runtime/metrics/epoch_timings.py,
runtime/execution/epoch_stats.py): a real Kafka -> keyed sum -> Kafka EXACTLY_ONCE job on the test
run's broker and local Spark logs every phase per epoch; the stack the web view draws adds up to
the epoch's time; epoch logs written before the timings existed read as they did."""
import re
import time
import xml.etree.ElementTree as ET

import pytest

import kafka_env
from runtime.checkpoint.epoch_log import EpochLog
from runtime.common.phase_timer import Phase
from runtime.common import Types, WatermarkStrategy
from runtime.common.serialization import SimpleStringSchema
from runtime.datastream.connectors import DeliveryGuarantee
from runtime.datastream.connectors.kafka import (KafkaOffsetsInitializer, KafkaRecordSerializationSchema, KafkaSink,
                                                 KafkaSource)
from runtime.jobmaster import metrics_history
from runtime.metrics.epoch_timings import (ACKNOWLEDGEMENTS, BOUNDARY_WAIT, CHECKPOINT_QUEUE, CHECKPOINT_RECORD,
                                           HAND_OFF, KAFKA_TRANSACTION, OTHER, PLANNING, PREVIOUS_CHECKPOINT, SPARK_JOB,
                                           SOURCE_POSITIONS, STAGE, STATE_SNAPSHOT, EpochTimings, LatencyPercentiles,
                                           RecordTimes, StageTiming, last_epoch_timings, latency_percentiles, stacked,
                                           stage_shares)
from runtime.storage.layout import job_dir
from runtime_env import job_env
from sluice_airflow.web.charts import line_chart


def test_stages_running_at_once_share_the_time_they_overlap():
    stages = [StageTiming(1, "a", 2, 1000, 1400), StageTiming(2, "b", 2, 1200, 1600),
              StageTiming(3, "c", 1, 1700, 1800)]
    shared = stage_shares(stages, 0.9, 2.0)
    # 1000-1200 a alone, 1200-1400 a and b, 1400-1600 b alone, 1700-1800 c
    assert [s.share_ms for s in shared] == [300.0, 300.0, 100.0]
    assert sum(s.share_ms for s in shared) <= 1100      # never more than the job took


def test_a_checkpoints_source_positions_and_sink_commits_running_at_once_share_the_time_they_overlap():
    """The sources' positions are written while the Kafka transaction runs: each gets its time
    alone and half of the time both ran, so the epoch's parts still add up to its time; the
    sink's own commit is logged whole."""
    from types import SimpleNamespace

    from runtime.execution.epoch_stats import EpochStatsTracker
    tracker = EpochStatsTracker(None, SimpleNamespace(vertices=[]), "r", {}, True)
    timer = tracker.begin(0, 100.0)
    timer.begun = 100.0
    timer.add(PLANNING, 100.0, 100.1)
    timer.add(SOURCE_POSITIONS, 100.1, 100.15)      # beside the sink's 100.1-100.14
    timer.phases.append(Phase(KAFKA_TRANSACTION, 100.1, 100.14, "7"))
    timer.add(CHECKPOINT_RECORD, 100.15, 100.17)
    timings = tracker.finish(0, 1)
    assert timings.phases == {PLANNING: 100.0, SOURCE_POSITIONS: 30.0, KAFKA_TRANSACTION: 20.0, CHECKPOINT_RECORD: 20.0}
    assert [(s.phase, s.ms) for s in timings.sinks] == [(KAFKA_TRANSACTION, 40.0)]
    parts = dict(stacked(timings.to_json()))
    assert parts[SOURCE_POSITIONS] == 30.0 and parts[OTHER] == 0.0
    assert sum(parts.values()) == pytest.approx(timings.total_ms, abs=0.5) and timings.total_ms == pytest.approx(170.0)


def test_the_stack_adds_up_to_the_epochs_time_and_other_is_the_rest():
    timings = EpochTimings(1000.0, {BOUNDARY_WAIT: 100.0, PLANNING: 20.0, SPARK_JOB: 500.0, SOURCE_POSITIONS: 30.0,
                                    KAFKA_TRANSACTION: 80.0, CHECKPOINT_RECORD: 40.0},
                           (StageTiming(1, "Source: words -> Map", 2, 0, 200, snapshot_ms=0.0, share_ms=200.0),
                            StageTiming(2, "Keyed Sum -> Sink", 2, 200, 450, snapshot_ms=50.0, share_ms=250.0)))
    parts = dict(stacked(timings.to_json()))
    assert parts[STAGE + "Source: words -> Map"] == 200.0
    assert parts[STAGE + "Keyed Sum -> Sink"] == 200.0     # its snapshot apart
    assert parts[STATE_SNAPSHOT] == 50.0
    assert parts["Spark scheduling"] == 50.0                 # the job's time no stage ran
    assert parts[OTHER] == 1000.0 - 770.0                    # the phases' 770 ms
    assert sum(parts.values()) == pytest.approx(1000.0)
    assert timings.biggest(2) == [(OTHER, 230.0), (STAGE + "Source: words -> Map", 200.0)]


def test_latency_percentiles_come_from_a_bounded_sample_weighted_by_its_stride():
    times = RecordTimes()
    for lo in range(0, 100_000, 1000):       # 100,000 records, timestamps 0 .. 99,999 ms
        times.add(list(range(lo, lo + 1000)))
    assert len(times.sample) <= RecordTimes.LIMIT and times.stride > 1 and times.oldest == 0
    no_time = RecordTimes()
    no_time.add([None] * 1000)                # a source without timestamps samples nothing
    latency = latency_percentiles([times, no_time], 100_000)
    assert latency.max == 100_000             # exact: the oldest record's
    assert latency.p50 == pytest.approx(50_000, rel=0.02)
    assert latency.p90 == pytest.approx(10_000 + 80_000, rel=0.02)
    assert latency.p99 == pytest.approx(99_000, rel=0.02)
    assert latency.records == pytest.approx(100_000, rel=0.02) and latency.sampled == len(times.sample)
    assert latency_percentiles([no_time], 5) is None


def test_an_epoch_log_without_timings_reads_and_charts_as_before(tmp_path):
    """Metrics rows logged before the timings existed: no `timings` key."""
    rows = [{"run_id": "old", "epoch": e, "processing_time": 0, "duration_ms": 10.0, "vertices": {}} for e in range(3)]
    charts = {c.id: c for c in metrics_history.epoch_charts(rows)}
    assert charts["epoch-phases"].series == () and "No epoch logged" in charts["epoch-phases"].empty
    assert charts["epoch-latency"].series == ()
    assert charts["epoch-duration"].series[0].points[-1].y == 10.0
    assert last_epoch_timings(rows) == {"lastEpochTime": -1, "lastEpochLatencyP99": -1}
    timed = rows + [{**rows[-1], "epoch": 3, "timings": EpochTimings(
        120.0, {PLANNING: 5.0}, latency=LatencyPercentiles(40.0, 60.0, 80.6, 90.0, 10, 10)).to_json()}]
    assert last_epoch_timings(timed) == {"lastEpochTime": 120, "lastEpochLatencyP99": 81}
    assert [p.y for p in by_id_chart(timed, "epoch-phases").series[0].points] == [5.0]


def by_id_chart(rows: list, chart_id: str):
    return next(c for c in metrics_history.epoch_charts(rows) if c.id == chart_id)


def _kafka_job(tmp_path, bootstrap, source_topic, sink_topic, epochs):
    env = job_env(tmp_path, 2, epoch__max_records_per_split=20, epoch__max_epochs=epochs)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(2)       # epochs 1 and 2 (the last)
    source = (KafkaSource.builder().set_bootstrap_servers(bootstrap).set_topics(source_topic)
              .set_group_id(f"{source_topic}-group").set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_value_only_deserializer(SimpleStringSchema()).build())
    sink = (KafkaSink.builder().set_bootstrap_servers(bootstrap)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(sink_topic)
                                   .set_value_serialization_schema(SimpleStringSchema()).build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE).set_transactional_id_prefix(sink_topic).build())
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "words")
        .map(lambda w: (w.split("-")[0], 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
        .key_by(lambda t: t[0], key_type=Types.STRING())
        .sum(1)
        .map(lambda t: f"{t[0]}={t[1]}", output_type=Types.STRING())
        .sink_to(sink))
    return env.execute("epoch-timings")


@pytest.mark.slow
def test_a_kafka_job_logs_every_phase_of_each_epoch_and_its_records_latency(spark, kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap
    source_topic = kafka_env.create_topic(bootstrap, "timings-in", 2)
    sink_topic = kafka_env.create_topic(bootstrap, "timings-out", 1)
    produced = int(time.time() * 1000)
    for p in range(2):
        kafka_env.produce(bootstrap, source_topic, [f"w{i % 5}-{p}-{i}" for i in range(60)], partition=p,
                          timestamps=[produced] * 60)
    started = time.time()
    result = _kafka_job(tmp_path, bootstrap, source_topic, sink_topic, 3)
    ended = time.time()
    assert len(kafka_env.read_committed(bootstrap, sink_topic)) == 120

    rows = EpochLog(job_dir(str(tmp_path / "warehouse"), "epoch-timings")).epoch_metrics()
    assert [(r["epoch"], r["checkpoint_id"]) for r in rows] == [(0, None), (1, 1), (2, 2)]
    for row in rows:
        timings = row["timings"]
        phases = timings["phases"]
        assert all(ms >= 0 for ms in phases.values()), phases
        assert timings["checkpoint_id"] == row["checkpoint_id"]
        assert 0 < timings["total_ms"] <= (ended - started) * 1000
        parts = stacked(timings)
        print(f"epoch {row['epoch']}: {timings['total_ms']} ms", [p for p in parts if p[1]], timings["latency"])
        assert all(v >= 0 for _, v in parts)
        assert sum(v for _, v in parts) == pytest.approx(timings["total_ms"], abs=1.0)
        # Within its wall time: what the named phases cover, the rest is "other".
        assert sum(v for k, v in parts if k != OTHER) <= timings["total_ms"] + 1.0
        for phase in (PLANNING, SPARK_JOB, ACKNOWLEDGEMENTS, PREVIOUS_CHECKPOINT, HAND_OFF):
            assert phase in phases, (phase, phases)
        # The Spark job per stage, named by the vertices each runs: the map stage the source's
        # chain, the result stage the keyed sum's.
        stages = timings["stages"]
        assert [s["name"] for s in stages] == ["Source: words -> Map",
                                               "Keyed Aggregation -> Map -> Sink: Kafka Sink"], stages
        assert all(s["completed"] >= s["submitted"] and s["tasks"] == 2 for s in stages)
        assert 0 < sum(s["share_ms"] for s in stages) <= phases[SPARK_JOB] + 1.0
        if row["checkpoint_id"] is None:
            # Its records become visible with the next checkpoint: counted there.
            assert timings["latency"] is None and KAFKA_TRANSACTION not in phases
            continue
        for phase in (CHECKPOINT_QUEUE, SOURCE_POSITIONS, KAFKA_TRANSACTION, CHECKPOINT_RECORD):
            assert phase in phases, (phase, phases)
        assert [(s["sink"], s["phase"]) for s in timings["sinks"]] == [("Sink: Kafka Sink", KAFKA_TRANSACTION)]
        # Latency: every record was stamped ``produced``, before the run started, and its results
        # became visible when the checkpoint's record committed, before the run ended.
        latency = timings["latency"]
        assert latency["records"] == (80 if row["epoch"] == 1 else 40)
        assert latency["p50"] == latency["p90"] == latency["p99"] == latency["max"]     # one timestamp
        assert (started * 1000 - produced) <= latency["max"] <= (ended * 1000 - produced)
    # The progress line names each epoch's biggest parts.
    line = result.epochs[-1].progress_line("epoch-timings")
    print(line)
    assert re.search(r" ms, checkpoint 2 \(\d+ ms\)(, local state 2/2)?; biggest: .+ \d+ ms, .+ \d+ ms$", line), line


def test_the_stacked_chart_draws_a_bar_per_epoch_its_parts_one_on_another():
    rows = [{"run_id": "r", "epoch": e, "processing_time": 0, "duration_ms": 10.0, "vertices": {},
             "timings": EpochTimings(100.0 * (e + 1), {PLANNING: 10.0, CHECKPOINT_RECORD: 20.0 * e}).to_json()}
            for e in range(3)]
    chart = by_id_chart(rows, "epoch-phases")
    assert chart.stacked and [s.name for s in chart.series] == [PLANNING, CHECKPOINT_RECORD, OTHER]
    svg = str(line_chart(chart))
    root = ET.fromstring(svg[svg.index("<svg"):svg.index("</svg>") + 6])
    stacks = root.findall(".//g[@class='series stack']")
    assert [g.get("data-series") for g in stacks] == [PLANNING, CHECKPOINT_RECORD, OTHER]
    for i in range(3):      # each epoch's segments touch, bottom up, and their values add up to its time
        rects = [g.findall("rect")[i] for g in stacks]
        assert sum(float(r.get("data-y")) for r in rects) == pytest.approx(100.0 * (i + 1))
        for lower, upper in zip(rects, rects[1:]):
            assert float(upper.get("y")) + float(upper.get("height")) == pytest.approx(float(lower.get("y")), abs=0.11)
