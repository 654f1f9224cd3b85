"""A replayed epoch's Kafka reads go back to the subtasks that planned them (no broker, no
Spark: the plan is made here, pickled as the epoch log keeps it, and read back)."""
import pickle

from runtime.common import WatermarkStrategy
from runtime.common.serialization import SimpleStringSchema
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors.kafka import KafkaSource
from runtime.execution.options import ExecutionOptions
from runtime.execution.source_coordinator import SourceCoordinator
from runtime.graph.job_graph import create_job_graph
from runtime.task.deployment import SplitRead


def kafka_coordinator(tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment()
    source = (KafkaSource.builder().set_bootstrap_servers("127.0.0.1:1").set_topics("t")
              .set_value_only_deserializer(SimpleStringSchema()).build())
    env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka").set_parallelism(2).print()
    graph = create_job_graph(env.get_stream_graph("replayed plan"))
    return SourceCoordinator(graph, ExecutionOptions(), str(tmp_path / "job"), batch=False)


def test_a_replayed_plan_gives_each_read_to_the_subtask_that_planned_it(tmp_path):
    sources = kafka_coordinator(tmp_path)
    (vid,) = sources.enumerators
    # Subtask 1 owns both partitions (as Flink's split owner may decide); subtask 0 none.
    reads = (SplitRead("t-0", 0, 5, {"topic": "t", "partition": 0, "offset": 0, "wm": 7}),
             SplitRead("t-1", 3, 9, {"topic": "t", "partition": 1, "offset": 3}))
    plan = {vid: {0: (), 1: reads}}
    logged = pickle.loads(pickle.dumps({"plan": sources.logged_plan(plan)}))
    assert sources.replayed_plan(logged) == plan        # round-robin would give t-0 to subtask 0
    # An epoch log written before reads named their subtask still replays (round-robin).
    old = {"plan": {uid: list(reads) for uid in sources.operator_ids.values()}}
    assert sources.replayed_plan(old) == {vid: {0: reads[:1], 1: reads[1:]}}
    sources.close()
