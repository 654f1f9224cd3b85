"""Parquet for ``FileSink.for_bulk_format``, as ``pyflink.datastream.formats.parquet``.

PyFlink's ``for_row_type`` takes the Table API's ``RowType``; here it takes the stream's row type
information (``Types.ROW_NAMED``), whose fields become the file's columns through the engine's one
Python-to-Arrow conversion (``runtime.common.arrow``), written with pyarrow.
"""
from __future__ import annotations

from dataclasses import dataclass

from runtime.common.serialization import BulkWriterFactory
from runtime.common.typeinfo import RowTypeInfo, TypeInformation


@dataclass(frozen=True)
class ParquetWriterFactory(BulkWriterFactory):
    row_type: TypeInformation
    utc_timestamp: bool = False


class ParquetBulkWriters:
    @staticmethod
    def for_row_type(row_type: TypeInformation, hadoop_config=None, utc_timestamp: bool = False) -> ParquetWriterFactory:
        """A writer of records of ``row_type`` (``Types.ROW_NAMED([...], [...])``) to Parquet.

            FileSink.for_bulk_format("out", ParquetBulkWriters.for_row_type(row_type)).build()
        """
        if not isinstance(row_type, RowTypeInfo):
            raise TypeError(f"ParquetBulkWriters.for_row_type takes a row type (Types.ROW_NAMED(names, "
                            f"types)), got {row_type!r}")
        if hadoop_config is not None:
            raise ValueError("ParquetBulkWriters.for_row_type: a Hadoop configuration has no meaning here "
                             "(files are written with pyarrow); leave hadoop_config out")
        return ParquetWriterFactory(row_type, utc_timestamp)


__all__ = ["ParquetBulkWriters", "ParquetWriterFactory"]
