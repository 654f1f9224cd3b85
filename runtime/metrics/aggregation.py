"""The driver's aggregation of the tasks' metric reports, epoch by epoch, over one run.

Per scope (``<operator>.<group>...<name>``, summed over the operator's subtasks):

- counter: ``count``, the run's total so far, and ``epoch``, what this epoch added;
- meter: ``count`` (run total), ``events`` of this epoch and their ``rate`` per second over the
  epoch's duration;
- gauge: the last value of each subtask (``subtasks``: subtask index -> value);
- distribution: ``count``, ``sum``, ``min``, ``max``, ``mean`` of this epoch's updates.

Everything is JSON-able: it goes into the epoch log as it is.
"""
from __future__ import annotations

from runtime.metrics.registry import COUNTER, DISTRIBUTION, GAUGE, METER


class RunMetrics:
    def __init__(self):
        self.totals: dict = {}      # (vertex id, subtask) -> {scope: total} of counters and meters
        self.kinds: dict = {}       # scope -> kind, of every scope the run has seen
        self.gauges: dict = {}      # scope -> {subtask: last value}

    def counts_of(self, vertex_id, subtask: int) -> dict:
        """The subtask's counter and meter totals so far: where its next task starts them."""
        return dict(self.totals.get((vertex_id, subtask), {}))

    def epoch(self, reports: list, duration_s: float) -> dict:
        """``reports``: (vertex id, subtask, TaskMetrics.report()) of the epoch's tasks."""
        before = self._run_totals()
        distributions: dict = {}
        for vertex_id, subtask, report in reports:
            for scope, (kind, value) in report.items():
                self.kinds.setdefault(scope, kind)
                if kind in (COUNTER, METER):
                    self.totals.setdefault((vertex_id, subtask), {})[scope] = value
                elif kind == GAUGE:
                    self.gauges.setdefault(scope, {})[str(subtask)] = value
                elif kind == DISTRIBUTION:
                    distributions.setdefault(scope, []).append(value)
        totals = self._run_totals()
        out: dict = {}
        for scope in sorted(self.kinds):
            kind = self.kinds[scope]
            if kind == COUNTER:
                out[scope] = {"kind": kind, "count": totals.get(scope, 0),
                              "epoch": totals.get(scope, 0) - before.get(scope, 0)}
            elif kind == METER:
                events = totals.get(scope, 0) - before.get(scope, 0)
                out[scope] = {"kind": kind, "count": totals.get(scope, 0), "events": events,
                              "rate": events / duration_s if duration_s > 0 else None}
            elif kind == GAUGE:
                out[scope] = {"kind": kind, "subtasks": dict(sorted(self.gauges[scope].items(), key=lambda i: int(i[0])))}
            elif scope in distributions:
                out[scope] = {"kind": kind, **_combine(distributions[scope])}
        return out

    def _run_totals(self) -> dict:
        totals: dict = {}
        for counts in self.totals.values():
            for scope, n in counts.items():
                totals[scope] = totals.get(scope, 0) + n
        return totals


def _combine(parts: list) -> dict:
    count = sum(p[0] for p in parts)
    total = sum(p[1] for p in parts)
    mins = [p[2] for p in parts if p[2] is not None]
    maxs = [p[3] for p in parts if p[3] is not None]
    return {"count": count, "sum": total, "min": min(mins) if mins else None,
            "max": max(maxs) if maxs else None, "mean": total / count if count else None}
