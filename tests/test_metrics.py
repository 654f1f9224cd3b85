"""Issue 18, part 5: user metrics (``runtime_context.get_metrics_group()``), as PyFlink's.

The job below is PyFlink code (only the imports differ). Every expected value is computed
here from the input: the numbers 1..N, cut into epochs of a few records per split.
"""
import ast

from runtime.checkpoint.storage import CheckpointStorage
from runtime.datastream import MapFunction
from runtime.metrics import Counter, Distribution, Meter, MetricGroup
from runtime.metrics.aggregation import RunMetrics
from runtime.storage.layout import job_dir
from runtime_env import job_env

N = 40
NUMBERS = list(range(1, N + 1))


class Numbers(MapFunction):
    """Registers one metric of each kind in open(), as a PyFlink job does."""

    def open(self, runtime_context):
        group: MetricGroup = runtime_context.get_metrics_group().add_group("numbers")
        self.seen: Counter = group.counter("seen")
        self.evens: Counter = runtime_context.get_metrics_group().add_group("parity", "even").counter("n")
        self.thirds: Meter = group.meter("thirds", time_span_in_seconds=10)
        self.values: Distribution = group.distribution("values")
        self.here = 0       # records this subtask processed in this run: a gauge of it
        group.gauge("here", lambda: self.here)
        self.subtask = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        self.seen.inc()
        self.seen.inc(2)
        self.seen.dec(2)
        if value % 2 == 0:
            self.evens.inc()
        self.thirds.mark_event(value % 3)
        self.values.update(value)
        self.here = self.seen.get_count()
        return self.subtask, self.seen.get_count()


def run(tmp_path, **settings):
    env = job_env(tmp_path, 2, epoch__max_records_per_split=5, **settings)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    env.from_collection(NUMBERS).map(Numbers()).name("Count numbers").print()
    return env.execute("metrics")


def test_metrics_are_aggregated_per_epoch_and_logged(spark, tmp_path):
    result = run(tmp_path)
    assert len(result.epochs) > 2       # the input spans several epochs
    seen = [e.metrics["Count numbers.numbers.seen"] for e in result.epochs]
    # Counters: the run's total so far, and what each epoch added.
    assert [s["kind"] for s in seen] == ["counter"] * len(seen)
    assert sum(s["epoch"] for s in seen) == seen[-1]["count"] == N
    assert [s["count"] for s in seen] == [sum(x["epoch"] for x in seen[:i + 1]) for i in range(len(seen))]
    assert result.epochs[-1].metrics["Count numbers.parity.even.n"]["count"] == sum(v % 2 == 0 for v in NUMBERS)
    # A task's get_count() continues from the run's total of its subtask: each subtask's
    # counts are 1, 2, 3, ... across the epochs.
    pairs = [ast.literal_eval(line.split("> ", 1)[1]) for line in result.printed]     # "1> (0, 3)"
    by_subtask = {}
    for subtask, count in pairs:
        by_subtask.setdefault(subtask, []).append(count)
    assert sorted(by_subtask) == [0, 1]
    for counts in by_subtask.values():
        assert sorted(counts) == list(range(1, len(counts) + 1))
    # Gauges: each subtask's last value (its records so far).
    here = result.epochs[-1].metrics["Count numbers.numbers.here"]
    assert here == {"kind": "gauge", "subtasks": {str(s): len(c) for s, c in sorted(by_subtask.items())}}
    # Meters: the epoch's events and their rate; the total over the run.
    thirds = [e.metrics["Count numbers.numbers.thirds"] for e in result.epochs]
    assert sum(t["events"] for t in thirds) == thirds[-1]["count"] == sum(v % 3 for v in NUMBERS)
    assert all((t["rate"] > 0) == (t["events"] > 0) for t in thirds)
    # Distributions: the epoch's updates, which together are the input.
    values = [e.metrics["Count numbers.numbers.values"] for e in result.epochs if "Count numbers.numbers.values" in e.metrics]
    assert sum(d["count"] for d in values) == N and sum(d["sum"] for d in values) == sum(NUMBERS)
    assert min(d["min"] for d in values if d["count"]) == 1 and max(d["max"] for d in values if d["count"]) == N
    assert all(d["mean"] == d["sum"] / d["count"] for d in values if d["count"])
    # The epoch log holds each epoch's metrics, built-in and user, once it ran.
    logged = CheckpointStorage(job_dir(str(tmp_path / "warehouse"), "metrics")).epoch_log.epoch_metrics()
    assert [(m["epoch"], m["records_in"], m["metrics"]) for m in logged] == \
        [(e.epoch, e.records_in, e.metrics) for e in result.epochs]
    assert {m["run_id"] for m in logged} == {result.run_id}


def test_metrics_start_at_zero_in_a_restored_run(spark, tmp_path):
    """As Flink: metrics are not checkpointed; a run restored from a checkpoint counts what it
    processes itself."""
    first = run(tmp_path, epoch__max_epochs=2)
    done = first.epochs[-1].metrics["Count numbers.numbers.seen"]["count"]
    assert sum(e.records_in for e in first.epochs) == done < N
    second = run(tmp_path)
    assert second.restored_from is not None
    assert second.epochs[-1].metrics["Count numbers.numbers.seen"]["count"] == N - done
    logged = CheckpointStorage(job_dir(str(tmp_path / "warehouse"), "metrics")).epoch_log.epoch_metrics(first.run_id)
    assert logged[-1]["metrics"]["Count numbers.numbers.seen"]["count"] == done


def test_run_metrics_by_hand():
    """Two subtasks, two epochs; the sums worked out by hand."""
    metrics = RunMetrics()
    first = metrics.epoch([
        (1, 0, {"M.c": ("counter", 3), "M.g": ("gauge", 7), "M.m": ("meter", 4), "M.d": ("distribution", (2, 10, 4, 6))}),
        (1, 1, {"M.c": ("counter", 2), "M.g": ("gauge", 1), "M.m": ("meter", 0), "M.d": ("distribution", (1, 1, 1, 1))}),
    ], duration_s=2.0)
    assert first == {"M.c": {"kind": "counter", "count": 5, "epoch": 5},
                     "M.d": {"kind": "distribution", "count": 3, "sum": 11, "min": 1, "max": 6, "mean": 11 / 3},
                     "M.g": {"kind": "gauge", "subtasks": {"0": 7, "1": 1}},
                     "M.m": {"kind": "meter", "count": 4, "events": 4, "rate": 2.0}}
    assert metrics.counts_of(1, 0) == {"M.c": 3, "M.m": 4}
    # Subtask 1 reports nothing in the second epoch: its totals and last gauge value stay.
    second = metrics.epoch([(1, 0, {"M.c": ("counter", 4), "M.g": ("gauge", 9), "M.m": ("meter", 10)})], 3.0)
    assert second == {"M.c": {"kind": "counter", "count": 6, "epoch": 1},
                      "M.g": {"kind": "gauge", "subtasks": {"0": 9, "1": 1}},
                      "M.m": {"kind": "meter", "count": 10, "events": 6, "rate": 2.0}}
