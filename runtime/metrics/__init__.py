"""User-defined metrics, as ``pyflink.metrics``: a rich function registers counters, gauges,
meters and distributions on ``runtime_context.get_metrics_group()`` in ``open()``.

Each task reports its metrics with its acknowledgement (``TaskMetrics.report``); the driver
aggregates them per epoch (``RunMetrics``) into the epoch log, beside the built-in metrics.
As in Flink, metrics belong to a run: they are not checkpointed and start at 0 when a run
starts (a restore included).
"""
from runtime.metrics.metricbase import Counter, Distribution, Meter, Metric, MetricGroup

__all__ = ["Counter", "Distribution", "Meter", "Metric", "MetricGroup"]
