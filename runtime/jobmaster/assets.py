"""Delta tables as data assets, for data-aware scheduling (Airflow's Assets), without Airflow.

A job's sink tables are its outputs: a run announces each table it committed new versions to,
with the table's Delta version and the checkpoint that committed it, so that what runs on the
table reads exactly-once output. Its Delta sources are its inputs: a job may run when they
change (``JobDeployment(schedule=ON_INPUTS)``) instead of on a clock.

What a run committed comes from its checkpoint records (each names the Delta version of every
sink table its commit left): a table is new output of an Airflow run when the run's completed
checkpoints (all its attempts') recorded a version above any an earlier run's checkpoint
recorded. A run that fails announces nothing; a replay whose commits were no-ops (Delta app
transactions) records versions already recorded, so it announces nothing either. A crash after a
sink commit but before its checkpoint record leaves a version no checkpoint recorded yet: the
replay that records it announces it, once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from runtime.jobmaster.deployment import ON_INPUTS, resolve_args
from runtime.storage.filesystems import absolute, file_uri

# The checkpoints and the history are imported where a run's commits are read (a task): a parse
# of the DAG files needs only ON_INPUTS and input_tables.


@dataclass(frozen=True)
class TableCommit:
    """New output of a run in one sink table: the version its last checkpoint recorded."""
    table: str              # the table's path or URI, as the job names it
    version: int            # its Delta version
    checkpoint_id: int      # the checkpoint whose commit made that version

    @property
    def uri(self) -> str:
        return table_uri(self.table)

    def to_json(self) -> dict:
        return {"table": self.table, "uri": self.uri, "version": self.version, "checkpoint_id": self.checkpoint_id}


def table_uri(table: str) -> str:
    """A Delta table's location as an asset URI: ``file:///abs/path`` or the object-store URI."""
    return file_uri(absolute(table))


def committed_tables(checkpoints: Iterable, run_ids: set, job_dir: str) -> tuple:
    """The TableCommits of the runs ``run_ids`` (an Airflow run's attempts): each sink table whose
    version in their completed checkpoints is above every version other runs' checkpoints recorded."""
    from runtime.checkpoint.checkpoint_record import CHECKPOINT, COMPLETED, DISCARDED
    before: dict = {}
    during: dict = {}
    for record in sorted(checkpoints, key=lambda r: r.checkpoint_id):
        # A DISCARDED checkpoint was completed and subsumed: what it committed stays committed.
        if record.kind != CHECKPOINT or record.status not in (COMPLETED, DISCARDED):
            continue
        seen = during if record.run_id in run_ids else before
        for table, version in record.sink_versions(job_dir).items():
            if version is not None and version > seen.get(table, (-1, None))[0]:
                seen[table] = (version, record.checkpoint_id)
    return tuple(TableCommit(table, version, checkpoint_id) for table, (version, checkpoint_id) in sorted(during.items())
                 if version > before.get(table, (-1, None))[0])


def run_commits(job_dir: str, dag_run_id: str) -> tuple:
    """What the Airflow run ``dag_run_id`` of the job in ``job_dir`` committed (committed_tables)."""
    from runtime.checkpoint.completed_checkpoint_store import CompletedCheckpointStore
    from runtime.execution.history import ExecutionHistory
    run_ids = {r.run_id for r in ExecutionHistory(job_dir).attempts(dag_run_id)}
    if not run_ids:
        return ()
    return committed_tables(CompletedCheckpointStore(job_dir).history(), run_ids, job_dir)


def source_tables(job) -> tuple:
    """The Delta tables a compiled job reads (its DeltaSources' paths), in source order."""
    from runtime.datastream.connectors import DeltaSource
    found = []
    for node in job.stream_graph.nodes:
        source = getattr(node.operator, "source", None) if node.kind == "source" else None
        if isinstance(source, DeltaSource) and source.table_path not in found:
            found.append(source.table_path)
    return tuple(found)


def input_tables(spec, warehouse: Optional[str], profile) -> tuple:
    """The tables a job's deployment schedules it on: its Delta sources' (``ON_INPUTS``: as its
    last compile found them, ``profile``, a ``dag_profiles.DagProfile``; () before any), or the
    tables it lists ({warehouse} is the warehouse; relative paths are the project's)."""
    schedule = spec.deployment.schedule
    if isinstance(schedule, tuple):
        return tuple(resolve_args(schedule, warehouse))
    return tuple(profile.input_tables) if schedule == ON_INPUTS and profile is not None else ()
