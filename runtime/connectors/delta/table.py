"""What the Delta source and sink share of a table: opening it (its reader protocol checked),
its Arrow schema, where its data files live and how partition values are written."""
from __future__ import annotations

import datetime
from typing import Any, Optional
from urllib.parse import quote, unquote

import pyarrow as pa

from runtime.connectors.delta.protocol import check_reader_protocol
from runtime.storage.delta_log import DeltaLog, Metadata

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
