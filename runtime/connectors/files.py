"""Text files (``read_text_file``, ``FileSource``): each file is a split, a folder adds splits.

The epoch plan fixes, per file, the byte range [offset, size at planning time), so a replay
reads the same bytes even while the file grows. A monitored (unbounded) source consumes
complete lines only; a bounded one also takes a last line with no newline. Offsets are
kept as (byte, line).

UTF-8 lines are read as one Arrow string array (``ArrowBatch``es of it go down the chain): an
Arrow-batch function and the vectorised operators take them without a Python string per line,
and a per-record function gets the strings decoded once, as fast as ``str.split`` makes them.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow.fs import FileType

from runtime.common.arrow import arrow_schema
from runtime.common.typeinfo import Types
from runtime.connectors.base import SourceReader, SplitEnumerator
from runtime.storage.filesystems import check_readable, info, read_bytes, walk_files
from runtime.task.arrow_batch import ArrowBatch
from runtime.task.deployment import SplitRead

_LINE = Types.STRING()
_LINE_SCHEMA = arrow_schema(_LINE)
_UTF8 = {"utf-8", "utf8"}


def discover(paths) -> list[str]:
    found = []
    for p in paths:
        kind = info(p).type
        if kind == FileType.Directory:
            found.extend(walk_files(p))
        elif kind == FileType.File:
            found.append(p)
        else:
            raise FileNotFoundError(
                f"File source: {p} does not exist. Pass an existing file or folder to read_text_file / "
                "FileSource.for_record_stream_format.")
    return found


METRICS_FILES = 100     # files whose figures an epoch's metrics row carries


class FileEnumerator(SplitEnumerator):
    def __init__(self, source, context):
        super().__init__(source, context)
        self.files: list[str] = []
        self.sizes: dict[str, int] = {}

    def check(self) -> None:
        for path in self.source.paths:
            check_readable(path, "the file source's path (read_text_file / FileSource)")
        discover(self.source.paths)

    def _discover(self) -> None:
        # Splits keep their index: new files are appended, so assignments never move.
        for path in discover(self.source.paths):
            if path not in self.files:
                self.files.append(path)

    def plan_epoch(self, epoch):
        self._discover()
        plan: dict[int, list] = {s: [] for s in range(self.parallelism)}
        limit = self.max_records_per_split
        for index, path in enumerate(self.files):
            size = info(path).size
            self.sizes[path] = size
            state = dict(self.positions.get(path, {}))
            if limit is not None:
                state["max_lines"] = limit      # the reader stops after this many lines: same on replay
            if state.get("offset", 0) < size:
                plan[index % self.parallelism].append(SplitRead(path, state.get("offset", 0), size, state))
        planned = any(plan.values())
        # With a line limit the input ends with the first epoch that finds nothing left.
        self.input_ends_with_plan = self.source.monitor_interval_ms is None and (limit is None or not planned)
        return {s: tuple(reads) for s, reads in plan.items()}

    def split_metrics(self) -> dict[str, dict]:
        """Each file in bytes: the offset reached, its size when the epoch was planned, the bytes
        left; the newest METRICS_FILES files only (a monitored folder may hold thousands). ``unit``
        says so to the charts (a split without one counts records, as Kafka's offsets do)."""
        return {path: {"offset": self.positions.get(path, {}).get("offset", 0), "latest": self.sizes[path],
                       "lag": self.sizes[path] - self.positions.get(path, {}).get("offset", 0), "unit": "bytes"}
                for path in self.files[-METRICS_FILES:] if path in self.sizes}

    @property
    def finished(self):
        if self.source.monitor_interval_ms is not None:
            return False
        self._discover()
        return all(self.positions.get(p, {}).get("offset", 0) >= info(p).size for p in self.files)


class FileReader(SourceReader):
    def read(self, split, batch_size):
        final = self.source.monitor_interval_ms is None
        data = read_bytes(split.split_id, split.start, split.end - split.start)
        end = len(data)
        if not final:
            end = data.rfind(b"\n") + 1     # leave a partial last line for the next epoch
        limit = split.state.get("max_lines")
        if limit is not None:
            cut = -1
            for _ in range(limit):
                cut = data.find(b"\n", cut + 1, end)
                if cut < 0:
                    break
            if cut >= 0:
                end = cut + 1
        charset = self.source.stream_format.charset_name
        lines = _arrow_lines(data, end) if charset.lower() in _UTF8 else None
        if lines is None:
            lines = _lines(data[:end].decode(charset))
        line_no = split.state.get("line", 0)
        self.ends[split.split_id] = {"offset": split.start + end, "line": line_no + len(lines)}
        for lo in range(0, len(lines), batch_size):
            chunk = lines[lo:lo + batch_size]
            if type(chunk) is list:
                yield chunk, [None] * len(chunk)
            else:
                yield ArrowBatch(pa.RecordBatch.from_arrays([chunk], schema=_LINE_SCHEMA),
                                 pa.nulls(len(chunk), pa.int64()), _LINE)

    def origin(self, split, index: int) -> str:
        return f"file {split.split_id}, line {split.state.get('line', 0) + index + 1}"


def _lines(text: str) -> list:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines


def _arrow_lines(data: bytes, end: int) -> Optional[pa.Array]:
    """The lines of ``data[:end]`` as ``_lines`` gives them, as one Arrow string array split in
    C++ (a fifth of the time of decoding and splitting in Python, and no object per line); None
    when the bytes are not UTF-8 (the decoding then names the error) or more than a string array
    holds (2 GiB)."""
    if end >= 2**31:
        return None
    whole = pa.Array.from_buffers(pa.large_binary(), 1, [None, pa.py_buffer(np.array([0, end], np.int64)),
                                                         pa.py_buffer(data)])
    lines = pc.list_flatten(pc.split_pattern(whole, b"\n"))
    if lines[-1].as_py() == b"":        # after the last newline
        lines = lines.slice(0, len(lines) - 1)
    try:
        lines = lines.cast(pa.string())
    except pa.ArrowInvalid:
        return None
    if data.find(b"\r", 0, end) >= 0:
        lines = pc.replace_substring_regex(lines, "\r$", "")
    return lines
