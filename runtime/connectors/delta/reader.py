"""The Delta source's reader (task side): the rows [start, end) of a data file, by physical row
position; the rows its deletion vector deletes skipped, columns found by their physical names
under column mapping, partition values from the split, and a change feed's ``_change_type``,
``_commit_version`` and ``_commit_timestamp``. Records are ``Row``s named by the table's columns
(or only the source's ``columns``).

Data files are read with pyarrow's own file systems, not delta-rs's pyarrow dataset: scanning
through delta-rs's filesystem handler can abort the interpreter at exit (delta-rs issue #2184,
"terminate called without an active exception")."""
from __future__ import annotations

from typing import Iterator, Optional

import pyarrow as pa
import pyarrow.parquet as pq

from runtime.common.types import make_rows
from runtime.connectors.base import SourceReader
from runtime.connectors.delta.column_mapping import column_mapping, file_column, physical_name
from runtime.connectors.delta.deletion_vectors import deleted_rows, dv_key
from runtime.connectors.delta.table import arrow_schema, data_path, metadata_of, open_table
from runtime.storage.filesystems import filesystem

CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


class DeltaSourceReader(SourceReader):
    def __init__(self, source, ctx):
        super().__init__(source, ctx)
        self._fs, self._root = filesystem(source.table_path)
        self._schemas: dict = {}
        self._deleted: dict = {}        # deletion vector -> the sorted rows it deletes (a few kept)

    def _schema(self, version) -> tuple[pa.Schema, list, dict]:
        if version not in self._schemas:
            dt = open_table(self.source.table_path, version)
            self._schemas[version] = (arrow_schema(dt), list(dt.metadata().partition_columns),
                                      column_mapping(metadata_of(dt)))
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
        pf = pq.ParquetFile(data_path(self._root, state.get("path", split.split_id)), filesystem=self._fs)
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
                        columns.append(partition_column(value, field.type, n))
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


def partition_column(value, type_: pa.DataType, length: int) -> pa.Array:
    if value is None:
        return pa.nulls(length, type_)
    if isinstance(value, str) and not (pa.types.is_string(type_) or pa.types.is_large_string(type_)):
        scalar = pa.array([value]).cast(type_)[0]
    else:
        scalar = pa.scalar(value, type_)
    return pa.array([scalar.as_py()] * length, type_)
