"""Delta table source and sink descriptors (read and written through delta-rs)."""
from __future__ import annotations

from dataclasses import dataclass
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
class DeltaSink(Sink):
    """Appends records to a Delta table; with checkpoints, exactly once per checkpoint."""

    default_name: ClassVar[str] = "Delta Sink"

    table_path: str
    partition_by: Optional[tuple] = None

    @staticmethod
    def for_row_data(table_path: str, partition_by=None) -> "DeltaSink":
        return DeltaSink(_check_path(table_path), tuple(partition_by) if partition_by else None)


def _check_path(path) -> str:
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"a Delta table needs a non-empty path or URI, got {path!r}")
    return path
