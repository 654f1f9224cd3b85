"""State schema evolution on restore (Flink's serializer upgrade: ``TypeSerializerSchemaCompatibility``).

A restored state's stored type (the declared type its checkpoint wrote, ``snapshot_format``'s
``TYPES_METADATA``) is compared with the type the operator registers it with:

* the same type: compatible as is;
* compatible after migration: a Row that gained fields (null in the restored values), lost
  fields (dropped), or whose fields widened a number (BYTE/SHORT -> INT -> LONG, FLOAT ->
  DOUBLE), as a value, a list's elements, or a map's values (a map's key type may not change);
  a top-level number widened the same way;
* anything else is incompatible: ``StateMigrationException``, naming the operator, the state, both
  types and the fix (a SavepointWriter migration, docs/operations/state-processor.md).

A checkpoint written before types were stored, or a state stored pickled (no declared type), has
no stored type to compare: it restores as it always did.
"""
from __future__ import annotations

from typing import Callable, Optional

from runtime.common.throwables import ThrowableType
from runtime.common.typeinfo import (
    BasicType, BasicTypeInfo, CollectionTypeInfo, ListTypeInfo, MapTypeInfo, RowTypeInfo, TypeInformation)
from runtime.common.types import Row

_WIDER = {
    BasicType.BYTE: {BasicType.SHORT, BasicType.INT, BasicType.LONG},
    BasicType.SHORT: {BasicType.INT, BasicType.LONG},
    BasicType.INT: {BasicType.LONG},
    BasicType.FLOAT: {BasicType.DOUBLE},
}


class StateMigrationException(RuntimeError):
    """A restored state's stored type cannot become the type it is registered with. A restart
    restores the same state into the same type: the run fails without one."""

    throwable_type = ThrowableType.NON_RECOVERABLE_ERROR


def _same(value):
    return value


def migration(stored: TypeInformation, new: TypeInformation) -> Optional[Callable]:
    """None when ``stored`` and ``new`` are the same type; else the function that turns a value
    of ``stored`` into one of ``new``. Raises ValueError (saying why) when there is none."""
    if stored == new:
        return None
    if isinstance(stored, BasicTypeInfo) and isinstance(new, BasicTypeInfo):
        if new._basic_type in _WIDER.get(stored._basic_type, ()):
            return _same
        raise ValueError(f"{stored} cannot become {new} (a number may only widen: "
                         f"BYTE/SHORT -> INT -> LONG, FLOAT -> DOUBLE)")
    if isinstance(stored, RowTypeInfo) and isinstance(new, RowTypeInfo):
        return _row_migration(stored, new)
    if isinstance(stored, ListTypeInfo) and isinstance(new, ListTypeInfo):
        element = migration(stored.get_element_type(), new.get_element_type()) or _same
        return lambda values: None if values is None else [element(v) for v in values]
    if isinstance(stored, MapTypeInfo) and isinstance(new, MapTypeInfo):
        if stored.get_key_type() != new.get_key_type():
            raise ValueError(f"a map's key type {stored.get_key_type()} cannot become {new.get_key_type()}")
        value = migration(stored.get_value_type(), new.get_value_type()) or _same
        return lambda entries: None if entries is None else {k: value(v) for k, v in entries.items()}
    if isinstance(stored, CollectionTypeInfo) or isinstance(new, CollectionTypeInfo) or type(stored) is not type(new):
        raise ValueError(f"{stored} cannot become {new}")
    raise ValueError(f"{stored} cannot become {new}")


def _row_migration(stored: RowTypeInfo, new: RowTypeInfo) -> Callable:
    old_names, new_names = stored.get_field_names(), new.get_field_names()
    old_types = dict(zip(old_names, stored.get_field_types()))
    fields = []     # (the stored field's position or None, its migration) per new field
    for name, new_type in zip(new_names, new.get_field_types()):
        if name not in old_types:
            fields.append((None, None))
            continue
        try:
            fields.append((old_names.index(name), migration(old_types[name], new_type) or _same))
        except ValueError as e:
            raise ValueError(f"field '{name}': {e}") from None

    def migrate(row):
        if row is None:
            return None
        return Row(**{n: None if i is None else f(row[i]) for n, (i, f) in zip(new_names, fields)})
    return migrate


def check_restored_type(operator: str, state: str, stored: Optional[TypeInformation],
                        new: Optional[TypeInformation]) -> Optional[Callable]:
    """The migration of a restored state's values to the type it is registered with (None: none
    needed), or StateMigrationException when there is none."""
    from runtime.state.snapshot_format import declared
    if not declared(stored) or not declared(new):
        return None
    try:
        return migration(stored, new)
    except ValueError as e:
        raise StateMigrationException(
            f"{operator}: the state '{state}' was checkpointed as {stored} and is now registered as {new}, "
            f"which it cannot become ({e}). A restore may add Row fields, drop them, or widen a number "
            f"(INT -> LONG, FLOAT -> DOUBLE). Keep the old type, give the new state another name, or migrate "
            f"the savepoint's state offline: read it with SavepointReader, transform it, and bootstrap the new "
            f"type with SavepointWriter.with_operator (docs/operations/state-processor.md).") from None
