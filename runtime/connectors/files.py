"""Text files (``read_text_file``, ``FileSource``): each file is a split, a folder adds splits.

The epoch plan fixes, per file, the byte range [offset, size at planning time), so a replay
reads the same bytes even while the file grows. A monitored (unbounded) source consumes
complete lines only; a bounded one also takes a last line with no newline. Offsets are
kept as (byte, line).
"""
from __future__ import annotations

from pyarrow.fs import FileType

from runtime.connectors.base import SourceReader, SplitEnumerator
from runtime.storage.filesystems import check_readable, info, read_bytes, walk_files
from runtime.task.deployment import SplitRead


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
        left; the newest METRICS_FILES files only (a monitored folder may hold thousands)."""
        return {path: {"offset": self.positions.get(path, {}).get("offset", 0), "latest": self.sizes[path],
                       "lag": self.sizes[path] - self.positions.get(path, {}).get("offset", 0)}
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
        text = data[:end].decode(self.source.stream_format.charset_name)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if "\r" in text:
            lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        line_no = split.state.get("line", 0)
        self.ends[split.split_id] = {"offset": split.start + end, "line": line_no + len(lines)}
        for lo in range(0, len(lines), batch_size):
            chunk = lines[lo:lo + batch_size]
            yield chunk, [None] * len(chunk)

    def origin(self, split, index: int) -> str:
        return f"file {split.split_id}, line {split.state.get('line', 0) + index + 1}"
