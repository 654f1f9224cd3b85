"""execute_and_collect() gives the records as PyFlink does. PyFlink 2.3, env.set_parallelism(2)
(bench/.venv-pyflink, run for this test): from_collection is non-parallel (its source is
forceNonParallel: pyflink/datastream/stream_execution_environment.py _from_collection); its
collect sink has parallelism 1 (Java DataStream.collectAsync, CollectStreamSink), so
``from_collection(range(20)).execute_and_collect()`` returns 0..19 in order; a map at parallelism 2
gets the records round robin (REBALANCE, StreamGraphGenerator: the parallelism changes) and collect
returns one subtask's records, then the other's: [0, 20, ..., 180, 10, 30, ..., 190] (or the two
halves the other way round, as the subtasks finish)."""
import json

from runtime_env import job_env


def test_a_non_parallel_source_is_collected_in_order(tmp_path):
    env = job_env(tmp_path, 2)
    assert list(env.from_collection(list(range(20))).execute_and_collect()) == list(range(20))


def test_a_parallelism_1_map_is_collected_in_order(tmp_path):
    env = job_env(tmp_path, 2)     # PyFlink: map(...).set_parallelism(1) gives 0..19 in order
    ds = env.from_collection(list(range(20))).map(lambda x: x).set_parallelism(1)
    assert list(ds.execute_and_collect()) == list(range(20))


def test_a_parallel_map_after_it_is_collected_a_subtask_at_a_time(tmp_path):
    env = job_env(tmp_path, 2)
    mapped = env.from_collection(list(range(20))).map(lambda x: x * 10)
    nodes = json.loads(env.get_execution_plan())["nodes"]
    assert [(n["type"], n["parallelism"]) for n in nodes] == [("Source: Collection Source", 1), ("Map", 2)]
    assert nodes[1]["predecessors"][0]["ship_strategy"] == "REBALANCE"
    assert list(mapped.execute_and_collect()) == list(range(0, 200, 20)) + list(range(10, 200, 20))
