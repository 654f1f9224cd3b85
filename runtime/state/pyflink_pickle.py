"""A key pickled to the bytes PyFlink's ``cloudpickle.dumps(key)`` gives, Rows included.

PyFlink's ``key_by`` without a ``key_type`` routes a key by its pickled bytes (see
``runtime.state.java_hash.pickled_key``). Plain data pickles the same in Sluice and PyFlink, but
a Row does not: Sluice's reduces to ``runtime.common.types._create_row`` with ``None`` for an
INSERT row, PyFlink 2.3's (pyflink/common/types.py Row.__reduce__) to
``pyflink.common.types._create_row(fields or None, tuple(row), row_kind)``, the RowKind enum
pickled as ``pyflink.common.types.RowKind(value)``. So for routing (and BATCH's key order) only,
Rows and RowKinds are written as PyFlink's; everywhere else (checkpoints, shuffles) a Row
pickles as Sluice's, which Sluice can load back.

The pure-Python pickler is used because it lets these globals be written by name: the C pickler
checks that a global can be imported, and PyFlink is not installed.
"""
from __future__ import annotations

import io
import pickle

from runtime.common.types import Row, RowKind

__all__ = ["SLUICE_TYPES_MODULE", "pyflink_dumps"]

# Found in any pickle holding a Sluice Row or RowKind (the module of their reduce's globals).
SLUICE_TYPES_MODULE = Row.__module__.encode()
_PYFLINK_TYPES = "pyflink.common.types"


def _create_row():
    """Stands for ``pyflink.common.types._create_row`` in a pickle (never called)."""


def _row_kind():
    """Stands for the class ``pyflink.common.types.RowKind`` in a pickle (never called)."""


_PYFLINK_GLOBALS = {_create_row: "_create_row", _row_kind: "RowKind"}


class _PyFlinkPickler(pickle._Pickler):   # noqa: the C Pickler cannot write an unimportable global

    def reducer_override(self, obj):
        if isinstance(obj, Row):
            return _create_row, (obj._field_names, tuple(obj), obj.get_row_kind())
        if isinstance(obj, RowKind):
            return _row_kind, (obj.value,)
        return NotImplemented

    def save_global(self, obj, name=None):
        if obj not in _PYFLINK_GLOBALS:
            return super().save_global(obj, name)
        # What the pickler writes for a global under protocol >= 4.
        self.save(_PYFLINK_TYPES)
        self.save(_PYFLINK_GLOBALS[obj])
        self.write(pickle.STACK_GLOBAL)
        self.memoize(obj)

    dispatch = dict(pickle._Pickler.dispatch)
    dispatch[type(_create_row)] = save_global


def pyflink_dumps(key) -> bytes:
    """``key`` pickled (protocol 5) as PyFlink's cloudpickle pickles it, Rows as PyFlink's Rows."""
    out = io.BytesIO()
    _PyFlinkPickler(out, 5).dump(key)
    return out.getvalue()
