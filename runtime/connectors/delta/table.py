"""What the Delta source and sink share of a table: opening it (its reader protocol checked), the
process's kept handle on it (``current_table``), its Arrow schema, where its data files live and
how partition values are written."""
from __future__ import annotations

import datetime
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Iterator, Optional
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.fs as pafs

from runtime.connectors.delta.protocol import check_reader_protocol
from runtime.storage.delta_log import DeltaLog, Metadata, Protocol

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def data_path(root: str, log_path: str) -> str:
    """Where the file an add action names lives (log paths are relative, URL-encoded)."""
    if "://" in log_path:
        raise ValueError(f"Delta file {log_path!r} has an absolute URI; Sluice reads relative paths only")
    return root + "/" + unquote(log_path)


def open_table(table_path: str, version: Optional[int] = None, what: str = "Delta source"):
    """delta-rs's handle on the table (at ``version``), once its log says Sluice reads it."""
    from deltalake import DeltaTable
    if not DeltaTable.is_deltatable(table_path):
        raise FileNotFoundError(
            f"{what}: there is no Delta table at {table_path} (no _delta_log). Create it first, "
            "e.g. with deltalake.write_deltalake or a job that sinks to it with sink_to().")
    dt = DeltaTable(table_path) if version is None else DeltaTable(table_path, version=version)
    protocol, _ = DeltaLog(table_path).protocol_and_metadata(dt.version())
    check_reader_protocol(protocol, table_path, what)
    return dt


_HANDLES_KEPT = 16
_handles: "OrderedDict[str, tuple]" = OrderedDict()    # path -> (its lock, its handle, _commit_stamp)
_handles_lock = threading.Lock()


def _commit_stamp(table_path: str, version: int) -> Optional[tuple]:
    """Size and time of a commit's file: a table deleted and made anew at the same path has
    another file at the version a kept handle read (or none), as Delta's DeltaLog cache checks."""
    log = DeltaLog(table_path)
    info = log.fs.get_file_info(log.commit_path(version))
    return (info.size, info.mtime_ns) if info.type == pafs.FileType.File else None


@contextmanager
def current_table(table_path: str) -> Iterator[Optional[Any]]:
    """delta-rs's handle on the table as it is now (None: no table yet), held by the caller alone
    for the ``with``. A sink's writers and committer see the table every epoch: opening it reads
    the log's last checkpoint and every commit since (60-120 ms at a few hundred versions, more
    as they grow), where the process's handle, kept and brought up to date, reads only the
    commits since its last use (others' included). A handle whose table was made anew, or that
    cannot be brought up to date, or whose user failed, is opened anew."""
    from deltalake import DeltaTable
    with _handles_lock:
        lock, _, _ = _handles.setdefault(table_path, (threading.Lock(), None, None))
        _handles.move_to_end(table_path)
        while len(_handles) > _HANDLES_KEPT:
            _handles.popitem(last=False)
    with lock:
        _, dt, stamp = _handles.get(table_path, (lock, None, None))
        if dt is not None:
            try:
                if _commit_stamp(table_path, dt.version()) != stamp:
                    dt = None
                else:
                    dt.update_incremental()
            except Exception:
                dt = None
        if dt is None and DeltaTable.is_deltatable(table_path):
            dt = DeltaTable(table_path)
        kept = None
        try:
            yield dt
            kept = dt
        finally:
            with _handles_lock:
                if table_path in _handles:
                    _handles[table_path] = (lock, kept, _commit_stamp(table_path, kept.version()) if kept else None)


def protocol_of(dt) -> Protocol:
    """A delta-rs table's protocol as its log holds it."""
    p = dt.protocol()
    return Protocol(int(p.min_reader_version), int(p.min_writer_version),
                    frozenset(p.reader_features or ()), frozenset(p.writer_features or ()))


def arrow_schema(dt) -> pa.Schema:
    """A delta-rs table's schema as Arrow (logical column names)."""
    return pa.schema(dt.schema().to_arrow())


def metadata_of(dt) -> Metadata:
    """A delta-rs table's metadata as its log holds it (schema JSON with each field's column
    mapping, partition columns, properties)."""
    metadata = dt.metadata()
    return Metadata(dt.schema().to_json(), tuple(metadata.partition_columns), dict(metadata.configuration or {}))


def partition_string(value: Any) -> Optional[str]:
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


def partition_dir(columns: list, values: tuple) -> str:
    """The Hive-style folder of a partition (``col=value/..``) under the table."""
    return "/".join(f"{quote(c, safe='')}=" + (HIVE_NULL if v is None else quote(v, safe=''))
                    for c, v in zip(columns, values))
