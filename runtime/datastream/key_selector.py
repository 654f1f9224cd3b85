"""The key selector ``key_by`` builds (Flink's ``KeyByKeySelector``): the user's selector and the
key's type, which decides how the key is hashed into a key group (see
``runtime.state.java_hash.key_by_hash``).

PyFlink keys a stream by ``Row.of(key)`` of the key as the Java value of ``key_type``, and without
a ``key_type`` by the key's pickled bytes (``Types.PICKLED_BYTE_ARRAY()``); so any picklable key
works, a list too. A list key is handed around as a :class:`ListKey`, a list that hashes (by its
pickled bytes), so that state can be kept per key.
"""
from __future__ import annotations

import pickle

from runtime.datastream import functions as fn

__all__ = ["KeyByKeySelector", "ListKey", "plain_key", "select_keys"]


class ListKey(list):
    """A list key: a list, hashable by its pickled bytes (state is per serialized key, as in
    PyFlink). Mutating it after ``key_by`` returned it is not supported."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(pickle.dumps(plain_key(self), 5))


def freeze(key):
    """``key`` usable as a dict key: a list (and the lists in it) as a ListKey."""
    return ListKey(map(freeze, key)) if isinstance(key, list) else key


def plain_key(key):
    """``key`` as the user's selector returned it (ListKeys back to lists): what is pickled."""
    return [plain_key(k) for k in key] if isinstance(key, list) else key


class KeyByKeySelector(fn.KeySelector):
    """``key_by(selector, key_type)``: the selector's key, frozen (:func:`freeze`), and the type it
    is hashed as (``Types.PICKLED_BYTE_ARRAY()`` when none was given)."""

    def __init__(self, selector: fn.KeySelector, key_type):
        self.selector = selector
        self.key_type = key_type

    def open(self, runtime_context) -> None:
        self.selector.open(runtime_context)

    def close(self) -> None:
        self.selector.close()

    def get_key(self, value):
        key = self.selector.get_key(value)
        return ListKey(map(freeze, key)) if type(key) is list else key


def select_keys(selector: fn.KeySelector, values: list, each=None) -> list:
    """``[selector.get_key(v) for v in values]``, calling a ``key_by`` selector's own function
    directly: one Python call per record instead of three. ``each(f, values)`` maps ``f`` (an
    operator's, which names a record that fails)."""
    if each is None:
        each = _map
    if type(selector) is not KeyByKeySelector:
        return each(selector.get_key, values)
    keys = each(fn.method_of(selector.selector, "get_key"), values)
    if list in set(map(type, keys)):
        keys = [ListKey(map(freeze, k)) if type(k) is list else k for k in keys]
    return keys


def _map(f, values: list) -> list:
    return list(map(f, values))
