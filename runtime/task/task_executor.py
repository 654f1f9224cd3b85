"""A slot's long-running task (Flink's TaskExecutor, one slot of it): deployed once per run, it
runs subtask i of every vertex (slot sharing), epoch after epoch, as the driver's gateway says.

Per epoch the driver sends the slot its subtasks' deployment descriptors; the slot runs them in
the job graph's topological order, each as one ``StreamTask`` (as an epoch's Spark task does), its
input the parts the upstream subtasks sent (``runtime.task.data_exchange``), its output routed
by channel to the downstream subtasks' slots, and answers with the acknowledgements. So an epoch
costs no Spark job (its scheduling, its two stages' hand-offs: about 90 ms on a local master),
only the work and the messages. Everything else is as with a Spark job per epoch: the same
descriptors, tasks, snapshots and acknowledgements, and a failed user function a failed
acknowledgement. A slot whose task cannot go on (another slot gone) answers with a failure, and
the driver fails the run, which restores as any failed run does.
"""
from __future__ import annotations

import gc
import pickle
import traceback
from multiprocessing.connection import Connection

from runtime.common.memory import return_freed_memory
from runtime.graph.job_graph import JobGraph
from runtime.task.data_exchange import DataExchange
from runtime.task.deployment import ACK
from runtime.task.stream_task import run_task

__all__ = ["EPOCH", "FAILED", "ACKNOWLEDGED", "STOP", "TaskExecutor"]

# The gateway's messages: driver -> slot (EPOCH, epoch, descriptors) and (STOP,); slot -> driver
# (ACKNOWLEDGED, pickled acknowledgements) or (FAILED, why).
EPOCH, STOP, ACKNOWLEDGED, FAILED = "epoch", "stop", "acknowledged", "failed"


class TaskExecutor:
    def __init__(self, slot: int, job_graph: JobGraph, job_parameters: dict, exchange: DataExchange) -> None:
        self.slot = slot
        self.job_graph = job_graph
        self.job_parameters = job_parameters
        self.exchange = exchange
        # In the job graph's order (topological): a slot waits only on parts that other slots send
        # before they wait themselves.
        self.vertices = [v for v in job_graph.vertices if slot < v.parallelism]
        # Subtask ``slot``'s input parts per vertex: one per edge and upstream subtask.
        self.parts = {v.id: [(e.data_set, s) for e in job_graph.inputs_of(v.id)
                             for s in range(job_graph.vertex(e.source_vertex).parallelism)]
                      for v in self.vertices if not v.is_input_vertex}
        self.settled = False

    def serve(self, gateway: Connection) -> None:
        """Run the epochs the gateway sends until it says stop (or goes)."""
        while True:
            try:
                message = pickle.loads(gateway.recv_bytes())
            except EOFError:        # the driver went: so does the task
                return
            if message[0] == STOP:
                return
            _, epoch, descriptors = message
            try:
                reply = (ACKNOWLEDGED, self.run_epoch(epoch, descriptors))
            except Exception as e:
                reply = (FAILED, f"slot {self.slot}'s task failed in epoch {epoch}: {type(e).__name__}: {e}\n"
                                 f"{traceback.format_exc()}")
                self.exchange.discard_before(epoch + 1)
            gateway.send_bytes(pickle.dumps(reply, pickle.HIGHEST_PROTOCOL))
            self._settle()

    def run_epoch(self, epoch: int, descriptors: dict) -> list:
        """The slot's subtasks of ``epoch``, in order; their pickled acknowledgements."""
        acks = []
        for v in self.vertices:
            inputs = () if v.is_input_vertex else self.exchange.receive(epoch, v.id, self.parts[v.id])
            rows = []
            for row in run_task(self.job_graph, descriptors[(v.id, self.slot)], self.job_parameters, inputs):
                if row[0] == ACK:
                    acks.append(row[1])
                else:
                    rows.append(row)
            self._route(epoch, v, rows)
        return acks

    def _route(self, epoch: int, vertex, rows: list) -> None:
        """Each downstream subtask's part of ``rows``: those of its edge's data set, by channel."""
        for edge in self.job_graph.outputs_of(vertex.id):
            n = self.job_graph.vertex(edge.target_vertex).parallelism
            parts = [[] for _ in range(n)]
            for row in rows:
                if row[1][0] == edge.data_set:
                    parts[row[0] % n].append(row)
            for target, part in enumerate(parts):
                self.exchange.send(target, epoch, edge.target_vertex, (edge.data_set, self.slot), part)

    def _settle(self) -> None:
        """After the first epoch: collect, then freeze what survived (modules, the job graph, the
        state's caches) out of the cyclic collector's scans, as a reused worker does after its
        first task (runtime.execution.epoch_job); after every epoch the freed pages go back."""
        if not self.settled:
            self.settled = True
            gc.collect()
            gc.freeze()
        return_freed_memory()
