"""The execution history of a job: one Delta table, ``<warehouse>/<job>/executions/``.

One row per change of a run's state (append-only; a run's state is its last row): runs
from the CLI and from Airflow alike, with the Airflow run and attempt that started them,
the checkpoint they restored, their failure, and the restart strategy's decision on it
(``restarting``: whether the job restarts, ``backoff_ms``: after how long, ``restart``: the
decision in words). The web view, the control plane and the restart strategies read it;
anyone can (it is a plain Delta table). Columns added later (``restarting``) are added to an
older table by its next append and read as null from its older rows.
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Optional

import pyarrow as pa

from runtime.checkpoint.checkpoint_record import SAVEPOINT
from runtime.storage.delta_files import DeltaTables, append, arrow_table, read_table
from runtime.storage.filesystems import join
from runtime.storage.maintenance import (COMPACT_AFTER_FILES, LOG_RETENTION_S, clean_log, compact_and_vacuum,
                                         own_table_properties)

RUNNING, FINISHED, FAILED, CANCELED = "RUNNING", "FINISHED", "FAILED", "CANCELED"

_TS = pa.timestamp("us", tz="UTC")

EXECUTIONS_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("job_name", pa.string()),
    ("dag_run_id", pa.string()), ("attempt", pa.int64()),         # Airflow's run and try number
    ("state", pa.string()), ("started_at", _TS), ("ended_at", _TS),
    ("restored_from", pa.int64()), ("last_checkpoint", pa.int64()),
    ("epochs", pa.int64()), ("records_in", pa.int64()),
    ("parallelism", pa.string()),                                  # JSON: vertex name -> parallelism
    ("failure", pa.string()), ("failed_tasks", pa.string()),       # JSON: ["Name (i/p)", ...]
    ("restart", pa.string()), ("backoff_ms", pa.int64()),          # the restart strategy's decision
    ("restarting", pa.bool_()),                                    # ... whether it restarts (null: not asked)
    ("host", pa.string()), ("pid", pa.int64()), ("recorded_at", _TS),
    ("application_id", pa.string()),                               # the Spark application that ran the attempt
    ("savepoint", pa.string()),                                    # the savepoint a stop with savepoint took
    ("restored_savepoint", pa.string()),                           # the savepoint's path, when it restored one
])


@dataclass(frozen=True)
class ExecutionRecord:
    run_id: str
    job_name: str
    state: str
    started_at: float
    dag_run_id: str = ""
    attempt: int = 1
    ended_at: Optional[float] = None
    restored_from: Optional[int] = None
    last_checkpoint: Optional[int] = None
    epochs: int = 0
    records_in: int = 0
    parallelism: dict = field(default_factory=dict)
    failure: Optional[str] = None
    failed_tasks: tuple = ()
    restart: Optional[str] = None           # the restart strategy's decision, in words
    backoff_ms: Optional[int] = None        # ... the delay before the next attempt
    recorded_at: Optional[float] = None
    restarting: Optional[bool] = None       # ... whether the job restarts (None: the strategy was not asked)
    application_id: Optional[str] = None    # the Spark application (its driver) that ran the attempt
    savepoint: Optional[str] = None         # the savepoint it stopped with (stop with savepoint)
    restored_savepoint: Optional[str] = None    # the savepoint it restored (its path); restored_from is its checkpoint

    def to_json(self) -> dict:
        return {**asdict(self), "failed_tasks": list(self.failed_tasks)}


def _us(t: Optional[float]) -> Optional[int]:
    return None if t is None else int(t * 1_000_000)


def _s(t) -> Optional[float]:
    return None if t is None else t.timestamp()


class ExecutionHistory:
    def __init__(self, job_dir: str, log_retention_s: float = LOG_RETENTION_S):
        self.path = join(job_dir, "executions")
        self.log_retention_s = log_retention_s
        self.table_properties = own_table_properties(log_retention_s)

    def record(self, record: ExecutionRecord) -> ExecutionRecord:
        now = time.time()
        row = {**asdict(record), "started_at": _us(record.started_at), "ended_at": _us(record.ended_at),
               "parallelism": json.dumps(record.parallelism), "failed_tasks": json.dumps(list(record.failed_tasks)),
               "host": socket.gethostname(), "pid": os.getpid(), "recorded_at": _us(now)}
        append(self.path, arrow_table(EXECUTIONS_SCHEMA, [row]), tables=DeltaTables(self.table_properties))
        return replace(record, recorded_at=now)

    def compact(self, after_files: int = COMPACT_AFTER_FILES) -> Optional[list]:
        """Rewrite the table as each run's latest row (all its readers read) once it has more
        than ``after_files`` files, after cleaning its Delta log; by the run that holds the job.
        The files deleted."""
        clean_log(self.path, retention_s=self.log_retention_s)
        dt = DeltaTables(self.table_properties).get(self.path)
        if dt is None or len(dt.file_uris()) <= after_files:
            return None
        latest: dict = {}
        for row in self._rows():
            latest[row["run_id"]] = row
        return compact_and_vacuum(dt, pa.Table.from_pylist(list(latest.values()), schema=pa.schema(dt.schema().to_arrow())))

    def _rows(self) -> list[dict]:
        table = read_table(self.path)
        return [] if table is None else table.sort_by([("recorded_at", "ascending")]).to_pylist()

    def executions(self) -> list[ExecutionRecord]:
        """Every run, its latest state, newest first."""
        latest: dict = {}
        for row in self._rows():
            latest[row["run_id"]] = row
        records = [ExecutionRecord(
            r["run_id"], r["job_name"], r["state"], _s(r["started_at"]), r["dag_run_id"] or "", r["attempt"] or 1,
            _s(r["ended_at"]), r["restored_from"], r["last_checkpoint"], r["epochs"] or 0, r["records_in"] or 0,
            json.loads(r["parallelism"] or "{}"), r["failure"], tuple(json.loads(r["failed_tasks"] or "[]")),
            r["restart"], r["backoff_ms"], _s(r["recorded_at"]), r.get("restarting"), r.get("application_id"),
            r.get("savepoint"), restored_savepoint=r.get("restored_savepoint"))
            for r in latest.values()]
        return sorted(records, key=lambda r: (r.started_at or 0, r.recorded_at or 0), reverse=True)

    def attempts(self, dag_run_id: str, run_ids: tuple = ()) -> list[ExecutionRecord]:
        """The attempts of one run, oldest first: what a restart strategy decides on. Those of an
        Airflow run, or (no ``dag_run_id``) those ``run_ids`` names: a driver's own attempts, as
        ``sluice run`` restarts them."""
        return sorted((r for r in self.executions()
                       if (r.dag_run_id == dag_run_id if dag_run_id else r.run_id in run_ids)),
                      key=lambda r: (r.attempt, r.started_at or 0))


class RunRecorder:
    """A run's rows in its job's execution history: RUNNING when it starts, then how it ended,
    a failure with the restart strategy's decision on it (Flink's JobMaster asks its
    RestartBackoffTimeStrategy; here the history of the Airflow run is the strategy's memory)."""

    def __init__(self, job_dir: str, started: ExecutionRecord, compact_after: int = COMPACT_AFTER_FILES,
                 log_retention_s: float = LOG_RETENTION_S, restored=None):
        """``restored``: the RestorePoint the run starts from, if any (a savepoint's is named by its path)."""
        self.history = ExecutionHistory(job_dir, log_retention_s)
        self.history.compact(compact_after)
        if restored is not None:
            started = replace(started, restored_from=restored.record.checkpoint_id,
                              restored_savepoint=restored.root if restored.record.kind == SAVEPOINT else None)
        self.execution = self.history.record(started)

    def ended(self, state: str, result, restored_from: Optional[int], **more) -> ExecutionRecord:
        """The run ended in ``state``; ``result`` its JobExecutionResult so far."""
        if restored_from != self.execution.restored_from:      # it fell back to another checkpoint
            more.setdefault("restored_savepoint", None)
        return self.history.record(replace(
            self.execution, state=state, ended_at=time.time(), epochs=result.epoch_count,
            records_in=result.records_in_total, last_checkpoint=result.last_checkpoint,
            restored_from=restored_from, savepoint=result.savepoint, **more))

    def failed(self, error_text: str, failed_tasks: tuple, result, restored_from: Optional[int], decision):
        """Record the failure with the restart strategy's ``decision`` on it (``failure_handler``),
        which is returned."""
        self.ended(FAILED, result, restored_from, failure=error_text[:4000], failed_tasks=failed_tasks,
                   restart=decision.describe(), backoff_ms=decision.backoff_ms, restarting=decision.restart)
        return decision
