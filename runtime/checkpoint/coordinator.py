"""Flink's CheckpointCoordinator, on the driver, at epoch boundaries.

An epoch boundary is an aligned barrier by construction. When the checkpoint interval says
so (every epoch, every N epochs, or once ``interval`` ms passed), the epoch is planned as a
checkpoint: its tasks write their snapshots into the state tables' folders and acknowledge
the files. Then the sinks commit (each sink's committer with what its writers staged: a Delta
app transaction per sink, version = checkpoint id, so a replay is a no-op), and after them the
checkpoint record, which lists the state files. Only the record makes the checkpoint exist; a
crash anywhere before it leaves the previous checkpoint as the restore point, and the replayed
epoch, planned from the epoch log with the same checkpoint id, commits exactly what the crashed
one would have. The state tables commit the files after the record (``_after_record``).

As in Flink, a checkpoint completes asynchronously: its commits run in the background while
the next epoch runs (``complete_async``), and the state tables' commits and discarding what it
subsumed follow them. The next epoch, logged before it runs, is replayed like any other if the
process dies first.

Every epoch's acknowledgements come here (Flink's ``receiveAcknowledgeMessage``), one kept per
subtask, and the sinks' committables go from here to their committers: printed lines and
collected records at once, what commits with checkpoints kept for the next one.
"""
from __future__ import annotations

import dataclasses
import logging
import pickle
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Optional

from runtime.state.snapshot_format import SOURCE_STATE, SPLIT, state_table_name
from runtime.state.snapshot_writer import snapshot_to_table, write_state_file
from runtime.checkpoint.incremental import file_entry, referenced_partitions
from runtime.checkpoint.sink_committers import create_committers
from runtime.checkpoint.checkpoint_record import CHECKPOINT, COMPLETED, DISCARDED, FAILED, CheckpointRecord
from runtime.checkpoint.storage import CheckpointStorage
from runtime.common.faults import fault_point, fault_point_of_epochs
from runtime.common.phase_timer import (CHECKPOINT_QUEUE, CHECKPOINT_RECORD, HAND_OFF, NO_TIMER, SOURCE_POSITIONS,
                                        PhaseTimer)
from runtime.graph.job_graph import JobGraph
from runtime.state.key_groups import KEY_HASHING, key_type_of
from runtime.state.key_regrouping import key_type_name
from runtime.storage.filesystems import relative

log = logging.getLogger("sluice.checkpoint")
STATE_COMMIT_THREADS = 4        # state tables a checkpoint commits at once
HOUSEKEEPING_INTERVAL_S = 1.0   # the state tables' commits and retention, at most this often (_after_record)


def checkpointing_enabled(config: dict) -> bool:
    """Whether a job's checkpoint config (``settings.checkpoint_config``) takes checkpoints."""
    return (config.get("interval_ms") or -1) > 0 or config.get("interval_epochs") is not None


def commit_sink(committer, committables: list, version: int, timer: PhaseTimer = NO_TIMER) -> dict:
    """A sink's commit, timed as its kind of commit (a Kafka transaction, a Delta commit), named by its node id."""
    with timer.phase(committer.commit_phase, committer.context.sink_id):
        return committer.commit(committables, version)


class CheckpointCoordinator:
    def __init__(self, storage: CheckpointStorage, job_graph: JobGraph, config: dict, run_id: str):
        """Of ``storage`` it takes the completed-checkpoint store and the state tables."""
        self.checkpoints = storage.checkpoints
        self.state = storage.state
        self.job_graph = job_graph
        self.run_id = run_id
        self.interval_ms = config.get("interval_ms", -1)
        self.interval_epochs = config.get("interval_epochs")
        self.max_retained = config.get("max_retained", 3)
        self.enabled = checkpointing_enabled(config)
        self.next_id = storage.max_checkpoint_id() + 1
        self.last_epoch: Optional[int] = None           # epoch of the last checkpoint
        self.last_time = time.time()
        self.swept = False      # whether this run finished the discarding of earlier runs
        self.caught_up = False  # whether the state tables hold every completed checkpoint's files
        self._lock = threading.Lock()       # guards what follows: the completions' thread and the housekeeping's
        self._unfiled: list = []            # (checkpoint id, epoch, [(state table, files)]) since the last housekeeping
        self._housekeeping_queued = False   # submitted, or due on _timer
        self._timer: Optional[threading.Timer] = None
        self._housekept_at = float("-inf")  # time.monotonic() of the last housekeeping's start
        self.kept: dict = {}    # discarded checkpoints whose partitions retained chains still read
        # One background thread completes checkpoints, in order; another commits their state
        # tables and discards what they subsumed, so that housekeeping never holds up a completion.
        self._background: Optional[ThreadPoolExecutor] = None
        self._retention: Optional[ThreadPoolExecutor] = None
        self._state_commits: Optional[ThreadPoolExecutor] = None     # a checkpoint's state tables, at once
        self._sink_commits: Optional[ThreadPoolExecutor] = None      # a checkpoint's sinks, beside its state
        self.committers: dict = {}          # sink node id -> its Committer, for the run
        self.pending: dict = {}             # sink node id -> committables waiting for a checkpoint

    def restored(self, record: CheckpointRecord) -> None:
        """The run restored ``record``: its housekeeping starts at once, for what the run before
        left (a kill after a record, a failed housekeeping), not at its first checkpoint. A run
        without checkpoints (a savepoint restored with checkpointing off) leaves them as they are."""
        self.last_epoch = record.epoch
        if not self.enabled:
            return
        with self._lock:
            self._queue_housekeeping()

    def should_trigger(self, epoch: int, final: bool) -> bool:
        """Whether the epoch ends in a checkpoint; ``final``: the run's last epoch (its input ended,
        or it reached max_epochs), whose checkpoint commits the sinks (FLIP-147)."""
        if not self.enabled:
            return False
        if final:
            return True
        if self.interval_epochs is not None:
            since = epoch - (self.last_epoch if self.last_epoch is not None else -1)
            return since >= self.interval_epochs
        return (time.time() - self.last_time) * 1000 >= self.interval_ms

    def take_id(self, logged: Optional[int] = None) -> int:
        """The id of the next checkpoint; a replayed epoch keeps the id it was logged with."""
        if logged is not None:
            self.next_id = max(self.next_id, logged + 1)
            return logged
        checkpoint_id, self.next_id = self.next_id, self.next_id + 1
        return checkpoint_id

    # ---- acknowledgements -----------------------------------------------------------------

    def receive_acknowledgements(self, payloads: list) -> list:
        """The epoch's tasks' pickled acknowledgements (Flink's receiveAcknowledgeMessage), one
        per subtask, in (vertex id, subtask) order. A recomputed task (a retry, a cache miss)
        acknowledges twice, with the same content, unless one of the computations failed: then
        the epoch failed, and the failure is the one kept."""
        raw = {}
        for payload in payloads:
            ack = pickle.loads(payload)
            key = (ack.job_vertex_id, ack.subtask_index)
            if key not in raw or ack.failure:
                raw[key] = ack
        return [raw[k] for k in sorted(raw)]

    def open_sinks(self, result) -> None:
        """The run's sink committers (filling ``result``, its JobExecutionResult); without
        checkpoints their transactions are the run's."""
        self.committers = create_committers(self.job_graph, "" if self.enabled else f"-{self.run_id}", result)

    def spark_committers(self) -> tuple:
        """The names of the sinks whose commits run Spark jobs (delta-spark's)."""
        return tuple(self.job_graph.stream_graph.node(node_id).operator_name
                     for node_id, c in self.committers.items() if c.runs_spark_jobs())

    def route_committables(self, acks: list, epoch: int) -> None:
        """The sink writers' committables of an epoch, in vertex then subtask order: printed lines
        and collected records are committed at once, in order as they come; what commits with
        checkpoints (Delta sinks' staged files) waits for the next one."""
        order = {v.id: i for i, v in enumerate(self.job_graph.vertices)}
        for a in sorted(acks, key=lambda a: (order[a.job_vertex_id], a.subtask_index)):
            for node_id, committable in a.committables.items():
                committer = self.committers[node_id]
                if committer.at_checkpoint:
                    self.pending.setdefault(node_id, []).append(committable)
                else:
                    committer.commit([committable], epoch + 1)

    def staged(self) -> list[tuple]:
        """(committer, committables staged since the last commit) of each sink that commits with
        checkpoints (Delta sinks: their staged files), taken out of the pending ones."""
        return [(c, self.pending.pop(node_id, [])) for node_id, c in self.committers.items() if c.at_checkpoint]

    # ---- completing --------------------------------------------------------------------

    def complete_async(self, checkpoint_id: int, epoch: int, started: float, state_files: list,
                       enumerators: dict, watermarks: dict, sinks: list,
                       chains: Optional[dict] = None, timer: PhaseTimer = NO_TIMER) -> Future:
        """``complete`` in the background, while the next epoch runs; the future gives its record
        and the time its commits ended (or raises its failure). What it commits is taken now: the
        sources' positions at this epoch's end, the staged sink output, the chains' files. The
        interval counts from here. ``timer`` times its phases (the epoch's, epoch_stats)."""
        self.last_epoch, self.last_time = epoch, time.time()
        positions = {vid: e.snapshot() for vid, e in enumerators.items()}
        state_files = list(state_files)
        timer.lap(HAND_OFF)     # the epoch's last step on its thread: its checkpoint goes to the background
        handed = time.time()

        def completion():
            timer.add(CHECKPOINT_QUEUE, handed, time.time())     # behind the completion before, or nothing
            record = self.complete(checkpoint_id, epoch, started, state_files, positions, watermarks, sinks, chains,
                                   timer)
            return record, time.time()
        return self._submit(completion)

    def complete(self, checkpoint_id: int, epoch: int, started: float, state_files: list,
                 positions: dict, watermarks: dict, sinks: list,
                 chains: Optional[dict] = None, timer: PhaseTimer = NO_TIMER) -> CheckpointRecord:
        """Commit the sinks while the sources' positions are written, then the record; returns
        the completed record, whose state files the state tables commit after it
        (``_after_record``). ``sinks``: (committer, committables staged since the last
        checkpoint) of each sink that commits with checkpoints; each commits its committables
        with the checkpoint id as version. ``state_files`` are the files the tasks wrote in this
        checkpoint's partitions; ``positions`` each source vertex's split positions (its
        enumerator's snapshot); ``chains`` (an operator id -> its files, absolute paths, in
        order) what the record lists for each operator: with incremental checkpoints, files of
        earlier checkpoints too.

        The sinks commit on a thread of their own: a reader sees the results at the sinks'
        commits. They commit one after the other and one checkpoint at a time (the next
        completion starts after this one), and the record only after they succeeded; a failure
        fails the checkpoint once the sinks are done, so nothing of it is still committing when
        the run falls back.

        Exactly once holds as it holds for a crash between the sinks' commits and the record:
        until the record, no restore reads anything this checkpoint wrote; the restore takes the
        checkpoint before and replays the epochs logged after it with their logged checkpoint
        ids, so a sink that committed this checkpoint's id finds it and commits nothing again (a
        Delta table's app transaction, the Kafka marker in its group; a file sink's replayed
        parts take the names the first attempt made visible), and the replay's state files are
        the ones its record lists. No sink's commit reads the state or the sources' positions:
        each commits what its writers staged, under the checkpoint id."""
        committing = self._commit_sinks_beside(sinks, checkpoint_id, epoch, timer)
        try:
            with timer.phase(SOURCE_POSITIONS):
                sources = self._write_source_state(checkpoint_id, positions)
            fault_point("after-state-files", epoch)
        except BaseException:
            wait([committing])      # a failed write fails the checkpoint once its sinks are done
            if committing.exception() is not None:
                log.warning("%s: checkpoint %d's sink commits failed too: %s", self.job_graph.job_name,
                            checkpoint_id, committing.exception())
            raise
        versions = committing.result()
        by_operator: dict[str, list] = {}
        for f in list(state_files) + sources:
            by_operator.setdefault(f.operator_id, []).append(f)
        nodes = self.job_graph.by_operator_id
        source_ids = {f.path for f in sources}
        # Every operator is listed, with or without state, as Flink's checkpoint metadata lists
        # each OperatorState: a restore then knows the parallelism it ran at.
        operators = []
        listed = {op_id: [file_entry(f) for f in files] for op_id, files in by_operator.items()}
        listed.update(chains or {})
        for op_id, (v, n) in nodes.items():
            table = state_table_name(n)
            root = self.state.table_path(table)
            operators.append({
                "operator_id": op_id, "uid": n.uid, "table": table, "name": n.operator_name,
                "vertex": v.name, "parallelism": v.parallelism,
                "max_parallelism": v.max_parallelism, "keyed": bool(n.is_keyed),
                # How keys hash into the key groups of the files (runtime.state.key_groups).
                "key_hashing": KEY_HASHING if n.is_keyed else None,
                "key_type": key_type_name(key_type_of(n.state_key_selectors[0])) if n.is_keyed else None,
                "files": [{"path": relative(f["path"], root), "size": f["size"], "rows": f["rows"],
                           "checksum": f["checksum"], "subtask": f["subtask"],
                           "key_group_min": f["key_group_min"], "key_group_max": f["key_group_max"],
                           "source_state": f["path"] in source_ids, "increment": bool(f.get("increment")),
                           # a restored file hashed with another key type than the job's
                           **({"key_type": f["key_type"]} if f.get("key_type") else {})}
                          for f in listed.get(op_id, ())]})
        now = time.time()
        record = CheckpointRecord(
            checkpoint_id, epoch, CHECKPOINT, COMPLETED, self.run_id,
            duration_ms=int((now - started) * 1000),
            state_bytes=sum(f["size"] for fs in listed.values() for f in fs),
            state_rows=sum(f["rows"] for fs in listed.values() for f in fs),
            source_offsets={state_table_name(self.job_graph.vertex(vid).head): p
                            for vid, p in positions.items()},
            watermarks=watermarks, operators=operators, table_versions=versions,
            started_at=started, completed_at=now)
        with timer.phase(CHECKPOINT_RECORD):
            self.checkpoints.record([record], before_commit=lambda: fault_point("during-checkpoint-record", epoch))
        fault_point("after-checkpoint-record", epoch)
        self._after_record(checkpoint_id, epoch, [(state_table_name(nodes[op_id][1]), files)
                                                  for op_id, files in by_operator.items()])
        return record

    def _commit_sinks_beside(self, sinks: list, checkpoint_id: int, epoch: int, timer: PhaseTimer) -> Future:
        """The sinks' commits, in order, on the sinks' thread; the future of their tables' versions."""
        def commit_all():
            versions = {}
            for i, (committer, committables) in enumerate(sinks):
                if i:
                    fault_point("between-sink-commits", epoch)      # the sinks before committed, this one not
                versions.update(commit_sink(committer, committables, checkpoint_id, timer))
            fault_point("after-sink-commit", epoch)
            return versions
        if self._sink_commits is None:
            self._sink_commits = ThreadPoolExecutor(1, thread_name_prefix="sluice-sink-commit")
        return self._sink_commits.submit(commit_all)

    def _commit_state(self, files_by_table: dict) -> None:
        """Each state table's files ({table: {checkpoint id: files}}) in one commit, the tables at
        once (independent Delta tables; one after the other, a job with a source and a keyed
        operator took 40-50 ms more, bench/epoch_floor.py)."""
        def commit(item):
            self.state.commit(*item)
        if len(files_by_table) < 2:
            list(map(commit, files_by_table.items()))
            return
        if self._state_commits is None:
            self._state_commits = ThreadPoolExecutor(STATE_COMMIT_THREADS, thread_name_prefix="sluice-state-commit")
        list(self._state_commits.map(commit, files_by_table.items()))

    def _submit(self, fn, *args) -> Future:
        if self._background is None:
            self._background = ThreadPoolExecutor(1, thread_name_prefix="sluice-checkpoint")
        return self._background.submit(fn, *args)

    def _after_record(self, checkpoint_id: int, epoch: int, tables: list) -> None:
        """The checkpoint is complete: its state tables' commits and discarding what it subsumed
        follow in the background while the next epochs run (Flink's CheckpointsCleaner), on a
        thread of their own so that they never hold up a completion (a retention held the next
        one up by 70-90 ms of a 250 ms epoch's checkpoint, bench/epoch_floor.py).

        The state tables follow the record, as Flink's checkpoint metadata, not its state
        handles, makes a checkpoint: a restore reads the files the record lists, and the tables
        are what Spark, DuckDB and pandas read of the state. That housekeeping runs at most every
        ``HOUSEKEEPING_INTERVAL_S``, for every checkpoint completed since, a commit per table:
        its Delta commits (2 state tables' adds and removes, the discarded checkpoints' rows) took
        the CPU of two cores from every epoch's tasks and commits when they ran per checkpoint
        (an epoch to visible 124 ms against 80, bench/epoch_floor.py). A run killed after a
        record leaves a completed checkpoint that its tables lack; the next run's first
        housekeeping commits it (``StateTables.catch_up``), as table maintenance does."""
        with self._lock:
            self._unfiled.append((checkpoint_id, epoch, tables))
            self._queue_housekeeping(self._housekept_at + HOUSEKEEPING_INTERVAL_S - time.monotonic())

    def _queue_housekeeping(self, after_s: float = 0.0) -> None:
        """A housekeeping unless one is queued: at once, or in ``after_s`` seconds on a timer (not
        at the next record: a stream may stop for hours). The caller holds ``_lock``."""
        if self._housekeeping_queued:
            return
        self._housekeeping_queued = True
        if after_s > 0:
            self._timer = threading.Timer(after_s, self._timer_fired)
            self._timer.daemon = True
            self._timer.start()
        else:
            self._housekeep_later()

    @property
    def _housekept(self) -> bool:
        """Whether the state tables hold every completed checkpoint's files and retention
        discarded what it was to (no failure left work for the next housekeeping)."""
        return self.caught_up and self.swept

    def _timer_fired(self) -> None:
        with self._lock:
            if self._timer is None:     # canceled: await_retention runs the housekeeping
                return
            self._timer = None
        self._housekeep_later()

    def _housekeep_later(self) -> None:
        if self._retention is None:
            self._retention = ThreadPoolExecutor(1, thread_name_prefix="sluice-retention")
        self._retention.submit(self._housekeep)

    def _housekeep(self) -> None:
        """The state tables' commits of the checkpoints completed since the last housekeeping,
        then retention. Failures are logged, not raised: the checkpoints are complete, and the
        next housekeeping (or the next run's) commits and discards what this one did not."""
        with self._lock:
            unfiled, self._unfiled = self._unfiled, []
            self._housekeeping_queued = False
            self._housekept_at = time.monotonic()
        if not unfiled and self._housekept:
            return
        epochs = [epoch for _, epoch, _ in unfiled] or [self.last_epoch if self.last_epoch is not None else -1]
        try:
            if self.caught_up:
                by_table: dict = {}
                for checkpoint_id, _, tables in unfiled:
                    for table, files in tables:
                        by_table.setdefault(table, {})[checkpoint_id] = files
                self._commit_state(by_table)
            else:       # a run's first: with what a run killed after a record, or a failure, left out
                self.state.catch_up(self.checkpoints.completed())
                self.caught_up = True
            fault_point_of_epochs("after-state-commit", epochs)
        except Exception as e:
            self.caught_up = False
            log.warning("%s: the state table commits of checkpoint(s) %s failed (the next ones commit them): %s: %s",
                        self.job_graph.job_name, ", ".join(str(c) for c, _, _ in unfiled), type(e).__name__, e)
        try:
            self._retain(epochs)
        except Exception as e:
            self.swept = False      # the next retention sweeps every DISCARDED checkpoint again
            log.warning("%s: discarding subsumed checkpoints failed (the next retention finishes it): "
                        "%s: %s", self.job_graph.job_name, type(e).__name__, e)

    def await_retention(self) -> None:
        """Wait for the background work queued so far: completions, then the housekeeping of
        every checkpoint completed, and once more if it left something out (a failed completion
        is its future's to raise)."""
        # Completions first: one running at the barrier hands its checkpoint over when it ends.
        if self._background is not None:
            self._background.submit(lambda: None).result()
        for _ in range(2):
            with self._lock:
                if self._timer is not None:     # its housekeeping runs now instead
                    self._timer.cancel()
                    self._timer = None
                    self._housekeeping_queued = False
                # What is unfiled, and what a failed housekeeping of the run's left out.
                if self._unfiled or self._housekept_at > float("-inf") and not self._housekept:
                    self._queue_housekeeping()
            if self._retention is not None:
                self._retention.submit(lambda: None).result()

    def close(self) -> None:
        """The run ends: its completions and retention finish first."""
        self.await_retention()
        for pool in (self._background, self._retention, self._state_commits, self._sink_commits):
            if pool is not None:
                pool.shutdown()
        self._background = self._retention = self._state_commits = self._sink_commits = None

    def fail(self, checkpoint_id: int, epoch: int, started: float, reason: str) -> None:
        """Record a failed checkpoint; it is never restored from."""
        self.checkpoints.record([CheckpointRecord(checkpoint_id, epoch, CHECKPOINT, FAILED, self.run_id,
                                              duration_ms=int((time.time() - started) * 1000), failure=reason,
                                              started_at=started, completed_at=time.time())])

    def _write_source_state(self, checkpoint_id: int, positions_by_vertex: dict) -> list:
        """The sources' split positions as list state (SourceReaderState) of the source operator."""
        files = []
        for vid, snapshot in positions_by_vertex.items():
            head = self.job_graph.vertex(vid).head
            positions = sorted(snapshot.items())
            table = snapshot_to_table({"operator_state": {SOURCE_STATE: (SPLIT, positions)}}, -1, head.operator_name)
            if table is not None:
                directory = self.state.checkpoint_dir(checkpoint_id).format(table=state_table_name(head))
                files.append(write_state_file(table, directory, head.operator_id, -1))
        return files

    def _retain(self, epochs: list) -> None:
        """Keep the last N completed checkpoints; discard the state only they referred to.

        Marked DISCARDED first, then deleted: a kill in between leaves partitions of DISCARDED
        checkpoints, which the run's first retention deletes too (discarding is idempotent).
        INVALID checkpoints are not completed: never retained, never deleted."""
        completed = self.checkpoints.completed()
        doomed = completed[:-self.max_retained] if len(completed) > self.max_retained else []
        if doomed:
            self.checkpoints.record([dataclasses.replace(r, status=DISCARDED) for r in doomed])
            fault_point_of_epochs("during-retention", epochs)
        if not self.swept:      # once per run: what an earlier run was killed before deleting
            doomed = [r for r in self.checkpoints.history() if r.status == DISCARDED and r.kind == CHECKPOINT]
            self.swept = True
        # An increment's chain reads the partitions of earlier checkpoints: those stay until no
        # retained checkpoint reads them.
        needed = referenced_partitions(self.checkpoints.completed())
        doomed = [*doomed, *self.kept.values()]
        self.kept = {r.checkpoint_id: r for r in doomed if r.checkpoint_id in needed}
        doomed = [r for r in doomed if r.checkpoint_id not in needed]
        ids = [r.checkpoint_id for r in doomed]
        for table in {op["table"] for r in doomed for op in r.operators}:
            self.state.discard(table, ids)
        # Everything discarded is deleted: the checkpoints table may forget what it no longer needs.
        self.checkpoints.compact(needed | set(self.kept), epochs[-1])
        self.state.clean_logs(sorted({state_table_name(n) for v in self.job_graph.vertices
                                              for n in v.operators}), epochs[-1])
