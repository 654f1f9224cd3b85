"""Delta tables: a source whose splits are data files, and a sink that stages files per epoch and
commits them once per checkpoint. One module per concept:

- ``enumerator``: the source's splits (appends, and the change data feed) on the driver;
- ``reader``: a split's rows on a task;
- ``writer``: the sink's staged Parquet files (or an upsert sink's last changes) on a task;
- ``committer``: the checkpoint's commit on the driver (appends, and MERGE for upserts), exactly
  once through Delta's app transactions, and the sink's checks at job start (``schema_fit``: the
  stream's type against the table's schema);
- ``spark_committer``: the same commits through delta-spark, for tables delta-rs cannot write
  (``protocol.delta_rs_can_write`` says which);
- ``deletion_vectors``, ``column_mapping``, ``protocol``: the table features they apply;
- ``table``: what source and sink share of a table.

The table's log (commits, checkpoints of every kind, protocol, commit timestamps) is read by
``runtime.storage.delta_log``, the one reader of it for the connectors and for maintenance.
The descriptors users build (``DeltaSource``, ``DeltaSink``) live in
``runtime.datastream.connectors.delta``.
"""
from runtime.connectors.delta.committer import (
    MERGE_ATTEMPTS, DeltaCommitter, commit_sink_files, committed_version, last_changes, merge_upserts)
from runtime.connectors.delta.enumerator import TABLE_KEY, DeltaSourceEnumerator
from runtime.connectors.delta.reader import CHANGE_COLUMNS, DeltaSourceReader
from runtime.connectors.delta.writer import DELETE_COLUMN, DeltaSinkWriter, records_to_table

__all__ = ["DeltaSourceEnumerator", "DeltaSourceReader", "DeltaSinkWriter", "DeltaCommitter",
           "commit_sink_files", "committed_version", "merge_upserts", "last_changes", "records_to_table",
           "DELETE_COLUMN", "CHANGE_COLUMNS", "TABLE_KEY", "MERGE_ATTEMPTS"]
