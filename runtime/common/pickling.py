"""Values pickled for another process: by the C pickler, or by cloudpickle when a value holds
what only cloudpickle can pickle, as PyFlink pickles a ``PICKLED_BYTE_ARRAY`` record.

A job's own classes (defined in its script or the modules beside it) reach the workers by value,
with the job graph: the C pickler cannot find them by name there, so their instances in records
and state go by value too. Either bytes are read back by ``pickle.loads``.
"""
from __future__ import annotations

import io
import pickle

# What the C pickler raises for a class it cannot find by name (PicklingError), a local class
# or function (AttributeError), or an object it has no reduction for (TypeError).
NOT_BY_NAME = (pickle.PicklingError, AttributeError, TypeError)


def dumps(value) -> bytes:
    try:
        return pickle.dumps(value, protocol=5)
    except NOT_BY_NAME:
        return _by_value(value)


# What a chunk pickled without the memo may grow to before it is pickled again with it: records that
# share one large object (the memo writes it once) would otherwise be written once each.
UNSHARED_LIMIT = 64 << 20


def dumps_unshared(value) -> bytes:
    """``dumps`` of a chunk of records for a shuffle, without the pickler's memo: a chunk of 65,536
    records of a string and three integers pickled in 146-194 ns a record instead of 334-641 (the
    memo's dict holds every tuple and string of the chunk), and read back as fast. Records are
    independent values, as Flink's serializers make them: an object two records (or one record
    twice) hold arrives as two copies. Cycles, and a chunk past UNSHARED_LIMIT, go with the memo."""
    out = _Bounded()
    pickler = pickle.Pickler(out, protocol=5)
    pickler.fast = True
    try:
        pickler.dump(value)
    except NOT_BY_NAME:
        return _by_value(value)
    except (_TooLarge, ValueError, RecursionError):     # fast mode refuses cycles (ValueError)
        return dumps(value)
    return out.getvalue()


class _TooLarge(Exception):
    pass


class _Bounded(io.BytesIO):
    def write(self, data) -> int:       # called per 64 KiB frame
        if self.tell() + len(data) > UNSHARED_LIMIT:
            raise _TooLarge
        return super().write(data)


def dumps_each(values) -> list:
    """``[dumps(v) for v in values]``, without a call per value while all pickle by name."""
    try:
        return [pickle.dumps(v, protocol=5) for v in values]
    except NOT_BY_NAME:
        return [dumps(v) for v in values]


def _by_value(value) -> bytes:
    import cloudpickle
    return cloudpickle.dumps(value, protocol=5)
