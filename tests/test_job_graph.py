"""JobGraph: Flink's chaining rules, chained names, job edges and distribution patterns."""
import json

import pytest

from runtime.common import WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import NumberSequenceSource
from runtime.graph.job_graph import DistributionPattern, create_job_graph


def chains(env):
    return [(v.name, v.parallelism) for v in create_job_graph(env.get_stream_graph()).vertices]


def src(env):
    return env.from_collection([1, 2, 3])


def test_forward_edges_with_equal_parallelism_chain(env):
    src(env).map(lambda x: x).filter(lambda x: True).print()
    assert chains(env) == [("Source: Collection Source -> Map -> Filter -> Sink: Print to Std. Out", 1)]


def numbers(env):
    """A source its consumers cannot read for it (from_collection's they can, below)."""
    return env.from_source(NumberSequenceSource(1, 3), WatermarkStrategy.no_watermarks(), "Numbers")


def test_parallelism_change_breaks_the_chain(env):
    numbers(env).map(lambda x: x).set_parallelism(2).filter(lambda x: True).set_parallelism(2).print()
    assert chains(env) == [("Source: Numbers", 1), ("Map -> Filter", 2), ("Sink: Print to Std. Out", 1)]


def test_a_rebalance_out_of_a_collection_is_read_by_the_consumers_it_chains_to(env):
    src(env).map(lambda x: x).set_parallelism(2).filter(lambda x: True).set_parallelism(2).print()
    graph = create_job_graph(env.get_stream_graph())
    assert [(v.name, v.parallelism) for v in graph.vertices] == [
        ("Source: Collection Source -> Map -> Filter", 2), ("Sink: Print to Std. Out", 1)]
    source = graph.vertices[0].head
    assert source.operator.source.shares == 2 and source.max_parallelism == graph.vertices[0].operators[1].max_parallelism
    assert json.loads(env.get_execution_plan())["nodes"][0]["parallelism"] == 1    # the StreamGraph is Flink's


@pytest.mark.parametrize("build", [
    lambda env: src(env).key_by(lambda x: x).map(lambda x: x).set_parallelism(2).print(),      # keyed
    lambda env: src(env).map(lambda x: x).set_parallelism(2).disable_chaining().print(),       # does not chain
    lambda env: src(env).map(lambda x: x).set_parallelism(2).slot_sharing_group("other").print(),
    lambda env: [s.map(lambda x: x).set_parallelism(2).print() for s in [src(env)] * 2],      # two consumers
])
def test_a_collection_keeps_its_one_subtask_where_the_consumers_cannot_read_it(env, build):
    build(env)
    graph = create_job_graph(env.get_stream_graph())
    assert all(v.parallelism == 1 for v in graph.vertices if v.is_input_vertex)


def test_non_forward_partitioner_breaks_the_chain(env):
    src(env).map(lambda x: x).rebalance().map(lambda x: x).print()
    assert chains(env) == [("Source: Collection Source -> Map", 1), ("Map -> Sink: Print to Std. Out", 1)]


def test_key_by_breaks_the_chain(env):
    src(env).key_by(lambda x: x).reduce(lambda a, b: a + b).print()
    assert chains(env) == [("Source: Collection Source", 1),
                           ("Keyed Reduce -> Sink: Print to Std. Out", 1)]


def test_disable_chaining_isolates_the_operator(env):
    src(env).map(lambda x: x).disable_chaining().filter(lambda x: True).print()
    assert chains(env) == [("Source: Collection Source", 1), ("Map", 1),
                           ("Filter -> Sink: Print to Std. Out", 1)]


def test_start_new_chain_starts_at_the_operator(env):
    src(env).map(lambda x: x).filter(lambda x: True).start_new_chain().print()
    assert chains(env) == [("Source: Collection Source -> Map", 1),
                           ("Filter -> Sink: Print to Std. Out", 1)]


def test_different_slot_sharing_groups_do_not_chain(env):
    src(env).map(lambda x: x).slot_sharing_group("heavy").print().slot_sharing_group("heavy")
    assert chains(env) == [("Source: Collection Source", 1), ("Map -> Sink: Print to Std. Out", 1)]


def test_operator_with_two_inputs_does_not_chain(env):
    a = src(env)
    b = env.from_collection([4])
    a.union(b).map(lambda x: x).print()
    assert chains(env) == [("Source: Collection Source", 1), ("Source: Collection Source", 1),
                           ("Map -> Sink: Print to Std. Out", 1)]


def test_chaining_disabled_for_the_environment(env):
    env.disable_operator_chaining()
    src(env).map(lambda x: x).print()
    assert chains(env) == [("Source: Collection Source", 1), ("Map", 1), ("Sink: Print to Std. Out", 1)]


def test_a_branching_chain_is_named_with_parentheses(env):
    m = src(env).map(lambda x: x)
    m.filter(lambda x: True).print()
    m.print()
    assert chains(env) == [
        ("Source: Collection Source -> Map -> (Filter -> Sink: Print to Std. Out, "
         "Sink: Print to Std. Out)", 1)]


def test_sources_are_chain_heads_and_never_chain_to_a_predecessor():
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)   # the sink chains to the source
    env.from_collection([1]).print()
    graph = create_job_graph(env.get_stream_graph())
    assert [v.is_input_vertex for v in graph.vertices] == [True]


def test_job_edges_and_data_sets(env):
    s = numbers(env)
    s.map(lambda x: x).set_parallelism(2).rescale().map(lambda x: x).set_parallelism(4).print()
    graph = create_job_graph(env.get_stream_graph())
    edges = [(graph.vertex(e.source_vertex).name, graph.vertex(e.target_vertex).name,
              e.ship_strategy, e.distribution_pattern) for e in graph.edges]
    assert edges == [
        ("Source: Numbers", "Map", "REBALANCE", DistributionPattern.ALL_TO_ALL),
        ("Map", "Map", "RESCALE", DistributionPattern.POINTWISE),
        ("Map", "Sink: Print to Std. Out", "REBALANCE", DistributionPattern.ALL_TO_ALL),
    ]
    assert len({e.data_set for e in graph.edges}) == 3
    assert [d.producer for d in graph.data_sets] == [e.source_vertex for e in graph.edges]


def test_one_pipeline_is_one_source_and_a_single_line_of_vertices():
    """Its stages run one after another (execution/epoch_job.py shares the slots' pools)."""
    def graph_of(env):
        return create_job_graph(env.get_stream_graph())

    def graph(build):
        env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
        build(env)
        return graph_of(env)
    assert graph(lambda env: env.from_collection([1, 2]).key_by(lambda x: x).map(lambda x: x).print()).is_one_pipeline()
    keyed_twice = graph(lambda env: env.from_collection([1]).key_by(lambda x: x).map(lambda x: x)
                        .key_by(lambda x: -x).map(lambda x: x).print())
    assert len(keyed_twice.vertices) == 3 and keyed_twice.is_one_pipeline()
    assert not graph(lambda env: env.from_collection([1]).union(env.from_collection([2])).key_by(lambda x: x)
                     .map(lambda x: x).print()).is_one_pipeline()         # two sources
    def two_consumers(env):
        keyed = env.from_collection([1]).key_by(lambda x: x).map(lambda x: x)
        keyed.print()       # chained: still one line
        keyed.map(lambda x: x).set_parallelism(1).print()
        assert graph_of(env).is_one_pipeline()
        keyed.map(lambda x: x).set_parallelism(3).print()
    assert not graph(two_consumers).is_one_pipeline()       # a vertex with two outputs


def test_job_graph_is_a_pure_function_of_the_stream_graph(env):
    src(env).map(lambda x: x).key_by(lambda x: x).sum(0).print()
    stream_graph = env.get_stream_graph()
    assert create_job_graph(stream_graph) == create_job_graph(stream_graph)
    with pytest.raises(Exception):
        create_job_graph(stream_graph).vertices[0].name = "changed"   # frozen
