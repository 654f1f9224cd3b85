"""The pre-aggregated window path inside one task, without Spark: first records as columns,
and a finished task handing its records back to reference counting."""
import gc
import pickle

import numpy as np
import pyarrow as pa
import pytest

from runtime.common import Row, Time, Types, WatermarkStrategy
from runtime.common.watermark_strategy import MIN_WATERMARK
from runtime.connectors import writer_class
from runtime.connectors.collect_sink import CollectWriter
from runtime.connectors.collection import CollectionReader
from runtime.datastream import StreamExecutionEnvironment, TumblingEventTimeWindows
from runtime.datastream.operators import SinkSpec
from runtime.graph.job_graph import create_job_graph
from runtime.task.arrow_batch import ArrowBatch
from runtime.task.record_helpers import with_field
from runtime.task.sink_writer import WriterInitContext
from runtime.task.window_aggregation import PanePreAggregator, WindowAggregationOperator
from runtime.task.stream_task import ACK, SplitRead, TaskDeploymentDescriptor, run_task
from runtime.task.record_columns import RecordColumns, to_pylist


@pytest.mark.parametrize("records", [
    [("a", 1, 10), ("b", 2, 20), ("c", 3, 30)],
    [("a", 1.5, True), ("b", -2.25, False)],
    [(b"x", 2 ** 70), (b"y", 1)],                      # beyond int64: stays a list
    [("a", 1), ("b", 2.0)],                            # int and float: no Arrow, no 1 -> 1.0
    [("a", None), ("b", 2)],
    [("a", 1), ("b", 2, 3)],                           # two lengths: rows
    [["a", 1], ["b", 2]],                              # lists
    [(), ()],
    ["plain", "values"],
])
def test_first_records_give_back_the_records_after_pickling_taking_and_concatenating(records):
    first = pickle.loads(pickle.dumps(RecordColumns.of(records), protocol=5))
    assert first.records() == records
    assert [type(v) for r in first.records() for v in (r if isinstance(r, (tuple, list)) else [r])] == \
           [type(v) for r in records for v in (r if isinstance(r, (tuple, list)) else [r])]
    idx = np.array([len(records) - 1, 0])
    assert first.take(idx).records() == [records[-1], records[0]]
    both = RecordColumns.concat([first, RecordColumns.of(records[:1]), RecordColumns(rows=list(records[:1]))])
    assert both.records() == records + records[:1] * 2


def test_first_records_of_plain_tuples_travel_as_arrow_columns():
    first = RecordColumns.of([("a", 1, 10), ("b", 2, 20)])
    assert all(isinstance(c, pa.Array) for c in first.columns)
    assert first.with_field(1, [7, 8]) == [("a", 7, 10), ("b", 8, 20)]
    assert first.with_field(None, [7, 8]) == [7, 8]


def test_with_field_of_rows_equals_with_field_per_record():
    records = [("a", 1, 10), ["b", 2, 20], ("c", 3)]
    assert RecordColumns.of(records).with_field(1, [5, 6, 7]) == \
        [with_field(r, 1, v) for r, v in zip(records, [5, 6, 7])]


def _window_job(records: list, to_record, key_by, output_type=None):
    """records (key, ts) -> to_record -> event time -> key_by -> 5 s tumbling sum(1) -> collect."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    counts = (env.from_collection(records)
              .map(to_record, output_type=output_type)
              .assign_timestamps_and_watermarks(
                  WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2]))
              .key_by(key_by)
              .window(TumblingEventTimeWindows.of(Time.seconds(5)))
              .sum(1))
    counts._sink(SinkSpec(kind="collect", sink=counts._t.id), "Collect Stream Sink")   # execute_and_collect's sink
    return create_job_graph(env.get_stream_graph("window job"))


def _run_source_then_window(job_graph, n: int):
    source, window = job_graph.vertices[0], job_graph.vertices[-1]
    tdd = TaskDeploymentDescriptor(source.id, 0, 0, epoch=0, processing_time=0, end_of_input=True,
                                   splits=(SplitRead("collection", 0, n),), source_reader=CollectionReader)
    rows = list(run_task(job_graph, tdd, {}, []))
    source_garbage = gc.collect()
    ack = pickle.loads(rows[-1][1])
    assert rows[-1][0] == ACK and ack.failure is None and ack.records_in == n
    inputs = [r for r in rows if r[0] != ACK]
    sinks = {n.id: writer_class(n.operator.sink) for n in window.operators if n.kind == "sink"}
    out = list(run_task(job_graph, TaskDeploymentDescriptor(window.id, 0, 0, epoch=0, processing_time=0,
                                                            end_of_input=True, sink_writers=sinks), {}, inputs))
    window_garbage = gc.collect()
    ack = pickle.loads(out[-1][1])
    assert ack.failure is None and ack.watermark > MIN_WATERMARK
    (collected,) = (c.records() for c in ack.committables.values())
    return collected, source_garbage, window_garbage


@pytest.mark.parametrize("keys", [["a", "b", "a"], [1, 2, 1], ["a", b"a", "a"], [1, 1.0, 2.5], [(1, "x"), (2, "y"), (1, "x")]])
def test_window_results_keep_the_first_records_fields_and_types(keys):
    records = [(k, i * 1000) for i, k in enumerate(keys)]
    job_graph = _window_job(records, lambda e: (e[0], 1, e[1]), 0)
    got, _, _ = _run_source_then_window(job_graph, len(records))
    expected = {}
    for k, ts in records:
        first = expected.setdefault(k, [k, 0, ts])
        first[1] += 1
    assert sorted(map(repr, got)) == sorted(repr(tuple(v)) for v in expected.values())


@pytest.mark.parametrize("output_type, arrow, to_record", [
    (Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()]), True, tuple),
    (Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()]), False, tuple),     # int32: not the sums' int64
    (Types.ROW_NAMED(["word", "n", "ts"], [Types.STRING(), Types.LONG(), Types.LONG()]), False,
     lambda fields: Row(word=fields[0], n=fields[1], ts=fields[2])),
])
def test_results_of_plain_tuples_reach_the_collect_sink_as_arrow_columns(monkeypatch, output_type, arrow, to_record):
    seen = []
    write = CollectWriter.write
    monkeypatch.setattr(CollectWriter, "write", lambda self, values: (seen.append(type(values)), write(self, values)))
    records = [("a", 0), ("b", 1000), ("a", 2000), ("c", 7000), ("a", 8000)]
    job_graph = _window_job(records, lambda e: to_record((e[0], 1, e[1])), 0, output_type)
    got, _, _ = _run_source_then_window(job_graph, len(records))
    assert set(seen) == {ArrowBatch if arrow else list}
    expected = [("a", 2, 0), ("b", 1, 1000), ("a", 1, 8000), ("c", 1, 7000)]
    assert sorted(map(repr, got)) == sorted(repr(to_record(e)) for e in expected)
    if not arrow and isinstance(got[0], Row):
        assert got[0].as_dict().keys() == {"word", "n", "ts"}


@pytest.mark.parametrize("batches", [
    [[("a", 1, 0), ("b", 2, 1000)], [("a", 3, 2000), ("c", 4, 7000)]],          # one type: merged as one run
    [[("a", 1, 0), ("b", 2, 1000)], [("a", 2.5, 2000)]],                        # ints, then floats: shipped apart
    [[("a", 1, 0)], [(b"a", 1, 1000)]],                                          # str, then bytes keys: two keys
    [[("a", "x", 0)], [("a", "y", 1000)]],                                       # a sum Arrow has not: in Python
])
def test_batches_aggregated_as_they_come_merge_into_one_runs_panes(batches):
    """A run's batches are pre-aggregated as they come and merged at the flush: the same panes as
    aggregating the whole run at once, first records included; parts Arrow cannot merge are
    shipped apart, and the window subtask's merge gives the same results."""
    job_graph = _window_job([("a", 0)], lambda e: e, 0)
    edge = job_graph.outputs_of(job_graph.vertices[0].id)[0].stream_edge
    spec = next(n.operator for n in job_graph.vertices[-1].operators if n.kind == "operator")
    aggregator = PanePreAggregator(spec, edge.partitioner.key_selector, 0, None)
    values = [r for b in batches for r in b]
    stamps = [r[2] for r in values]
    want = aggregator.aggregate(values, stamps)
    parts = [aggregator.batch_panes(b, [r[2] for r in b]) for b in batches]
    if any(p is None for p in parts):       # not Arrow: the writer keeps the records for aggregate()
        assert batches[0][0][1] == "x"
        return
    try:
        got = aggregator.merge(parts)
    except (pa.ArrowInvalid, pa.ArrowTypeError):     # ints then floats, str then bytes
        assert _merged_results(spec, parts) == _merged_results(spec, [want])
        return
    for g, w in zip(got, want):
        g, w = (x.records() if isinstance(x, RecordColumns) else to_pylist(x) for x in (g, w))
        assert repr(sorted(map(repr, g))) == repr(sorted(map(repr, w)))
    by_pane = lambda p: sorted(zip(to_pylist(p.keys), p.starts.tolist(), p.representatives.records()), key=repr)
    assert by_pane(got) == by_pane(want)     # each pane's first record


def _merged_results(spec, parts):
    """The results a window subtask makes of pre-aggregated panes of one window: its first records
    with the merged aggregate."""
    chunks = [(p.keys, p.accumulators, p.representatives) for p in parts]
    operator = WindowAggregationOperator.__new__(WindowAggregationOperator)
    operator.kind, operator.position = spec.aggregation.kind, spec.aggregation.position
    _, accs, reps = operator._merge(chunks)
    return sorted(reps.with_field(operator.position, to_pylist(accs)), key=repr)


def test_the_collect_writer_keeps_arrow_and_record_writes_in_order():
    t = Types.TUPLE([Types.STRING(), Types.LONG()])
    writer = CollectWriter(None, WriterInitContext("Collect Stream Sink", 0, 1, 0, 0, input_type=t))
    writer.write([("a", 1)])
    writer.write(ArrowBatch.of_records([("b", 2), ("c", 3)], [None, None], t))
    writer.write([("d", 4)])
    columns = writer.finish()
    assert columns.records() == [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    assert all(isinstance(c, pa.Array) for c in pickle.loads(pickle.dumps(columns)).columns)


def test_a_finished_task_leaves_nothing_for_the_cyclic_collector():
    # Operators, contexts and writers reference each other; what they hold when the task ends
    # must be dropped, not left to a cyclic collection (about a second per 500,000 records).
    # Lists made inside the task, not tuples: they stay Python objects all the way (no Arrow
    # columns), as records of any user type would.
    n = 60_000
    gc.collect()
    job_graph = _window_job([(f"w{i}", i) for i in range(n)], lambda e: [e[0], 1, e[1]], lambda e: e[0])
    collected, source_garbage, window_garbage = _run_source_then_window(job_graph, n)
    assert source_garbage < 1_000 and window_garbage < 1_000
    assert sorted(collected) == [[f"w{i}", 1, i] for i in sorted(range(n), key=lambda i: f"w{i}")]
