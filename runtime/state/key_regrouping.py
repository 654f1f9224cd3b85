"""Restored keyed state whose key groups were computed with another key type than the job's.

A key's group depends on how its key_by serializes it (runtime.state.key_groups): PyFlink's
pickled key without ``key_type``, the key as ``key_type`` with one, a field key as its Java value.
A state file keeps each key's value (``key``, ``key_bytes``) beside the group its writer hashed
it to, so a job keyed otherwise (a SavepointWriter bootstrap keyed with ``Types.STRING()``, a job
keyed by a lambda alone, or a job whose ``key_type`` changed between runs) would look its keys up
in groups, and on subtasks, that hold nothing: empty state, silently. Flink itself refuses such a
restore (its key serializer is incompatible); Sluice keeps every key in the file as a Python
value, so where the values are equal it recomputes each restored row's group with the job's key
type (Flink's KeyGroupRangeAssignment, as the job's records are routed), and refuses where a key
cannot be hashed as the job's key type.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc

from runtime.common.arrow import records_to_arrow
from runtime.common.typeinfo import PickledBytesTypeInfo
from runtime.state.key_groups import assign_key_groups
from runtime.state.snapshot_format import TIMER_PREFIX, declared, decode_keys

__all__ = ["FIELD_KEY", "KeyRegrouping", "KeyTypeMismatchException", "key_type_name"]

FIELD_KEY = "field key (its Java value)"    # key_by(0) / key_by("name"): key_type None
PICKLED = str(PickledBytesTypeInfo())         # key_by(selector) without key_type: PyFlink's pickled key


def key_type_name(key_type) -> str:
    """How a checkpoint records the key type its key groups were hashed with."""
    return FIELD_KEY if key_type is None else str(key_type)


class KeyTypeMismatchException(RuntimeError):
    """Restored keys that cannot be hashed as the job's key type."""


@dataclass(frozen=True)
class KeyRegrouping:
    """How a subtask recomputes the key groups of an operator's restored rows: ``key_type`` the
    job's (hashed as its records are), ``written`` the name of the key type the files were
    hashed with, ``operator`` the operator's name, for errors."""

    operator: str
    written: str
    key_type: Any
    max_parallelism: int

    def failure(self, state: str, key, error: Exception) -> KeyTypeMismatchException:
        job = key_type_name(self.key_type)
        return KeyTypeMismatchException(
            f"{self.operator}: the state '{state}' was written with keys of type {self.written} and the job "
            f"keys its stream as {job}; the restored key {key!r} ({type(key).__name__}) is no {job} value "
            f"({error}), so no record's key would find it. Key the stream as the state was written "
            f"({_declaration(self.written)}), or rewrite the state's keys with SavepointWriter "
            f"(docs/operations/state-processor.md).")

    def regrouped(self, table: pa.Table) -> pa.Table:
        """``table`` (a state file's rows, base columns present) with each keyed row's (and
        timer's) key group recomputed from its key; operator state rows (no group) as they are."""
        kg = table.column("key_group")
        if table.num_rows == 0 or kg.null_count == table.num_rows:
            return table
        keyed = pc.is_valid(kg)
        rows = table.filter(keyed) if kg.null_count else table
        keys = decode_keys(rows)
        groups = self._groups(keys, rows)
        if kg.null_count:
            merged = kg.to_pylist()
            it = iter(groups.tolist())
            groups = [next(it) if g is not None else None for g in merged]
        return table.set_column(table.schema.get_field_index("key_group"), "key_group", pa.array(groups, pa.int32()))

    def _groups(self, keys: list, rows: pa.Table):
        try:
            return self._hashed(keys)
        except Exception as e:      # find the key that does not fit, to name it
            names = rows.column("state_name").to_pylist()
            for key, name in zip(keys, names):
                try:
                    self._hashed([key])
                except Exception as one:
                    raise self.failure(_state(name), key, one) from one
            raise self.failure(_state(names[0]), keys[0], e) from e

    def _hashed(self, keys: list):
        if declared(self.key_type):
            # The keys must be values of the declared type (what the job's selector returns for
            # it): "1" would hash as INT's 1 and never equal the job's key 1.
            records_to_arrow(keys, self.key_type)
        return assign_key_groups(keys, self.max_parallelism, self.key_type)


def _declaration(written: str) -> str:
    if written == FIELD_KEY:
        return 'key_by(0) or key_by("name")'
    if written == PICKLED:
        return "key_by(selector) without key_type"
    return f"declare key_by(selector, key_type=...) as {written}"


def _state(name: Optional[str]) -> str:
    return "timers" if name and name.startswith(TIMER_PREFIX) else str(name)
