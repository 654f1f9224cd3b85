"""Text file sources (``pyflink.datastream.connectors.file_system.FileSource``).

Each file is one split; a monitored folder turns files that arrive later into new
splits. Offsets are (file, line).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Optional

from runtime.common.time import to_millis
from runtime.datastream.connectors.base import Boundedness, Source


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
