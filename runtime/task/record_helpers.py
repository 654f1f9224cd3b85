"""Record helpers of the executing operators: a record's field read or replaced (tuples, Rows,
lists, plain values), Flink's sum/min/max aggregators as reduce functions, and whether a batch
has timestamps and their extreme. Plain functions over records, so that operators and the
columnar record code both use them without importing each other."""
from __future__ import annotations

from typing import Any, Callable

from runtime.datastream import operators as ops


def no_timestamps(timestamps: list) -> bool:
    return timestamps.count(None) == len(timestamps)


def extreme(pick, timestamps: list):
    """``max``/``min`` of the timestamps that are set, or None; at C speed when all are."""
    if not timestamps:
        return None
    try:
        return pick(timestamps)     # all set (or all None: a single None, or a TypeError)
    except TypeError:
        pass
    stamps = [t for t in timestamps if t is not None]
    return pick(stamps) if stamps else None


def with_field(record, position, value):
    """``record`` with field ``position`` replaced (tuples, Rows, lists, or a plain value)."""
    if position is None or not isinstance(record, (tuple, list)):
        return value
    if type(record) is tuple:
        return record[:position] + (value,) + record[position + 1:]
    if isinstance(record, list):
        copy = list(record)
        copy[position] = value
        return copy
    values = tuple(record)
    replaced = values[:position] + (value,) + values[position + 1:]
    if type(record) is tuple:
        return replaced
    names = getattr(record, "_fields", None)
    cls = type(record)
    return cls(**dict(zip(names, replaced))) if names else cls(*replaced)


def field_of(record, position):
    if position is None or not isinstance(record, (tuple, list)):
        if position not in (None, 0):
            raise IndexError(f"field {position} of a plain value {record!r}")
        return record
    return record[position]


def aggregator(aggregation: ops.Aggregation) -> Callable[[Any, Any], Any]:
    """Flink's SumAggregator / ComparableAggregator as a reduce function.

    sum/min/max keep the other fields of the first record; min_by/max_by return the
    record holding the extreme (the first or last of equals, per ``first``).
    """
    pos, kind, first = aggregation.position, aggregation.kind, aggregation.first

    if kind == "sum":
        return lambda acc, v: with_field(acc, pos, field_of(acc, pos) + field_of(v, pos))
    if kind == "min":
        return lambda acc, v: acc if field_of(acc, pos) <= field_of(v, pos) else with_field(acc, pos, field_of(v, pos))
    if kind == "max":
        return lambda acc, v: acc if field_of(acc, pos) >= field_of(v, pos) else with_field(acc, pos, field_of(v, pos))
    if kind == "min_by":
        if first:
            return lambda acc, v: v if field_of(v, pos) < field_of(acc, pos) else acc
        return lambda acc, v: v if field_of(v, pos) <= field_of(acc, pos) else acc
    if kind == "max_by":
        if first:
            return lambda acc, v: v if field_of(v, pos) > field_of(acc, pos) else acc
        return lambda acc, v: v if field_of(v, pos) >= field_of(acc, pos) else acc
    raise ValueError(f"unknown aggregation {kind!r}")
