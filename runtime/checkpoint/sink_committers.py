"""The job's sinks as the driver commits them: each sink's committer and transaction id, where
sinks already hold the job's committed output, and whether they can write at all.

Its own module because both the checkpoint coordinator (which commits the sinks' committables)
and the run's preflight (which probes the sinks before anything runs) need the same view of
the sinks, and neither is the other's.
"""
from __future__ import annotations

from runtime.connectors import committer_class
from runtime.connectors.base import CommitterContext
from runtime.graph.job_graph import JobGraph
from runtime.storage.filesystems import StorageException, check_writable
from runtime.storage.layout import slug


def sink_nodes(job_graph: JobGraph) -> list:
    return [n for v in job_graph.vertices for n in v.operators if n.kind == "sink"]


def sink_app_id(job_graph: JobGraph, node) -> str:
    """The id of a sink's transactions: its commits carry it, which makes them exactly once."""
    return f"sluice-{slug(job_graph.job_name)}-{node.operator_id}"


def create_committers(job_graph: JobGraph, transaction_suffix: str, result) -> dict:
    """A committer per sink (by node id), for one run; ``transaction_suffix`` follows each sink's
    app id (a run's id when its transactions are the run's), ``result`` is the run's
    JobExecutionResult, which committers fill."""
    stream_graph = job_graph.stream_graph
    return {n.id: committer_class(n.operator.sink)(n.operator.sink, CommitterContext(
                job_graph.job_name, n.id, n.operator_id, sink_app_id(job_graph, n) + transaction_suffix, result,
                input_type=stream_graph.edge_type(stream_graph.in_edges(n.id)[0])))
            for n in sink_nodes(job_graph)}


def check_sink_locations(job_graph: JobGraph) -> None:
    """Every sink's table or base folder in an object store is probed as the warehouse is (a local
    one costs nothing): a missing bucket, refused credentials or an unreachable endpoint fail
    before the first epoch, naming the sink, the URI and the setting to fix; then each sink's
    committer checks its own configuration, and the stream's declared type, against what is there
    (``Committer.check``)."""
    stream_graph = job_graph.stream_graph
    for node in sink_nodes(job_graph):
        committer = committer_class(node.operator.sink)
        where = committer.output_location(node.operator.sink)
        if where is not None:
            try:
                check_writable(*where)
            except StorageException as e:
                raise StorageException(f"the sink '{node.operator_name}' cannot write its output: {e}") from None
        committer.check(node.operator.sink, node.operator_name,
                        stream_graph.edge_type(stream_graph.in_edges(node.id)[0]))


def committed_sinks(job_graph: JobGraph) -> list[str]:
    """Where the job's sinks already hold output it committed (a Delta table holding its app
    transaction), as each sink's committer tells."""
    found = (committer_class(n.operator.sink).committed_output(n.operator.sink, sink_app_id(job_graph, n))
             for n in sink_nodes(job_graph))
    return [where for where in found if where is not None]
