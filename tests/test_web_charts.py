"""The web view's charts as pure functions, in the fast loop: epoch-log rows and checkpoint records
shaped into series (runtime.jobmaster.metrics_history), drawn as SVG (sluice_airflow.web.charts),
and an epoch's per-vertex figures from its tasks' acknowledgements (runtime.metrics.vertex_metrics).
The browser test (test_web_view.py) draws them from a real job's tables."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict

from runtime.checkpoint.checkpoint_record import CheckpointRecord
from runtime.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from runtime.execution.history import FINISHED, RUNNING, ExecutionRecord
from runtime.jobmaster.metrics_history import (MAX_POINTS, MAX_SPLIT_SERIES, SPLIT_EPOCHS, SPLIT_ROWS,
                                               checkpoint_breakdown, checkpoint_charts, epoch_charts, split_history,
                                               written_bytes)
from runtime.jobmaster.overview import with_live_figures
from runtime.metrics.vertex_metrics import epoch_vertex_metrics
from runtime.task.deployment import Acknowledgement
from sluice_airflow.web.charts import bar_chart, breakable, fmt, line_chart, short_label

SVG = "{http://www.w3.org/2000/svg}"


def row(run: str, epoch: int, vertices: dict, duration_ms: float = 100.0, checkpoint_id=None) -> dict:
    """An epoch log's metrics row as EpochSummary's fields give it (those the charts read)."""
    return {"run_id": run, "epoch": epoch, "processing_time": 1_000_000 + epoch * 1000, "duration_ms": duration_ms,
            "checkpoint_id": checkpoint_id, "vertices": vertices}


def vertex(records_in, records_out=0, watermark=None, snapshot_ms=(), splits=None) -> dict:
    v = {"records_in": records_in, "records_out": records_out, "watermark": watermark, "snapshot_ms": list(snapshot_ms)}
    return {**v, "splits": splits} if splits else v


def by_id(charts) -> dict:
    return {c.id: c for c in charts}


def parsed(markup) -> ET.Element:
    """The figure's SVG, parsed: it must be well-formed XML (names escaped)."""
    svg = str(markup)
    return ET.fromstring(svg[svg.index("<svg"):svg.index("</svg>") + 6].replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ', 1))


def test_epochs_of_two_runs_are_points_in_log_order_with_each_runs_start_marked():
    rows = [row("a", e, {"Source": vertex(10 * e, 10 * e, watermark=900_000 + e * 1000),
                         "Sink": vertex(10 * e, 0, watermark=MIN_WATERMARK)}) for e in range(3)]
    rows += [row("b", e, {"Source": vertex(5, 5, watermark=MAX_WATERMARK, splits={"p0": {"offset": 9, "latest": 12, "lag": 3},
                                                                                "p1": {"offset": 4, "latest": 4, "lag": 0}}),
                          "Sink": vertex(5, 0, watermark=None)}) for e in (2, 3)]    # restored: epoch 2 again
    charts = by_id(epoch_charts(rows))
    records_in = charts["records-in"]
    assert [s.name for s in records_in.series] == ["Source", "Sink"]
    assert [(p.x, p.y, p.tick) for p in records_in.series[0].points] == \
        [(0, 0, "0"), (1, 10, "1"), (2, 20, "2"), (3, 5, "2"), (4, 5, "3")]
    assert records_in.runs == ((0, "a"), (3, "b")) and records_in.note == ""
    # A watermark lag only where there is a watermark short of the end of input.
    [lag] = charts["watermark-lag"].series
    assert (lag.name, [p.y for p in lag.points]) == ("Source", [100_000] * 3)
    # Source lag: the splits' lags summed, only for epochs whose source reported them.
    [source_lag] = charts["source-lag"].series
    assert [(p.x, p.y) for p in source_lag.points] == [(3, 3), (4, 3)]
    assert [len(s.points) for s in charts["epoch-duration"].series] == [5]


def test_charts_without_data_say_what_they_would_show():
    charts = by_id(epoch_charts([row("a", 0, {"Source": vertex(1)})]))
    assert charts["source-lag"].series == () and "reports `lag` per split" in charts["source-lag"].empty
    figure = str(line_chart(charts["source-lag"]))
    assert "<svg" not in figure and "split_metrics()" in figure
    assert checkpoint_charts([])[0].series == () and checkpoint_breakdown(None, []) == []


def test_ten_thousand_epochs_are_downsampled_keeping_each_buckets_highest():
    rows = [row("a" if e < 6000 else "b", e, {"Source": vertex(e % 7)}, duration_ms=1000 if e == 4321 else 10)
            for e in range(10_000)]
    charts = by_id(epoch_charts(rows))
    [durations] = charts["epoch-duration"].series
    assert len(durations.points) == MAX_POINTS and "highest of 50 consecutive epochs" in charts["epoch-duration"].note
    assert max(p.y for p in durations.points) == 1000         # the spike survives
    assert [p.x for p in durations.points] == list(range(49, 10_000, 50))
    assert charts["records-in"].runs == ((0, "a"), (6000, "b"))
    svg = parsed(line_chart(charts["epoch-duration"]))
    assert len(svg.findall(f".//{SVG}circle")) == MAX_POINTS


def test_the_svg_has_a_path_and_a_point_per_value_and_escapes_names():
    rows = [row("r<1>", e, {"Map & <Filter>": vertex(e), "Sink": vertex(2 * e)}) for e in range(4)]
    svg = parsed(line_chart(by_id(epoch_charts(rows))["records-in"]))
    series = svg.findall(f".//{SVG}g[@class='series']")
    assert [(g.get("data-series"), g.get("data-points")) for g in series] == [("Map & <Filter>", "4"), ("Sink", "4")]
    for g in series:
        assert len(g.findall(f"{SVG}path")) == 1 and g.find(f"{SVG}path").get("d").count("L") == 3
        assert [c.get("data-x") for c in g.findall(f"{SVG}circle")] == ["0", "1", "2", "3"]
    assert [c.get("data-y") for c in series[1].findall(f"{SVG}circle")] == ["0", "2", "4", "6"]
    assert [g.get("data-run") for g in svg.findall(f".//{SVG}g[@class='run']")] == ["r<1>"]
    # The y axis goes up to a round value at or above the highest point.
    labels = [t.text for t in svg.findall(f".//{SVG}g[@class='grid']/{SVG}text")]
    assert labels[0] == "0" and float(labels[-1]) >= 6


def test_values_are_said_in_their_units():
    assert [fmt(v, "ms") for v in (850, 1500, 90_000, 5_400_000, 2 * 86_400_000)] == \
        ["850 ms", "1.5 s", "1.5 min", "1.5 h", "2 d"]
    assert [fmt(v, "bytes") for v in (900, 2970, 5 * 1024 ** 2)] == ["900 B", "2.9 KiB", "5 MiB"]
    assert [fmt(v, "records") for v in (42, 1500, 2_500_000, -3)] == ["42", "1.5k", "2.5M", "-3"]


def checkpoint(checkpoint_id: int, run: str = "r", operators=None, state_bytes: int = 0, duration_ms: int = 50,
               status: str = "COMPLETED") -> CheckpointRecord:
    return CheckpointRecord(checkpoint_id, checkpoint_id - 1, "CHECKPOINT", status, run, duration_ms=duration_ms,
                            state_bytes=state_bytes, operators=operators or [])


def files(*entries) -> list:
    return [{"path": f"checkpoint_id={c}/part-{i}.parquet", "size": size, "rows": 1, "subtask": subtask,
             "source_state": subtask < 0} for i, (c, subtask, size) in enumerate(entries)]


OPERATORS = [
    {"uid": "src", "name": "Source: Numbers", "vertex": "Source: Numbers", "parallelism": 2, "files": files((5, -1, 300))},
    {"uid": "counts", "name": "Counts", "vertex": "Counts -> Sink", "parallelism": 2,
     "files": files((4, 0, 1000), (5, 0, 200), (5, 1, 700))},      # incremental: checkpoint 4's file too
    {"uid": "sink", "name": "Sink", "vertex": "Counts -> Sink", "parallelism": 2, "files": []},
]


def test_checkpoint_charts_and_what_a_checkpoint_wrote_itself():
    records = [checkpoint(3, "a", state_bytes=10), checkpoint(4, "b", state_bytes=20, status="DISCARDED"),
               checkpoint(5, "b", OPERATORS, state_bytes=2200, duration_ms=80), checkpoint(6, "b", status="FAILED")]
    assert written_bytes(records[2]) == 1200        # not checkpoint 4's file it still lists
    duration, size = checkpoint_charts(records)
    assert [(p.x, p.y, p.tick) for p in duration.series[0].points] == [(3, 50, "3"), (4, 50, "4"), (5, 80, "5")]
    assert [s.name for s in size.series] == ["state size", "written"]
    assert [p.y for p in size.series[1].points] == [0, 0, 1200] and size.runs == ((3, "a"), (4, "b"))


def test_a_checkpoint_per_operator_and_subtask():
    record = checkpoint(5, operators=OPERATORS, state_bytes=2200)
    rows = [row("b", 4, {"Source: Numbers": vertex(3, snapshot_ms=[1.5, 2.0]), "Counts -> Sink": vertex(3, snapshot_ms=[9.0, 4.0])},
                checkpoint_id=5)]
    state, snapshots = checkpoint_breakdown(record, rows)
    assert [(b.label, b.value, b.part) for b in state.bars] == [
        ("Source: Numbers (the sources' positions (driver))", 300, 300),
        ("Counts (1/2)", 1200, 200), ("Counts (2/2)", 700, 700)]
    assert [(b.label, b.value) for b in snapshots.bars] == [
        ("Source: Numbers (1/2)", 1.5), ("Source: Numbers (2/2)", 2.0),
        ("Counts -> Sink (1/2)", 9.0), ("Counts -> Sink (2/2)", 4.0)]
    assert [(b.name, b.subtask) for b in state.bars] == [("Source: Numbers", "driver"), ("Counts", "1/2"),
                                                         ("Counts", "2/2")]
    svg = parsed(bar_chart(state))
    bars = svg.findall(f".//{SVG}g[@class='bar']")
    assert [(g.get("data-value"), g.get("data-part")) for g in bars] == [("300", "300"), ("1200", "200"), ("700", "700")]
    widths = [(float(g.find(f"{SVG}rect[@class='whole']").get("width")), float(g.find(f"{SVG}rect[@class='part']").get("width")))
              for g in bars]
    assert widths[1][1] / widths[1][0] == 200 / 1200 and widths[1][0] == max(w for w, _ in widths)
    # Many subtasks: the largest bars, in their order, and a note saying so.
    many = str(bar_chart(state, max_bars=2))
    assert many.count('class="bar"') == 2 and "The 2 largest of 3 bars." in many and 'data-value="300"' not in many
    # No epoch row for it (compacted away): the snapshot chart says so.
    assert checkpoint_breakdown(record, [])[1].bars == ()


def test_an_epochs_figures_per_vertex_from_its_acknowledgements():
    acks = [Acknowledgement(1, 1, records_in=4, records_out=8, watermark=2000, snapshot_ms=3.25),
            Acknowledgement(1, 0, records_in=6, records_out=12, watermark=1000, snapshot_ms=1.0),
            Acknowledgement(2, 0, records_in=20, records_written=20, watermark=MIN_WATERMARK),
            Acknowledgement(3, 0, records_in=1, records_out=1, watermark=5)]
    figures = epoch_vertex_metrics({1: "Source", 2: "Sink", 3: "Sink"}, acks,
                                   {1: {"p0": {"offset": 10, "latest": 15, "lag": 5}}, 2: {}})
    assert figures == {
        "Source": {"records_in": 10, "records_out": 20, "watermark": 1000, "snapshot_ms": [1.0, 3.2],
                   "splits": {"p0": {"offset": 10, "latest": 15, "lag": 5}}},
        "Sink": {"records_in": 20, "records_out": 20, "watermark": None, "snapshot_ms": [0.0]},
        "Sink [3]": {"records_in": 1, "records_out": 1, "watermark": 5, "snapshot_ms": [0.0]}}


KAFKA = "Source: Kafka Source -> Map"


def kafka_row(run: str, epoch: int, checkpoint_id=None, partitions: int = 2, lag=lambda p, e: 5 if p == 0 else e):
    """An epoch of a Kafka source as its enumerator reports it: per topic-partition the offset after
    the epoch (10 records a partition an epoch), the latest offset when it was planned, the lag."""
    splits = {f"events-{p}": {"offset": 10 * (epoch + 1) + p, "latest": 10 * (epoch + 1) + p + lag(p, epoch),
                              "lag": lag(p, epoch)} for p in range(partitions)}
    return row(run, epoch, {KAFKA: vertex(20, 20, splits=splits), "Sink": vertex(20)}, checkpoint_id=checkpoint_id)


def kafka_log():
    """Run a checkpoints every other epoch (1, 2, 3); checkpoint 1 was since discarded, 3 has no
    record (the run died completing it). Run b restores checkpoint 1 (an older one, by id) and
    runs epochs 2 and 3 again, completing checkpoint 4."""
    rows = [kafka_row("a", e, checkpoint_id={1: 1, 3: 2, 5: 3}.get(e)) for e in range(6)]
    rows += [kafka_row("b", 2), kafka_row("b", 3, checkpoint_id=4)]
    checkpoints = [checkpoint(1, "a", status="DISCARDED"), checkpoint(2, "a"), checkpoint(4, "b")]
    return rows, checkpoints


def table(source) -> list:
    """A source's per-split table as (run, epoch, split, offset, latest, lag, checkpointed id, checkpointed offset)."""
    return [(e.run_id, e.epoch, f.split, f.offset, f.latest, f.lag, e.checkpointed_id, f.checkpointed)
            for e in source.epochs for f in e.splits]


def test_each_partitions_offsets_over_epochs_with_the_last_completed_checkpoints_offset():
    rows, checkpoints = kafka_log()
    [source] = split_history(rows, checkpoints, {"a": None, "b": 1})
    assert source.source == KAFKA and source.note == "Every epoch that reported its splits, newest first."
    assert [(e.run_id, e.epoch, e.checkpoint_id, e.checkpoint_status, e.checkpointed_id) for e in source.epochs] == [
        ("b", 3, 4, "COMPLETED", 4), ("b", 2, None, None, 1),           # restored checkpoint 1, not 2
        ("a", 5, 3, None, 2),                   # checkpoint 3 never completed: 2 still holds the partitions
        ("a", 4, None, None, 2), ("a", 3, 2, "COMPLETED", 2), ("a", 2, None, None, 1),
        ("a", 1, 1, "DISCARDED", 1), ("a", 0, None, None, None)]
    by_epoch = {(r, e, s): (o, latest, lag, c) for r, e, s, o, latest, lag, _, c in table(source)}
    assert by_epoch[("a", 0, "events-0")] == (10, 15, 5, None)         # nothing checkpointed yet
    assert by_epoch[("a", 1, "events-1")] == (21, 22, 1, 21)           # its own checkpoint completed
    assert by_epoch[("a", 2, "events-1")] == (31, 33, 2, 21)           # checkpoint 1's
    assert by_epoch[("a", 5, "events-0")] == (60, 65, 5, 40)           # checkpoint 2's: epoch 3's offset
    assert by_epoch[("b", 2, "events-0")] == (30, 35, 5, 20)           # the restored checkpoint 1's
    assert by_epoch[("b", 3, "events-1")] == (41, 44, 3, 41)
    # Without the runs' restore points, a run goes on from the one before it in the log.
    [guessed] = split_history(rows, checkpoints)
    assert [e.checkpointed_id for e in guessed.epochs][:2] == [4, 2]
    # The lag chart: a series per partition over every epoch that reported it, each run's start marked.
    chart = source.lag
    assert (chart.id, chart.title, chart.note) == ("split-lag-1", f"Lag per split of {KAFKA}, in records", "")
    assert [s.name for s in chart.series] == ["events-0", "events-1"]     # the highest lag now (5, 3) first
    assert [(p.x, p.tick, p.y) for p in chart.series[1].points] == \
        [(0, "0", 0), (1, "1", 1), (2, "2", 2), (3, "3", 3), (4, "4", 4), (5, "5", 5), (6, "2", 2), (7, "3", 3)]
    assert chart.runs == ((0, "a"), (6, "b"))
    svg = parsed(line_chart(chart))
    assert [(g.get("data-series"), g.get("data-points")) for g in svg.findall(f".//{SVG}g[@class='series']")] == \
        [("events-0", "8"), ("events-1", "8")]
    # The summed source lag stays: both partitions' lags added.
    [summed] = by_id(epoch_charts(rows))["source-lag"].series
    assert [p.y for p in summed.points] == [5 + e for e in range(6)] + [7, 8]
    json.dumps(asdict(source))      # the JSON API's shape


def test_many_partitions_draw_the_ones_furthest_behind_and_the_table_keeps_its_size():
    lag = lambda p, e: (p * 7) % 24 if e == 29 else 1000 if p == 3 else 0     # noqa: E731: 3 was far behind before
    rows = [kafka_row("a", e, checkpoint_id=e + 1, partitions=24, lag=lag) for e in range(30)]
    [source] = split_history(rows, [checkpoint(e + 1, "a") for e in range(30)])
    chart = source.lag
    now = {f"events-{p}": lag(p, 29) for p in range(24)}
    expected = sorted(now, key=lambda s: (-now[s], -max(now[s], 1000 if s == "events-3" else 0), s))[:MAX_SPLIT_SERIES]
    assert [s.name for s in chart.series] == expected and len(expected) == MAX_SPLIT_SERIES
    assert "The 8 of 24 splits with the highest lag at the latest epoch (the table lists them all)." == chart.note
    # A vertex renamed between runs (its chain changed) is another source: each marks only its own runs.
    renamed = [{**r, "vertices": {"Source: Kafka Source": r["vertices"][KAFKA]}, "run_id": "b"} for r in rows[20:]]
    old_name, new_name = split_history(rows[:20] + renamed, [])
    assert (old_name.lag.runs, new_name.lag.runs) == (((0, "a"),), ((20, "b"),))
    shown = SPLIT_ROWS // 24
    assert shown < SPLIT_EPOCHS and [e.epoch for e in source.epochs] == list(range(29, 29 - shown, -1))
    assert all(len(e.splits) == 24 for e in source.epochs)
    assert source.note == f"The last {shown} of 30 epochs that reported its splits, newest first."
    assert all(f.checkpointed == f.offset for e in source.epochs for f in e.splits)     # every checkpoint completed
    figure = str(line_chart(chart))
    assert figure.count('class="series"') == MAX_SPLIT_SERIES and "(the table lists them all)" in figure


def test_sources_without_splits_have_no_split_history():
    assert split_history([row("a", 0, {"Source": vertex(1)})], []) == []


def test_the_split_tables_render_each_partitions_figures_and_checkpointed_offset():
    """templates/splits.html (the job page includes it) from the Kafka-shaped log: a row per epoch
    and partition, newest first, the epoch's checkpoint and its status once per epoch."""
    from html.parser import HTMLParser

    import jinja2
    import sluice_airflow.web
    rows, checkpoints = kafka_log()
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(f"{sluice_airflow.web.__path__[0]}/templates"),
                             autoescape=True)
    env.globals["line_chart"] = line_chart
    env.filters["breakable"] = breakable
    page = env.get_template("splits.html").render(charts={"splits": split_history(rows, checkpoints, {"b": 1})})

    class Rows(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.cells = [], []

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag == "tr" and "data-split" in attrs:
                self.rows.append(attrs)
            if tag == "td" and "data-status" in attrs:
                self.cells.append((attrs["data-checkpoint-id"], attrs["data-status"]))

    parsed_rows = Rows()
    parsed_rows.feed(page)
    assert [(r["data-run"], r["data-epoch"], r["data-split"], r["data-offset"], r["data-lag"],
             r["data-checkpointed-offset"]) for r in parsed_rows.rows][:6] == [
        ("b", "3", "events-0", "40", "5", "40"), ("b", "3", "events-1", "41", "3", "41"),
        ("b", "2", "events-0", "30", "5", "20"), ("b", "2", "events-1", "31", "2", "21"),
        ("a", "5", "events-0", "60", "5", "40"), ("a", "5", "events-1", "61", "5", "41")]
    assert len(parsed_rows.rows) == 16 and parsed_rows.cells[:3] == [("4", "COMPLETED"), ("", ""), ("3", "")]
    assert "3 <span class=\"muted\">no record: completing, or lost</span>" in page
    assert "no checkpoint yet" in page and 'data-chart="split-lag-1"' in page


def test_long_operator_names_keep_their_subtask_in_a_bars_short_label():
    """A chain's name is long: its label gives way in the middle, never the subtask, so the bars of
    one vertex read apart (they used to be cut to the same 37 characters)."""
    chain = "Source: Custom File Source -> Map -> Map -> Timestamps/Watermarks"
    rows = [row("a", 0, {chain: vertex(3, snapshot_ms=[1.0, 2.0, 3.0])}, checkpoint_id=1)]
    operators = [{"uid": "src", "name": "Source: Custom File Source", "vertex": chain, "parallelism": 3,
                  "files": files((1, -1, 10))},
                 {"uid": "w", "name": "Window(TumblingEventTimeWindows(10000), EventTimeTrigger, ReduceFunction)",
                  "vertex": "Window", "parallelism": 2, "files": files((1, 0, 5), (1, 1, 6))}]
    state, snapshots = checkpoint_breakdown(checkpoint(1, operators=operators), rows)
    for chart in (state, snapshots):
        labels = [short_label(b) for b in chart.bars]
        assert len(set(labels)) == len(labels) and all(len(label) <= 42 for label in labels), labels
        assert all(label.endswith(f"({b.subtask})") for label, b in zip(labels, chart.bars))
        drawn = [t.text for t in parsed(bar_chart(chart)).findall(f".//{SVG}g[@class='bar']/{SVG}text")][::2]
        assert drawn == labels
    assert short_label(snapshots.bars[0]) == "Source: Custom File S…mps/Watermarks (1/3)"
    assert short_label(state.bars[1]) == "Window(TumblingEventT…educeFunction) (1/2)"
    assert short_label(state.bars[0]) == "Source: Custom File Source (driver)"


def test_lag_charts_say_what_their_values_count():
    """A file's lag is bytes, a Kafka partition's records: each source-lag chart has one unit, named
    over its y axis and in each point's tooltip."""
    files_lag = {"/in/a.txt": {"offset": 10, "latest": 4106, "lag": 4096, "unit": "bytes"}}
    kafka_lag = {"events-0": {"offset": 9, "latest": 12, "lag": 3}}
    rows = [row("a", e, {"Source: Files": vertex(1, splits=files_lag), KAFKA: vertex(1, splits=kafka_lag)})
            for e in range(2)]
    charts = by_id(epoch_charts(rows))
    records, byte_lag = charts["source-lag"], charts["source-lag-bytes"]
    assert (records.unit, [s.name for s in records.series]) == ("records", [KAFKA])
    assert (byte_lag.unit, [s.name for s in byte_lag.series]) == ("bytes", ["Source: Files"])
    assert "in records" in records.title and "in bytes" in byte_lag.title
    svg = parsed(line_chart(records))
    assert svg.find(f".//{SVG}text[@class='axis-title y-unit']").text == "records"
    assert svg.find(f".//{SVG}circle/{SVG}title").text == f"{KAFKA}: 3 records at epoch 0"
    assert parsed(line_chart(byte_lag)).find(f".//{SVG}text[@class='axis-title y-unit']").text == "bytes"
    assert parsed(line_chart(charts["epoch-duration"])).find(f".//{SVG}text[@class='axis-title y-unit']").text == "time"
    # Only one kind of source: one chart, as before.
    assert [c.id for c in epoch_charts([row("a", 0, {KAFKA: vertex(1, splits=kafka_lag)})])
            if c.id.startswith("source-lag")] == ["source-lag"]
    # Per split too.
    by_source = {s.source: s.lag for s in split_history(rows, [])}
    assert (by_source["Source: Files"].unit, by_source[KAFKA].unit) == ("bytes", "records")
    assert by_source["Source: Files"].title.endswith("in bytes")


def test_a_running_execution_counts_the_epochs_its_log_has_so_far():
    """The history's RUNNING row says 0 epochs until the run ends; the epoch log has one row per epoch."""
    running = ExecutionRecord("r2", "job", RUNNING, 1.0)
    finished = ExecutionRecord("r1", "job", FINISHED, 0.0, epochs=2, records_in=30)
    rows = [{**row("r1", e, {}), "records_in": 15} for e in range(2)]
    rows += [{**row("r2", e, {}), "records_in": 7 + e} for e in range(3)]
    live, done = with_live_figures([running, finished], rows)
    assert (live.epochs, live.records_in, live.state) == (3, 7 + 8 + 9, RUNNING)
    assert done == finished
    assert with_live_figures([running], []) == [running]


def test_ids_wrap_after_their_separators_only():
    assert str(breakable("manual__2026-01-01T00:00:00+00:00")) == \
        "manual__<wbr>2026-<wbr>01-<wbr>01T00:<wbr>00:<wbr>00+<wbr>00:<wbr>00"
    assert str(breakable("/tmp/<x>.txt")) == "/<wbr>tmp/<wbr>&lt;x&gt;.<wbr>txt"
