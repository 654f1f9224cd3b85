"""State time-to-live (Flink's TtlStateFactory and its TtlValueState, TtlListState, TtlMapState...):
a TTL'd state is a decorator over two of its backend's states without TTL, the values and their
times, so both backends share one implementation of Flink's TTL rules.

The times are a state of their own, ``TTL_PREFIX + name``, checkpointed, restored and rescaled with
the values (the checkpoint's rows keep them apart: Flink stores a TtlValue of both): a LONG per
entry of a value, reducing or aggregating state, a list of LONGs beside a list (one per element),
a dict of times beside a map (one per map key), so each element and map entry expires on its own.

The rules (Flink's AbstractTtlDecorator): an entry expires once its last write (or access, under
``OnReadAndWrite``) + ttl <= now; the read that finds it expired removes it and returns it only
under ``ReturnExpiredIfNotCleanedUp``; an entry restored without a time (TTL enabled later) counts
from its first access. A partly expired list or map has its expired entries filtered out and
removed by the read that finds them (Flink leaves them to its background cleanup, which shows
only under ReturnExpiredIfNotCleanedUp: here they are returned once). Every full or incremental
snapshot leaves expired entries out (Flink's cleanup in full snapshot, ``cleanup_full_snapshot``),
whichever cleanup strategy the config names.

The decorated states give what the decorators use: ``_get()`` (the current key's and namespace's
value, None when absent), ``_put(value)``, ``clear()``, ``set_current_namespace``, and for the
cleanup of a snapshot ``_slots()`` (where entries are: a backend's own handle of a key and
namespace, the same for a state and its times), ``_get_at``, ``_put_at``, ``_remove_at``; a list
also ``_append_all(values)``, which says whether the list was there.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

from runtime.common.typeinfo import Types
from runtime.datastream import state as api
from runtime.state.internal_state import AggregatingStateOps, ReducingStateOps, StateBase, ValueStateOps

__all__ = ["TTL_PREFIX", "TtlStateFactory", "TtlState", "TtlValueState", "TtlReducingState", "TtlAggregatingState",
           "TtlListState", "TtlMapState", "ttl_enabled"]

TTL_PREFIX = "_ttl/"        # the state of a TTL'd state's entry times
_RETURN_EXPIRED = api.StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
_ON_READ_AND_WRITE = api.StateTtlConfig.UpdateType.OnReadAndWrite


def ttl_enabled(descriptor) -> bool:
    ttl = descriptor.ttl_config
    return ttl is not None and ttl.is_enabled()


class TtlStateFactory:
    """Flink's TtlStateFactory: the TTL'd state of a descriptor, over the backend's states
    without TTL that ``internal_state(descriptor)`` makes (the values' and the times')."""

    @staticmethod
    def create_state(backend, descriptor: api.StateDescriptor, internal_state: Callable) -> "TtlState":
        cls = _TTL_STATES[type(descriptor)]
        times_name = TTL_PREFIX + descriptor.name
        # A list's times are a list of LONGs (appended to as the list is); a map's a dict, which
        # a LONG state stores pickled (the declared type only ever said "no codec": kept as it was).
        times = (api.ListStateDescriptor(times_name, Types.LONG()) if cls is TtlListState
                 else api.ValueStateDescriptor(times_name, Types.LONG()))
        return cls(backend, descriptor, internal_state(descriptor), internal_state(times))


class TtlState(StateBase):
    """Flink's AbstractTtlState: ``original``, the decorated state, and ``times``, its entries'
    times, both the backend's states without TTL, set to the same namespace."""

    def __init__(self, backend, descriptor: api.StateDescriptor, original, times):
        self.backend = backend
        self.descriptor = descriptor
        self.ttl: api.StateTtlConfig = descriptor.ttl_config
        self.original = original
        self.times = times

    @property
    def namespace(self):
        return self.original.namespace

    def set_current_namespace(self, namespace) -> None:
        self.original.set_current_namespace(namespace)
        self.times.set_current_namespace(namespace)

    def clear(self) -> None:
        self.original.clear()
        self.times.clear()

    def _expired(self, stamp: Optional[int]) -> bool:
        return self.backend.expired(stamp, self.ttl)

    def _return_expired(self) -> bool:
        return self.ttl.get_state_visibility() is _RETURN_EXPIRED

    def _refresh_on_read(self) -> bool:
        return self.ttl.get_update_type() is _ON_READ_AND_WRITE

    def cleanup_full_snapshot(self) -> None:
        """Flink's cleanup in full snapshot: the expired entries removed before a snapshot."""
        raise NotImplementedError


# ---- value, reducing and aggregating state: one time per entry -------------------------------

class _TtlSingleValue(TtlState):
    """The primitives ValueStateOps, ReducingStateOps and AggregatingStateOps build on, checked."""

    def _get(self):
        """The current value, checked on read: an expired one is removed (and returned under
        ReturnExpiredIfNotCleanedUp), a live one touched under OnReadAndWrite."""
        value = self.original._get()
        if value is None:
            return None
        stamp = self.times._get()
        if self._expired(stamp):
            self.clear()
            return value if self._return_expired() else None
        if stamp is None or self._refresh_on_read():
            self.times._put(self.backend.now())
        return value

    def _live(self):
        """The current value for a write that builds on it (reduce, aggregate): expired is absent."""
        value = self.original._get()
        if value is not None and self._expired(self.times._get()):
            self.clear()
            return None
        return value

    def _put(self, value) -> None:
        self.original._put(value)
        self.times._put(self.backend.now())

    def merge_namespaces(self, target, sources: Iterable) -> None:
        """Fold the sources' values into ``target`` (merging windows), removing the sources; the
        merged value is written now."""
        current = self.namespace
        try:
            merged = None
            for ns in [target, *(ns for ns in sources if ns != target)]:
                self.set_current_namespace(ns)
                value = self.original._get()
                if value is not None:
                    if ns != target:
                        self.clear()
                    merged = value if merged is None else self._merge(merged, value)
            if merged is not None:
                self.set_current_namespace(target)
                self._put(merged)
        finally:
            self.set_current_namespace(current)

    def cleanup_full_snapshot(self) -> None:
        times = self.times
        for slot in times._slots():
            if self._expired(times._get_at(slot)):
                self.original._remove_at(slot)
                times._remove_at(slot)


class TtlValueState(ValueStateOps, _TtlSingleValue, api.ValueState):
    """Flink's TtlValueState."""


class TtlReducingState(ReducingStateOps, _TtlSingleValue, api.ReducingState):
    """Flink's TtlReducingState."""


class TtlAggregatingState(AggregatingStateOps, _TtlSingleValue, api.AggregatingState):
    """Flink's TtlAggregatingState."""


# ---- list and map state: a time per element or map entry -------------------------------------

class _TtlEntries(TtlState):
    """What a TTL'd list and map share: the checks of Flink's AbstractTtlDecorator per entry."""

    def _current_entries(self) -> tuple:
        """(values, times) of the current key and namespace, (None, None) when absent."""
        values = self.original._get()
        if values is None:
            return None, None
        return values, self.times._get()

    def _store(self, values, times) -> None:
        if not values:
            self.clear()
            return
        self.original._put(values)
        self.times._put(times)

    def _store_at(self, slot, values, times) -> None:
        if not values:
            self.original._remove_at(slot)
            self.times._remove_at(slot)
            return
        self.original._put_at(slot, values)
        self.times._put_at(slot, times)

    def _clock(self) -> tuple[int, int]:
        """(now, the latest time of an entry that has expired by now)."""
        now = self.backend.now()
        return now, now - self.ttl.get_ttl_millis()

    def cleanup_full_snapshot(self) -> None:
        times_state = self.times
        for slot in times_state._slots():
            values = self.original._get_at(slot)
            if values is None:          # times left without values
                times_state._remove_at(slot)
                continue
            now, limit = self._clock()
            kept = self._without(values, self._aligned(values, times_state._get_at(slot), now), lambda t: t <= limit)
            if kept is not None:
                self._store_at(slot, *kept)

    def merge_namespaces(self, target, sources: Iterable) -> None:
        """Fold the sources' entries into ``target`` (merging windows), each keeping its time."""
        current = self.namespace
        try:
            merged = None
            for ns in [target, *(ns for ns in sources if ns != target)]:
                self.set_current_namespace(ns)
                values, times = self._current_entries()
                if values:
                    times = self._aligned(values, times, self.backend.now())
                    merged = (values, times) if merged is None else self._concat(merged, (values, times))
                    if ns != target:
                        self.clear()
            self.set_current_namespace(target)
            if merged is not None:
                self._store(*merged)
        finally:
            self.set_current_namespace(current)


class TtlListState(_TtlEntries, api.ListState):
    """Flink's TtlListState: each element has its own time."""

    @staticmethod
    def _aligned(values: list, times, now) -> list:
        """The elements' times (``times`` itself when it has one for each); elements restored
        without one (TTL enabled later) count from ``now``."""
        if times is not None and len(times) >= len(values):
            return times
        times = list(times or ())
        return times + [now] * (len(values) - len(times))

    @staticmethod
    def _without(values: list, times: list, gone: Callable) -> Optional[tuple]:
        """(values, times) without the elements whose time is ``gone``; None when none is."""
        keep = [i for i, t in enumerate(times) if not gone(t)]
        if len(keep) == len(values):
            return None
        return [values[i] for i in keep], [times[i] for i in keep]

    @staticmethod
    def _concat(a: tuple, b: tuple) -> tuple:
        return a[0] + b[0], a[1] + b[1]

    def get(self):
        values, times = self._current_entries()
        if not values:
            return []
        now, limit = self._clock()
        stamped = self._aligned(values, times, now)
        kept = self._without(values, stamped, lambda t: t <= limit)
        live, live_times = (values, stamped) if kept is None else kept
        if self._refresh_on_read():
            live_times = [now] * len(live)
        if live_times is not times:     # expired elements removed, times added or refreshed
            self._store(live, live_times)
        return list(values if self._return_expired() else live)

    def _checked(self, values) -> list:
        values = list(values)
        if any(v is None for v in values):
            raise ValueError(f"ListState '{self.descriptor.name}': cannot add None")
        return values

    def _append(self, values: list) -> None:
        """Append ``values``, written now: the list's bytes and its times' appended to, neither
        decoded (unless its elements were restored without times)."""
        now = self.backend.now()
        if not self.original._append_all(values):
            self.times._put([now] * len(values))
        elif self.times._get() is None:     # restored without times: they count from now
            self.times._put([now] * len(self.original._get()))
        else:
            self.times._append_all([now] * len(values))

    def add(self, value) -> None:
        self._append(self._checked([value]))

    def add_all(self, values) -> None:
        values = self._checked(values)
        if values:
            self._append(values)

    def update(self, values) -> None:
        values = self._checked(values)
        self._store(values, [self.backend.now()] * len(values))


_ABSENT = object()


class TtlMapState(_TtlEntries, api.MapState):
    """Flink's TtlMapState: each entry has its own time; a read refreshes (OnReadAndWrite) only
    the entries it reads."""

    @staticmethod
    def _aligned(values: dict, times, now) -> dict:
        """The entries' times (``times`` itself when it has one for each); entries restored
        without one (TTL enabled later) count from ``now``."""
        if times is not None and len(times) >= len(values):
            return times
        times = times or {}
        return {k: times.get(k, now) for k in values}

    @staticmethod
    def _without(values: dict, times: dict, gone: Callable) -> Optional[tuple]:
        """``values`` and ``times`` without the entries whose time is ``gone`` (removed in place);
        None when none is."""
        expired = [k for k, t in times.items() if gone(t)]
        if not expired:
            return None
        for k in expired:
            values.pop(k, None)
            del times[k]
        return values, times

    @staticmethod
    def _concat(a: tuple, b: tuple) -> tuple:
        return {**a[0], **b[0]}, {**a[1], **b[1]}

    def _read(self, key):
        """The value of ``key`` checked (Flink's getWrappedWithTtlCheckAndUpdate); _ABSENT if none."""
        values, times = self._current_entries()
        if not values or key not in values:
            return _ABSENT
        now, limit = self._clock()
        stamped = self._aligned(values, times, now)
        value = values[key]
        if stamped[key] <= limit:
            del values[key], stamped[key]
            self._store(values, stamped)
            return value if self._return_expired() else _ABSENT
        refresh = self._refresh_on_read()
        if refresh:
            stamped[key] = now
        if refresh or stamped is not times:
            self._store(values, stamped)
        return value

    def _checked_all(self, refresh: bool) -> dict:
        """The entries, the expired ones removed (and returned under ReturnExpiredIfNotCleanedUp),
        the live ones refreshed when ``refresh``."""
        values, times = self._current_entries()
        if not values:
            return {}
        now, limit = self._clock()
        stamped = self._aligned(values, times, now)
        out = dict(values) if self._return_expired() else None
        expired = self._without(values, stamped, lambda t: t <= limit)
        if refresh:
            stamped = dict.fromkeys(values, now)
        if expired is not None or stamped is not times:
            self._store(values, stamped)
        return dict(values) if out is None else out

    def get(self, key):
        value = self._read(key)
        return None if value is _ABSENT else value

    def contains(self, key) -> bool:
        return self._read(key) is not _ABSENT

    def items(self):
        return list(self._checked_all(self._refresh_on_read()).items())

    def keys(self):
        return list(self._checked_all(self._refresh_on_read()).keys())

    def values(self):
        return list(self._checked_all(self._refresh_on_read()).values())

    def is_empty(self) -> bool:
        return not self._checked_all(False)

    def put(self, key, value) -> None:
        self.put_all({key: value})

    def put_all(self, dict_value) -> None:
        if not dict_value:
            return
        values, times = self._current_entries()
        now = self.backend.now()
        values = {} if values is None else values
        times = self._aligned(values, times, now)
        values.update(dict_value)
        times.update(dict.fromkeys(dict_value, now))
        self._store(values, times)

    def remove(self, key) -> None:
        values, times = self._current_entries()
        if values is not None and key in values:
            times = self._aligned(values, times, self.backend.now())
            del values[key], times[key]
            self._store(values, times)


_TTL_STATES = {
    api.ValueStateDescriptor: TtlValueState,
    api.ListStateDescriptor: TtlListState,
    api.MapStateDescriptor: TtlMapState,
    api.ReducingStateDescriptor: TtlReducingState,
    api.AggregatingStateDescriptor: TtlAggregatingState,
}
