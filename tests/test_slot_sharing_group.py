"""SlotSharingGroup and MemorySize (PyFlink's pyflink.datastream.slot_sharing_group), and the
slots a job with declared resources is planned with. Expected values are what PyFlink 2.3.0
returned for the same calls (bench/.venv-pyflink; Java's SlotSharingGroup.Builder and
MemorySize behind them)."""
import json

import pytest

from runtime.datastream import MemorySize, SlotSharingGroup
from runtime.datastream import slot_sharing_group as module
from runtime.graph.execution_graph import build_execution_graph
from runtime.graph.job_graph import create_job_graph
from runtime.graph.stream_graph import StreamGraphError
from runtime.scheduler.slots import NoResourceAvailableException, compute_slot_plan, local_task_managers

from runtime_env import job_env


def heavy(cpu=1.0, name="heavy"):
    return (SlotSharingGroup.builder(name).set_cpu_cores(cpu).set_task_heap_memory_mb(100)
            .set_task_off_heap_memory_mb(200).set_managed_memory_mb(300).build())


def test_builder_and_accessors_give_pyflinks_values():
    assert module.SlotSharingGroup is SlotSharingGroup and module.MemorySize is MemorySize
    g = heavy(1.5)
    assert (g.get_name(), g.get_cpu_cores(), str(g.get_task_heap_memory()), g.get_task_heap_memory().get_bytes(),
            str(g.get_task_off_heap_memory()), str(g.get_managed_memory()), g.get_external_resources()) == \
        ("heavy", 1.5, "100 mb", 104857600, "200 mb", "300 mb", {})
    assert SlotSharingGroup.builder("x").set_cpu_cores(1).set_task_heap_memory_mb(1).build().get_cpu_cores() == 1.0
    plain = SlotSharingGroup.builder("plain").build()
    assert (plain.get_name(), plain.get_cpu_cores(), plain.get_task_heap_memory(), plain.get_task_off_heap_memory(),
            plain.get_managed_memory(), plain.get_external_resources()) == ("plain", None, None, None, None, {})
    # Unset optional memories are 0 bytes once cpu and heap are set (PyFlink: "0 bytes 0 bytes").
    minimal = SlotSharingGroup.builder("a").set_cpu_cores(1.0).set_task_heap_memory(MemorySize.of_mebi_bytes(1)).build()
    assert (str(minimal.get_task_off_heap_memory()), str(minimal.get_managed_memory())) == ("0 bytes", "0 bytes")
    with_gpu = SlotSharingGroup.builder("g").set_cpu_cores(1.0).set_task_heap_memory_mb(1).set_external_resource("gpu", 1)
    assert with_gpu.build().get_external_resources() == {"gpu": 1.0}


def test_groups_compare_by_resources_not_name_as_flinks():
    assert SlotSharingGroup.builder("a").build() == SlotSharingGroup.builder("b").build()
    assert heavy(name="a") == heavy(name="b") and hash(heavy(name="a")) == hash(heavy(name="b"))
    assert heavy(1.0) != heavy(0.5)
    explicit_zero = (SlotSharingGroup.builder("a").set_cpu_cores(1.0).set_task_heap_memory_mb(1)
                     .set_managed_memory_mb(0).build())
    assert explicit_zero == SlotSharingGroup.builder("a").set_cpu_cores(1.0).set_task_heap_memory_mb(1).build()


@pytest.mark.parametrize("build, error, message", [
    (lambda: SlotSharingGroup.builder("x").set_cpu_cores(0.0), ValueError, "The cpu cores should be positive."),
    (lambda: SlotSharingGroup.builder("x").set_task_heap_memory_mb(0), ValueError,
     "The task heap memory should be positive."),
    (lambda: SlotSharingGroup.builder("x").set_task_heap_memory(MemorySize(bytes_size=0)), ValueError,
     "The task heap memory should be positive."),
    (lambda: SlotSharingGroup.builder("x").set_managed_memory_mb(-1), ValueError, "bytes must be >= 0"),
    (lambda: SlotSharingGroup.builder("x").set_cpu_cores(1.0).build(), ValueError,
     "The cpu cores and task heap memory are required"),
    (lambda: SlotSharingGroup.builder("x").set_external_resource("gpu", 1.0).build(), ValueError,
     "The cpu cores and task heap memory are required"),
    (lambda: SlotSharingGroup.builder("x").set_task_heap_memory(512), TypeError, "takes a MemorySize"),
    (lambda: SlotSharingGroup.builder(None), TypeError, "name"),
    (lambda: MemorySize(bytes_size=-1), ValueError, "bytes must be >= 0"),
])
def test_bad_values_are_refused_with_flinks_messages(build, error, message):
    with pytest.raises(error, match=message):
        build()


def test_memory_size_units_text_and_hash_as_javas():
    m = MemorySize.of_mebi_bytes(1536)
    assert (str(m), m.get_bytes(), m.get_kibi_bytes(), m.get_mebi_bytes(), m.get_gibi_bytes(),
            m.get_tebi_bytes(), hash(m)) == ("1536 mb", 1610612736, 1572864, 1536, 1, 0, 1610612736)
    texts = {b: str(MemorySize(bytes_size=b)) for b in (0, 1, 1024, 1536, 1048576, 1073741824, 3 * 1024 ** 4)}
    assert texts == {0: "0 bytes", 1: "1 bytes", 1024: "1 kb", 1536: "1536 bytes", 1048576: "1 mb",
                     1073741824: "1 gb", 3 * 1024 ** 4: "3298534883328 bytes"}
    assert [hash(MemorySize(bytes_size=b)) for b in (3 * 1024 ** 4, 2 ** 40 + 1)] == [768, 257]
    assert MemorySize.of_mebi_bytes(1) == MemorySize(bytes_size=1048576) != 1048576
    assert MemorySize.of_mebi_bytes(1) < MemorySize.of_mebi_bytes(2) and MemorySize.of_mebi_bytes(2) <= MemorySize.of_mebi_bytes(2)
    with pytest.raises(TypeError, match="non-MemorySize 3"):
        MemorySize.of_mebi_bytes(1) < 3


def _plan(env, cores=4):
    return compute_slot_plan(build_execution_graph(create_job_graph(env.get_stream_graph())), local_task_managers(cores))


def test_a_job_plans_the_slots_its_groups_declare(env):
    env.register_slot_sharing_group(heavy())
    s = env.from_collection([1, 2]).map(lambda x: x).set_parallelism(2)
    scored = s.map(lambda x: x).set_parallelism(2).slot_sharing_group("heavy")      # registered by name
    scored.print().slot_sharing_group(heavy())                                       # the same resources
    plan = _plan(env)
    assert dict(plan.slots_per_group) == {"default": 2, "heavy": 2}
    assert json.loads(plan.to_json())["slot_resources"] == {"heavy": {
        "cpu_cores": 1.0, "task_heap_memory": "100 mb", "task_off_heap_memory": "200 mb", "managed_memory": "300 mb"}}
    assert [(s.slot_sharing_group, s.slot_number) for s in plan.shared_slots] == [
        ("default", 0), ("default", 1), ("heavy", 0 + 2), ("heavy", 1 + 2)]


def test_a_group_given_on_an_operator_declares_its_resources(env):
    env.from_collection([1]).map(lambda x: x).slot_sharing_group(heavy(0.5, "light")).print()
    assert json.loads(_plan(env).to_json())["slot_resources"]["light"]["cpu_cores"] == 0.5


def test_two_resource_specs_for_one_name_are_refused(env):
    env.register_slot_sharing_group(heavy(1.0))
    env.from_collection([1]).map(lambda x: x).slot_sharing_group(heavy(0.5)).print()
    # Flink's StreamGraphGenerator message.
    with pytest.raises(StreamGraphError, match="The slot sharing group heavy has been configured with two "
                                               "different resource spec"):
        env.get_stream_graph()


@pytest.mark.parametrize("group", [
    heavy(2.0),
    SlotSharingGroup.builder("heavy").set_cpu_cores(1.0).set_task_heap_memory_mb(1).set_external_resource("gpu", 1.0).build(),
])
def test_more_than_a_slot_offers_is_refused_when_slots_are_planned(env, group):
    env.from_collection([1]).map(lambda x: x).slot_sharing_group(group).print()
    with pytest.raises(NoResourceAvailableException, match="slot sharing group 'heavy'.*a slot is one Spark task slot"):
        _plan(env)


def test_bad_arguments_name_the_fix(env):
    with pytest.raises(TypeError, match="register_slot_sharing_group\\(\\) takes a SlotSharingGroup"):
        env.register_slot_sharing_group("heavy")
    with pytest.raises(ValueError, match="non-empty name or a SlotSharingGroup"):
        env.from_collection([1]).slot_sharing_group(3)


def test_a_run_is_planned_with_the_declared_slots_or_refused(tmp_path):
    env = job_env(tmp_path, 2)
    env.register_slot_sharing_group(heavy())
    env.from_collection([1, 2, 3]).map(lambda x: 2 * x).set_parallelism(2).slot_sharing_group("heavy").print()
    plan = env.execute().slot_plan
    assert dict(plan.slots_per_group) == {"default": 1, "heavy": 2}     # the source, the map and its sink
    assert dict(plan.slot_resources)["heavy"]["task_heap_memory"] == "100 mb"

    env = job_env(tmp_path / "refused", 2)
    env.from_collection([1]).map(lambda x: x).slot_sharing_group(heavy(2.0)).print()
    with pytest.raises(NoResourceAvailableException, match="2.0 cpu cores"):
        env.execute()
