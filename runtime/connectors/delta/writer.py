"""The Delta sink's writer (task side): stages this subtask's records of an epoch as Parquet files
(one per partition value with ``partition_by``) in the table's folder; the file handles are its
committable, which the driver's ``DeltaCommitter`` commits at the checkpoint.

The records take the stream's declared type (``output_type``/``type_info``), converted by the
engine's one conversion (``runtime.common.arrow.records_to_table``): the table's schema comes from
it, and a record that does not fit fails naming the sink, the record and the column; a stream
with no declared type (or a field declared PICKLED_BYTE_ARRAY) is typed by its values, batch by
batch. An existing table's schema wins: the records are cast to it.

Upsert mode (``DeltaSink.with_upsert_keys``): the writer keeps each key's last change of the epoch
(a changelog as Flink's upsert sinks read it: INSERT/UPDATE_AFTER upsert, DELETE deletes,
UPDATE_BEFORE ignored) and hands them to the driver as an Arrow table with a ``_sluice_delete``
column; the committer merges them into the table.
"""
from __future__ import annotations

import time
import uuid
from typing import Optional

import pyarrow as pa
import pyarrow.parquet as pq

from runtime.common.arrow import record_column_names
from runtime.common.arrow import records_to_table as records_as_arrow
from runtime.common.types import Row, RowKind
from runtime.connectors.delta.column_mapping import column_mapping, physical_name, physical_table
from runtime.connectors.delta.table import (
    arrow_schema, current_table, metadata_of, partition_dir, partition_string)
from runtime.datastream.connectors.delta import upsert_key_values
from runtime.storage.delta_files import file_stats
from runtime.storage.filesystems import filesystem
from runtime.task.sink_writer import BufferingSinkWriter

DELETE_COLUMN = "_sluice_delete"     # an upsert committable's column: the change deletes its key


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
    table = records_as_arrow(records, type_info, what)
    names, arrays = table.column_names, [c.combine_chunks() for c in table.columns]
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


def insert_kind(record):
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

    def _target(self) -> tuple[Optional[pa.Schema], list[str], dict]:
        """The table's schema (None: no table yet), its partition columns and its column mapping
        (``column_mapping``: {} when its files hold the logical names)."""
        with current_table(self.sink.table_path) as dt:
            if dt is None:
                return None, list(self.sink.partition_by or ()), {}
            columns = list(dt.metadata().partition_columns)
            schema, mapping = arrow_schema(dt), column_mapping(metadata_of(dt))
        wanted = list(self.sink.partition_by or ())
        if wanted and wanted != columns:
            raise ValueError(f"Delta sink: {self.sink.table_path} is partitioned by {columns}, not {wanted}")
        return schema, columns, mapping

    def _upsert_changes(self) -> list[dict]:
        """Upsert mode: the epoch's last change per key as an Arrow table (with DELETE_COLUMN),
        typed as the stream declares and cast to the table's schema when it exists."""
        changes, self.changes = self.changes, {}
        if not changes:
            return []
        target, _, _ = self._target()
        if target is not None:
            missing = [k for k in self.sink.upsert_keys if k not in target.names]
            if missing:
                raise ValueError(f"{self.ctx.operator_name}: the upsert Delta sink's key column(s) {missing} "
                                 f"are not columns of {self.sink.table_path} ({target.names})")
        records = [insert_kind(record) for record, _ in changes.values()]
        table = records_to_table(records, target, self.ctx.input_type,
                                 f"{self.ctx.operator_name} {self.ctx.subtask_label}, table {self.sink.table_path}")
        if target is not None:      # the table's other columns keep their values in an update
            own = record_column_names(records, self.ctx.input_type)
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
        target, partition_by, mapping = self._target()
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
                groups.setdefault(tuple(partition_string(v) for v in key), []).append(i)
            data = table.drop_columns(partition_by)
            parts = [(values, data.take(pa.array(rows, pa.int64()))) for values, rows in groups.items()]
        else:
            parts = [((), table)]
        # A column-mapped table's files, folders and partition values name the physical columns.
        physical_partitions = [physical_name(mapping.get(c), c) for c in partition_by]
        handles = []
        for values, part in parts:
            part = physical_table(part, mapping)
            rel = (partition_dir(physical_partitions, values) + "/" if partition_by else "") + name
            path = f"{root}/{rel}"
            fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
            pq.write_table(part, path, filesystem=fs)
            handles.append({
                "path": rel,            # as on disk: delta-rs URL-encodes it in the log
                "size": fs.get_file_info(path).size,
                "num_records": part.num_rows,
                "partition_values": dict(zip(physical_partitions, values)),
                "stats": file_stats(part),
                "modification_time": int(time.time() * 1000),
                "schema": table.schema,
                "partition_by": partition_by,
            })
        return handles
