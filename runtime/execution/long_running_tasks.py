"""Epochs without a Spark job each (``sluice.epoch.tasks: long-running``): one Spark job per run,
a barrier stage of one long-running task per slot (``runtime.task.task_executor``), to which the
driver sends each epoch's deployment descriptors over a socket, as Flink's JobMaster sends its
TaskExecutors their tasks, and Spark's real-time mode runs its long-running tasks.

The same interface as ``EpochJob`` (``run`` an epoch's descriptors, get the tasks' pickled
acknowledgements; ``release``), so that the rest of the run does not know which one runs its
epochs. What it costs: the run's slots are held by its tasks for its life, so the session needs
a free task slot per subtask of the widest vertex, and Spark jobs of the driver's own (a
delta-spark commit) need slots beyond those (``check_free_slots``).

The barrier stage starts its tasks together, and they find each other through the driver; a
task that fails or is killed fails the stage, and with it the run (Spark retries no barrier task
on its own here: the run restarts from its checkpoint, as after any failed epoch).
"""
from __future__ import annotations

import os
import pickle
import queue
import threading
import time
from multiprocessing.connection import Connection, Listener, wait
from typing import Optional

from pyspark.serializers import CloudPickleSerializer

from runtime.graph.job_graph import JobGraph
from runtime.task.task_executor import ACKNOWLEDGED, EPOCH, STOP

_POLL_S = 0.5       # how often a wait on the tasks looks at whether their Spark job ended
# How long the tasks may take to start: Spark holds a barrier stage until all its tasks have a
# slot, and slots another job holds (its long-running tasks) may never come free.
DEPLOY_TIMEOUT_S = 60.0


# The Spark task slots that runs' long-running tasks hold in this process's Spark session (a run
# id -> its slots): jobs of one process share its SparkContext, and a job whose tasks find no
# free slot would wait behind them for as long as they run.
_held: dict = {}
_held_lock = threading.Lock()


def slots_needed(job_graph: JobGraph) -> int:
    """Slot sharing: a slot per subtask of the widest vertex."""
    return max(v.parallelism for v in job_graph.vertices)


def slots_held() -> int:
    """The slots other runs' long-running tasks hold in this process's Spark session."""
    with _held_lock:
        return sum(_held.values())


def check_free_slots(job_graph: JobGraph, task_slots: int, long_running: bool, spark_committers: tuple = ()) -> None:
    """Refuse a run that would wait for Spark task slots forever (Flink's
    NoResourceAvailableException): long-running tasks need a free slot per subtask of the widest
    vertex, and one more for sinks that commit with Spark jobs of their own
    (``spark_committers``: their names); a Spark job per epoch needs one free slot."""
    held = slots_held()
    free = task_slots - held
    others = f", {held} of them held by other runs' long-running tasks in this process" if held else ""
    if not long_running:
        if free < 1:
            raise ValueError(f"job '{job_graph.job_name}' cannot run: the Spark session's {task_slots} task slot(s) are "
                             f"all held by other runs' long-running tasks in this process. Stop one of them, or run "
                             f"this job in a Spark session of its own")
        return
    needed = slots_needed(job_graph)
    widest = max(job_graph.vertices, key=lambda v: v.parallelism)
    if free < needed:
        raise ValueError(f"sluice.epoch.tasks: long-running needs a Spark task slot per subtask: '{widest.name}' has "
                         f"parallelism {needed}, the Spark session has {task_slots} slot(s){others}. Lower the job's "
                         f"parallelism, give Spark more cores (sluice.spark.master), or run sluice.epoch.tasks: "
                         f"per-epoch")
    if spark_committers and free == needed:
        raise ValueError(f"sluice.epoch.tasks: long-running holds {needed} of the Spark session's {task_slots} task "
                         f"slot(s){others}, and {', '.join(spark_committers)} commit(s) with Spark jobs (delta-spark) "
                         f"that need one more. Lower the job's parallelism to {free - 1}, give Spark more cores "
                         f"(sluice.spark.master), or run sluice.epoch.tasks: per-epoch")


def _slot_task(gateway: tuple, secret: bytes, broadcast, job_parameters: dict):
    """The body of each barrier task: a slot's TaskExecutor, until the driver says stop."""
    def run(rows):
        from pyspark import BarrierTaskContext
        from multiprocessing.connection import Client
        from runtime.task.data_exchange import DataExchange
        from runtime.task.task_executor import TaskExecutor
        for _ in rows:
            pass
        context = BarrierTaskContext.get()
        slot = context.partitionId()
        host = context.getTaskInfos()[slot].address.rsplit(":", 1)[0]   # this executor's, as Spark knows it
        exchange = DataExchange(slot, host, secret)
        try:
            # The slots learn each other's addresses from the driver (BarrierTaskContext.allGather
            # would do, but waits in steps of a second).
            driver = Client(gateway, authkey=secret)
            driver.send((slot, exchange.address))
            exchange.connect(driver.recv())
            TaskExecutor(slot, pickle.loads(broadcast.value), job_parameters, exchange).serve(driver)
            driver.close()
        finally:
            exchange.close()
        return iter(())
    return run


class LongRunningTasks:
    """Runs each epoch of one job run on the run's long-running tasks."""

    def __init__(self, sc, job_graph: JobGraph, run_id: str, job_parameters: dict):
        self.sc = sc
        self.job_graph = job_graph
        self.run_id = run_id
        self.job_parameters = job_parameters
        self.slots = slots_needed(job_graph)
        self.stage_vertices: dict = {}      # no stage per epoch: the epoch's timings have none
        self._secret = os.urandom(32)
        self._connections: list[Connection] = []
        self._job: Optional[threading.Thread] = None
        self._job_error: Optional[BaseException] = None
        self._pickler = CloudPickleSerializer()     # descriptors name the job's classes, shipped by value

    def run(self, epoch: int, broadcast, tdds: dict) -> list:
        """Send each slot its subtasks' descriptors; their pickled acknowledgements."""
        if self._job is None:
            self._deploy(broadcast)
        for slot, conn in enumerate(self._connections):
            mine = {k: d for k, d in tdds.items() if k[1] == slot}
            conn.send_bytes(self._pickler.dumps((EPOCH, epoch, mine)))
        # Every slot's answer, before a failure is raised: a task that died is the cause, and the
        # other slots' failures (their input gone with it) only its consequence.
        acks, failures, lost, waiting = [], [], [], set(self._connections)
        while waiting:
            for conn in wait(list(waiting), _POLL_S):
                waiting.discard(conn)
                try:
                    kind, payload = pickle.loads(conn.recv_bytes())
                except EOFError:
                    lost.append(self._connections.index(conn))
                    continue
                if kind == ACKNOWLEDGED:
                    acks.extend(payload)
                else:
                    failures.append(payload)
            if waiting and not self._job.is_alive():
                lost.append(None)
                break
        if lost:
            raise self._task_lost(min(lost, key=lambda s: s is None), epoch)
        if failures:
            raise RuntimeError(f"{failures[0].rstrip()}\n(epoch {epoch} of job '{self.job_graph.job_name}')")
        return acks

    def release(self) -> None:
        """The run ends: its tasks stop (their Spark job ends), or are canceled if they do not."""
        for conn in self._connections:
            try:
                conn.send_bytes(pickle.dumps((STOP,)))
                conn.close()
            except OSError:     # the task is gone already
                pass
        self._connections = []
        if self._job is not None:
            self._job.join(10)
            if self._job.is_alive():
                self.sc.cancelJobGroup(self._job_group)
                self._job.join(10)
            self._job = None
        with _held_lock:
            _held.pop(self.run_id, None)

    # ---- deployment ----------------------------------------------------------------------------

    @property
    def _job_group(self) -> str:
        return f"sluice-{self.run_id}-tasks"

    def _deploy(self, broadcast) -> None:
        """Start the run's Spark job and wait for each of its tasks to connect."""
        with _held_lock:
            _held[self.run_id] = self.slots
        host = self.sc.getConf().get("spark.driver.host", "127.0.0.1")
        listener = Listener((host, 0), authkey=self._secret)
        task = _slot_task(listener.address, self._secret, broadcast, self.job_parameters)
        rdd = self.sc.parallelize(range(self.slots), self.slots).barrier().mapPartitions(task)
        # Not what a failure of user code gets (a failed acknowledgement): Spark must not retry a
        # barrier stage that lost a task, the run restarts from its checkpoint.

        def spark_job():
            self.sc.setJobGroup(self._job_group, f"{self.job_graph.job_name}: long-running tasks", True)
            try:
                rdd.collect()
            except BaseException as e:
                self._job_error = e
        self._job = threading.Thread(target=spark_job, daemon=True, name=f"sluice-tasks-{self.run_id}")
        self._job.start()
        accepted: queue.Queue = queue.Queue()

        def accept():
            try:
                for _ in range(self.slots):
                    conn = listener.accept()
                    accepted.put((*conn.recv(), conn))
            except Exception as e:
                accepted.put((None, None, e))
        threading.Thread(target=accept, daemon=True, name=f"sluice-tasks-accept-{self.run_id}").start()
        connections, addresses = {}, {}
        deadline = time.monotonic() + DEPLOY_TIMEOUT_S
        try:
            while len(connections) < self.slots:
                try:
                    slot, address, conn = accepted.get(timeout=_POLL_S)
                except queue.Empty:
                    if not self._job.is_alive():
                        raise self._task_lost(None, None) from None
                    if time.monotonic() > deadline:
                        self.sc.cancelJobGroup(self._job_group)
                        raise RuntimeError(
                            f"the long-running tasks of job '{self.job_graph.job_name}' did not all start within "
                            f"{DEPLOY_TIMEOUT_S:.0f} s: {len(connections)} of {self.slots} have a Spark task slot. "
                            f"Another job's tasks may hold the others (sluice.epoch.tasks: long-running keeps them "
                            f"for a run's life): give Spark more cores, or run this job per-epoch") from None
                    continue
                if slot is None:
                    raise RuntimeError(f"deploying the long-running tasks of job '{self.job_graph.job_name}' "
                                       f"failed: {conn}") from conn
                connections[slot], addresses[slot] = conn, address
        finally:
            listener.close()
        self._connections = [connections[s] for s in range(self.slots)]
        for conn in self._connections:
            conn.send([addresses[s] for s in range(self.slots)])

    def _task_lost(self, slot: Optional[int], epoch: Optional[int]) -> RuntimeError:
        self._job.join(5)
        which = f"slot {slot}'s long-running task" if slot is not None else "the long-running tasks"
        when = f" in epoch {epoch}" if epoch is not None else " while deploying"
        return RuntimeError(f"{which} of job '{self.job_graph.job_name}' ended{when}{_why(self._job_error)}")


def _why(error: Optional[BaseException]) -> str:
    """What Spark said of its failed job, without the JVM's stack frames (the executor's log has
    them) and py4j's preamble: the stage's failure and the task's cause."""
    if error is None:
        return ""
    lines = [line for line in str(error).splitlines()
             if line.strip() and not line.startswith(("\tat ", "\t...", "An error occurred while calling"))]
    return ": " + "\n".join(line.removeprefix(": ") for line in lines[:4])
