"""The Delta sink's committer (driver side): at each checkpoint, the files the writers staged since
the last one in ONE Delta transaction carrying the app transaction (app id, checkpoint id), so a
replayed commit is a no-op (``commit_sink_files``); an upsert sink's changes reduced to each key's
last one and applied with delta-rs's MERGE in one commit carrying the same app transaction
(``merge_upserts``). A table delta-rs cannot write (row tracking, in-commit timestamps, liquid
clustering, UniForm) is committed through delta-spark with the same app transaction
(``spark_committer``). ``DeltaCommitter.check`` runs before the job starts."""
from __future__ import annotations

import json
import logging
import time
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc

from runtime.common.arrow import batch_fields
from runtime.common.typeinfo import PickledBytesTypeInfo
from runtime.connectors.base import Committer
from runtime.connectors.delta.schema_fit import check_stream_fits
from runtime.connectors.delta.table import arrow_schema, current_table, protocol_of
from runtime.connectors.delta.spark_committer import (
    DELTA_SPARK, WriterChoice, choose_writer, spark_commit_files, spark_merge_upserts)
from runtime.connectors.delta.writer import DELETE_COLUMN, records_to_table
from runtime.storage.delta_log import DeltaLog

log = logging.getLogger(__name__)


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
    _choice: Optional[WriterChoice] = None

    def writer(self) -> WriterChoice:
        """The writer of this commit, from the table's protocol as it is now (a feature turned on
        while the job runs moves the table to delta-spark), logged when it changes."""
        try:
            with current_table(self.sink.table_path) as dt:
                protocol = protocol_of(dt) if dt is not None else None
        except Exception:       # delta-rs cannot open it (a reader feature it lacks): the log says
            log_ = DeltaLog(self.sink.table_path)
            protocol = log_.protocol_and_metadata()[0] if log_.exists() else None
        choice = choose_writer(self.sink.table_path, protocol, self.sink.writer)
        if choice != self._choice:
            self._choice = choice
            log.info("The Delta sink to %s commits with %s: %s", self.sink.table_path, choice.writer, choice.reason)
        return choice

    def runs_spark_jobs(self) -> bool:
        return self.writer().writer == DELTA_SPARK

    def _version(self) -> dict:
        """The table's version after this commit, by its kept handle (``current_table``)."""
        with current_table(self.sink.table_path) as dt:
            return {self.sink.table_path: dt.version()} if dt is not None else {}

    def commit(self, committables: list, version: int) -> dict:
        table = self.sink.table_path
        spark = self.writer().writer == DELTA_SPARK
        if self.sink.upsert:
            changes = [c["upsert"] for handles in committables for c in handles]
            if changes:
                if spark and DeltaLog(table).exists():
                    spark_merge_upserts(table, last_changes(changes, self.sink.upsert_keys), self.sink.upsert_keys,
                                        self.context.app_id, version, DELETE_COLUMN)
                else:
                    merge_upserts(table, changes, self.sink.upsert_keys, self.context.app_id, version,
                                  partition_by=self.sink.partition_by, what=f"the upsert Delta sink to {table}")
                return self._version()
        else:
            files = [handle for handles in committables for handle in handles]
            committed = None
            if spark and files:
                spark_commit_files(table, files, self.context.app_id, version)
            elif files:
                with current_table(table) as dt:
                    before = dt.version() if dt is not None else -1
                    commit_sink_files(table, files, None, self.context.app_id, version, dt)
                # Its version, from the commit after the handle's (no listing of the log).
                committed = DeltaLog(table).version_with_transaction(self.context.app_id, version, before)
            self.context.result.sink_files.setdefault(self.context.sink_id, []).extend(files)
            if committed is not None:
                return {table: committed}
            if files:
                return self._version()
        if not DeltaLog(table).exists() and not self._create_empty():
            return {}
        return self._version() or {table: None}

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
    def check(sink, name: str, input_type=None) -> None:
        """A writer must write the table (its protocol's features; ``with_writer``), the stream's
        declared type ``input_type`` must fit the table's schema (``schema_fit``), and an upsert
        sink's key columns must be columns of its table, if the table exists."""
        if not DeltaLog(sink.table_path).exists():
            return
        try:
            protocol, metadata = DeltaLog(sink.table_path).protocol_and_metadata()
            choose_writer(sink.table_path, protocol, sink.writer, metadata)
        except ValueError as e:
            raise ValueError(f"the sink '{name}': {e}") from None
        from deltalake import Schema
        schema = pa.schema(Schema.from_json(metadata.schema_string).to_arrow())
        if not sink.upsert:
            check_stream_fits(sink.table_path, schema, input_type, f"the sink '{name}'")
            return
        columns = schema.names
        missing = [k for k in sink.upsert_keys if k not in columns]
        if missing:
            raise ValueError(
                f"the sink '{name}' upserts by key column(s) {missing} that its table {sink.table_path} does "
                f"not have (its columns are {columns}): upsert by columns the table has "
                f"(DeltaSink...with_upsert_keys(...)), or write to another table")
        check_stream_fits(sink.table_path, schema, input_type, f"the sink '{name}'")


def committed_version(table_path: str, app_id: str) -> Optional[int]:
    """The last version (checkpoint id) ``app_id`` committed to the table; None if it never did."""
    from deltalake import DeltaTable
    if not DeltaTable.is_deltatable(table_path):
        return None
    return DeltaTable(table_path).transaction_version(app_id)


def commit_sink_files(table_path: str, handles: list, schema: Optional[pa.Schema] = None,
                      app_id: str = "sluice", version: int = 0, table=None) -> bool:
    """Commit an epoch's staged files in ONE Delta transaction carrying (app_id, version).

    Creates the table if missing. A no-op (returns False) when there is nothing to commit or
    the table's transaction version for ``app_id`` is already ``>= version``, so a replayed
    commit does nothing; returns True when it committed. ``table``: the table's delta-rs handle
    as it is now (``current_table``), when the caller holds one.
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
    if table is None and not DeltaTable.is_deltatable(table_path):
        schema = schema if schema is not None else _schema_of(handles)
        try:
            create_table_with_add_actions(table_path, Schema.from_arrow(schema), actions, mode="error",
                                          partition_by=partition_by or None, commit_properties=properties)
            return True
        except Exception:
            if not DeltaTable.is_deltatable(table_path):
                raise
            # Another writer created the table meanwhile: append to it below.
    dt = table if table is not None else DeltaTable(table_path)
    done = dt.transaction_version(app_id)
    if done is not None and done >= version:
        return False
    dt.create_write_transaction(actions, "append", arrow_schema(dt),
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
            with current_table(table_path) as dt:
                return _merge(dt, source, keys, properties, app_id, version, what)
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
    target = arrow_schema(dt)
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
