"""Values pickled for another process: by the C pickler, or by cloudpickle when a value holds
what only cloudpickle can pickle, as PyFlink pickles a ``PICKLED_BYTE_ARRAY`` record.

A job's own classes (defined in its script or the modules beside it) reach the workers by value,
with the job graph: the C pickler cannot find them by name there, so their instances in records
and state go by value too. Either bytes are read back by ``pickle.loads``.
"""
from __future__ import annotations

import pickle

# What the C pickler raises for a class it cannot find by name (PicklingError), a local class
# or function (AttributeError), or an object it has no reduction for (TypeError).
NOT_BY_NAME = (pickle.PicklingError, AttributeError, TypeError)


def dumps(value) -> bytes:
    try:
        return pickle.dumps(value, protocol=5)
    except NOT_BY_NAME:
        return _by_value(value)


def dumps_each(values) -> list:
    """``[dumps(v) for v in values]``, without a call per value while all pickle by name."""
    try:
        return [pickle.dumps(v, protocol=5) for v in values]
    except NOT_BY_NAME:
        return [dumps(v) for v in values]


def _by_value(value) -> bytes:
    import cloudpickle
    return cloudpickle.dumps(value, protocol=5)
