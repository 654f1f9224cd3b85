"""A whole job's first epoch run through the task harness (``run_task``), without Spark.

The fast loop's way to run every operator: each vertex's subtasks run one after the other in
this process, the driver's split enumerators plan the sources' reads, and the rows a producer
writes for a consumer channel are the consumer subtask's input, as the Spark shuffle would
deliver them. One epoch, with the whole bounded input and no checkpoint: state, restores and
the epoch loop are what the Spark job tests (slow tier ``jobs``) cover.
"""
import pickle

from runtime.connectors import create_enumerator, reader_class, writer_class
from runtime.connectors.base import EnumeratorContext
from runtime.execution.options import ExecutionOptions
from runtime.graph.job_graph import create_job_graph
from runtime.task.stream_task import ACK, TaskDeploymentDescriptor, run_task


def collect_in_tasks(stream, job_name: str = "harness") -> list:
    """What ``stream.execute_and_collect()`` returns, subtask after subtask, from tasks run here
    at the environment's pinned clock (sluice.clock.start) and batch size (sluice.task.batch-size)."""
    stream._collect_sink()      # execute_and_collect's sink
    stream_graph = stream._env.get_stream_graph(job_name)
    settings = stream_graph.settings
    options = ExecutionOptions.from_configuration(dict(settings.configuration))
    job_graph = create_job_graph(stream_graph)
    outputs: dict = {}      # vertex id -> the data rows its subtasks wrote
    collected = []
    for v in job_graph.vertices:
        edges = job_graph.inputs_of(v.id)
        data_sets = {je.data_set for je in edges}
        rows = [row for producer in {je.source_vertex for je in edges} for row in outputs[producer]
                if row[1][0] in data_sets]
        plan = source = None
        if v.is_input_vertex:
            source = v.head.operator.source
            plan = create_enumerator(source, EnumeratorContext(parallelism=v.parallelism)).plan_epoch(0)
        sinks = {n.id: writer_class(n.operator.sink) for n in v.operators if n.kind == "sink"}
        outputs[v.id] = []
        for subtask in range(v.parallelism):
            tdd = TaskDeploymentDescriptor(
                v.id, subtask, 0, epoch=0, processing_time=options.clock_start_ms, end_of_input=True,
                splits=plan.get(subtask, ()) if plan is not None else (), batch_size=options.batch_size,
                source_reader=reader_class(source) if source is not None else None, sink_writers=sinks)
            inputs = [r for r in rows if r[0] == subtask]
            for row in run_task(job_graph, tdd, dict(settings.job_parameters), inputs):
                if row[0] != ACK:
                    outputs[v.id].append(row)
                    continue
                ack = pickle.loads(row[1])
                if ack.failure is not None:
                    raise AssertionError(ack.failure)
                collected.extend(r for c in ack.committables.values() for r in c.records())
    return collected
