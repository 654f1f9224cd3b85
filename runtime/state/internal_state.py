"""What every backend's keyed states share: Flink's semantics of value, reducing, aggregating and
map reads, given once over a backend's primitives.

Each backend's state classes give the primitives (``_get``: the current value; ``_live``: the value
a write builds on; ``_put``; ``_map``: a map state's current dict) and list a mixin here first.
A TTL'd state (runtime.state.ttl) gives the same primitives, checked for expiry, over two of its
backend's states.
"""
from __future__ import annotations

__all__ = ["StateBase", "ValueStateOps", "ReducingStateOps", "AggregatingStateOps", "MapStateReads"]


class StateBase:
    """What every backend's state objects share."""

    def _merge(self, a, b):
        raise NotImplementedError(f"{type(self).__name__} cannot be merged")


class ValueStateOps:
    def value(self):
        return self._get()

    def update(self, value) -> None:
        if value is None:
            self.clear()
        else:
            self._put(value)


class ReducingStateOps:
    def get(self):
        return self._get()

    def add(self, value) -> None:
        current = self._live()
        self._put(value if current is None else self.descriptor.reduce_function(current, value))

    def _merge(self, a, b):
        return self.descriptor.reduce_function(a, b)


class AggregatingStateOps:
    def get(self):
        acc = self._get()
        return None if acc is None else self.descriptor.agg_function.get_result(acc)

    def add(self, value) -> None:
        fn = self.descriptor.agg_function
        acc = self._live()
        self._put(fn.add(value, fn.create_accumulator() if acc is None else acc))

    def _merge(self, a, b):
        return self.descriptor.agg_function.merge(a, b)


class MapStateReads:
    def get(self, key):
        return self._map().get(key)

    def contains(self, key) -> bool:
        return key in self._map()

    def items(self):
        return list(self._map().items())

    def keys(self):
        return list(self._map().keys())

    def values(self):
        return list(self._map().values())

    def is_empty(self) -> bool:
        return not self._map()

    def _merge(self, a, b):
        return {**a, **b}
