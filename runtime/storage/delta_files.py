"""Delta tables written and read by the runtime itself (checkpoints, epoch log, state,
executions): one Parquet file and one commit per append, and the file statistics Delta readers
skip files by. Public helpers, so that no package reaches into another's private ones."""
from __future__ import annotations

import datetime
import json
import math
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from runtime.storage.filesystems import filesystem, makedirs


def arrow_table(schema: pa.Schema, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)


def read_table(path: str) -> Optional[pa.Table]:
    """The whole of one of the runtime's own (unpartitioned) tables, None if there is none.

    Its files are scanned by Arrow's own file system, not through delta-rs's: Arrow threads
    calling into delta-rs's file system while the interpreter exits abort the process (seen
    for 1 exit in 4 when a CLI command failed right after reading the checkpoints). A file
    gone while it was read (the table was compacted meanwhile) makes it read the table anew."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable
    for attempt in range(3):
        if not DeltaTable.is_deltatable(path):
            return None
        table = DeltaTable(path)
        schema = pa.schema(table.schema().to_arrow())      # files written before a column was added lack it
        try:
            if table.metadata().partition_columns:
                return pa.table(table.to_pyarrow_dataset().to_table())
            fs = filesystem(path)[0]
            return ds.dataset([filesystem(uri)[1] for uri in table.file_uris()], schema=schema, format="parquet",
                              filesystem=fs).to_table()
        except FileNotFoundError:
            if attempt == 2:
                raise


class DeltaTables:
    """A writer's DeltaTable handles, kept across its commits: each table's log is replayed once,
    then every use reads only the commits since (``update_incremental``), as a long-running Delta
    writer keeps its snapshot; re-opening a table per commit replays its log each time. For a run
    that holds its job: its tables are not removed under it. ``properties``: the table properties
    its tables are created with (and given, when an existing table lacks them).

    A commit does not move its handle to its version: ``catch_up_later`` moves it on a thread of
    its own, or the handle's next user first, so that the committer does not wait for it (a
    checkpoint's record waited 5-10 ms a table on a small epoch, bench/epoch_floor.py)."""

    def __init__(self, properties: Optional[dict] = None):
        self.properties = dict(properties or {})
        self._open: dict = {}
        self._behind: set = set()       # tables whose handle is behind its writer's last commit
        self._catching_up: Optional[ThreadPoolExecutor] = None

    def get(self, path: str, refresh: bool = True):
        """The table at ``path`` as it is now, None if there is none. ``refresh=False``: a handle
        already open as its own commits left it, for its table's only writer."""
        from deltalake import DeltaTable
        dt = self._open.get(path)
        if dt is not None and not refresh:
            if path in self._behind:
                self._behind.discard(path)
                dt.update_incremental()
            return dt
        if dt is not None:
            try:
                self._behind.discard(path)
                dt.update_incremental()
                return dt
            except Exception:       # removed (or replaced) meanwhile: opened anew
                del self._open[path]
        if not DeltaTable.is_deltatable(path):
            return None
        dt = self._open[path] = DeltaTable(path)
        configuration = dt.metadata().configuration
        if any(configuration.get(k) != v for k, v in self.properties.items()):
            dt.alter.set_table_properties(self.properties)
        return dt

    def catch_up_later(self, path: str, lock) -> None:
        """The handle of ``path`` committed a version: moved on to it in the background, holding
        ``lock`` (which every user of the handle holds: the handle is not shared between threads)."""
        self._behind.add(path)

        def catch_up():
            with lock:
                self.get(path, refresh=False)
        if self._catching_up is None:
            self._catching_up = ThreadPoolExecutor(1, thread_name_prefix="sluice-delta-catch-up")
        self._catching_up.submit(catch_up)

    def create(self, path: str, schema: pa.Schema, actions: list, partition_by=None) -> None:
        """A new table holding ``actions``' files (an error if one exists)."""
        from deltalake import Schema
        from deltalake.transaction import create_table_with_add_actions
        create_table_with_add_actions(path, Schema.from_arrow(schema), actions, mode="error",
                                      partition_by=partition_by, configuration=self.properties or None)


def append(path: str, table: pa.Table, before_commit=None, create_only: bool = False,
           tables: Optional[DeltaTables] = None, lock=None) -> None:
    """Append ``table`` as one Parquet file and one commit; ``before_commit`` between the two.
    ``tables``: the writer's open handles (else the table is opened for this commit); with the
    handle's ``lock`` (held by the caller), the commit goes on the handle as this writer left it
    and it catches up later (a concurrent writer's commit is one delta-rs commits after: appends
    do not conflict)."""
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction
    makedirs(path)
    actions = []
    if table.num_rows:
        name = f"part-{uuid.uuid4().hex}.parquet"
        fs, root = filesystem(path)
        pq.write_table(table, f"{root}/{name}", filesystem=fs)
        actions.append(AddAction(name, fs.get_file_info(f"{root}/{name}").size, {}, int(time.time() * 1000),
                                 True, file_stats(table)))
    if before_commit is not None:
        before_commit()
    tables = tables or DeltaTables()
    dt = tables.get(path, refresh=lock is None)
    if dt is None:
        try:
            tables.create(path, table.schema, actions)
            return
        except Exception:
            if not DeltaTable.is_deltatable(path):
                raise
    if create_only:
        return
    dt = dt or tables.get(path)
    add_new_columns(dt, table.schema)
    dt.create_write_transaction(actions, "append", table.schema)
    if lock is not None:
        tables.catch_up_later(path, lock)


def add_new_columns(dt, schema: pa.Schema) -> None:
    """Schema evolution: columns ``schema`` has and the table has not yet are added (nullable),
    so a table written by an older version takes rows with a new column; its older files read
    the column as null (``read_table``)."""
    from deltalake import Schema
    known = {f.name for f in dt.schema().fields}
    new = [f.with_nullable(True) for f in schema if f.name not in known]
    if new:
        dt.alter.add_columns(list(Schema.from_arrow(pa.schema(new)).fields))
        dt.update_incremental()


STAT_TYPES = (pa.types.is_integer, pa.types.is_floating, pa.types.is_string, pa.types.is_date)


def file_stats(table: pa.Table) -> str:
    """Delta file statistics: numRecords, and nullCount/minValues/maxValues of simple columns."""
    stats = FileStats()
    stats.add(table)
    return stats.json()


class FileStats:
    """Delta file statistics of a file written a part at a time: ``add`` each part."""

    def __init__(self):
        self.rows = 0
        self.mins: dict = {}
        self.maxs: dict = {}
        self.nulls: dict = {}
        self.unfit: set = set()     # columns without min and max (NaN, long text)

    def add(self, table: pa.Table) -> None:
        self.rows += table.num_rows
        for name, column in zip(table.column_names, table.columns):
            if not any(check(column.type) for check in STAT_TYPES):
                continue
            self.nulls[name] = self.nulls.get(name, 0) + column.null_count
            if name in self.unfit or column.null_count == len(column):
                continue
            mm = pc.min_max(column)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if (isinstance(lo, float) and (math.isnan(lo) or math.isnan(hi) or pc.any(pc.is_nan(column)).as_py())) \
                    or (isinstance(lo, str) and max(len(lo), len(hi)) > 64):
                self.unfit.add(name)
                self.mins.pop(name, None)
                self.maxs.pop(name, None)
                continue
            if isinstance(lo, datetime.date):
                lo, hi = lo.isoformat(), hi.isoformat()
            self.mins[name] = min(self.mins.get(name, lo), lo)
            self.maxs[name] = max(self.maxs.get(name, hi), hi)

    def json(self) -> str:
        return json.dumps({"numRecords": self.rows, "minValues": self.mins, "maxValues": self.maxs,
                           "nullCount": self.nulls})


class AppendOnlyTable:
    """One of the runtime's append-only tables (unpartitioned), read as it grows: each data file
    is read once per reader, so a run that reads its checkpoints table at every checkpoint pays
    for the commits since its last read. Every writer's commits are seen (``update_incremental``);
    a file gone since the last read (the table was compacted or rewritten) makes the next read
    start over."""

    def __init__(self, path: str):
        self.path = path
        self._delta = None
        self._files: set = set()
        self._table: Optional[pa.Table] = None

    def read(self) -> Optional[pa.Table]:
        """The whole table as it is now, None if there is none."""
        new, restarted = self.read_new()
        if new is None:
            return None
        self._table = new if restarted or self._table is None else pa.concat_tables(
            [self._table, new], promote_options="default")     # a column added since: nulls before
        return self._table

    def read_new(self) -> tuple[Optional[pa.Table], bool]:
        """The rows committed since the last read, and whether they are the whole table (the
        first read, or one that started over); (None, True) when there is no table."""
        import pyarrow.dataset as ds
        from deltalake import DeltaTable
        for attempt in range(3):
            if self._delta is not None:
                try:
                    self._delta.update_incremental()
                except Exception:       # the table was removed (or replaced): read it anew
                    self._delta = None
            if self._delta is None:
                self._files, self._table = set(), None
                if not DeltaTable.is_deltatable(self.path):
                    return None, True
                self._delta = DeltaTable(self.path)
            uris = self._delta.file_uris()
            restarted = not self._files or not self._files.issubset(uris)
            if restarted:
                self._files = set()
            new = [u for u in uris if u not in self._files]
            schema = pa.schema(self._delta.schema().to_arrow())
            try:
                read = ds.dataset([filesystem(u)[1] for u in new], schema=schema, format="parquet",
                                  filesystem=filesystem(self.path)[0]).to_table()
            except FileNotFoundError:   # compacted while this read listed its files
                self._delta = None
                if attempt == 2:
                    raise
                continue
            self._files = set(uris) if restarted else self._files | set(new)
            return read, restarted
        raise AssertionError("unreachable")
