"""Delta table source and sink descriptors (read and written through delta-rs)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Optional

from runtime.datastream.connectors.base import Boundedness, Sink, Source
from runtime.datastream.functions import KeySelector


@dataclass(frozen=True)
class DeltaSource(Source):
    """Reads a Delta table's rows; continuous mode also reads versions committed later;
    ``for_change_data_feed`` reads its change data feed instead."""

    default_name: ClassVar[str] = "Delta Source"

    table_path: str
    continuous: bool = False
    starting_version: Optional[int] = None
    columns: Optional[tuple] = None
    change_data_feed: bool = False          # for_change_data_feed: the table's change rows

    @property
    def locations(self) -> tuple:
        return (self.table_path,)

    @staticmethod
    def for_bounded_row_data(table_path: str, columns=None, starting_version: Optional[int] = None) -> "DeltaSource":
        """The table's rows at ``starting_version`` (None: the latest as the run starts). A run
        restored from a checkpoint reads as Structured Streaming's ``availableNow``: the rows the
        versions after its checkpointed one added, up to the latest as it starts, so a job run on
        each new version of the table (``JobDeployment(schedule="on-inputs")``) reads each row once.
        Those versions must append (a DELETE, UPDATE or MERGE fails naming the fix)."""
        return DeltaSource(_check_path(table_path), False, starting_version,
                           tuple(columns) if columns else None)

    @staticmethod
    def for_continuous_row_data(table_path: str, columns=None, starting_version: Optional[int] = None) -> "DeltaSource":
        return DeltaSource(_check_path(table_path), True, starting_version,
                           tuple(columns) if columns else None)

    @staticmethod
    def for_change_data_feed(table_path: str, starting_version: Optional[int] = None, columns=None,
                             continuous: bool = True) -> "DeltaSource":
        """The change data feed of a table with ``delta.enableChangeDataFeed``, as Spark's
        ``readChangeFeed``: each record is a row of the table with ``_change_type`` (insert,
        update_preimage, update_postimage, delete), ``_commit_version`` and ``_commit_timestamp``
        (UTC), from ``starting_version`` on (None: the latest version's rows as inserts, then the
        changes after it, as Spark's streaming change feed). Continuous by default (the commits
        made while the job runs too); ``continuous=False`` reads up to the version that was the
        latest when the run started (a run restored from a checkpoint: from its position on).
        ``columns`` may name the three change columns as well."""
        if starting_version is not None and (isinstance(starting_version, bool) or not isinstance(
                starting_version, int) or starting_version < 0):
            raise ValueError(f"DeltaSource.for_change_data_feed: starting_version is a table version "
                             f"(an int >= 0) or None, got {starting_version!r}")
        return DeltaSource(_check_path(table_path), bool(continuous), starting_version,
                           tuple(columns) if columns else None, True)

    @property
    def boundedness(self) -> Boundedness:
        return Boundedness.CONTINUOUS_UNBOUNDED if self.continuous else Boundedness.BOUNDED


@dataclass(frozen=True)
class TableMaintenance:
    """How ``sluice maintain`` and the ``sluice_maintenance`` DAG keep a sink's Delta table small
    (Delta's OPTIMIZE and VACUUM, through delta-rs). ``None`` turns a part off.

    compact_min_files       compact a partition once it has more files than this (default 50)
    target_file_size        bytes a compacted file aims at (default 128 MiB; None: Delta's 100 MB)
    vacuum_retention_hours  delete files the table stopped listing this many hours ago
                            (default 168, Delta's); never files it never listed
    """

    compact_min_files: Optional[int] = 50
    target_file_size: Optional[int] = 128 * 1024 * 1024
    vacuum_retention_hours: Optional[int] = 168

    def __post_init__(self):
        for name, least in (("compact_min_files", 1), ("target_file_size", 1), ("vacuum_retention_hours", 0)):
            value = getattr(self, name)
            if value is None:
                continue
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or value != value or not float(value).is_integer() or value < least:
                unit = " (hours)" if name == "vacuum_retention_hours" else " (bytes)" if name == "target_file_size" else ""
                raise ValueError(f"TableMaintenance({name}={value!r}): must be a whole number{unit} of at least "
                                 f"{least}, or None to turn that part off")
            object.__setattr__(self, name, int(value))


SINK_WRITERS = ("delta-rs", "delta-spark")      # DeltaSink.with_writer's choices


@dataclass(frozen=True)
class DeltaSink(Sink):
    """Appends records to a Delta table; with checkpoints, exactly once per checkpoint. With
    ``with_upsert_keys``, keeps one row per key instead (Flink's upsert sinks)."""

    default_name: ClassVar[str] = "Delta Sink"

    table_path: str
    partition_by: Optional[tuple] = None
    maintenance: Optional[TableMaintenance] = None      # with_maintenance: what `sluice maintain` does
    upsert_keys: Optional[tuple] = None                 # with_upsert_keys: the key columns
    writer: Optional[str] = None                        # with_writer: "delta-rs", "delta-spark", None: per table

    def with_upsert_keys(self, *keys) -> "DeltaSink":
        """This sink in upsert mode: the table keeps ONE row per value of the key columns.

            counts.sink_to(DeltaSink.for_row_data("warehouse/word-counts").with_upsert_keys("word"))

        The records are a changelog, as Flink's upsert sinks read one: a Row whose kind is
        INSERT or UPDATE_AFTER (``Row.get_row_kind()``) inserts or replaces its key's row, a
        DELETE removes it, an UPDATE_BEFORE is ignored. Per checkpoint the last change of each key
        is merged into the table in one Delta commit carrying the sink's app transaction, so a
        replayed commit is a no-op (exactly once). ``sink_to`` keys the stream by the key columns
        before the sink (as Flink's upsert sinks shuffle by their primary key), so each key's
        changes reach one subtask, in order. ``keys``: column names, or one list of them."""
        if len(keys) == 1 and isinstance(keys[0], (list, tuple)):
            keys = tuple(keys[0])
        if not keys:
            raise ValueError("DeltaSink.with_upsert_keys(): name at least one key column, e.g. "
                             "with_upsert_keys(\"word\")")
        bad = [k for k in keys if not isinstance(k, str) or not k.strip()]
        if bad:
            raise TypeError(f"DeltaSink.with_upsert_keys{tuple(keys)!r}: key columns are column names "
                            f"(non-empty strings), got {bad[0]!r}")
        if len(set(keys)) != len(keys):
            raise ValueError(f"DeltaSink.with_upsert_keys{tuple(keys)!r}: a key column is named twice")
        return replace(self, upsert_keys=tuple(keys))

    def with_writer(self, writer: Optional[str]) -> "DeltaSink":
        """This sink committing with ``writer``: "delta-rs" or "delta-spark" (the job's Spark session);
        None (the default) chooses per table from its protocol: delta-rs where it writes the
        table's features, delta-spark where the table needs one delta-rs lacks (row tracking,
        in-commit timestamps, liquid clustering, UniForm). Both record the same app transaction, so
        a table can change writers between runs without a checkpoint committed twice."""
        if writer is not None and writer not in SINK_WRITERS:
            raise ValueError(f"DeltaSink.with_writer({writer!r}): the writer is "
                             f"{' or '.join(map(repr, SINK_WRITERS))}, or None to choose per table from its protocol")
        return replace(self, writer=writer)

    @property
    def upsert(self) -> bool:
        return bool(self.upsert_keys)

    @staticmethod
    def for_row_data(table_path: str, partition_by=None) -> "DeltaSink":
        return DeltaSink(_check_path(table_path), tuple(partition_by) if partition_by else None)

    def with_maintenance(self, policy: Optional[TableMaintenance] = None) -> "DeltaSink":
        """This sink with a maintenance policy for its table (default: ``TableMaintenance()``):
        ``sluice maintain`` and the ``sluice_maintenance`` DAG compact and vacuum it as it says."""
        policy = TableMaintenance() if policy is None else policy
        if not isinstance(policy, TableMaintenance):
            raise TypeError(f"DeltaSink.with_maintenance(policy={policy!r}): the policy must be a "
                            f"TableMaintenance(compact_min_files=..., target_file_size=..., "
                            f"vacuum_retention_hours=...)")
        return replace(self, maintenance=policy)


class UpsertKeySelector(KeySelector):
    """The key an upsert sink keys its input by (``sink_to`` adds the ``key_by``): the key
    columns' values as a tuple. A record without a key field, or with a null key, fails naming
    the sink, the field and the fix."""

    def __init__(self, keys: tuple, table_path: str):
        self.keys = tuple(keys)
        self.table_path = table_path

    def get_key(self, value):
        return tuple(upsert_key_values(value, self.keys, self.table_path))

    def __eq__(self, other):
        return isinstance(other, UpsertKeySelector) and (other.keys, other.table_path) == (self.keys, self.table_path)

    def __hash__(self):
        return hash(("UpsertKeySelector", self.keys, self.table_path))


def upsert_key_values(value, keys: tuple, table_path: str) -> list:
    """The values of the key columns ``keys`` of a record (a named Row, a dict, a tuple's f0..);
    a missing field or a null value raises a ValueError naming the sink and the fix."""
    out = []
    for k in keys:
        try:
            if isinstance(value, dict):
                v = value[k]
            elif getattr(value, "_field_names", None) is not None:
                v = value[value._field_names.index(k)]
            elif isinstance(value, tuple) and k[:1] == "f" and k[1:].isdigit():
                v = value[int(k[1:])]
            else:
                raise KeyError(k)
        except (KeyError, ValueError, IndexError):
            raise ValueError(
                f"the upsert Delta sink to {table_path} (keys {list(keys)}) got a record without the key "
                f"field {k!r}: {value!r}. Give every record the key columns (a Row with field {k!r}, "
                f"declared in the stream's output_type), or change the sink's with_upsert_keys(...)") from None
        if v is None:
            raise ValueError(
                f"the upsert Delta sink to {table_path} (keys {list(keys)}) got a record whose key field "
                f"{k!r} is null: {value!r}. A key column cannot be null (the row could never be updated "
                f"or deleted): filter such records out or give them a key before the sink")
        out.append(v)
    return out


def _check_path(path) -> str:
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"a Delta table needs a non-empty path or URI, got {path!r}")
    return path
