"""State schema evolution on restore (runtime/state/schema_evolution.py) in both keyed backends,
without Spark: restored Row values of value, list and map states registered with an evolved type
(the whole job on Spark: tests/test_state_processor.py)."""
import pytest

from runtime.common import Row, Types
from runtime.datastream.state import (
    ListStateDescriptor, MapStateDescriptor, ReducingStateDescriptor, ValueStateDescriptor)
from runtime.state.key_groups import assign_to_key_group
from runtime.state.schema_evolution import StateMigrationException, migration
from state_helpers import BACKENDS, keyed_backend

OLD = Types.ROW_NAMED(["id", "score"], [Types.INT(), Types.FLOAT()])
GAINED_WIDENED = Types.ROW_NAMED(["score", "id", "note"], [Types.DOUBLE(), Types.LONG(), Types.STRING()])


@pytest.fixture
def backend(request, tmp_path):
    made = keyed_backend(request.param, tmp_path / "store")
    yield made
    made.dispose()


def restored(backend, name, stored_type, values: dict):
    backend.restore([(assign_to_key_group(k, 128), name, None, k, v) for k, v in values.items()])
    backend.restored_types = {name: stored_type}


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_value_list_and_map_states_of_an_evolved_row_type_restore_migrated(backend):
    restored(backend, "v", OLD, {"a": Row(id=1, score=0.5), "b": Row(id=2, score=1.5)})
    state = backend.get_partitioned_state(ValueStateDescriptor("v", GAINED_WIDENED))
    backend.set_current_key("a")
    assert state.value() == Row(score=0.5, id=1, note=None) and state.value().note is None
    backend.set_current_key("b")
    assert state.value().as_dict() == {"score": 1.5, "id": 2, "note": None}

    restored(backend, "l", Types.LIST(OLD), {"a": [Row(id=1, score=0.5), Row(id=3, score=2.0)]})
    lst = backend.get_partitioned_state(ListStateDescriptor("l", Types.ROW_NAMED(["id"], [Types.INT()])))
    backend.set_current_key("a")
    assert [r.as_dict() for r in lst.get()] == [{"id": 1}, {"id": 3}]

    restored(backend, "m", Types.MAP(Types.STRING(), OLD), {"a": {"x": Row(id=1, score=0.5)}})
    mp = backend.get_partitioned_state(MapStateDescriptor("m", Types.STRING(), GAINED_WIDENED))
    backend.set_current_key("a")
    assert mp.get("x").as_dict() == {"score": 0.5, "id": 1, "note": None}
    # The next snapshot writes the new type's values.
    assert {r[3]: r[4].as_dict() for r in backend.snapshot() if r[1] == "v"} == {
        "a": {"score": 0.5, "id": 1, "note": None}, "b": {"score": 1.5, "id": 2, "note": None}}


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("descriptor, why", [
    (ValueStateDescriptor("v", Types.ROW_NAMED(["id", "score"], [Types.SHORT(), Types.FLOAT()])),
     "field 'id': Integer cannot become Short"),
    (ValueStateDescriptor("v", Types.ROW_NAMED(["id", "score"], [Types.INT(), Types.STRING()])),
     "field 'score': Float cannot become String"),
    (ValueStateDescriptor("v", Types.LONG()), "cannot become Long"),
    (ListStateDescriptor("v", OLD), "cannot become List"),
])
def test_other_changes_are_refused_naming_the_operator_state_types_and_fix(backend, descriptor, why):
    restored(backend, "v", OLD, {"a": Row(id=1, score=0.5)})
    with pytest.raises(StateMigrationException) as refused:
        backend.get_partitioned_state(descriptor)
    message = str(refused.value)
    for part in ("op:", "'v'", "Row(id: Integer, score: Float)", str(descriptor.type_info), why, "SavepointWriter"):
        assert part in message, message


def test_number_widening_and_map_keys_follow_flinks_rules():
    assert migration(Types.INT(), Types.LONG())(7) == 7
    assert migration(Types.FLOAT(), Types.DOUBLE()) is not None
    assert migration(OLD, OLD) is None
    for stored, new in [(Types.LONG(), Types.INT()), (Types.DOUBLE(), Types.FLOAT()), (Types.INT(), Types.DOUBLE()),
                        (Types.MAP(Types.INT(), OLD), Types.MAP(Types.LONG(), OLD))]:
        with pytest.raises(ValueError):
            migration(stored, new)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_reducing_state_widens_a_number_only_and_untyped_states_restore_unchecked(backend):
    restored(backend, "r", Types.INT(), {"a": 5})
    state = backend.get_partitioned_state(ReducingStateDescriptor("r", lambda a, b: a + b, Types.LONG()))
    backend.set_current_key("a")
    assert state.get() == 5
    restored(backend, "p", None, {"a": {"anything": 1}})      # stored pickled: nothing to compare
    assert backend.get_partitioned_state(ValueStateDescriptor("p", Types.LONG())) is not None
