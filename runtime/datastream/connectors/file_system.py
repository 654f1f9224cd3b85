"""Text file sources and the file sink (``pyflink.datastream.connectors.file_system``).

Source: each file is one split; a monitored folder turns files that arrive later into new
splits. Offsets are (file, line).

Sink: Flink's ``FileSink``, row format (an ``Encoder`` per record) or bulk format (Parquet),
into buckets (sub-folders) of part files that roll by a ``RollingPolicy``; what the writing
and committing mean is in ``runtime.connectors.file_sink``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Optional

from runtime.common.serialization import BulkWriterFactory, Encoder
from runtime.common.time import to_millis
from runtime.datastream.connectors.base import Boundedness, Sink, Source


class StreamFormat:
    """Record format of a file source; only text lines exist so far."""

    TEXT_LINE = "text_line"

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> "TextLineFormat":
        return TextLineFormat(charset_name)


@dataclass(frozen=True)
class TextLineFormat:
    charset_name: str = "UTF-8"


@dataclass(frozen=True)
class FileSource(Source):
    default_name: ClassVar[str] = "File Source"

    paths: tuple
    stream_format: TextLineFormat = TextLineFormat()
    # None: read what is there and finish; else look for new files every N ms.
    monitor_interval_ms: Optional[int] = None

    @property
    def locations(self) -> tuple:
        return tuple(self.paths)

    @staticmethod
    def for_record_stream_format(stream_format: TextLineFormat, *paths: str) -> "FileSourceBuilder":
        if not paths:
            raise ValueError("FileSource needs at least one path (a file or a folder)")
        return FileSourceBuilder(FileSource(tuple(str(p) for p in paths), stream_format))

    @property
    def boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED if self.monitor_interval_ms is None else Boundedness.CONTINUOUS_UNBOUNDED

    @property
    def produced_type(self):
        from runtime.common.typeinfo import Types
        return Types.STRING()


class FileSourceBuilder:
    def __init__(self, source: FileSource):
        self._source = source

    def monitor_continuously(self, discovery_interval) -> "FileSourceBuilder":
        ms = to_millis(discovery_interval, "discovery_interval")
        if ms <= 0:
            raise ValueError(f"monitor_continuously: the discovery interval must be positive, got {ms} ms")
        self._source = replace(self._source, monitor_interval_ms=ms)
        return self

    def process_static_file_set(self) -> "FileSourceBuilder":
        self._source = replace(self._source, monitor_interval_ms=None)
        return self

    def build(self) -> FileSource:
        return self._source


# ---- sink -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class OutputFileConfig:
    """Part file names: ``<prefix>-<uuid>-<counter><suffix>``."""

    part_prefix: str = "part"
    part_suffix: str = ""

    @staticmethod
    def builder() -> "OutputFileConfigBuilder":
        return OutputFileConfigBuilder()

    def get_part_prefix(self) -> str:
        return self.part_prefix

    def get_part_suffix(self) -> str:
        return self.part_suffix


class OutputFileConfigBuilder:
    def __init__(self):
        self._config = OutputFileConfig()

    def with_part_prefix(self, prefix: str) -> "OutputFileConfigBuilder":
        self._config = replace(self._config, part_prefix=_name_part(prefix, "part prefix"))
        return self

    def with_part_suffix(self, suffix: str) -> "OutputFileConfigBuilder":
        self._config = replace(self._config, part_suffix=_name_part(suffix, "part suffix"))
        return self

    def build(self) -> OutputFileConfig:
        return self._config


def _name_part(value, what: str) -> str:
    if not isinstance(value, str) or "/" in value:
        raise ValueError(f"OutputFileConfig: the {what} must be a string without '/', got {value!r}")
    return value


@dataclass(frozen=True)
class BucketAssigner:
    """Which bucket (sub-folder of the base path) a record goes to."""

    kind: str = "date_time"
    format_str: str = "yyyy-MM-dd--HH"       # a java.time DateTimeFormatter pattern
    timezone_id: Optional[str] = None        # None: the system's time zone, as Flink's default

    @staticmethod
    def base_path_bucket_assigner() -> "BucketAssigner":
        """Every record into the base path itself."""
        return BucketAssigner("base_path", "", None)

    @staticmethod
    def date_time_bucket_assigner(format_str: str = "yyyy-MM-dd--HH", timezone_id: Optional[str] = None) -> "BucketAssigner":
        """Buckets named by the processing time the record is written at (Flink's default,
        ``yyyy-MM-dd--HH``: one bucket an hour)."""
        from runtime.common.java_time import check_pattern
        check_pattern(format_str)
        if timezone_id is not None:
            from zoneinfo import ZoneInfo
            ZoneInfo(timezone_id)       # an unknown zone fails here, when the job is built
        return BucketAssigner("date_time", format_str, timezone_id)


@dataclass(frozen=True)
class RollingPolicy:
    """When an in-progress part file is finished and a new one started.

    ``default_rolling_policy``: when it has grown past ``part_size`` bytes, is ``rollover_interval``
    ms old or has had no record for ``inactivity_interval`` ms (checked as each epoch starts), and
    at a checkpoint once past ``part_size``. ``on_checkpoint_rolling_policy``: at every checkpoint
    (the only policy of bulk formats)."""

    kind: str = "default"
    part_size: int = 128 * 1024 * 1024
    rollover_interval: int = 60 * 1000
    inactivity_interval: int = 60 * 1000

    @staticmethod
    def default_rolling_policy(part_size: int = 128 * 1024 * 1024, rollover_interval=60 * 1000,
                               inactivity_interval=60 * 1000) -> "RollingPolicy":
        if isinstance(part_size, bool) or not isinstance(part_size, int) or part_size <= 0:
            raise ValueError(f"RollingPolicy: part_size must be a positive number of bytes, got {part_size!r}")
        rollover = to_millis(rollover_interval, "rollover_interval")
        inactivity = to_millis(inactivity_interval, "inactivity_interval")
        if rollover <= 0 or inactivity <= 0:
            raise ValueError(f"RollingPolicy: the intervals must be positive, got rollover_interval={rollover} "
                             f"ms, inactivity_interval={inactivity} ms")
        return RollingPolicy("default", part_size, rollover, inactivity)

    @staticmethod
    def on_checkpoint_rolling_policy() -> "RollingPolicy":
        return RollingPolicy("on_checkpoint")


@dataclass(frozen=True)
class FileSink(Sink):
    """Writes part files under ``base_path``, finished and visible only once the checkpoint that
    covers them completes (exactly once)."""

    default_name: ClassVar[str] = "File Sink"

    base_path: str
    encoder: Optional[Encoder] = None                   # row format
    writer_factory: Optional[BulkWriterFactory] = None  # bulk format
    bucket_assigner: BucketAssigner = BucketAssigner()
    rolling_policy: RollingPolicy = RollingPolicy()
    output_file_config: OutputFileConfig = OutputFileConfig()
    bucket_check_interval: int = 60 * 1000

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> "RowFormatBuilder":
        """Each record through ``encoder`` (``Encoder.simple_string_encoder()``).

            FileSink.for_row_format("out", Encoder.simple_string_encoder()).build()
        """
        if not isinstance(encoder, Encoder):
            raise TypeError(f"FileSink.for_row_format takes an Encoder (Encoder.simple_string_encoder()), "
                            f"got {encoder!r}")
        return RowFormatBuilder(FileSink(_check_base_path(base_path), encoder=encoder))

    @staticmethod
    def for_bulk_format(base_path: str, writer_factory: BulkWriterFactory) -> "BulkFormatBuilder":
        """Whole files written by ``writer_factory`` (``ParquetBulkWriters.for_row_type(row_type)``);
        they roll at every checkpoint.

            FileSink.for_bulk_format("out", ParquetBulkWriters.for_row_type(row_type)).build()
        """
        if not isinstance(writer_factory, BulkWriterFactory):
            raise TypeError(f"FileSink.for_bulk_format takes a bulk writer factory "
                            f"(ParquetBulkWriters.for_row_type(row_type)), got {writer_factory!r}")
        return BulkFormatBuilder(FileSink(_check_base_path(base_path), writer_factory=writer_factory,
                                          rolling_policy=RollingPolicy.on_checkpoint_rolling_policy()))


def _check_base_path(path) -> str:
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"FileSink needs a non-empty base path or URI, got {path!r}")
    return path


class RowFormatBuilder:
    def __init__(self, sink: FileSink):
        self._sink = sink

    def with_bucket_check_interval(self, interval: int) -> "RowFormatBuilder":
        """Kept for PyFlink's API: the rolling policy's times are checked as each epoch starts."""
        self._sink = replace(self._sink, bucket_check_interval=to_millis(interval, "bucket_check_interval"))
        return self

    def with_bucket_assigner(self, assigner: BucketAssigner) -> "RowFormatBuilder":
        if not isinstance(assigner, BucketAssigner):
            raise TypeError(f"with_bucket_assigner takes a BucketAssigner, got {assigner!r}")
        self._sink = replace(self._sink, bucket_assigner=assigner)
        return self

    def with_rolling_policy(self, policy: RollingPolicy) -> "RowFormatBuilder":
        if not isinstance(policy, RollingPolicy):
            raise TypeError(f"with_rolling_policy takes a RollingPolicy, got {policy!r}")
        self._sink = replace(self._sink, rolling_policy=policy)
        return self

    def with_output_file_config(self, config: OutputFileConfig) -> "RowFormatBuilder":
        if not isinstance(config, OutputFileConfig):
            raise TypeError(f"with_output_file_config takes an OutputFileConfig, got {config!r}")
        self._sink = replace(self._sink, output_file_config=config)
        return self

    def build(self) -> FileSink:
        return self._sink


class BulkFormatBuilder(RowFormatBuilder):
    def with_rolling_policy(self, policy: RollingPolicy) -> "BulkFormatBuilder":
        if not isinstance(policy, RollingPolicy) or policy.kind != "on_checkpoint":
            raise ValueError("a bulk-format FileSink rolls its part files at checkpoints only, as Flink's "
                             "(CheckpointRollingPolicy): use RollingPolicy.on_checkpoint_rolling_policy()")
        return super().with_rolling_policy(policy)
