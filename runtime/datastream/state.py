"""State interfaces, descriptors and TTL configuration as in ``pyflink.datastream.state``.

Only the user-facing contracts live here; the engine's state backends implement them.
A descriptor's ``type_info`` is optional: backends store values typed (Arrow) when it is given
and pickled when it is not.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import Any, Callable, Dict, Generic, Iterable, Iterator, List, Optional, Tuple, TypeVar

from runtime.common.typeinfo import TypeInformation, Types

__all__ = [
    "State", "ValueState", "AppendingState", "MergingState", "ListState", "MapState",
    "ReducingState", "AggregatingState", "ReadOnlyBroadcastState", "BroadcastState",
    "StateDescriptor", "ValueStateDescriptor", "ListStateDescriptor", "MapStateDescriptor",
    "ReducingStateDescriptor", "AggregatingStateDescriptor", "StateTtlConfig",
]

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
IN = TypeVar("IN")
OUT = TypeVar("OUT")


# --------------------------------------------------------------------------- states


class State(ABC):
    """Base of all partitioned (per-key) states."""

    @abstractmethod
    def clear(self) -> None:
        """Removes the value of this state for the current key."""


class ValueState(State, Generic[T]):
    """A single value per key."""

    @abstractmethod
    def value(self) -> Optional[T]:
        """The current value, None if unset."""

    @abstractmethod
    def update(self, value: T) -> None:
        """Replaces the current value."""


class AppendingState(State, Generic[IN, OUT]):
    """A state that values can be added to and a result read from."""

    @abstractmethod
    def get(self) -> OUT:
        """The current result."""

    @abstractmethod
    def add(self, value: IN) -> None:
        """Adds a value."""


class MergingState(AppendingState[IN, OUT]):
    """An appending state whose per-namespace contents can be merged (e.g. merging windows)."""


class ListState(MergingState[T, Iterable[T]]):
    """A list of values per key."""

    @abstractmethod
    def add_all(self, values: List[T]) -> None:
        """Appends all values."""

    @abstractmethod
    def update(self, values: List[T]) -> None:
        """Replaces the list with ``values``."""

    def __iter__(self) -> Iterator[T]:
        return iter(self.get())


class ReducingState(MergingState[T, T]):
    """A value per key, combined with each added value by the descriptor's reduce function."""


class AggregatingState(MergingState[IN, OUT]):
    """An accumulator per key, fed and read through the descriptor's aggregate function."""


class MapReads(ABC, Generic[K, V]):
    """The reading half of a map state (MapState and the broadcast states share it)."""

    @abstractmethod
    def get(self, key: K) -> Optional[V]:
        """The value mapped to ``key``, None if absent."""

    @abstractmethod
    def contains(self, key: K) -> bool:
        """Whether ``key`` is mapped."""

    @abstractmethod
    def items(self) -> Iterable[Tuple[K, V]]:
        """All (key, value) pairs."""

    @abstractmethod
    def keys(self) -> Iterable[K]:
        """All keys."""

    @abstractmethod
    def values(self) -> Iterable[V]:
        """All values."""

    @abstractmethod
    def is_empty(self) -> bool:
        """Whether the map has no mappings."""

    def __getitem__(self, key: K) -> V:
        return self.get(key)

    def __contains__(self, key: K) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())


class MapWrites(ABC, Generic[K, V]):
    """The writing half of a map state."""

    @abstractmethod
    def put(self, key: K, value: V) -> None:
        """Maps ``key`` to ``value``."""

    @abstractmethod
    def put_all(self, dict_value: Dict[K, V]) -> None:
        """Adds all mappings."""

    @abstractmethod
    def remove(self, key: K) -> None:
        """Removes the mapping of ``key``."""

    def __setitem__(self, key: K, value: V) -> None:
        self.put(key, value)

    def __delitem__(self, key: K) -> None:
        self.remove(key)


class MapState(State, MapReads[K, V], MapWrites[K, V]):
    """A map per key."""


class ReadOnlyBroadcastState(State, MapReads[K, V]):
    """The broadcast state as the non-broadcast side sees it: read only (PyFlink's)."""


class BroadcastState(ReadOnlyBroadcastState[K, V], MapWrites[K, V]):
    """A map every parallel instance holds a copy of, written by the broadcast side only; each
    instance must store the same entries (Flink gives one instance's copy to every subtask on
    restore and rescale)."""


# --------------------------------------------------------------------------- TTL


class StateTtlConfig:
    """Time-to-live of state entries; build it with ``StateTtlConfig.new_builder(ttl)``."""

    class UpdateType(Enum):
        """When the last-access timestamp (and so the expiry) is refreshed."""

        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(Enum):
        """Whether expired values not yet cleaned up may still be returned."""

        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(Enum):
        """The time TTL is measured in (Flink only supports processing time)."""

        ProcessingTime = 0

    class CleanupStrategies:
        """How expired entries are removed besides on access."""

        class Strategies(Enum):
            FULL_STATE_SCAN_SNAPSHOT = 0
            INCREMENTAL_CLEANUP = 1
            ROCKSDB_COMPACTION_FILTER = 2

        class EmptyCleanupStrategy:
            pass

        class IncrementalCleanupStrategy:
            def __init__(self, cleanup_size: int, run_cleanup_for_every_record: bool):
                if cleanup_size <= 0:
                    raise ValueError(f"incremental cleanup size must be positive, got {cleanup_size}")
                self._cleanup_size = cleanup_size
                self._run_cleanup_for_every_record = run_cleanup_for_every_record

            def get_cleanup_size(self) -> int:
                return self._cleanup_size

            def run_cleanup_for_every_record(self) -> bool:
                return self._run_cleanup_for_every_record

        class RocksdbCompactFilterCleanupStrategy:
            def __init__(self, query_time_after_num_entries: int, periodic_compaction_time: Any = None):
                self._query_time_after_num_entries = query_time_after_num_entries
                self._periodic_compaction_time = periodic_compaction_time

            def get_query_time_after_num_entries(self) -> int:
                return self._query_time_after_num_entries

            def get_periodic_compaction_time(self) -> Any:
                return self._periodic_compaction_time

        EMPTY_STRATEGY = EmptyCleanupStrategy()

        def __init__(self, strategies: Dict["StateTtlConfig.CleanupStrategies.Strategies", Any],
                     is_cleanup_in_background: bool):
            self._strategies = dict(strategies)
            self._is_cleanup_in_background = is_cleanup_in_background

        def is_cleanup_in_background(self) -> bool:
            return self._is_cleanup_in_background

        def in_full_snapshot(self) -> bool:
            return self.Strategies.FULL_STATE_SCAN_SNAPSHOT in self._strategies

        def get_incremental_cleanup_strategy(self):
            if self._is_cleanup_in_background:
                default = StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy(5, False)
            else:
                default = None
            return self._strategies.get(self.Strategies.INCREMENTAL_CLEANUP, default)

        def get_rocksdb_compact_filter_cleanup_strategy(self):
            if self._is_cleanup_in_background:
                default = StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy(1000)
            else:
                default = None
            return self._strategies.get(self.Strategies.ROCKSDB_COMPACTION_FILTER, default)

    def __init__(self, update_type: "StateTtlConfig.UpdateType",
                 state_visibility: "StateTtlConfig.StateVisibility",
                 ttl_time_characteristic: "StateTtlConfig.TtlTimeCharacteristic",
                 ttl: Any, cleanup_strategies: "StateTtlConfig.CleanupStrategies"):
        self._ttl_millis = _ttl_millis(ttl)
        self._update_type = update_type
        self._state_visibility = state_visibility
        self._ttl_time_characteristic = ttl_time_characteristic
        self._ttl = ttl
        self._cleanup_strategies = cleanup_strategies

    @staticmethod
    def new_builder(ttl: Any) -> "StateTtlConfig.Builder":
        """A builder for a TTL of ``ttl`` (a ``Time``, a ``Duration`` or milliseconds)."""
        return StateTtlConfig.Builder(ttl)

    def get_update_type(self) -> "StateTtlConfig.UpdateType":
        return self._update_type

    def get_state_visibility(self) -> "StateTtlConfig.StateVisibility":
        return self._state_visibility

    def get_ttl(self) -> Any:
        return self._ttl

    def get_ttl_millis(self) -> int:
        return self._ttl_millis

    def get_ttl_time_characteristic(self) -> "StateTtlConfig.TtlTimeCharacteristic":
        return self._ttl_time_characteristic

    def is_enabled(self) -> bool:
        return self._update_type is not StateTtlConfig.UpdateType.Disabled

    def get_cleanup_strategies(self) -> "StateTtlConfig.CleanupStrategies":
        return self._cleanup_strategies

    def __repr__(self) -> str:
        return (f"StateTtlConfig(ttl={self._ttl_millis} ms, update_type={self._update_type.name}, "
                f"state_visibility={self._state_visibility.name})")

    class Builder:
        """Builds a ``StateTtlConfig``; defaults as Flink's: OnCreateAndWrite, NeverReturnExpired."""

        def __init__(self, ttl: Any):
            self._ttl = ttl
            _ttl_millis(ttl)
            self._update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self._state_visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._ttl_time_characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            self._is_cleanup_in_background = True
            self._strategies: Dict[Any, Any] = {}

        def set_update_type(self, update_type: "StateTtlConfig.UpdateType") -> "StateTtlConfig.Builder":
            self._update_type = _check_enum(update_type, StateTtlConfig.UpdateType, "update type")
            return self

        def update_ttl_on_create_and_write(self) -> "StateTtlConfig.Builder":
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> "StateTtlConfig.Builder":
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(self, state_visibility: "StateTtlConfig.StateVisibility") -> "StateTtlConfig.Builder":
            self._state_visibility = _check_enum(state_visibility, StateTtlConfig.StateVisibility,
                                                 "state visibility")
            return self

        def return_expired_if_not_cleaned_up(self) -> "StateTtlConfig.Builder":
            return self.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)

        def never_return_expired(self) -> "StateTtlConfig.Builder":
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(
                self, ttl_time_characteristic: "StateTtlConfig.TtlTimeCharacteristic") -> "StateTtlConfig.Builder":
            self._ttl_time_characteristic = _check_enum(
                ttl_time_characteristic, StateTtlConfig.TtlTimeCharacteristic, "TTL time characteristic")
            return self

        def use_processing_time(self) -> "StateTtlConfig.Builder":
            return self.set_ttl_time_characteristic(StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)

        def cleanup_full_snapshot(self) -> "StateTtlConfig.Builder":
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT] = \
                StateTtlConfig.CleanupStrategies.EMPTY_STRATEGY
            return self

        def cleanup_incrementally(self, cleanup_size: int,
                                  run_cleanup_for_every_record: bool) -> "StateTtlConfig.Builder":
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.INCREMENTAL_CLEANUP] = \
                StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy(
                    cleanup_size, run_cleanup_for_every_record)
            return self

        def cleanup_in_rocksdb_compact_filter(self, query_time_after_num_entries: int,
                                              periodic_compaction_time: Any = None) -> "StateTtlConfig.Builder":
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.ROCKSDB_COMPACTION_FILTER] = \
                StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy(
                    query_time_after_num_entries, periodic_compaction_time)
            return self

        def disable_cleanup_in_background(self) -> "StateTtlConfig.Builder":
            self._is_cleanup_in_background = False
            return self

        def set_ttl(self, ttl: Any) -> "StateTtlConfig.Builder":
            _ttl_millis(ttl)
            self._ttl = ttl
            return self

        def build(self) -> "StateTtlConfig":
            return StateTtlConfig(
                self._update_type, self._state_visibility, self._ttl_time_characteristic, self._ttl,
                StateTtlConfig.CleanupStrategies(self._strategies, self._is_cleanup_in_background))


def _ttl_millis(ttl: Any) -> int:
    if isinstance(ttl, bool):
        millis = None
    elif isinstance(ttl, int):
        millis = ttl
    else:
        to_ms = getattr(ttl, "to_milliseconds", None)
        millis = int(to_ms()) if callable(to_ms) else None
    if millis is None:
        raise TypeError(f"a state TTL must be a Time, a Duration or milliseconds as an int, got {ttl!r}")
    if millis <= 0:
        raise ValueError(f"a state TTL must be positive, got {ttl!r}")
    return millis


def _check_enum(value: Any, enum: type, what: str) -> Any:
    if not isinstance(value, enum):
        raise TypeError(f"{what} must be a StateTtlConfig.{enum.__name__}, got {value!r}")
    return value


# --------------------------------------------------------------------------- descriptors


class StateDescriptor(ABC):
    """Names a partitioned state and tells the backend how to store it.

    Descriptors compare and hash by (class, name): the name identifies the state of an operator.
    """

    def __init__(self, name: str, type_info: Optional[TypeInformation] = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"{type(self).__name__} needs a non-empty str name, got {name!r}")
        self.name = name
        self.type_info = _optional_type_info(type_info, type(self).__name__, "type_info")
        self._ttl_config: Optional[StateTtlConfig] = None

    def get_name(self) -> str:
        return self.name

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> None:
        """Expire this state's entries as ``ttl_config`` says."""
        if not isinstance(ttl_config, StateTtlConfig):
            raise TypeError(f"enable_time_to_live takes a StateTtlConfig (StateTtlConfig.new_builder"
                            f"(ttl)...build()), got {ttl_config!r}")
        self._ttl_config = ttl_config

    @property
    def ttl_config(self) -> Optional[StateTtlConfig]:
        return self._ttl_config

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.name == self.name

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, type_info={self.type_info})"


def _optional_type_info(value: Any, owner: str, what: str) -> Optional[TypeInformation]:
    if value is None or isinstance(value, TypeInformation):
        return value
    hint = ""
    if callable(value) and getattr(value, "__qualname__", "").startswith("Types."):
        hint = f" (call it: {value.__qualname__}())"
    raise TypeError(f"{owner} {what} must be a TypeInformation or None, got {value!r}{hint}")


class ValueStateDescriptor(StateDescriptor):
    """Describes a ``ValueState``."""

    def __init__(self, name: str, value_type_info: Optional[TypeInformation] = None):
        super().__init__(name, value_type_info)


class ListStateDescriptor(StateDescriptor):
    """Describes a ``ListState``; ``type_info`` is ``Types.LIST(elem_type_info)`` when given."""

    def __init__(self, name: str, elem_type_info: Optional[TypeInformation] = None):
        elem_type_info = _optional_type_info(elem_type_info, type(self).__name__, "elem_type_info")
        super().__init__(name, None if elem_type_info is None else Types.LIST(elem_type_info))
        self.elem_type_info = elem_type_info


class MapStateDescriptor(StateDescriptor):
    """Describes a ``MapState``.

    ``type_info`` is ``Types.MAP(key, value)`` when either type is given, the missing one
    standing as ``PICKLED_BYTE_ARRAY``; None when neither is.
    """

    def __init__(self, name: str, key_type_info: Optional[TypeInformation] = None,
                 value_type_info: Optional[TypeInformation] = None):
        owner = type(self).__name__
        key_type_info = _optional_type_info(key_type_info, owner, "key_type_info")
        value_type_info = _optional_type_info(value_type_info, owner, "value_type_info")
        map_type = None
        if key_type_info is not None or value_type_info is not None:
            map_type = Types.MAP(key_type_info or Types.PICKLED_BYTE_ARRAY(),
                                 value_type_info or Types.PICKLED_BYTE_ARRAY())
        super().__init__(name, map_type)
        self.key_type_info = key_type_info
        self.value_type_info = value_type_info


class ReducingStateDescriptor(StateDescriptor):
    """Describes a ``ReducingState``; ``reduce_function`` is a ReduceFunction or a callable."""

    def __init__(self, name: str, reduce_function: Any, type_info: Optional[TypeInformation] = None):
        super().__init__(name, type_info)
        reduce = getattr(reduce_function, "reduce", None)
        if callable(reduce):
            # A bound method pickles with its instance, so the function object travels along.
            self._reduce_function: Callable[[Any, Any], Any] = reduce
        elif callable(reduce_function):
            self._reduce_function = reduce_function
        else:
            raise TypeError(f"{type(self).__name__} {name!r} needs a ReduceFunction (with reduce(a, b)) "
                            f"or a callable taking two values, got {reduce_function!r}")

    @property
    def reduce_function(self) -> Callable[[Any, Any], Any]:
        return self._reduce_function

    def get_reduce_function(self) -> Callable[[Any, Any], Any]:
        return self._reduce_function


# merge is only needed by merging (session) windows, so, as in functions.AggregateFunction,
# it is not required here.
_AGGREGATE_METHODS = ("create_accumulator", "add", "get_result")


class AggregatingStateDescriptor(StateDescriptor):
    """Describes an ``AggregatingState``; ``state_type_info`` types the accumulator.

    ``agg_function`` needs create_accumulator, add and get_result (merge for merging windows).
    """

    def __init__(self, name: str, agg_function: Any, state_type_info: Optional[TypeInformation] = None):
        super().__init__(name, state_type_info)
        missing = [m for m in _AGGREGATE_METHODS if not callable(getattr(agg_function, m, None))]
        if missing:
            raise TypeError(f"{type(self).__name__} {name!r} needs an AggregateFunction with "
                            f"{', '.join(_AGGREGATE_METHODS)}; {agg_function!r} lacks "
                            f"{', '.join(missing)}")
        self._agg_function = agg_function

    @property
    def agg_function(self) -> Any:
        return self._agg_function

    def get_agg_function(self) -> Any:
        return self._agg_function
