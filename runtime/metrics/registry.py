"""The metrics of one subtask for one epoch (Flink's MetricRegistry as a task sees it).

A task lives for one epoch, so counters and meters start from the subtask's totals so far in
the run (``counts``, sent by the driver with the deployment): ``get_count()`` answers what it
would in Flink's long-lived task. ``report()`` is what the acknowledgement carries: per scope
``<operator>.<group>...<name>``, its kind and value (counters and meters: the subtask's total;
gauges: their value now; distributions: count, sum, min and max of the epoch's updates).
"""
from __future__ import annotations

import logging
from typing import Callable, Optional

from runtime.metrics.metricbase import Counter, Distribution, Meter, MetricGroup

log = logging.getLogger(__name__)

COUNTER, GAUGE, METER, DISTRIBUTION = "counter", "gauge", "meter", "distribution"


class SimpleCounter(Counter):
    def __init__(self, count: int = 0):
        self.count = count

    def inc(self, n: int = 1):
        self.count += n

    def dec(self, n: int = 1):
        self.count -= n

    def get_count(self) -> int:
        return self.count

    def value(self):
        return self.count


class EpochMeter(Meter):
    """Events marked; the driver turns the epoch's events into a rate over the epoch (Flink's
    MeterView averages over ``time_span_in_seconds``; an epoch is the span here)."""

    def __init__(self, count: int = 0, time_span_in_seconds: int = 60):
        self.count = count
        self.time_span_in_seconds = time_span_in_seconds

    def mark_event(self, value: int = 1):
        self.count += value

    def get_count(self) -> int:
        return self.count

    def value(self):
        return self.count


class EpochDistribution(Distribution):
    def __init__(self):
        self.count, self.sum, self.min, self.max = 0, 0, None, None

    def update(self, value):
        self.count += 1
        self.sum += value
        self.min = value if self.min is None or value < self.min else self.min
        self.max = value if self.max is None or value > self.max else self.max

    def value(self):
        return (self.count, self.sum, self.min, self.max)


class Gauge:
    def __init__(self, scope: str, fn: Callable[[], int]):
        self.scope, self.fn = scope, fn

    def value(self):
        try:
            return self.fn()
        except Exception as e:      # Flink's reporters skip a failing gauge; the job goes on
            log.warning("gauge %s failed: %s: %s", self.scope, type(e).__name__, e)
            return None


class TaskMetrics:
    """A subtask's registered metrics by scope; ``counts``: its counter and meter totals so far."""

    def __init__(self, counts: Optional[dict] = None):
        self.counts = counts or {}
        self.metrics: dict = {}         # scope -> (kind, metric)

    def group(self, operator_name: str) -> "TaskMetricGroup":
        return TaskMetricGroup(self, (operator_name,))

    def register(self, kind: str, scope: str, create: Callable):
        known = self.metrics.get(scope)
        if known is not None:
            if known[0] == kind:
                return known[1]     # registered again (open() of a chained copy): the same metric
            log.warning("metric %s is a %s already; the %s of that name is not reported", scope, known[0], kind)
            return create()
        metric = create()
        self.metrics[scope] = (kind, metric)
        return metric

    def report(self) -> dict:
        return {scope: (kind, metric.value()) for scope, (kind, metric) in self.metrics.items()}


class TaskMetricGroup(MetricGroup):
    """PyFlink's metric group of an operator; its scope is ``<operator>.<group>...``."""

    def __init__(self, metrics: TaskMetrics, components: tuple):
        self.metrics, self.components = metrics, components

    def get_scope_components(self) -> list:
        return list(self.components)

    def get_metric_identifier(self, metric_name: str) -> str:
        return ".".join(self.components + (metric_name,))

    def add_group(self, name: str, extra: str = None) -> MetricGroup:
        added = (str(name),) if extra is None else (str(name), str(extra))
        return TaskMetricGroup(self.metrics, self.components + added)

    def counter(self, name: str) -> Counter:
        scope = self.get_metric_identifier(name)
        return self.metrics.register(COUNTER, scope, lambda: SimpleCounter(self.metrics.counts.get(scope, 0)))

    def gauge(self, name: str, obj: Callable[[], int]) -> None:
        scope = self.get_metric_identifier(name)
        self.metrics.register(GAUGE, scope, lambda: Gauge(scope, obj)).fn = obj    # the latest function wins

    def meter(self, name: str, time_span_in_seconds: int = 60) -> Meter:
        scope = self.get_metric_identifier(name)
        return self.metrics.register(
            METER, scope, lambda: EpochMeter(self.metrics.counts.get(scope, 0), time_span_in_seconds))

    def distribution(self, name: str) -> Distribution:
        return self.metrics.register(DISTRIBUTION, self.get_metric_identifier(name), EpochDistribution)
