"""The driver's coordinators, without Spark: the checkpoint coordinator receives the tasks'
acknowledgements and routes the sinks' committables (Flink's CheckpointCoordinator
receiveAcknowledgeMessage), the source coordinator plans and completes the splits (Flink's
SourceCoordinator)."""
import pickle

from runtime.checkpoint.coordinator import CheckpointCoordinator
from runtime.checkpoint.storage import CheckpointStorage
from runtime.common.watermark_strategy import WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import NumberSequenceSource
from runtime.execution.options import ExecutionOptions
from runtime.execution.source_coordinator import SourceCoordinator
from runtime.graph.job_graph import create_job_graph
from runtime.task.stream_task import Acknowledgement


def two_vertex_job():
    """A source of parallelism 2 feeding a map and sink of parallelism 3 (two job vertices)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_source(NumberSequenceSource(1, 10), WatermarkStrategy.no_watermarks(), "numbers") \
        .set_parallelism(2).rebalance().map(lambda x: x).set_parallelism(3).print().set_parallelism(3)
    return create_job_graph(env.get_stream_graph("driver coordinators"))


def coordinator(tmp_path, job_graph):
    return CheckpointCoordinator(CheckpointStorage(str(tmp_path / "job")), job_graph, {}, "run-1")


class RecordingCommitter:
    def __init__(self, at_checkpoint, commits):
        self.at_checkpoint = at_checkpoint
        self.commits = commits

    def commit(self, committables, version):
        self.commits.append((committables, version))
        return {}


def test_one_acknowledgement_per_subtask_in_order_and_a_failed_recomputation_wins(tmp_path):
    graph = two_vertex_job()
    source, sink = (v.id for v in graph.vertices)
    acks = [Acknowledgement(sink, 1, records_in=5), Acknowledgement(source, 0, records_in=1),
            Acknowledgement(sink, 1, failure="boom"),          # a recomputation of sink/1 failed
            Acknowledgement(sink, 1, records_in=5),            # ... and another one succeeded
            Acknowledgement(source, 0, records_in=1),          # a retry of source/0, the same
            Acknowledgement(sink, 0)]
    received = coordinator(tmp_path, graph).receive_acknowledgements([pickle.dumps(a) for a in acks])
    assert [(a.job_vertex_id, a.subtask_index, a.failure) for a in received] == \
        [(source, 0, None), (sink, 0, None), (sink, 1, "boom")]


def test_committables_go_in_vertex_then_subtask_order_and_checkpointed_ones_wait(tmp_path):
    graph = two_vertex_job()
    source, sink = (v.id for v in graph.vertices)
    at_once, at_checkpoint = [], []
    c = coordinator(tmp_path, graph)
    c.committers = {"print": RecordingCommitter(False, at_once), "delta": RecordingCommitter(True, at_checkpoint)}
    c.route_committables([Acknowledgement(sink, 2, committables={"print": "s2", "delta": "d2"}),
                          Acknowledgement(sink, 0, committables={"print": "s0", "delta": "d0"}),
                          Acknowledgement(source, 1, committables={"print": "src1"})], epoch=4)
    # Printed lines are delivered at once, with the epoch's number + 1 as the version.
    assert at_once == [(["src1"], 5), (["s0"], 5), (["s2"], 5)]
    assert at_checkpoint == []
    staged = c.staged()
    assert [(committer.at_checkpoint, committables) for committer, committables in staged] == [(True, ["d0", "d2"])]
    assert [committables for _, committables in c.staged()] == [[]]     # taken out


def test_a_logged_plan_replays_the_same_reads_per_subtask(tmp_path):
    graph = two_vertex_job()
    options = ExecutionOptions(max_records_per_split=3)
    sources = SourceCoordinator(graph, options, str(tmp_path / "job"), batch=False)
    plans, end_of_input = sources.plan_epoch(0)
    assert not end_of_input     # 3 of each subtask's 5 numbers
    (vid, plan), = plans.items()
    assert sorted(plan) == [0, 1]
    logged = {"plan": sources.logged_plan(plans)}
    assert sources.replayed_plan(logged) == {vid: {s: tuple(reads) for s, reads in plan.items()}}
    # Completed with the readers' positions, the enumerator plans on from there.
    sources.complete_epoch([Acknowledgement(vid, s, split_states={r.split_id: {"offset": r.end}})
                            for s, reads in plan.items() for r in reads])
    later, end_of_input = sources.plan_epoch(1)
    assert end_of_input
    assert [r.start for s in sorted(later[vid]) for r in later[vid][s]] == [r.end for s in sorted(plan) for r in plan[s]]
    sources.close()
