"""Maintenance of a job's tables on demand (``sluice maintain``, the ``sluice_maintenance`` DAG).

* The job's Delta sinks that carry a policy (``DeltaSink.with_maintenance(TableMaintenance(...))``):
  Delta's OPTIMIZE (``optimize.compact``, a ``dataChange=false`` commit that does not conflict
  with the blind appends of a job running meanwhile, and keeps the sink's app transactions, so
  its exactly-once commits read right after it) of the partitions holding more than
  ``compact_min_files`` files, and Delta's VACUUM in its default mode: the files the table's log
  removed more than ``vacuum_retention_hours`` ago. Never the full mode: a running job's staged,
  not yet committed files are in the table's folder and listed nowhere, and must survive.
* Sluice's own tables of the job (checkpoints, epoch log, executions, state tables), only when no
  run holds the job: the maintenance claims the job as a run would for its duration (a run
  starting meanwhile is refused and says by whom), compacts what every epoch compacts once its
  tables pass their thresholds (here whatever has more than one file), cleans their Delta logs
  and deletes state files no version lists (a dead writer's, once older than ORPHAN_AGE_S).
  A running job does this itself every epoch; it is reported and skipped.

``maintain_job`` returns a MaintenanceReport: per table, files before and after, the files and
log entries deleted, the bytes freed and the Delta versions.
"""
from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from typing import Optional

import pyarrow as pa
import pyarrow.fs as pafs

from runtime.checkpoint.sink_committers import sink_nodes
from runtime.checkpoint.job_lease import JobAlreadyRunningException
from runtime.checkpoint.storage import CheckpointStorage
from runtime.execution.history import ExecutionHistory
from runtime.execution.options import ExecutionOptions
from runtime.storage.delta_log import is_log_file
from runtime.storage.filesystems import filesystem, join, listdir
from runtime.storage.layout import job_dir
from runtime.storage.maintenance import CompactionConflict, compact_files, vacuum

NO_POLICY = "no policy (DeltaSink.with_maintenance)"
DEFAULT_TARGET_SIZE = 100 * 1024 * 1024     # delta-rs's and Delta's default for OPTIMIZE
SINK, OWN = "sink", "own"


@dataclass
class TableReport:
    """What maintenance did to one table."""
    table: str
    role: str                           # "sink" or "own" (Sluice's own table of the job)
    done: str                           # in words
    files_before: Optional[int] = None  # data files the table's version lists
    files_after: Optional[int] = None
    files_deleted: int = 0              # data files deleted from storage
    log_entries_deleted: int = 0        # Delta log entries deleted
    bytes_freed: int = 0
    version_before: Optional[int] = None
    version_after: Optional[int] = None
    deleted: list = field(default_factory=list)     # the paths deleted (data files and log entries)


@dataclass
class MaintenanceReport:
    job_name: str
    job_dir: str
    tables: list = field(default_factory=list)
    own_tables: str = ""        # what happened to the job's own tables, in words

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def files_deleted(self) -> int:
        return sum(t.files_deleted for t in self.tables)

    @property
    def bytes_freed(self) -> int:
        return sum(t.bytes_freed for t in self.tables)

    def lines(self) -> list[str]:
        """The report as a readable table."""
        header = ["table", "role", "files", "deleted", "log entries", "freed", "versions", "done"]
        rows = [[t.table, t.role, _arrow(t.files_before, t.files_after), str(t.files_deleted),
                 str(t.log_entries_deleted), size_text(t.bytes_freed), _arrow(t.version_before, t.version_after),
                 t.done] for t in self.tables]
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
        out = [f"Maintenance of job '{self.job_name}' ({self.job_dir}):"]
        out.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
        out.extend("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows)
        out.append(f"Own tables: {self.own_tables}")
        out.append(f"Removed {self.files_deleted} data file(s), "
                   f"{sum(t.log_entries_deleted for t in self.tables)} log entr(ies), {size_text(self.bytes_freed)}.")
        return out


def _arrow(before, after) -> str:
    if before is None and after is None:
        return "-"
    return f"{before} -> {after}" if before != after else str(before)


def size_text(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def maintain_job(job, warehouse: Optional[str] = None, lease_timeout_s: Optional[float] = None) -> MaintenanceReport:
    """Maintain a job's sinks (those with a policy) and, when no run holds the job, its own tables.
    ``job`` is a JobGraph, a CompiledJob or a JobSpec (compiled here, with its deployment's args);
    ``warehouse`` defaults to the job's configured one, ``lease_timeout_s`` to its
    ``sluice.lease-timeout``."""
    graph = _job_graph(job, warehouse)
    options = ExecutionOptions.from_configuration(dict(graph.settings.configuration))
    directory = job_dir(warehouse or options.warehouse, graph.job_name)
    report = MaintenanceReport(graph.job_name, directory)
    for node in sink_nodes(graph):
        sink = node.operator.sink
        policy = getattr(sink, "maintenance", None)
        path = getattr(sink, "table_path", None)
        if path is None:
            continue        # not a Delta sink: nothing of its own to maintain
        report.tables.append(maintain_sink(path, policy) if policy is not None else TableReport(path, SINK, NO_POLICY))
    report.own_tables = _maintain_own_tables(directory, report, options.lease_timeout_s
                                             if lease_timeout_s is None else lease_timeout_s)
    return report


def _job_graph(job, warehouse: Optional[str]):
    if hasattr(job, "job_graph"):       # CompiledJob
        return job.job_graph
    if hasattr(job, "vertices"):        # JobGraph
        return job
    from runtime.jobmaster.steps import RunRequest, compile_run     # a JobSpec
    return compile_run(job, RunRequest(parallelism=job.deployment.parallelism), warehouse).job_graph


# ---- sinks ------------------------------------------------------------------------------

COMPACTION_ATTEMPTS = 5


def compact_fenced(dt, filters, target_size) -> dict:
    """One partition's (or the table's) compaction (runtime.storage.maintenance.compact_files),
    committed at exactly the version it planned on; a commit that lost the race (the job's
    append, another maintenance) is planned again on the new version, a few times."""
    for attempt in range(COMPACTION_ATTEMPTS):
        try:
            removed, added = compact_files(dt, filters, target_size or DEFAULT_TARGET_SIZE)
            return {"numFilesRemoved": removed, "numFilesAdded": added}
        except CompactionConflict:
            if attempt == COMPACTION_ATTEMPTS - 1:
                raise
            dt.update_incremental()
    raise AssertionError("unreachable")


def maintain_sink(path: str, policy) -> TableReport:
    """Compaction and vacuum of one sink table, as ``policy`` (a TableMaintenance) says."""
    from deltalake import DeltaTable
    if not DeltaTable.is_deltatable(path):
        return TableReport(path, SINK, "no table yet")
    dt = DeltaTable(path)
    report = TableReport(path, SINK, "", len(dt.file_uris()), version_before=dt.version())
    done = []
    if policy.compact_min_files is not None:
        crowded = _crowded_partitions(dt, policy.compact_min_files)
        added = removed = 0
        for filters in crowded:
            metrics = compact_fenced(dt, filters, policy.target_file_size)
            added += metrics["numFilesAdded"]
            removed += metrics["numFilesRemoved"]
        if crowded:
            done.append(f"compacted {removed} file(s) into {added}")
            dt.update_incremental()
        else:
            done.append(f"no partition has more than {policy.compact_min_files} files")
    if policy.vacuum_retention_hours is not None:
        hours = policy.vacuum_retention_hours
        fs, root = filesystem(path)
        sizes = {}      # the files the vacuum would delete that are still there (a tombstone outlives its file)
        for listed in dt.vacuum(retention_hours=hours, dry_run=True, enforce_retention_duration=False):
            where = listed if listed.startswith(root + "/") else f"{root}/{listed}"
            found = fs.get_file_info(where)
            if found.type == pafs.FileType.File:
                sizes[where] = found.size or 0
        deleted = []
        if sizes:
            for listed in dt.vacuum(retention_hours=hours, dry_run=False, enforce_retention_duration=False):
                where = listed if listed.startswith(root + "/") else f"{root}/{listed}"
                if where in sizes:
                    deleted.append(where)
        report.files_deleted = len(deleted)
        report.bytes_freed = sum(sizes[p] for p in deleted)
        report.deleted = sorted(deleted)
        done.append(f"vacuumed {len(deleted)} file(s) removed over {hours} h ago")
    else:
        done.append("no vacuum (vacuum_retention_hours=None)")
    dt = DeltaTable(path)
    report.files_after, report.version_after = len(dt.file_uris()), dt.version()
    report.done = "; ".join(done)
    return report


def _crowded_partitions(dt, most: int) -> list:
    """Partition filters (None: the whole table) of the partitions with more than ``most`` files."""
    columns = list(dt.metadata().partition_columns)
    actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    counts: dict = {}
    for a in actions:
        key = tuple(a.get(f"partition.{c}") for c in columns)
        counts[key] = counts.get(key, 0) + 1
    crowded = [key for key, n in counts.items() if n > most]
    if not columns:
        return [None] if crowded else []
    if not all(isinstance(v, (str, int)) and not isinstance(v, bool) for key in crowded for v in key):
        return [None]       # no plain filter for a null (or a typed) value: the whole table
    return [[(c, "=", str(v)) for c, v in zip(columns, key)] for key in crowded]


# ---- the job's own tables ---------------------------------------------------------------

def _maintain_own_tables(directory: str, report: MaintenanceReport, lease_timeout_s: float) -> str:
    from deltalake import DeltaTable
    storage = CheckpointStorage(directory, compact_after=1)
    if not DeltaTable.is_deltatable(storage.epoch_log.path):
        return "none yet (the job has not run)"
    holder = storage.lease.running_holder(lease_timeout_s)
    if holder is not None:
        return (f"skipped: run {holder['run_id']} (pid {holder['pid']} on {holder['host']}) holds the job and "
                f"maintains them itself each epoch")
    run_id = f"maintenance-{uuid.uuid4().hex[:12]}"
    try:
        storage.lease.claim(run_id, lease_timeout_s)
    except JobAlreadyRunningException as e:
        return f"skipped: a run claimed the job first ({e})"
    history = ExecutionHistory(directory, storage.checkpoints.log_retention_s)
    state_root = join(directory, "state")
    state_tables = [t for t in listdir(state_root) if not t.startswith((".", "_"))]
    paths = [storage.checkpoints.path, storage.epoch_log.path, history.path,
             *(storage.state.table_path(t) for t in state_tables)]
    before = {p: _snapshot(p) for p in paths}
    try:
        # What a run killed after a checkpoint's record left out of its state tables goes in
        # first: vacuum removes the files a table does not list.
        storage.state.catch_up(storage.checkpoints.completed())
        in_use = set()
        for table in state_tables:
            dt = _table(storage.state.table_path(table))
            if dt is not None:
                in_use.update(int(p["checkpoint_id"]) for p in dt.partitions() if p.get("checkpoint_id") is not None)
        storage.checkpoints.compact(in_use)
        storage.epoch_log.compact()     # each cleans its Delta log too
        history.compact(1)
        storage.state.clean_logs(state_tables)
        for table in state_tables:
            dt = _table(storage.state.table_path(table))
            if dt is not None:
                vacuum(dt)
    finally:
        storage.lease.release(run_id, "FINISHED")
    for path in paths:
        report.tables.append(_own_report(path, before[path], _snapshot(path)))
    return f"maintained (the job was stopped; claimed by {run_id} meanwhile)"


def _table(path: str):
    from deltalake import DeltaTable
    return DeltaTable(path) if DeltaTable.is_deltatable(path) else None


def _snapshot(path: str) -> dict:
    """A table's files on storage (path -> size), its data files listed and its version."""
    fs, root = filesystem(path)
    files = {i.path: i.size or 0 for i in fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
             if i.type == pafs.FileType.File}
    dt = _table(path)
    return {"files": files, "listed": None if dt is None else len(dt.file_uris()),
            "version": None if dt is None else dt.version()}


def _own_report(path: str, before: dict, after: dict) -> TableReport:
    gone = sorted(set(before["files"]) - set(after["files"]))
    logs = [p for p in gone if is_log_file(p)]
    data = [p for p in gone if not is_log_file(p)]
    done = []
    if before["listed"] != after["listed"]:
        done.append(f"compacted {before['listed']} file(s) into {after['listed']}")
    if data:
        done.append(f"deleted {len(data)} unlisted file(s)")
    if logs:
        done.append(f"cleaned {len(logs)} log entr(ies)")
    return TableReport(path, OWN, "; ".join(done) or "nothing to do", before["listed"], after["listed"], len(data),
                       len(logs), sum(before["files"][p] for p in gone), before["version"], after["version"], gone)
