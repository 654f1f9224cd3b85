"""State descriptors, TTL configuration and the state interfaces' contracts."""
import pickle

import pytest

from runtime.common.typeinfo import Types
from runtime.datastream.state import (
    AggregatingState, AggregatingStateDescriptor, ListState, ListStateDescriptor, MapState,
    MapStateDescriptor, ReducingState, ReducingStateDescriptor, State, StateDescriptor,
    StateTtlConfig, ValueState, ValueStateDescriptor)
from state_helpers import BACKENDS, Average, keyed_backend


class Sum:
    """A ReduceFunction-like object (module level so it pickles)."""

    def reduce(self, a, b):
        return a + b


def add(a, b):
    return a + b


class Seconds:
    """Stands in for Time/Duration: anything with to_milliseconds()."""

    def __init__(self, n):
        self.n = n

    def to_milliseconds(self):
        return self.n * 1000


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize("make", [
    lambda name: ValueStateDescriptor(name),
    lambda name: ListStateDescriptor(name),
    lambda name: MapStateDescriptor(name),
    lambda name: ReducingStateDescriptor(name, add),
    lambda name: AggregatingStateDescriptor(name, Average()),
])
@pytest.mark.parametrize("bad", ["", None, 1, b"x"])
def test_bad_names_are_rejected_naming_the_descriptor_class(make, bad):
    with pytest.raises(ValueError) as err:
        make(bad)
    assert "StateDescriptor needs a non-empty str name" in str(err.value)
    assert str(err.value).split(" ")[0] in {
        "ValueStateDescriptor", "ListStateDescriptor", "MapStateDescriptor",
        "ReducingStateDescriptor", "AggregatingStateDescriptor"}


def test_bad_name_message():
    with pytest.raises(ValueError) as err:
        ListStateDescriptor("")
    assert str(err.value) == "ListStateDescriptor needs a non-empty str name, got ''"


# --------------------------------------------------------------------------- type infos


def test_value_descriptor():
    d = ValueStateDescriptor("count", Types.LONG())
    assert d.name == "count"
    assert d.get_name() == "count"
    assert d.type_info == Types.LONG()
    assert ValueStateDescriptor("count").type_info is None
    assert repr(d) == "ValueStateDescriptor(name='count', type_info=Long)"


def test_list_descriptor():
    d = ListStateDescriptor("seen", Types.STRING())
    assert d.elem_type_info == Types.STRING()
    assert d.type_info == Types.LIST(Types.STRING())
    assert repr(d.type_info) == "List<String>"
    untyped = ListStateDescriptor("seen")
    assert untyped.elem_type_info is None and untyped.type_info is None


def test_map_descriptor():
    d = MapStateDescriptor("m", Types.STRING(), Types.LONG())
    assert d.key_type_info == Types.STRING()
    assert d.value_type_info == Types.LONG()
    assert repr(d.type_info) == "Map<String, Long>"
    assert repr(MapStateDescriptor("m", Types.STRING()).type_info) == "Map<String, PickledByteArray>"
    assert repr(MapStateDescriptor("m", value_type_info=Types.INT()).type_info) == \
        "Map<PickledByteArray, Integer>"
    assert MapStateDescriptor("m").type_info is None


def test_type_info_must_be_a_type_information():
    with pytest.raises(TypeError, match=r"call it: Types.LONG\(\)"):
        ValueStateDescriptor("v", Types.LONG)
    with pytest.raises(TypeError, match="ListStateDescriptor elem_type_info must be a TypeInformation"):
        ListStateDescriptor("l", "String")
    with pytest.raises(TypeError, match="MapStateDescriptor value_type_info"):
        MapStateDescriptor("m", Types.STRING(), int)
    with pytest.raises(TypeError, match="ReducingStateDescriptor type_info"):
        ReducingStateDescriptor("r", add, "Long")


# --------------------------------------------------------------------------- functions


def test_reducing_descriptor_accepts_reduce_function_or_callable():
    with_object = ReducingStateDescriptor("sum", Sum(), Types.LONG())
    assert with_object.reduce_function(2, 3) == 5
    assert with_object.get_reduce_function()(2, 3) == 5
    assert with_object.type_info == Types.LONG()
    with_function = ReducingStateDescriptor("sum", add)
    assert with_function.reduce_function is add
    with_lambda = ReducingStateDescriptor("max", lambda a, b: max(a, b))
    assert with_lambda.reduce_function(2, 7) == 7
    with pytest.raises(TypeError, match="needs a ReduceFunction"):
        ReducingStateDescriptor("sum", 42)


def test_aggregating_descriptor():
    d = AggregatingStateDescriptor("avg", Average(), Types.TUPLE([Types.LONG(), Types.LONG()]))
    assert isinstance(d.agg_function, Average)
    assert d.get_agg_function() is d.agg_function
    assert repr(d.type_info) == "Tuple2<Long, Long>"

    class NoResult:
        def create_accumulator(self):
            return 0

        def add(self, value, acc):
            return acc + value

    with pytest.raises(TypeError) as err:
        AggregatingStateDescriptor("avg", NoResult())
    assert "lacks get_result" in str(err.value)
    assert "'avg'" in str(err.value)

    class NoMerge(NoResult):
        def get_result(self, acc):
            return acc

    # merge is only needed by merging windows.
    assert AggregatingStateDescriptor("sum", NoMerge()).name == "sum"


# --------------------------------------------------------------------------- identity


def test_descriptors_compare_by_class_and_name():
    assert ValueStateDescriptor("a", Types.LONG()) == ValueStateDescriptor("a")
    assert hash(ValueStateDescriptor("a", Types.LONG())) == hash(ValueStateDescriptor("a"))
    assert ValueStateDescriptor("a") != ValueStateDescriptor("b")
    assert ValueStateDescriptor("a") != ListStateDescriptor("a")
    assert ReducingStateDescriptor("a", add) == ReducingStateDescriptor("a", Sum())
    assert len({ValueStateDescriptor("a"), ValueStateDescriptor("a"), ListStateDescriptor("a")}) == 2
    assert ValueStateDescriptor("a") != "a"


def test_descriptors_pickle():
    ttl = StateTtlConfig.new_builder(Seconds(10)).update_ttl_on_read_and_write().build()
    descriptors = [
        ValueStateDescriptor("v", Types.ROW_NAMED(["a"], [Types.LONG()])),
        ListStateDescriptor("l", Types.STRING()),
        MapStateDescriptor("m", Types.STRING(), Types.LIST(Types.INT())),
        ReducingStateDescriptor("r", Sum(), Types.LONG()),
        ReducingStateDescriptor("r2", add),
        AggregatingStateDescriptor("g", Average()),
    ]
    descriptors[0].enable_time_to_live(ttl)
    for d in descriptors:
        back = pickle.loads(pickle.dumps(d))
        assert back == d
        assert back.type_info == d.type_info
    back = pickle.loads(pickle.dumps(descriptors[0]))
    assert back.ttl_config.get_ttl_millis() == 10_000
    assert back.ttl_config.get_update_type() is StateTtlConfig.UpdateType.OnReadAndWrite
    assert pickle.loads(pickle.dumps(descriptors[3])).reduce_function(1, 2) == 3
    assert pickle.loads(pickle.dumps(descriptors[5])).agg_function.get_result((6, 3)) == 2.0


# --------------------------------------------------------------------------- TTL


def test_ttl_builder_defaults():
    config = StateTtlConfig.new_builder(Seconds(5)).build()
    assert config.get_ttl_millis() == 5000
    assert isinstance(config.get_ttl(), Seconds)
    assert config.get_update_type() is StateTtlConfig.UpdateType.OnCreateAndWrite
    assert config.get_state_visibility() is StateTtlConfig.StateVisibility.NeverReturnExpired
    assert config.get_ttl_time_characteristic() is StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
    assert config.is_enabled()
    assert config.get_cleanup_strategies().is_cleanup_in_background()
    assert not config.get_cleanup_strategies().in_full_snapshot()
    assert repr(config) == ("StateTtlConfig(ttl=5000 ms, update_type=OnCreateAndWrite, "
                            "state_visibility=NeverReturnExpired)")


def test_ttl_builder_settings():
    config = (StateTtlConfig.new_builder(Seconds(1))
              .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
              .set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
              .cleanup_full_snapshot()
              .cleanup_incrementally(10, True)
              .set_ttl(250)
              .build())
    assert config.get_ttl_millis() == 250
    assert config.get_update_type() is StateTtlConfig.UpdateType.OnReadAndWrite
    assert config.get_state_visibility() is StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
    strategies = config.get_cleanup_strategies()
    assert strategies.in_full_snapshot()
    assert strategies.get_incremental_cleanup_strategy().get_cleanup_size() == 10
    assert strategies.get_incremental_cleanup_strategy().run_cleanup_for_every_record()
    disabled = (StateTtlConfig.new_builder(1000)
                .set_update_type(StateTtlConfig.UpdateType.Disabled).build())
    assert not disabled.is_enabled()


def test_ttl_validation():
    with pytest.raises(ValueError, match="must be positive"):
        StateTtlConfig.new_builder(0)
    with pytest.raises(ValueError, match="must be positive"):
        StateTtlConfig.new_builder(Seconds(-1))
    with pytest.raises(TypeError, match="a Time, a Duration or milliseconds"):
        StateTtlConfig.new_builder("10s")
    with pytest.raises(TypeError, match="update type must be a StateTtlConfig.UpdateType"):
        StateTtlConfig.new_builder(1000).set_update_type("OnReadAndWrite")
    with pytest.raises(TypeError, match="state visibility"):
        StateTtlConfig.new_builder(1000).set_state_visibility(True)


def test_enable_time_to_live():
    d = ValueStateDescriptor("v")
    assert d.ttl_config is None
    config = StateTtlConfig.new_builder(Seconds(1)).build()
    d.enable_time_to_live(config)
    assert d.ttl_config is config
    with pytest.raises(TypeError, match="takes a StateTtlConfig"):
        d.enable_time_to_live(StateTtlConfig.new_builder(Seconds(1)))


# --------------------------------------------------------------------------- interfaces


def test_state_interfaces_are_abstract():
    for cls in (State, ValueState, ListState, MapState, ReducingState, AggregatingState):
        with pytest.raises(TypeError):
            cls()
    assert issubclass(ValueStateDescriptor, StateDescriptor)


class DictMapState(MapState):
    def __init__(self):
        self.d = {}

    def get(self, key):
        return self.d.get(key)

    def put(self, key, value):
        self.d[key] = value

    def put_all(self, dict_value):
        self.d.update(dict_value)

    def remove(self, key):
        self.d.pop(key, None)

    def contains(self, key):
        return key in self.d

    def items(self):
        return self.d.items()

    def keys(self):
        return self.d.keys()

    def values(self):
        return self.d.values()

    def is_empty(self):
        return not self.d

    def clear(self):
        self.d.clear()


def backend_state(kind, descriptor, tmp_path):
    """The state ``descriptor`` describes, of a keyed state backend of ``kind``, at one key."""
    backend = keyed_backend(kind, tmp_path / "store")
    backend.set_current_key("key")
    return backend, backend.get_partitioned_state(descriptor)


STATES = ["plain", *BACKENDS]


@pytest.mark.parametrize("kind", STATES)
def test_map_state_protocol_helpers(kind, tmp_path):
    backend = None
    if kind == "plain":
        state = DictMapState()
    else:
        backend, state = backend_state(kind, MapStateDescriptor("m", Types.STRING(), Types.LONG()), tmp_path)
    state.put_all({"a": 1, "b": 2})
    state["c"] = 3
    assert list(state) == ["a", "b", "c"]
    assert "b" in state and "z" not in state
    assert state["c"] == 3
    del state["a"]
    assert list(state.items()) == [("b", 2), ("c", 3)]
    state.clear()
    assert state.is_empty()
    if backend is not None:
        backend.dispose()


class PlainListState(ListState):
    def __init__(self):
        self.values = []

    def get(self):
        return list(self.values)

    def add(self, value):
        self.values.append(value)

    def add_all(self, values):
        self.values.extend(values)

    def update(self, values):
        self.values = list(values)

    def clear(self):
        self.values = []


@pytest.mark.parametrize("kind", STATES)
def test_list_state_iterates_its_values(kind, tmp_path):
    backend = None
    if kind == "plain":
        state = PlainListState()
    else:
        backend, state = backend_state(kind, ListStateDescriptor("l", Types.LONG()), tmp_path)
    state.add(1)
    state.add_all([2, 3])
    assert list(state) == [1, 2, 3]
    state.update([9])
    assert state.get() == [9]
    if backend is not None:
        backend.dispose()
