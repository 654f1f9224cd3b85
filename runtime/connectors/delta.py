"""Delta tables through delta-rs: a source whose splits are data files, and a staging sink.

Source: each data file (an ``add`` action) of the version read is a split; its offset is the
next row to read, so an epoch reads rows [start, end) of a file and a replay reads the same
rows. A bounded source reads one version (``starting_version``, else the latest). A
continuous source reads the latest version's files first (or, with ``starting_version``, the
files added from that version on, as Flink's Delta connector), then, each epoch, the files
that later commits added; the last version read is kept in the enumerator's positions.
A bounded source restored from a checkpoint reads as Structured Streaming's ``availableNow``
trigger does: the files the commits after its checkpointed version added, up to the version
that was the latest when the run started (a job run on each new version of its input reads
each row once). Records are ``Row``s named by the table's columns (or only ``columns``).

Sink: a task's writer (``DeltaSinkWriter``) buffers its records, converts them to Arrow and
writes one Parquet file per subtask per epoch (one per partition value with ``partition_by``)
into the table folder; the file handles are its committable. The records take the stream's
declared type (``output_type``/``type_info``): the table's schema comes from it, and a record
that does not fit fails naming the sink, the record and the column; a stream with no declared
type (or a field declared PICKLED_BYTE_ARRAY) is typed by its values, batch by batch. On the
driver, the ``DeltaCommitter`` commits the handles staged since the last checkpoint in one Delta
transaction carrying the app transaction (app_id, version), so a replayed commit is a no-op
(``commit_sink_files``).

Upsert sink (``DeltaSink.with_upsert_keys``): the writer keeps each key's last change of the epoch
(a changelog as Flink's upsert sinks read it: INSERT/UPDATE_AFTER upsert, DELETE deletes,
UPDATE_BEFORE ignored) and hands them to the driver as an Arrow table; the committer reduces a
checkpoint's tables to each key's last change and applies them with delta-rs's MERGE in one
commit carrying the same app transaction (``merge_upserts``), so a replay is a no-op there too.

Data files are read and written with pyarrow's own filesystems, not delta-rs's pyarrow
dataset: scanning through delta-rs's filesystem handler can abort the interpreter at exit
(delta-rs issue #2184, "terminate called without an active exception").
"""
from __future__ import annotations

import datetime
import json
import logging
import time
import uuid
from typing import Any, Iterator, Optional
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from runtime.common.arrow import (
    CONVERSION_ERRORS, FieldTypeError, batch_fields, encode, field_columns, fields_of, first_misfit,
    infer_array)
from runtime.common.typeinfo import PickledBytesTypeInfo, Types
from runtime.common.types import Row, RowKind, make_rows
from runtime.connectors.base import Committer, SourceReader, SplitEnumerator
from runtime.connectors.delta_features import (
    check_reader_protocol, column_mapping, deleted_rows, dv_key, file_column, physical_name,
    snapshot_deletion_vectors)
from runtime.datastream.connectors.delta import upsert_key_values
from runtime.storage.delta_files import file_stats
from runtime.storage.filesystems import filesystem, isdir, join
from runtime.task.sink_writer import BufferingSinkWriter
from runtime.task.deployment import SplitRead

log = logging.getLogger(__name__)
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
TABLE_KEY = "_table"            # positions entry holding the source's table progress


# ---- paths and filesystems ---------------------------------------------------------------

def _data_path(root: str, log_path: str) -> str:
    """Where the file an add action names lives (log paths are relative, URL-encoded)."""
    if "://" in log_path:
        raise ValueError(f"Delta file {log_path!r} has an absolute URI; Sluice reads relative paths only")
    return root + "/" + unquote(log_path)


def _open_table(table_path: str, version: Optional[int] = None, what: str = "Delta source"):
    from deltalake import DeltaTable
    if not DeltaTable.is_deltatable(table_path):
        raise FileNotFoundError(
            f"{what}: there is no Delta table at {table_path} (no _delta_log). Create it first, "
            "e.g. with deltalake.write_deltalake or a job that sinks to it with sink_to().")
    dt = DeltaTable(table_path) if version is None else DeltaTable(table_path, version=version)
    check_reader_protocol(dt, table_path, what)
    return dt


def _arrow_schema(dt) -> pa.Schema:
    return pa.schema(dt.schema().to_arrow())


# ---- source --------------------------------------------------------------------------------

CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def _snapshot_files(dt, fs=None, root: Optional[str] = None) -> list[dict]:
    """The data files of a loaded table version: path, rows (physical: with deleted ones),
    partition values and, on a table with deletion vectors, the file's deletion vector."""
    actions = pa.table(dt.get_add_actions(flatten=False))
    paths = actions.column("path").to_pylist()
    rows = actions.column("num_records").to_pylist()
    if "partition" in actions.column_names:
        parts = actions.column("partition").to_pylist()
    else:
        parts = [{}] * len(paths)
    dvs: dict = {}
    if fs is not None and "deletionVectors" in set(dt.protocol().reader_features or ()):
        dvs = snapshot_deletion_vectors(fs, root, dt.version(), lambda v: _log_commit(fs, root, v))
        unknown = set(dvs) - {unquote(p) for p in paths}
        if unknown:
            raise ValueError(f"Delta source: the log of {root} gives deletion vectors for files the "
                             f"snapshot does not list ({sorted(unknown)[:3]}); refusing to guess its rows")
    return [{"path": p, "num_rows": n, "partition": dict(pv or {}), "dv": dvs.get(unquote(p))}
            for p, n, pv in zip(paths, rows, parts)]


def _partition_string(value: Any) -> Optional[str]:
    """A partition value as the Delta log writes it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _log_commit(fs: pafs.FileSystem, root: str, version: int) -> list[dict]:
    path = f"{root}/_delta_log/{version:020d}.json"
    try:
        with fs.open_input_stream(path) as f:
            text = f.read().decode("utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(
            f"Delta source: the commit {path} is gone (the log was cleaned up), so the changes of "
            f"version {version} cannot be read; restart the source from a later starting_version") from None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _commit_timestamp(fs, root: str, version: int, actions: list[dict]) -> int:
    """A commit's timestamp in ms as Spark's change feed shows it: the in-commit timestamp when
    the table has them, else the commit file's modification time (commitInfo's as a fallback)."""
    info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    if info.get("inCommitTimestamp") is not None:
        return int(info["inCommitTimestamp"])
    stat = fs.get_file_info(f"{root}/_delta_log/{version:020d}.json")
    if stat.mtime_ns is not None:
        return stat.mtime_ns // 1_000_000
    return int(info.get("timestamp") or 0)


def _stats_rows(action: dict) -> Optional[int]:
    stats = action.get("stats")
    return json.loads(stats).get("numRecords") if stats else None


class DeltaSourceEnumerator(SplitEnumerator):
    def __init__(self, source, context):
        super().__init__(source, context)
        self._fs, self._root = filesystem(source.table_path)
        self._table = None
        self._end: Optional[int] = None     # a bounded source's last version, pinned as the run starts

    # positions: split id -> {"offset", "num_rows", "partition", "index", "version", "dv"}
    #            (a change feed's splits also "path", "change", "timestamp"; their id is
    #            "<version>:<change>:<path>"; a file whose deletion vector a commit replaced,
    #            "newly_deleted" and "dv_before": its deletes are the rows "dv" adds)
    #            TABLE_KEY -> {"version": last version read, "files": number of splits,
    #                          a bounded source's "end": the last version this run reads}

    def check(self) -> None:
        """The table exists and Sluice reads its reader features (before Spark starts)."""
        source = self.source
        dt = _open_table(source.table_path)
        if source.starting_version is not None:
            _open_table(source.table_path, source.starting_version)
        if source.change_data_feed:
            if (dt.metadata().configuration or {}).get("delta.enableChangeDataFeed", "false").lower() != "true":
                raise ValueError(
                    f"Delta source: {source.table_path} does not record a change data feed; turn it on "
                    "(ALTER TABLE ... SET TBLPROPERTIES (delta.enableChangeDataFeed = true)) and read the "
                    "changes from a version after that, or read its rows with for_bounded_row_data")

    def _files(self) -> list[tuple[str, dict]]:
        return sorted(((k, v) for k, v in self.positions.items() if k != TABLE_KEY),
                      key=lambda kv: kv[1].get("index", 0))

    def _add_file(self, path: str, num_rows: Optional[int], partition: dict, version: int,
                  dv: Optional[dict] = None, split_id: Optional[str] = None, **extra) -> None:
        split_id = split_id or path
        if split_id in self.positions:
            return
        if num_rows is None:
            num_rows = pq.ParquetFile(_data_path(self._root, path), filesystem=self._fs).metadata.num_rows
        table = self.positions.setdefault(TABLE_KEY, {})
        index = table.get("files", 0)
        table["files"] = index + 1
        state = {"offset": 0, "num_rows": int(num_rows), "partition": partition, "index": index,
                 "version": version}
        if dv:
            state["dv"] = dict(dv)
        if split_id != path:
            state["path"] = path
        state.update(extra)
        self.positions[split_id] = state

    def _discover(self) -> None:
        source = self.source
        table = self.positions.get(TABLE_KEY)
        fresh = table is None or "version" not in table
        if fresh:
            self.positions.setdefault(TABLE_KEY, {})
            if source.starting_version is not None and (source.continuous or source.change_data_feed):
                # Flink's Delta connector (and Spark's change feed): a starting version reads
                # changes from it on.
                _open_table(source.table_path, source.starting_version)    # checks it exists
                self.positions[TABLE_KEY]["version"] = source.starting_version - 1
            else:
                dt = _open_table(source.table_path,
                                 None if source.continuous or source.change_data_feed else source.starting_version)
                version = dt.version()
                extra = {}
                if source.change_data_feed:     # no starting version: the snapshot as inserts
                    extra = {"change": "insert",
                             "timestamp": _commit_timestamp(self._fs, self._root, version,
                                                            _log_commit_or_none(self._fs, self._root, version))}
                for f in _snapshot_files(dt, self._fs, self._root):
                    split_id = f"{version}:insert:{f['path']}" if source.change_data_feed else None
                    self._add_file(f["path"], f["num_rows"], f["partition"], version, f["dv"], split_id, **extra)
                self.positions[TABLE_KEY]["version"] = version
                self._table = dt
        if not source.continuous and self._end is None:
            # A bounded run reads up to the version that was the latest as it started (Structured
            # Streaming's availableNow): a fresh run of the rows, the snapshot it read; a change
            # feed, or a run restored from a checkpoint, the commits since its version too.
            if fresh and not source.change_data_feed:
                self._end = self.positions[TABLE_KEY]["version"]
            else:
                latest = self._table if fresh and self._table is not None else _open_table(source.table_path)
                self._end = max(latest.version(), self.positions[TABLE_KEY]["version"])
            self.positions[TABLE_KEY]["end"] = self._end
        if source.continuous:
            if self._table is None:
                self._table = _open_table(source.table_path)
            else:
                self._table.update_incremental()
        latest = self._table.version() if source.continuous else self._end
        last = self.positions[TABLE_KEY]["version"]
        for version in range(last + 1, latest + 1):
            actions = _log_commit(self._fs, self._root, version)
            if source.change_data_feed:
                self._discover_changes(version, actions)
            else:
                self._discover_appends(version, actions)
            self.positions[TABLE_KEY]["version"] = version

    def snapshot(self) -> dict:
        """The positions a checkpoint records: the splits not read to their end, and the table's
        progress. A split read to its end is never planned again (discovery goes by version), so
        the positions of a job that runs on each new version do not grow with its age."""
        return {k: dict(v) for k, v in self.positions.items()
                if k == TABLE_KEY or v.get("offset", 0) < v["num_rows"]}

    def restore(self, positions: dict) -> None:
        super().restore(positions)
        self._end = None        # pinned again: the restored run's start

    def _discover_appends(self, version: int, actions: list[dict]) -> None:
        for action in actions:
            if "add" in action and action["add"].get("dataChange", True):
                add = action["add"]
                self._add_file(add["path"], _stats_rows(add), dict(add.get("partitionValues") or {}), version,
                               add.get("deletionVector"))
            elif "remove" in action and action["remove"].get("dataChange", True):
                path = action["remove"].get("path")
                with_dv = action["remove"].get("deletionVector") or any(
                    "add" in a and a["add"].get("deletionVector") for a in actions)
                how = (" with deletion vectors (a DELETE, UPDATE or MERGE on a table with "
                       "delta.enableDeletionVectors)" if with_dv else "")
                following = ("a continuous Delta source" if self.source.continuous else
                             "a bounded Delta source restored from a checkpoint (an on-inputs run)")
                raise ValueError(
                    f"Delta source: version {version} of {self.source.table_path} removes data{how} "
                    f"({path}); {following} reads the versions after its own as appends only, as Flink's "
                    "(start it without its checkpoint, restore_from 'none', to read the table as it is now, "
                    "or from a starting_version after that change, or read the table's changes with "
                    "DeltaSource.for_change_data_feed on a table with delta.enableChangeDataFeed)")

    def _discover_changes(self, version: int, actions: list[dict]) -> None:
        """A commit's change rows, as Spark's change feed reads them (Delta's PROTOCOL.md, Change
        Data Files): its ``cdc`` files when it has some, else its data-changing adds as inserts
        and removes as deletes."""
        timestamp = _commit_timestamp(self._fs, self._root, version, actions)
        cdc = [a["cdc"] for a in actions if "cdc" in a]
        if cdc:
            for c in cdc:
                self._add_file(c["path"], None, dict(c.get("partitionValues") or {}), version, None,
                               f"{version}:cdc:{c['path']}", change="cdc", timestamp=timestamp)
            return
        adds = [a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)]
        removes = [a["remove"] for a in actions if "remove" in a and a["remove"].get("dataChange", True)]
        removed = {unquote(r["path"]): r for r in removes}
        both = {unquote(a["path"]) for a in adds} & set(removed)
        for a in adds:
            if unquote(a["path"]) not in both:
                continue
            # A file whose deletion vector the commit replaced (a DELETE with deletion vectors
            # writes no change files): the rows the new vector deletes and the old one did not
            # are the commit's deletes, as Spark's change feed derives them.
            before = removed[unquote(a["path"])].get("deletionVector")
            if not a.get("deletionVector"):
                raise ValueError(
                    f"Delta source: version {version} of {self.source.table_path} dropped the deletion vector "
                    f"of {a['path']} without change data files (rows deleted before come back), which Sluice's "
                    "change feed does not read; read the changes from a later starting_version")
            self._add_file(a["path"], _stats_rows(a), dict(a.get("partitionValues") or {}), version,
                           a["deletionVector"], f"{version}:delete:{a['path']}", change="delete",
                           timestamp=timestamp, newly_deleted=True, dv_before=before)
        adds = [a for a in adds if unquote(a["path"]) not in both]
        removes = [r for r in removes if unquote(r["path"]) not in both]
        for r in removes:
            self._add_file(r["path"], _stats_rows(r), dict(r.get("partitionValues") or {}), version,
                           r.get("deletionVector"), f"{version}:delete:{r['path']}", change="delete",
                           timestamp=timestamp)
        for a in adds:
            self._add_file(a["path"], _stats_rows(a), dict(a.get("partitionValues") or {}), version,
                           a.get("deletionVector"), f"{version}:insert:{a['path']}", change="insert",
                           timestamp=timestamp)

    def plan_epoch(self, epoch):
        self._discover()
        plan: dict[int, list] = {s: [] for s in range(self.parallelism)}
        everything = True
        cut = None          # a change feed: no version after one this epoch reads in part
        for path, state in self._files():
            start, total = state.get("offset", 0), state["num_rows"]
            if start >= total:
                continue
            if cut is not None and state["version"] > cut:
                everything = False
                break
            end = total if self.max_records_per_split is None else min(total, start + self.max_records_per_split)
            everything &= end >= total
            if end < total and self.source.change_data_feed:
                cut = state["version"]
            plan[state["index"] % self.parallelism].append(SplitRead(path, start, end, dict(state)))
        self.input_ends_with_plan = not self.source.continuous and everything
        return {s: tuple(reads) for s, reads in plan.items()}

    @property
    def finished(self):
        if self.source.continuous:
            return False
        if TABLE_KEY not in self.positions:
            return False
        return all(state.get("offset", 0) >= state["num_rows"] for _, state in self._files())


def _log_commit_or_none(fs, root: str, version: int) -> list[dict]:
    try:
        return _log_commit(fs, root, version)
    except FileNotFoundError:
        return []


class DeltaSourceReader(SourceReader):
    def __init__(self, source, ctx):
        super().__init__(source, ctx)
        self._fs, self._root = filesystem(source.table_path)
        self._schemas: dict = {}
        self._deleted: dict = {}        # deletion vector -> the sorted rows it deletes (a few kept)

    def _schema(self, version) -> tuple[pa.Schema, list, dict]:
        if version not in self._schemas:
            dt = _open_table(self.source.table_path, version)
            schema = _arrow_schema(dt)
            self._schemas[version] = (schema, list(dt.metadata().partition_columns), column_mapping(dt))
        return self._schemas[version]

    def read(self, split, batch_size):
        schema, partition_columns, mapping = self._schema(split.state.get("version"))
        changes = self.source.change_data_feed
        known = schema.names + (list(CHANGE_COLUMNS) if changes else [])
        names = list(self.source.columns) if self.source.columns else known
        missing = [n for n in names if n not in known]
        if missing:
            raise ValueError(f"Delta source: {self.source.table_path} has no column(s) {missing}; "
                             f"its columns are {known}")
        self.ends[split.split_id] = {"offset": split.end}
        return self._batches(split, schema, partition_columns, mapping, names, batch_size)

    def _deleted_rows(self, dv: Optional[dict]):
        key = dv_key(dv)
        if key is None:
            return None
        if key not in self._deleted:
            if len(self._deleted) >= 8:
                self._deleted.pop(next(iter(self._deleted)))
            import numpy as np
            self._deleted[key] = np.asarray(deleted_rows(self._fs, self._root, dv), dtype=np.int64)
        return self._deleted[key]

    def _batches(self, split, schema, partition_columns, mapping, names, batch_size) -> Iterator[tuple]:
        import numpy as np
        state = split.state
        pf = pq.ParquetFile(_data_path(self._root, state.get("path", split.split_id)), filesystem=self._fs)
        in_file = set(pf.schema_arrow.names)
        wanted = [n for n in names if n not in partition_columns and n not in CHANGE_COLUMNS]
        file_columns = [c for c in dict.fromkeys(physical_name(mapping.get(n), n) for n in wanted) if c in in_file]
        if mapping and len(file_columns) < len(wanted):     # id mode: a column found by its field id
            file_columns = None
        change = state.get("change")
        if change == "cdc":
            file_columns = None if file_columns is None else file_columns + ["_change_type"]
        partition = state.get("partition") or {}
        deleted = self._deleted_rows(state.get("dv"))
        first = 0
        for group in range(pf.metadata.num_row_groups):
            rows = pf.metadata.row_group(group).num_rows
            lo, hi = max(split.start, first), min(split.end, first + rows)
            if lo < hi:
                table = pf.read_row_group(group, columns=file_columns).slice(lo - first, hi - lo)
                if state.get("newly_deleted"):    # a change feed's deletes by deletion vector
                    keep = np.zeros(hi - lo, dtype=bool)
                    a, b = np.searchsorted(deleted, [lo, hi])
                    keep[deleted[a:b] - lo] = True
                    before = self._deleted_rows(state.get("dv_before"))
                    if before is not None:
                        a, b = np.searchsorted(before, [lo, hi])
                        keep[before[a:b] - lo] = False
                    table = table.filter(pa.array(keep))
                elif deleted is not None and len(deleted):
                    a, b = np.searchsorted(deleted, [lo, hi])
                    if b > a:   # positions count physical rows; the deleted ones are skipped
                        keep = np.ones(hi - lo, dtype=bool)
                        keep[deleted[a:b] - lo] = False
                        table = table.filter(pa.array(keep))
                n = table.num_rows
                columns = []
                for name in names:
                    if name == "_change_type":
                        columns.append(table.column("_change_type") if change == "cdc"
                                       else pa.array([change] * n, pa.string()))
                        continue
                    if name == "_commit_version":
                        columns.append(pa.array([state["version"]] * n, pa.int64()))
                        continue
                    if name == "_commit_timestamp":
                        columns.append(pa.array([state["timestamp"] * 1000] * n, pa.timestamp("us", tz="UTC")))
                        continue
                    field = schema.field(name)
                    if name in partition_columns:
                        value = partition.get(name, partition.get(physical_name(mapping.get(name), name)))
                        columns.append(_partition_column(value, field.type, n))
                        continue
                    column = file_column(table, mapping.get(name), name)
                    if column is None:      # a column added to the table after this file was written
                        columns.append(pa.nulls(n, field.type))
                    else:
                        columns.append(column if column.type == field.type else column.cast(field.type))
                values = [c.to_pylist() for c in columns]
                records = make_rows(zip(*values), list(names))
                for i in range(0, len(records), batch_size):
                    chunk = records[i:i + batch_size]
                    yield chunk, [None] * len(chunk)
            first += rows
            if first >= split.end:
                break


def _partition_column(value, type_: pa.DataType, length: int) -> pa.Array:
    if value is None:
        return pa.nulls(length, type_)
    if isinstance(value, str) and not (pa.types.is_string(type_) or pa.types.is_large_string(type_)):
        scalar = pa.array([value]).cast(type_)[0]
    else:
        scalar = pa.scalar(value, type_)
    return pa.array([scalar.as_py()] * length, type_)

# ---- sink: records to Arrow -----------------------------------------------------------------

def _record_columns(records: list) -> tuple[list[str], list[list]]:
    """(column names, one value list per column) of a batch of records of one shape.

    Named Rows and dicts by name, tuples and unnamed Rows as f0, f1.., other values as f0.
    """
    kinds = {"named" if isinstance(r, Row) and r._field_names is not None else
             "dict" if isinstance(r, dict) else
             "tuple" if isinstance(r, tuple) else "value" for r in records}
    if len(kinds) > 1 and kinds != {"named", "dict"}:
        raise TypeError(f"Delta sink: the records mix {' and '.join(sorted(kinds))} values; a table "
                        "needs records of one shape (named Rows or dicts, tuples, or single values)")
    named_only = kinds == {"named"}
    kind = kinds.pop()
    if kind in ("named", "dict"):
        shapes = ({tuple(n) for n in {id(r._field_names): r._field_names for r in records}.values()}
                  if named_only else ())
        if len(shapes) == 1 and set(map(len, records)) == {len(next(iter(shapes)))}:
            # Rows of one shape (a decoder's, a declared type's): by position.
            (names,) = shapes
            columns = fields_of(records, len(names), all_rows=True)
        else:
            by_name: dict = {}
            dicts = []
            for r in records:
                d = r if isinstance(r, dict) else dict(zip(r._field_names, r))
                by_name.update(dict.fromkeys(d))
                dicts.append(d)
            names = tuple(by_name)
            columns = [[d.get(n) for d in dicts] for n in names]
        bad = [n for n in names if not isinstance(n, str)]
        if bad:
            raise TypeError(f"Delta sink: column names must be strings, got {bad!r}")
        return list(names), columns
    if kind == "tuple":
        width = max(map(len, records))
        padded = [tuple(r) + (None,) * (width - len(r)) for r in records]
        return [f"f{i}" for i in range(width)], [[r[i] for r in padded] for i in range(width)]
    return ["f0"], [list(records)]


def _column_array(values: list) -> pa.Array:
    """A column of no declared type as Arrow: typed as ``infer_type_info`` types its values, else
    by pyarrow's own inference (mixed ints and floats, dates, decimals...), else pickled."""
    array = infer_array(values)
    if array is not None:
        return array
    if all(v is None for v in values):
        return pa.nulls(len(values), pa.string())   # nothing to infer from: a nullable string column
    try:
        return pa.array(values)
    except CONVERSION_ERRORS:
        return encode(values, Types.PICKLED_BYTE_ARRAY())   # as the engine moves unknown objects


def _declared_columns(records: list, type_info, what: str) -> tuple[list[str], list[pa.Array]]:
    """(column names, arrays) of records of a declared type: its fields' names and types (a field
    declared PICKLED_BYTE_ARRAY, which says nothing of its values, is typed by them)."""
    fields = batch_fields(type_info)
    try:
        columns = field_columns(records, type_info)
        arrays = [_column_array(c) if isinstance(t, PickledBytesTypeInfo) else encode(c, t)
                  for (_, t), c in zip(fields, columns)]
    except CONVERSION_ERRORS as error:
        found = first_misfit(records, type_info)
        if found is None:
            raise TypeError(f"{what}: the records do not fit the stream's declared type {type_info}: "
                            f"{error}") from None
        i, e = found
        why = (f"column {e.column!r} ({e.column_type}): {e.__cause__}" if isinstance(e, FieldTypeError)
               else str(e))
        raise TypeError(f"{what}: record {records[i]!r} does not fit the stream's declared type "
                        f"{type_info}: {why}. Convert it in the job, or declare the type it has.") from None
    return [name for name, _ in fields], arrays


def _delta_type(array: pa.Array) -> pa.Array:
    """Arrow types Delta stores: timestamps in microseconds."""
    t = array.type
    if pa.types.is_timestamp(t) and t.unit != "us":
        return array.cast(pa.timestamp("us", tz=t.tz))
    return array


def records_to_table(records: list, target: Optional[pa.Schema] = None, type_info=None,
                     what: str = "Delta sink") -> pa.Table:
    """The records as an Arrow table, typed as ``type_info`` declares (None or PICKLED_BYTE_ARRAY:
    by their values); cast to ``target`` (an existing table's schema) if given. ``what`` names the
    sink in errors."""
    if type_info is not None and not isinstance(type_info, PickledBytesTypeInfo):
        names, arrays = _declared_columns(records, type_info, what)
    else:
        names, columns = _record_columns(records)
        arrays = [_column_array(c) for c in columns]
    if target is None:
        return pa.Table.from_arrays([_delta_type(a) for a in arrays], names=names)
    extra = [n for n in names if n not in target.names]
    if extra:
        raise ValueError(f"Delta sink: the records have field(s) {extra} that the table does not; "
                         f"its columns are {target.names}")
    by_name = dict(zip(names, arrays))
    aligned = []
    for field in target:
        array = by_name.get(field.name)
        if array is None:
            aligned.append(pa.nulls(len(records), field.type))
            continue
        if array.type != field.type:
            try:
                array = array.cast(field.type)
            except (pa.ArrowException, TypeError, ValueError) as e:
                raise TypeError(f"Delta sink: column {field.name!r} of the table is {field.type} but "
                                f"the records hold {array.type} values: {e}") from e
        aligned.append(array)
    return pa.Table.from_arrays(aligned, schema=target)


# ---- sink: files (task side) ----------------------------------------------------------------

def _partition_dir(columns: list[str], values: tuple) -> str:
    return "/".join(f"{quote(c, safe='')}=" + (HIVE_NULL if v is None else quote(v, safe=''))
                    for c, v in zip(columns, values))


DELETE_COLUMN = "_sluice_delete"     # an upsert committable's column: the change deletes its key


def _insert_kind(record):
    """A changelog Row as a plain record of its values (Arrow conversion takes INSERT rows only)."""
    if isinstance(record, Row) and record._row_kind is not RowKind.INSERT:
        return Row(**record.as_dict()) if record._field_names is not None else Row(*record)
    return record


class DeltaSinkWriter(BufferingSinkWriter):
    """Task side of the Delta sink: stages this subtask's records of the epoch as Parquet files.

    In upsert mode (``DeltaSink.with_upsert_keys``) it keeps each key's last change of the epoch
    instead (UPDATE_BEFORE rows ignored) and hands them to the driver as one Arrow table with a
    ``_sluice_delete`` column: the driver merges them into the table (``merge_upserts``)."""

    def __init__(self, sink, context):
        super().__init__(sink, context)
        self.changes: dict = {}         # upsert mode: key -> (record, deletes)

    def write(self, values: list) -> None:
        if not self.sink.upsert:
            return super().write(values)
        keys, table, changes = self.sink.upsert_keys, self.sink.table_path, self.changes
        for i, value in enumerate(values):
            kind = value._row_kind if isinstance(value, Row) else RowKind.INSERT
            if kind is RowKind.UPDATE_BEFORE:
                continue
            try:
                key = tuple(upsert_key_values(value, keys, table))
                hash(key)
            except ValueError as e:
                self.ctx.fail(ValueError(f"{self.ctx.operator_name}: {e}"), value, values, i)
            except TypeError:
                key = repr(key)          # an unhashable key value (a list): keyed by its text
            changes.pop(key, None)      # the last change, in the order the last changes came
            changes[key] = (value, kind is RowKind.DELETE)

    def _target(self) -> tuple[Optional[pa.Schema], list[str]]:
        from deltalake import DeltaTable
        if DeltaTable.is_deltatable(self.sink.table_path):
            dt = DeltaTable(self.sink.table_path)
            columns = list(dt.metadata().partition_columns)
            wanted = list(self.sink.partition_by or ())
            if wanted and wanted != columns:
                raise ValueError(f"Delta sink: {self.sink.table_path} is partitioned by {columns}, "
                                 f"not {wanted}")
            return _arrow_schema(dt), columns
        return None, list(self.sink.partition_by or ())

    def _upsert_changes(self) -> list[dict]:
        """Upsert mode: the epoch's last change per key as an Arrow table (with DELETE_COLUMN),
        typed as the stream declares and cast to the table's schema when it exists."""
        changes, self.changes = self.changes, {}
        if not changes:
            return []
        target, _ = self._target()
        if target is not None:
            missing = [k for k in self.sink.upsert_keys if k not in target.names]
            if missing:
                raise ValueError(f"{self.ctx.operator_name}: the upsert Delta sink's key column(s) {missing} "
                                 f"are not columns of {self.sink.table_path} ({target.names})")
        records = [_insert_kind(record) for record, _ in changes.values()]
        table = records_to_table(records, target, self.ctx.input_type,
                                 f"{self.ctx.operator_name} {self.ctx.subtask_label}, table {self.sink.table_path}")
        if target is not None:      # the table's other columns keep their values in an update
            own = ([name for name, _ in batch_fields(self.ctx.input_type)]
                   if self.ctx.input_type is not None and not isinstance(self.ctx.input_type, PickledBytesTypeInfo)
                   else _record_columns(records)[0])
            table = table.select([n for n in table.column_names if n in own])
        table = table.append_column(DELETE_COLUMN, pa.array([d for _, d in changes.values()], pa.bool_()))
        return [{"upsert": table, "subtask": self.ctx.subtask_index, "epoch": self.ctx.epoch}]

    def finish(self) -> list[dict]:
        """Write the staged records; returns the file handles the driver commits (upsert mode:
        the epoch's last changes per key)."""
        if self.sink.upsert:
            return self._upsert_changes()
        records = self.take()
        if not records:
            return []
        target, partition_by = self._target()
        table = records_to_table(records, target, self.ctx.input_type,
                                 f"{self.ctx.operator_name} {self.ctx.subtask_label}, table {self.sink.table_path}")
        missing = [c for c in partition_by if c not in table.column_names]
        if missing:
            raise ValueError(f"Delta sink: partition column(s) {missing} are not fields of the records "
                             f"({table.column_names})")
        fs, root = filesystem(self.sink.table_path)
        name = f"part-{self.ctx.epoch:06d}-{self.ctx.subtask_index:05d}-{uuid.uuid4().hex}.parquet"
        if partition_by:
            keys = list(zip(*(table.column(c).to_pylist() for c in partition_by)))
            groups: dict[tuple, list[int]] = {}
            for i, key in enumerate(keys):
                groups.setdefault(tuple(_partition_string(v) for v in key), []).append(i)
            data = table.drop_columns(partition_by)
            parts = [(values, data.take(pa.array(rows, pa.int64()))) for values, rows in groups.items()]
        else:
            parts = [((), table)]
        handles = []
        for values, part in parts:
            rel = (_partition_dir(partition_by, values) + "/" if partition_by else "") + name
            path = f"{root}/{rel}"
            fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
            pq.write_table(part, path, filesystem=fs)
            handles.append({
                "path": rel,            # as on disk: delta-rs URL-encodes it in the log
                "size": fs.get_file_info(path).size,
                "num_records": part.num_rows,
                "partition_values": dict(zip(partition_by, values)),
                "stats": file_stats(part),
                "modification_time": int(time.time() * 1000),
                "schema": table.schema,
                "partition_by": partition_by,
            })
        return handles


# ---- sink: commit (driver side) -------------------------------------------------------------

def _schema_of(handles: list[dict]) -> pa.Schema:
    schemas = []
    for h in handles:
        if not any(s.equals(h["schema"]) for s in schemas):
            schemas.append(h["schema"])
    if len(schemas) > 1:
        listing = "\n".join(f"  {s.to_string(show_schema_metadata=False)}".replace("\n", ", ") for s in schemas)
        raise TypeError(
            "Delta sink: the subtasks wrote records of different types, so no single table schema fits:\n"
            f"{listing}\nCreate the table first with the schema you want (deltalake.write_deltalake or "
            "DeltaTable.create); the sink then casts records to it.")
    return schemas[0]


class DeltaCommitter(Committer):
    """Driver side of the Delta sink: the files its writers staged since the last checkpoint, in
    one transaction carrying (app id, checkpoint id), so a replayed commit is a no-op. A sink
    that has received no rows by its first checkpoint makes its table empty, with the stream's
    declared schema."""

    at_checkpoint = True
    _warned = False

    def commit(self, committables: list, version: int) -> dict:
        from deltalake import DeltaTable
        table = self.sink.table_path
        if self.sink.upsert:
            changes = [c["upsert"] for handles in committables for c in handles]
            if changes:
                merge_upserts(table, changes, self.sink.upsert_keys, self.context.app_id, version,
                              partition_by=self.sink.partition_by, what=f"the upsert Delta sink to {table}")
                return {table: DeltaTable(table).version()}
        else:
            files = [handle for handles in committables for handle in handles]
            commit_sink_files(table, files, None, self.context.app_id, version)
            self.context.result.sink_files.setdefault(self.context.sink_id, []).extend(files)
            if files:
                return {table: DeltaTable(table).version()}
        if not isdir(join(table, "_delta_log")) and not self._create_empty():
            return {}
        return {table: DeltaTable(table).version() if DeltaTable.is_deltatable(table) else None}

    def _create_empty(self) -> bool:
        """No rows yet, no table: the table is made now, with the schema the stream declares, so
        that Spark and delta-rs read it (empty) instead of failing with "not found" (Spark writes a
        table for an empty DataFrame too). It carries no app transaction: it holds no output."""
        from deltalake import DeltaTable
        declared = self.context.input_type
        # A field declared PICKLED_BYTE_ARRAY is typed by its values (records_to_table): unknown yet.
        if declared is None or any(isinstance(t, PickledBytesTypeInfo) for _, t in batch_fields(declared)):
            if not self._warned:
                self._warned = True
                log.warning("The Delta sink to %s has received no rows yet and its stream does not declare "
                            "the type of every field, so its table is made only with the first rows: declare "
                            "the stream's type (output_type=...) to have it from the first checkpoint",
                            self.sink.table_path)
            return False
        schema = records_to_table([], None, declared, f"the Delta sink to {self.sink.table_path}").schema
        DeltaTable.create(self.sink.table_path, schema, mode="ignore",
                          partition_by=list(self.sink.partition_by or ()) or None)
        return True

    @staticmethod
    def committed_output(sink, app_id: str) -> Optional[str]:
        return sink.table_path if committed_version(sink.table_path, app_id) is not None else None

    @staticmethod
    def output_location(sink) -> tuple[str, str]:
        return sink.table_path, "the Delta sink's table path (sink_to / DeltaSink.for_row_data)"

    @staticmethod
    def check(sink, name: str) -> None:
        """An upsert sink's key columns must be columns of its table, if the table exists."""
        if not sink.upsert:
            return
        from deltalake import DeltaTable
        if not DeltaTable.is_deltatable(sink.table_path):
            return
        columns = _arrow_schema(DeltaTable(sink.table_path)).names
        missing = [k for k in sink.upsert_keys if k not in columns]
        if missing:
            raise ValueError(
                f"the sink '{name}' upserts by key column(s) {missing} that its table {sink.table_path} does "
                f"not have (its columns are {columns}): upsert by columns the table has "
                f"(DeltaSink...with_upsert_keys(...)), or write to another table")


def committed_version(table_path: str, app_id: str) -> Optional[int]:
    """The last version (checkpoint id) ``app_id`` committed to the table; None if it never did."""
    from deltalake import DeltaTable
    if not DeltaTable.is_deltatable(table_path):
        return None
    return DeltaTable(table_path).transaction_version(app_id)


def commit_sink_files(table_path: str, handles: list, schema: Optional[pa.Schema] = None,
                      app_id: str = "sluice", version: int = 0) -> bool:
    """Commit an epoch's staged files in ONE Delta transaction carrying (app_id, version).

    Creates the table if missing. A no-op (returns False) when there is nothing to commit or
    the table's transaction version for ``app_id`` is already ``>= version``, so a replayed
    commit does nothing; returns True when it committed.
    """
    from deltalake import CommitProperties, DeltaTable, Schema, Transaction
    from deltalake.transaction import AddAction, create_table_with_add_actions
    handles = list(handles or ())
    if not handles:
        return False
    actions = [AddAction(h["path"], int(h["size"]), dict(h.get("partition_values") or {}),
                         int(h.get("modification_time") or time.time() * 1000), True,
                         h.get("stats") or json.dumps({"numRecords": h["num_records"]}))
               for h in handles]
    properties = CommitProperties(app_transactions=[Transaction(app_id, version)])
    partition_by = list(handles[0].get("partition_by") or ())
    if not DeltaTable.is_deltatable(table_path):
        schema = schema if schema is not None else _schema_of(handles)
        try:
            create_table_with_add_actions(table_path, Schema.from_arrow(schema), actions, mode="error",
                                          partition_by=partition_by or None, commit_properties=properties)
            return True
        except Exception:
            if not DeltaTable.is_deltatable(table_path):
                raise
            # Another writer created the table meanwhile: append to it below.
    dt = DeltaTable(table_path)
    done = dt.transaction_version(app_id)
    if done is not None and done >= version:
        return False
    dt.create_write_transaction(actions, "append", _arrow_schema(dt),
                                partition_by=list(dt.metadata().partition_columns) or None,
                                commit_properties=properties)
    return True


# ---- upsert sink: merge (driver side) ----------------------------------------------------------

def _quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def last_changes(changes: list, keys) -> pa.Table:
    """The changes of several subtasks and epochs (tables with DELETE_COLUMN, in epoch then
    subtask order) reduced to each key's last one."""
    try:
        table = pa.concat_tables(changes, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise TypeError(f"Delta sink: the subtasks' upserts have different types ({e}); declare the "
                        "stream's output_type, or create the table first with the schema you want") from None
    if len(changes) == 1:
        return table        # one subtask's epoch: one change per key already
    order = "__sluice_order"
    table = table.append_column(order, pa.array(range(table.num_rows), pa.int64()))
    last = table.group_by(list(keys), use_threads=False).aggregate([(order, "max")])
    kept = last.column(f"{order}_max")
    return table.take(pc.take(kept, pc.sort_indices(kept))).drop_columns([order])


def merge_upserts(table_path: str, changes: list, keys, app_id: str, version: int,
                  partition_by=None, what: str = "Delta sink") -> bool:
    """Merge an epoch's (or a checkpoint's) upserts into the table in ONE Delta commit carrying the
    app transaction (app_id, version): each key's last change inserts or updates its row, or
    deletes it (DELETE_COLUMN). Creates the table if missing. A no-op (False) when the table's
    transaction version for ``app_id`` is already ``>= version``, so a replayed commit does nothing."""
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
    from deltalake.exceptions import CommitFailedError
    source = last_changes(changes, keys)
    properties = CommitProperties(app_transactions=[Transaction(app_id, version)])
    if not DeltaTable.is_deltatable(table_path):
        rows = source.filter(pc.invert(source.column(DELETE_COLUMN))).drop_columns([DELETE_COLUMN])
        try:
            write_deltalake(table_path, rows, mode="error", partition_by=list(partition_by or ()) or None,
                            commit_properties=properties)
            return True
        except Exception:
            if not DeltaTable.is_deltatable(table_path):
                raise
            # Another writer created the table meanwhile: merge into it below.
    for attempt in range(MERGE_ATTEMPTS):
        try:
            return _merge(DeltaTable(table_path), source, keys, properties, app_id, version, what)
        except CommitFailedError:
            # Another writer committed since the merge read the table (a `sluice maintain`
            # compaction rewriting its files): delta-rs refuses the commit; read it again and
            # merge again, unless this was the last try (the checkpoint then fails and the job
            # replays from the one before).
            if attempt == MERGE_ATTEMPTS - 1:
                raise
    return False


MERGE_ATTEMPTS = 3


def _merge(dt, source: pa.Table, keys, properties, app_id: str, version: int, what: str) -> bool:
    done = dt.transaction_version(app_id)
    if done is not None and done >= version:
        return False
    target = _arrow_schema(dt)
    missing = [k for k in keys if k not in target.names]
    if missing:
        raise ValueError(f"{what}: the key column(s) {missing} are not columns of the table "
                         f"({target.names}); upsert by columns it has, or write to another table")
    columns = [f.name for f in target if f.name in source.column_names]
    for name in columns:        # the table's types (a table made before the job, e.g. int32 counts)
        i = source.column_names.index(name)
        if source.schema.field(i).type != target.field(name).type:
            source = source.set_column(i, name, source.column(i).cast(target.field(name).type))
    values = {_quoted(c): f"s.{_quoted(c)}" for c in columns}
    delete = f"s.{_quoted(DELETE_COLUMN)}"
    (dt.merge(source, " AND ".join(f"t.{_quoted(k)} = s.{_quoted(k)}" for k in keys),
              source_alias="s", target_alias="t", commit_properties=properties)
       .when_matched_delete(delete)
       .when_matched_update(values, f"NOT {delete}")
       .when_not_matched_insert(values, f"NOT {delete}")
       .execute())
    return True
