"""Delta table source and sink descriptors (read and written through delta-rs)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Optional

from runtime.datastream.connectors.base import Boundedness, Sink, Source


@dataclass(frozen=True)
class DeltaSource(Source):
    """Reads a Delta table's rows; continuous mode also reads versions committed later."""

    default_name: ClassVar[str] = "Delta Source"

    table_path: str
    continuous: bool = False
    starting_version: Optional[int] = None
    columns: Optional[tuple] = None

    @staticmethod
    def for_bounded_row_data(table_path: str, columns=None, starting_version: Optional[int] = None) -> "DeltaSource":
        return DeltaSource(_check_path(table_path), False, starting_version,
                           tuple(columns) if columns else None)

    @staticmethod
    def for_continuous_row_data(table_path: str, columns=None, starting_version: Optional[int] = None) -> "DeltaSource":
        return DeltaSource(_check_path(table_path), True, starting_version,
                           tuple(columns) if columns else None)

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


@dataclass(frozen=True)
class DeltaSink(Sink):
    """Appends records to a Delta table; with checkpoints, exactly once per checkpoint."""

    default_name: ClassVar[str] = "Delta Sink"

    table_path: str
    partition_by: Optional[tuple] = None
    maintenance: Optional[TableMaintenance] = None      # with_maintenance: what `sluice maintain` does

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


def _check_path(path) -> str:
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"a Delta table needs a non-empty path or URI, got {path!r}")
    return path
