"""Keeping Delta tables small as a job runs for months: compaction, vacuum and log clean-up.

Every epoch appends to Sluice's own tables (the epoch log, the checkpoints table, the state
tables) and every reader replays what was appended; left alone, an epoch's cost grows with the
job's age. Structured Streaming bounds its metadata the same ways: it compacts its commit and
offset logs, keeps ``minBatchesToRetain`` batches and cleans its state store's old versions.

* ``own_table_properties``: a Delta checkpoint every 10 commits, and tombstones dropped from it
  after 30 seconds (``sluice.maintenance.log-retention``: the log and deleted-file retentions the
  tables declare are that option, and delta-spark time-travels them within it). Nothing reads
  the history of Sluice's own tables: restores read the files
  the checkpoints' records list, so short retentions cost nothing.
* ``clean_log``: log entries before the table's latest Delta checkpoint, once older than
  ``LOG_RETENTION_S``, deleted oldest first (``delta.logRetentionDuration``, done here rather
  than in delta-rs's commit hook so that a kill in the middle is a fault point like the others).
  30 seconds leaves a reader that is replaying the log (the web view, ``sluice checkpoints``)
  the time to finish; a table keeps at most its last two Delta checkpoints' worth of entries
  plus those of the last 30 seconds.
* ``compact``: an append-only table rewritten as the rows its readers need, in one file and
  one commit (Delta's overwrite: either the old files or the new one, never a mix), committed
  at exactly the version read, so a row appended meanwhile is never lost: the commit fails and
  the compaction waits for its next turn.
* ``vacuum``: the data files a compaction removed are deleted at once (readers of Sluice's
  tables start over when a file they listed is gone), and files no version lists (a writer
  killed between its file and its commit) once older than ``ORPHAN_AGE_S``.
"""
from __future__ import annotations

import logging
import math
import time
import uuid
from typing import Iterable, Optional

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from runtime.common.faults import fault_point
from runtime.storage.delta_files import file_stats
from runtime.storage.delta_log import DeltaLog, is_log_file
from runtime.storage.filesystems import filesystem

log = logging.getLogger(__name__)

LOG_RETENTION_S = 30


def own_table_properties(log_retention_s: float = LOG_RETENTION_S) -> dict:
    """The table properties of Sluice's own tables for a job whose ``sluice.maintenance.log-retention``
    is ``log_retention_s``: the retention they declare is the one ``clean_log`` keeps, so that a
    Delta reader holds to it too (delta-spark refuses time travel to a version older than the
    declared ``delta.deletedFileRetentionDuration``)."""
    interval = f"interval {max(1, math.ceil(log_retention_s))} seconds"
    return {"delta.checkpointInterval": "10",
            "delta.logRetentionDuration": interval,
            "delta.deletedFileRetentionDuration": interval,
            "delta.enableExpiredLogCleanup": "false"}    # clean_log does it


OWN_TABLE_PROPERTIES = own_table_properties()
COMPACT_AFTER_FILES = 20        # an append-only table with more files than this is compacted
ORPHAN_AGE_S = 60               # a file no version lists, older than this, is a dead writer's


class CompactionConflict(RuntimeError):
    """Another writer committed to the table since it was read: nothing was changed."""


def compact(dt, rows: pa.Table, epoch: int = -1) -> list[str]:
    """Replace every file of the table ``dt`` (a DeltaTable at the version ``rows`` were read
    from) with one file of ``rows``; returns the paths of the files it removed (for ``vacuum``).
    Raises CompactionConflict when another commit came first."""
    removed = dt.file_uris()
    fs, root = filesystem(dt.table_uri)
    add = _write_file(fs, root, f"part-{uuid.uuid4().hex}.parquet", rows, {}, data_change=True)
    fault_point("during-compaction", epoch)     # the new file written, not committed
    _commit_at_read_version(dt, [add], "overwrite", rows.schema, fs, [f"{root}/{add.path}"])
    return removed


def _delete_quietly(fs, paths: list) -> None:
    for path in paths:
        try:
            fs.delete_file(path)
        except OSError:
            pass


def _write_file(fs, root: str, name: str, rows: pa.Table, partition_values: dict, data_change: bool):
    """``rows`` as the Parquet file ``name`` of the table at ``root``; its AddAction."""
    from deltalake.transaction import AddAction
    pq.write_table(rows, f"{root}/{name}", filesystem=fs)
    return AddAction(name, fs.get_file_info(f"{root}/{name}").size, partition_values, int(time.time() * 1000),
                     data_change, file_stats(rows))


def _commit_at_read_version(dt, actions: list, mode: str, schema: pa.Schema, fs, written: list,
                            partition_by: Optional[list] = None) -> None:
    """Commit ``actions`` at exactly the version after ``dt``'s (max_commit_retries=0), or not
    at all: then the files ``written`` for them are deleted and CompactionConflict raised."""
    from deltalake import CommitProperties
    version = dt.version()
    try:
        dt.create_write_transaction(actions, mode, schema, partition_by=partition_by,
                                    commit_properties=CommitProperties(max_commit_retries=0))
    except BaseException as e:
        _delete_quietly(fs, written)
        if type(e).__name__ == "CommitFailedError":
            raise CompactionConflict(f"{dt.table_uri}: committed to since version {version}") from e
        raise
    dt.update_incremental()


def vacuum(dt, removed: Iterable[str] = (), epoch: int = -1) -> list[str]:
    """Delete ``removed`` (files a compaction of ``dt`` just removed) and files no version of the
    table lists that are older than ORPHAN_AGE_S; returns what it deleted. Never a file the
    table's current version lists."""
    fs, root = filesystem(dt.table_uri)
    active = {filesystem(u)[1] for u in dt.file_uris()}
    doomed = {filesystem(u)[1] for u in removed} - active
    cutoff = time.time() - ORPHAN_AGE_S
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True)):
        relative = info.path[len(root):].lstrip("/")
        if (info.type == pafs.FileType.File and relative.endswith(".parquet") and not is_log_file(info.path)
                and info.path not in active and info.mtime is not None and info.mtime.timestamp() < cutoff):
            doomed.add(info.path)
    return _delete(fs, sorted(doomed), "during-vacuum", epoch)


def compact_and_vacuum(dt, rows: pa.Table, epoch: int = -1) -> Optional[list[str]]:
    """``compact`` then ``vacuum``: the files deleted, or None when another writer came first."""
    try:
        removed = compact(dt, rows, epoch)
    except CompactionConflict as e:
        log.info("compaction skipped: %s", e)
        return None
    return vacuum(dt, removed, epoch)


def clean_log(table_uri: str, epoch: int = -1, retention_s: float = LOG_RETENTION_S) -> list[str]:
    """Delete the table's log entries (commits, checkpoints, checksums) older than its latest
    Delta checkpoint and than ``retention_s``, oldest first, so that what remains always starts
    at a checkpoint; returns what it deleted."""
    delta_log = DeltaLog(table_uri)
    last = delta_log.last_checkpoint_hint()
    if last is None:
        return []
    cutoff = time.time() - retention_s
    doomed = [e.path for e in delta_log.entries()
              if e.version < last and e.mtime_s is not None and e.mtime_s < cutoff]
    return _delete(delta_log.fs, doomed, "during-log-cleanup", epoch)


def _delete(fs, paths: list, point: str, epoch: int) -> list[str]:
    """Delete ``paths`` in order (the fault point between two: some deleted, some not); the
    paths deleted (one already gone is not)."""
    deleted = []
    for path in paths:
        if deleted:
            fault_point(point, epoch)
        try:
            fs.delete_file(path)
            deleted.append(path)
        except FileNotFoundError:
            pass
    return deleted


def compact_files(dt, partition_filter: Optional[list], target_size: int, epoch: int = -1) -> tuple[int, int]:
    """Delta's OPTIMIZE for a table others write to (a sink): the files of the partition
    ``partition_filter`` selects ([(column, "=", value)], None: every partition) rewritten as
    files of about ``target_size`` bytes, in one dataChange=false commit (streaming readers skip
    it) at exactly the version ``dt`` is at. delta-rs's own OPTIMIZE and its conflict checker
    commit a compaction planned on an older version past another one that rewrote the same
    files (the rows are then there twice, seen with delta-rs 1.6.6): this one fails with
    CompactionConflict instead, and the caller plans again. Returns (files removed, added)."""
    import pyarrow.dataset as ds
    from deltalake.transaction import AddAction, RemoveAction
    columns = list(dt.metadata().partition_columns)
    wanted = {c: v for c, _, v in (partition_filter or ())}
    groups: dict = {}
    for a in pa.table(dt.get_add_actions(flatten=True)).to_pylist():
        values = {c: None if a[f"partition.{c}"] is None else str(a[f"partition.{c}"]) for c in columns}
        if all(values.get(c) == v for c, v in wanted.items()):
            groups.setdefault(tuple(values.items()), []).append(a)
    groups = {k: files for k, files in groups.items() if len(files) > 1}
    if not groups:
        return 0, 0
    table_schema = pa.schema(dt.schema().to_arrow())
    file_schema = pa.schema([f for f in table_schema if f.name not in columns])
    fs, root = filesystem(dt.table_uri)
    now = int(time.time() * 1000)
    actions, written = [], []
    try:
        for key, files in groups.items():
            values = dict(key)
            rows = ds.dataset([f"{root}/{a['path']}" for a in files], schema=file_schema, format="parquet",
                              filesystem=fs).to_table()
            size = sum(a["size_bytes"] for a in files)
            per_file = max(1, int(rows.num_rows * target_size / max(size, 1)))
            for start in range(0, max(rows.num_rows, 1), per_file):
                prefix = "/".join(f"{c}={v if v is not None else '__HIVE_DEFAULT_PARTITION__'}" for c, v in key)
                name = (prefix + "/" if prefix else "") + f"part-compacted-{uuid.uuid4().hex}.parquet"
                actions.append(_write_file(fs, root, name, rows.slice(start, per_file), values, data_change=False))
                written.append(f"{root}/{name}")
            actions.extend(RemoveAction(a["path"], False, now, a["size_bytes"], values) for a in files)
    except BaseException:
        _delete_quietly(fs, written)
        raise
    fault_point("during-compaction", epoch)     # the new files written, not committed
    _commit_at_read_version(dt, actions, "append", table_schema, fs, written, columns or None)
    return (sum(len(files) for files in groups.values()),
            sum(1 for a in actions if isinstance(a, AddAction)))
