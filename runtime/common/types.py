"""``Row`` and ``RowKind`` as in ``pyflink.common.types``.

Unlike PyFlink's ``Row`` (a plain object over a list), this ``Row`` subclasses ``tuple`` so that
generic tuple code (unpacking, slicing, ``zip(*rows)``, Arrow struct conversion) works on it.
The price is immutability: ``row[i] = v`` is not supported.
"""
from __future__ import annotations

from enum import Enum
from typing import Any, Iterable, List, Optional

__all__ = ["FieldNotFoundError", "Row", "RowKind", "with_field_names"]


class RowKind(Enum):
    """The change a row describes in a changelog, as Flink's ``RowKind``."""

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def short_string(self) -> str:
        return _SHORT_STRINGS[self.value]

    def to_byte_value(self) -> int:
        return self.value

    @staticmethod
    def from_byte_value(value: int) -> "RowKind":
        return _KINDS_BY_VALUE[value]

    @staticmethod
    def from_short_string(value: str) -> "RowKind":
        try:
            return _KINDS_BY_VALUE[_SHORT_STRINGS.index(value)]
        except ValueError:
            raise ValueError(f"unknown RowKind short string {value!r}; expected one of "
                             f"{', '.join(_SHORT_STRINGS)}") from None

    def __str__(self) -> str:
        return _SHORT_STRINGS[self.value]


_SHORT_STRINGS = ("+I", "-U", "+U", "-D")
_KINDS_BY_VALUE = tuple(RowKind)


class FieldNotFoundError(KeyError, ValueError):
    """A field name a Row does not have.

    PyFlink raises ValueError for ``row["missing"]``; KeyError is what mapping-style code
    catches. Deriving from both keeps either ``except`` working.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _create_row(fields: Optional[List[str]], values: Iterable, row_kind: Optional[RowKind] = None) -> "Row":
    """Rebuild a Row; the pickling entry point (same name and signature as PyFlink's)."""
    row = _tuple_new(Row, values)
    if fields is not None:
        _set(row, "_field_names", list(fields))
    if row_kind is not None and row_kind is not RowKind.INSERT:
        _set(row, "_row_kind", row_kind)
    return row


class _FieldOrTupleMethod:
    """Resolves ``row.count``/``row.index`` to the field when the row has one by that name.

    ``tuple`` defines ``count`` and ``index``; plain attribute lookup would find those methods
    before ``__getattr__`` and hide a field named ``count`` (common in word counts).
    """

    def __init__(self, name: str):
        self._name = name
        self._method = getattr(tuple, name)

    def __get__(self, row, owner=None):
        if row is None:
            return self._method
        names = row._field_names
        if names is not None and self._name in names:
            return tuple.__getitem__(row, names.index(self._name))
        return self._method.__get__(row, owner)


class Row(tuple):
    """A record with positional fields and, optionally, field names.

    ``Row(1, "a")`` is positional; ``Row(id=1, name="a")`` is named, fields in the given order.
    ``Row("id", "name")`` is also a positional row of two strings, which can be called as a
    factory: ``Person = Row("name", "age"); Person("Alice", 11) == Row(name="Alice", age=11)``.
    """

    # Class-level defaults keep unnamed INSERT rows free of a per-instance __dict__.
    _field_names: Optional[List[str]] = None
    _row_kind: RowKind = RowKind.INSERT

    count = _FieldOrTupleMethod("count")
    index = _FieldOrTupleMethod("index")

    def __new__(cls, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Can not use both args and kwargs to create Row")
        if kwargs:
            row = _tuple_new(cls, kwargs.values())
            _set(row, "_field_names", list(kwargs))
            return row
        return _tuple_new(cls, args)

    @staticmethod
    def of_kind(row_kind: RowKind, *args, **kwargs) -> "Row":
        row = Row(*args, **kwargs)
        row.set_row_kind(row_kind)
        return row

    def as_dict(self, recursive: bool = False) -> dict:
        """The named fields as a dict; nested Rows (in lists and dicts too) as dicts if recursive."""
        names = self._field_names
        if names is None:
            raise TypeError("Cannot convert a Row class into dict")
        if not recursive:
            return dict(zip(names, self))

        def conv(obj):
            if isinstance(obj, Row):
                return obj.as_dict(True)
            if isinstance(obj, list):
                return [conv(o) for o in obj]
            if isinstance(obj, dict):
                return {k: conv(v) for k, v in obj.items()}
            return obj

        return dict(zip(names, (conv(v) for v in self)))

    def get_row_kind(self) -> RowKind:
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        if not isinstance(row_kind, RowKind):
            raise TypeError(f"row kind must be a RowKind, got {row_kind!r}")
        _set(self, "_row_kind", row_kind)

    def set_field_names(self, field_names: List[str]) -> None:
        field_names = list(field_names)
        if len(field_names) != len(self):
            raise ValueError(f"{len(field_names)} field names {field_names} given for a row of "
                             f"{len(self)} fields {self!r}")
        _set(self, "_field_names", field_names)

    def _is_retract_msg(self) -> bool:
        return self._row_kind in (RowKind.UPDATE_BEFORE, RowKind.DELETE)

    def _is_accumulate_msg(self) -> bool:
        return self._row_kind in (RowKind.INSERT, RowKind.UPDATE_AFTER)

    def __call__(self, *args) -> "Row":
        """Use this row's (string) values as field names for a new row of ``args``."""
        names = list(tuple.__iter__(self))
        if not all(type(n) is str for n in names):
            raise TypeError(f"{self!r} is not a row factory: only a Row of field names "
                            f"(all str), like Row('name', 'age'), can be called")
        if len(args) > len(names):
            raise ValueError("Can not create Row with fields %s, expected %d values but got %s"
                             % (self, len(names), args))
        if len(args) < len(names):
            # PyFlink accepts this and builds a row whose names outnumber its values, which
            # then breaks typed serialization downstream; fail here instead.
            raise ValueError("Can not create Row with fields %s, expected %d values but got %s"
                             % (self, len(names), args))
        return _create_row(names, args, self._row_kind)

    def __getitem__(self, item):
        if isinstance(item, (int, slice)):
            return tuple.__getitem__(self, item)
        return tuple.__getitem__(self, self._name_index(item))

    def __setitem__(self, key, value):
        raise TypeError("Row is immutable (it is a tuple); build a new Row instead of assigning "
                        f"row[{key!r}]")

    def __getattr__(self, item):
        # Only reached when normal lookup fails, i.e. for field names and missing attributes.
        if item.startswith("_"):
            if item == "_fields" and self._field_names is not None:
                return self._field_names
            raise AttributeError(item)
        names = self._field_names
        if names is not None:
            try:
                return tuple.__getitem__(self, names.index(item))
            except ValueError:
                pass
        raise AttributeError(item)

    def __setattr__(self, key, value):
        # Same whitelist as PyFlink: rows do not grow ad-hoc attributes.
        if key == "_fields":
            self.set_field_names(value)
        elif key == "_row_kind":
            self.set_row_kind(value)
        elif key == "_from_dict":
            pass
        else:
            raise AttributeError(key)

    def _name_index(self, name) -> int:
        names = self._field_names
        if names is None:
            raise FieldNotFoundError(f"field {name!r} not found: this Row has no field names "
                                     f"({self!r}); access it by position")
        try:
            return names.index(name)
        except ValueError:
            raise FieldNotFoundError(f"field {name!r} not found in {self!r}; fields are "
                                     f"{', '.join(map(repr, names))}") from None

    def __reduce__(self):
        kind = self._row_kind
        return _create_row, (self._field_names, tuple(self), None if kind is RowKind.INSERT else kind)

    def __repr__(self) -> str:
        names = self._field_names
        if names is not None:
            return "Row(%s)" % ", ".join(f"{k}={v!r}" for k, v in zip(names, self))
        return "<Row(%s)>" % ", ".join(map(repr, self))      # PyFlink's, what print() shows

    def __eq__(self, other) -> bool:
        if not isinstance(other, Row):
            return False
        return (self._field_names == other._field_names
                and self._row_kind is other._row_kind
                and tuple.__eq__(self, other))

    def __ne__(self, other) -> bool:
        # tuple defines __ne__, so without this != would compare values only.
        return not self.__eq__(other)

    __hash__ = tuple.__hash__


_tuple_new = tuple.__new__
_set = object.__setattr__


def make_rows(value_tuples: Iterable[tuple], field_names: Optional[List[str]]) -> List[Row]:
    """Rows from tuples of values, all sharing one field-name list (fast path for decoders)."""
    if field_names is None:
        return [_tuple_new(Row, t) for t in value_tuples]
    rows = []
    append = rows.append
    for t in value_tuples:
        row = _tuple_new(Row, t)
        _set(row, "_field_names", field_names)
        append(row)
    return rows


def with_field_names(records: list, field_names: List[str]) -> list:
    """``records`` of a row type named ``field_names``, as PyFlink's RowCoder decodes them on the
    far side of a shuffle: unnamed Rows (of any kind) and plain tuples of as many fields become
    Rows with those names (one shared list); any other record stays as it is."""
    n = len(field_names)
    out = []
    append = out.append
    for r in records:
        kind = type(r)
        if (kind is tuple or (kind is Row and r._field_names is None)) and len(r) == n:
            row = _tuple_new(Row, r)
            _set(row, "_field_names", field_names)
            if kind is Row and r._row_kind is not RowKind.INSERT:
                _set(row, "_row_kind", r._row_kind)
            r = row
        append(r)
    return out


def _row_field_names(row: Any) -> Optional[List[str]]:
    """Field names of a Row, None for unnamed Rows and non-Rows."""
    return row._field_names if isinstance(row, Row) else None
