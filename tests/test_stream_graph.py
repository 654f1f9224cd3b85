"""StreamGraph generation: nodes, names, partitioner defaults, virtual nodes, errors."""
import json
import pytest

from runtime.client import compile_job, load_stream_graph
from runtime.common import Row, Time, Types
from runtime.datastream import (
    CoMapFunction, KeyedProcessFunction, OutputTag, ProcessFunction, StreamExecutionEnvironment,
    TumblingEventTimeWindows, TumblingProcessingTimeWindows)
from runtime.graph.stream_graph import StreamGraphError

from pyflink_case import PyFlinkCommonDataStreamTestCase
from seed import ROOT, WINDOW, WORDCOUNT


def edges_of(graph):
    return sorted((e.source_id, e.target_id, e.partitioner.ship_strategy) for e in graph.edges)


def test_seed_wordcount_stream_graph():
    graph = load_stream_graph(WORDCOUNT, parallelism=3)     # the windows take the run's (-p)
    assert graph.job_name == "Socket Window WordCount"
    assert [(n.id, n.operator_name, n.parallelism, n.kind) for n in graph.nodes] == [
        (1, "Source: Socket Stream", 1, "source"),
        (2, "Flat Map", 1, "operator"),
        (3, "Map", 1, "operator"),
        (5, WINDOW, 3, "operator"),     # id 4 is the virtual key_by partition
        (6, "Sink: Print to Std. Out", 1, "sink"),
    ]
    assert edges_of(graph) == [(1, 2, "FORWARD"), (2, 3, "FORWARD"), (3, 5, "HASH"), (5, 6, "REBALANCE")]
    window = graph.node(5)
    assert window.is_keyed and window.uid == "word-counts"
    assert window.max_parallelism == 128
    keyed_edge = graph.in_edges(5)[0]
    assert keyed_edge.partitioner.max_parallelism == 128


def test_seed_wordcount_file_variant_reads_files():
    graph = load_stream_graph(WORDCOUNT, ["--input", "/tmp/words"])
    source = graph.node(1)
    assert source.operator_name == "Source: Custom File Source"
    assert source.operator.source.paths == ("/tmp/words",)


def test_partitioner_defaults_and_explicit_partitioners(env):
    src = env.from_collection([1, 2, 3])
    a = src.map(lambda x: x).name("same-p")                        # 1 -> 1: FORWARD
    b = a.map(lambda x: x).name("wider").set_parallelism(2)        # 1 -> 2: REBALANCE
    b.rescale().map(lambda x: x).name("rescaled").set_parallelism(4)
    b.shuffle().map(lambda x: x).name("shuffled").set_parallelism(2)
    b.broadcast().map(lambda x: x).name("broadcast").set_parallelism(2)
    b.global_().map(lambda x: x).name("global").set_parallelism(1)
    b.partition_custom(lambda key, n: key % n, lambda x: x).map(lambda x: x).name("custom")
    b.forward().map(lambda x: x).name("forwarded").set_parallelism(2)
    graph = env.get_stream_graph()
    by_name = {n.operator_name: n.id for n in graph.nodes}
    strategy = {graph.node(e.target_id).operator_name: e.partitioner.ship_strategy for e in graph.edges}
    assert strategy == {
        "same-p": "FORWARD", "wider": "REBALANCE", "rescaled": "RESCALE", "shuffled": "SHUFFLE",
        "broadcast": "BROADCAST", "global": "GLOBAL", "custom": "CUSTOM", "forwarded": "FORWARD"}
    assert set(by_name) >= {"Source: Collection Source"}


def test_forward_across_parallelism_change_is_refused(env):
    env.from_collection([1, 2]).map(lambda x: x).forward().map(lambda x: x).set_parallelism(2).print()
    with pytest.raises(StreamGraphError) as e:
        env.get_stream_graph()
    msg = str(e.value)
    assert msg.startswith("Forward partitioning does not allow change of parallelism.")
    assert "Upstream operation: Map-2 parallelism: 1" in msg
    assert "downstream operation: Map-4 parallelism: 2" in msg
    assert "such as broadcast, rebalance, shuffle or global" in msg


def test_union_and_side_outputs_are_virtual(env):
    late = OutputTag("late", Types.STRING())

    class Split(ProcessFunction):
        def process_element(self, value, ctx):
            if value > 1:
                yield value
            else:
                ctx.output(late, str(value))

    src1 = env.from_collection([1, 2, 3])
    src2 = env.from_collection([4, 5])
    main = src1.union(src2).process(Split(), Types.LONG())
    main.get_side_output(late).print()
    main.print()
    graph = env.get_stream_graph()
    names = [n.operator_name for n in graph.nodes]
    assert names == ["Source: Collection Source", "Source: Collection Source", "Process",
                     "Sink: Print to Std. Out", "Sink: Print to Std. Out"]
    process = next(n.id for n in graph.nodes if n.operator_name == "Process")
    assert sorted(e.source_id for e in graph.in_edges(process)) == [1, 2]
    tags = sorted((e.output_tag.tag_id if e.output_tag else "main") for e in graph.out_edges(process))
    assert tags == ["late", "main"]


def test_connect_keyed_streams_makes_a_keyed_two_input_node(env):
    class Join(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield value

    from runtime.datastream import KeyedCoProcessFunction

    class CoJoin(KeyedCoProcessFunction):
        def process_element1(self, value, ctx):
            yield value

        def process_element2(self, value, ctx):
            yield value

    a = env.from_collection([("a", 1)])
    b = env.from_collection([("a", 2)])
    a.connect(b).key_by(lambda r: r[0], lambda r: r[0]).process(CoJoin()).print()
    graph = env.get_stream_graph()
    co = next(n for n in graph.nodes if n.operator_name == "KeyedCoProcess")
    assert co.is_keyed and len(co.state_key_selectors) == 2
    assert sorted((e.type_number, e.partitioner.ship_strategy) for e in graph.in_edges(co.id)) == [
        (1, "HASH"), (2, "HASH")]


def test_slot_sharing_group_is_inherited_from_inputs(env):
    src = env.from_collection([1]).slot_sharing_group("ingest")
    m = src.map(lambda x: x)                     # inherits "ingest"
    other = env.from_collection([2])             # "default"
    m.union(other).map(lambda x: x).print()      # mixed inputs: "default"
    graph = env.get_stream_graph()
    groups = [(n.operator_name, n.slot_sharing_group) for n in graph.nodes]
    assert groups == [("Source: Collection Source", "ingest"), ("Map", "ingest"),
                      ("Source: Collection Source", "default"), ("Map", "default"),
                      ("Sink: Print to Std. Out", "default")]


def test_duplicate_uids_are_refused(env):
    env.from_collection([1]).map(lambda x: x).uid("same").map(lambda x: x).uid("same").print()
    with pytest.raises(StreamGraphError, match='Hash collision on user-specified ID "same"'):
        env.get_stream_graph()


def test_operator_ids_come_from_uid_or_position():
    def build(extra_name):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.from_collection([1]).map(lambda x: x).name(extra_name).uid("m").map(lambda x: x).print()
        return env.get_stream_graph()
    g1, g2 = build("first"), build("renamed")
    assert [n.operator_id for n in g1.nodes] == [n.operator_id for n in g2.nodes]
    assert len({n.operator_id for n in g1.nodes}) == 4


def test_cycles_are_refused(env):
    from dataclasses import replace
    env.from_collection([1]).map(lambda x: x).map(lambda x: x).print()
    graph = env.get_stream_graph()
    back = replace(graph.edges[-1], source_id=4, target_id=2)
    cyclic = replace(graph, edges=graph.edges + (back,))
    with pytest.raises(StreamGraphError, match="cycle through 'Map', 'Map', 'Sink: Print to Std. Out'"):
        cyclic.topological_order()


def test_max_parallelism_below_parallelism_is_refused(env):
    env.set_max_parallelism(4)
    env.from_collection([1]).map(lambda x: x).set_parallelism(4).print()
    env.get_stream_graph()  # equal is fine
    env2 = StreamExecutionEnvironment.get_execution_environment()
    env2.set_max_parallelism(2)
    env2.from_collection([1]).map(lambda x: x).set_parallelism(3).print()
    with pytest.raises(StreamGraphError, match=r"The maximum parallelism \(2\) of the stream node Map "
                                               r"is smaller than the parallelism \(3\)"):
        env2.get_stream_graph()
    op = env2.from_collection([1]).map(lambda x: x).set_max_parallelism(2)
    with pytest.raises(ValueError, match=r"The parallelism \(3\) of 'Map' is larger than its maximum"):
        op.set_parallelism(3)


def test_default_max_parallelism_follows_flink(env):
    env.from_collection([1]).map(lambda x: x).set_parallelism(100).print()
    graph = env.get_stream_graph()
    # Flink: roundUpToPowerOfTwo(p + p/2), at least 128.
    assert [n.max_parallelism for n in graph.nodes] == [1, 256, 128]


def test_no_operators_is_an_error(env):
    env.from_collection([1])
    with pytest.raises(StreamGraphError, match="No operators defined in streaming topology"):
        env.get_stream_graph()


def test_execution_plan_json_matches_flink_shape():
    graph = load_stream_graph(WORDCOUNT, parallelism=3)
    plan = json.loads(graph.get_streaming_plan_as_json())
    assert plan == {"nodes": [
        {"id": 1, "type": "Source: Socket Stream", "pact": "Data Source",
         "contents": "Source: Socket Stream", "parallelism": 1},
        {"id": 2, "type": "Flat Map", "pact": "Operator", "contents": "Flat Map", "parallelism": 1,
         "predecessors": [{"id": 1, "ship_strategy": "FORWARD", "side": "second"}]},
        {"id": 3, "type": "Map", "pact": "Operator", "contents": "Map", "parallelism": 1,
         "predecessors": [{"id": 2, "ship_strategy": "FORWARD", "side": "second"}]},
        {"id": 5, "type": WINDOW, "pact": "Operator", "contents": WINDOW, "parallelism": 3,
         "predecessors": [{"id": 3, "ship_strategy": "HASH", "side": "second"}]},
        {"id": 6, "type": "Sink: Print to Std. Out", "pact": "Data Sink",
         "contents": "Sink: Print to Std. Out", "parallelism": 1,
         "predecessors": [{"id": 5, "ship_strategy": "REBALANCE", "side": "second"}]},
    ]}


def test_job_graph_json_names_chains_and_inputs():
    job = compile_job(WORDCOUNT, parallelism=3)
    plan = json.loads(job.job_graph.get_job_graph_as_json())
    assert [(n["description"], n["parallelism"], [i["ship_strategy"] for i in n["inputs"]])
            for n in plan["nodes"]] == [
        ("Source: Socket Stream -> Flat Map -> Map", 1, []),
        (WINDOW, 3, ["HASH"]),
        ("Sink: Print to Std. Out", 1, ["REBALANCE"]),
    ]
    assert plan["name"] == "Socket Window WordCount"


def plan_of(env):
    return [(n["id"], n["type"], n["parallelism"], [(p["id"], p["ship_strategy"]) for p in n.get("predecessors", [])])
            for n in json.loads(env.get_execution_plan())["nodes"]]


def test_a_keyed_stream_taken_as_a_plain_one_is_planned_as_pyflink_and_runs_no_operator(env):
    # PyFlink takes a KeyedStream's values with a map named _keyed_stream_values_operator (at the
    # default parallelism) for union, add_sink, print and project; Sluice's keyed records are the
    # values: the plan has PyFlink's nodes, the records go by key straight to the next operator.
    env.set_parallelism(2)
    pairs = Types.TUPLE([Types.STRING(), Types.INT()])
    keyed = env.from_collection([("a", 1)], pairs).key_by(lambda r: r[0])        # 1: source, 2: key_by
    keyed.print()                                                                # 3: values, 4: sink
    keyed.add_sink(lambda r: None).set_parallelism(1)                            # 5, 6
    keyed.project(1).map(lambda r: r).set_parallelism(2)                         # 7, 8 Projection, 9
    other = env.from_collection([("b", 2)], pairs)                               # 10
    other.union(keyed).print()                                                   # 11 values, 12 union, 13
    assert plan_of(env) == [
        (1, "Source: Collection Source", 1, []),
        (3, "_keyed_stream_values_operator", 2, [(1, "HASH")]),
        (4, "Sink: Print to Std. Out", 2, [(3, "FORWARD")]),
        (5, "_keyed_stream_values_operator", 2, [(1, "HASH")]),
        (6, "Sink: Unnamed", 1, [(5, "REBALANCE")]),
        (7, "_keyed_stream_values_operator", 2, [(1, "HASH")]),
        (8, "Projection", 2, [(7, "FORWARD")]),
        (9, "Map", 2, [(8, "FORWARD")]),
        (10, "Source: Collection Source", 1, []),
        (11, "_keyed_stream_values_operator", 2, [(1, "HASH")]),
        (13, "Sink: Print to Std. Out", 2, [(10, "REBALANCE"), (11, "FORWARD")]),
    ]
    graph = env.get_stream_graph()
    assert [n.id for n in graph.nodes] == [1, 4, 6, 8, 9, 10, 13]     # no operator for the values
    assert edges_of(graph) == [(1, 4, "HASH"), (1, 6, "HASH"), (1, 8, "HASH"), (1, 13, "HASH"),
                               (8, 9, "FORWARD"), (10, 13, "REBALANCE")]
    assert not graph.node(8).is_keyed       # PyFlink's projection is of the values: a plain map
    assert graph.node(8).output_type == Types.TUPLE([Types.INT()])


def test_a_keyed_union_repartitioned_or_keyed_again_is_drawn_through_its_values_nodes(env):
    env.set_parallelism(2)
    union = env.from_collection([1]).key_by(lambda x: x).union(env.from_collection([2]).key_by(lambda x: x))
    union.rebalance().map(lambda x: x).set_parallelism(3).print()
    union.key_by(lambda x: x % 2).union(env.from_collection([3])).print()
    plan = {n[0]: n for n in plan_of(env)}
    assert [i for i, n in plan.items() if n[1] == "_keyed_stream_values_operator"] == [5, 6, 13]
    assert plan[5][3] == [(1, "HASH")] and plan[6][3] == [(3, "HASH")]
    assert plan[9][1:] == ("Map", 3, [(5, "REBALANCE"), (6, "REBALANCE")])     # rebalanced after the values
    assert plan[13][3] == [(5, "HASH"), (6, "HASH")]                            # keyed again, then values
    assert plan[15][3] == [(13, "FORWARD"), (12, "REBALANCE")]
    # What runs: each source's records rebalanced to the Map, and hashed by the second key to the sink.
    assert edges_of(env.get_stream_graph()) == [(1, 9, "REBALANCE"), (1, 15, "HASH"), (3, 9, "REBALANCE"),
                                                (3, 15, "HASH"), (9, 10, "REBALANCE"), (12, 15, "REBALANCE")]

class PyFlinkKeyedStreamUnionTests(PyFlinkCommonDataStreamTestCase):
    """PyFlink 2.3's CommonDataStreamTests.test_keyed_stream_union, its body unchanged: a union of
    keyed streams is a union of their values, each taken by a ``_keyed_stream_values_operator``."""

    def test_keyed_stream_union(self):
        ds_1 = self.env.from_collection([1, 2, 3])
        ds_2 = self.env.from_collection([4, 5, 6])
        unioned_stream = ds_1.key_by(lambda x: x).union(ds_2.key_by(lambda x: x))
        unioned_stream.add_sink(self.test_sink)
        exec_plan = eval(self.env.get_execution_plan())
        expected_union_node_pre_ids = []
        union_node_pre_ids = []
        for node in exec_plan['nodes']:
            if node['type'] == '_keyed_stream_values_operator':
                expected_union_node_pre_ids.append(node['id'])
            if node['pact'] == 'Data Sink':
                for pre in node['predecessors']:
                    union_node_pre_ids.append(pre['id'])

        expected_union_node_pre_ids.sort()
        union_node_pre_ids.sort()
        self.assertEqual(expected_union_node_pre_ids, union_node_pre_ids)
