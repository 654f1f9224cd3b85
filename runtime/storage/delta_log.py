"""A Delta table's log (``_delta_log``) read as Delta's PROTOCOL.md lays it out: the one reader of
it for every connector and for maintenance.

* commits: ``<version:020d>.json``, one action a line; a commit's timestamp is its in-commit
  timestamp when the table has them (``delta.enableInCommitTimestamps``: commitInfo, the first
  action, carries ``inCommitTimestamp``), else the commit file's modification time, as Spark's
  change feed and ``DESCRIBE HISTORY`` show it.
* checkpoints: classic (``<v>.checkpoint.parquet``), multi-part
  (``<v>.checkpoint.<part>.<parts>.parquet``, used only when every part is there) and v2
  (``<v>.checkpoint.<uuid>.json|parquet``, whose actions may sit in ``_sidecars/`` files); a
  classic-named checkpoint may be a v2 one too (it then lists sidecars). ``_last_checkpoint``
  is a hint only; the listing decides.
* a snapshot: the protocol, the metadata and the live files (with their deletion vectors) of a
  version, replayed from its newest checkpoint and the commits after it.

Files are read with pyarrow's file systems (``runtime.storage.filesystems``), so a table on an
object store reads as one on local disk, and no delta-rs handle is needed: a table whose
features delta-rs does not know still has a log this reads.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional
from urllib.parse import unquote

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from runtime.storage.filesystems import filesystem

LOG_DIR = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(
    r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?(?:\.([0-9a-fA-F-]{36}))?\.(parquet|json)$")
# The actions a snapshot is replayed from (a checkpoint's other columns are not read).
SNAPSHOT_ACTIONS = ("add", "remove", "protocol", "metaData", "sidecar")


@dataclass(frozen=True)
class Protocol:
    """A table's protocol action: the reader and writer versions and features it needs."""
    min_reader_version: int = 1
    min_writer_version: int = 2
    reader_features: frozenset = frozenset()
    writer_features: frozenset = frozenset()

    @staticmethod
    def of(action: Mapping) -> "Protocol":
        return Protocol(int(action.get("minReaderVersion") or 1), int(action.get("minWriterVersion") or 2),
                        frozenset(action.get("readerFeatures") or ()), frozenset(action.get("writerFeatures") or ()))


@dataclass(frozen=True)
class Metadata:
    """A table's metaData action: its schema (Delta's JSON), partition columns and properties."""
    schema_string: str = '{"type":"struct","fields":[]}'
    partition_columns: tuple = ()
    configuration: Mapping = field(default_factory=dict)

    @staticmethod
    def of(action: Mapping) -> "Metadata":
        configuration = action.get("configuration") or {}
        if isinstance(configuration, list):         # a checkpoint's map read as (key, value) pairs
            configuration = dict(configuration)
        return Metadata(action.get("schemaString") or Metadata.schema_string,
                        tuple(action.get("partitionColumns") or ()), dict(configuration))

    @property
    def fields(self) -> list:
        """The schema's top-level fields as Delta's JSON gives them (name, type, nullable, metadata)."""
        return json.loads(self.schema_string)["fields"]


@dataclass(frozen=True)
class Checkpoint:
    version: int
    kind: str                   # "classic", "multi-part" or "v2"
    paths: tuple                # its top-level files (a multi-part one's parts in order)


@dataclass(frozen=True)
class LogEntry:
    """A file of the log named by a version: a commit, a checkpoint (part) or a checksum."""
    version: int
    path: str
    mtime_s: Optional[float]


@dataclass(frozen=True)
class Snapshot:
    version: int
    protocol: Protocol
    metadata: Metadata
    files: Mapping              # unquoted data file path -> its add action (a dict)

    def deletion_vectors(self) -> dict:
        """{unquoted data file path: its deletion vector} of the files that have one."""
        return {path: add["deletionVector"] for path, add in self.files.items() if add.get("deletionVector")}


def is_log_file(path: str) -> bool:
    """Whether ``path`` (a file of a table's folder) is part of its log, not a data file."""
    return f"/{LOG_DIR}/" in path.replace("\\", "/")


def _lines(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def _rows(table, names: Iterable[str]) -> list[dict]:
    out = []
    for name in names:
        if name in table.column_names:
            out += [{name: a} for a in table.column(name).to_pylist(maps_as_pydicts="strict") if a]
    return out


class DeltaLog:
    """The log of the table at ``table_path`` (a path or URI)."""

    def __init__(self, table_path: str):
        self.table_path = table_path
        self.fs, self.root = filesystem(table_path)
        self.log_dir = f"{self.root}/{LOG_DIR}"

    def exists(self) -> bool:
        return self.fs.get_file_info(self.log_dir).type == pafs.FileType.Directory

    def commit_path(self, version: int) -> str:
        return f"{self.log_dir}/{version:020d}.json"

    def commit(self, version: int) -> list[dict]:
        """The actions of commit ``version``; FileNotFoundError when its file is gone (cleaned up)."""
        path = self.commit_path(version)
        try:
            with self.fs.open_input_stream(path) as f:
                return _lines(f.read())
        except FileNotFoundError:
            raise FileNotFoundError(f"the Delta commit {path} is gone (the log was cleaned up)") from None

    def version_with_transaction(self, app_id: str, txn_version: int, after: int, reads: int = 3) -> Optional[int]:
        """The version after ``after`` whose commit carries the app transaction (``app_id``,
        ``txn_version``), from the next ``reads`` commits' files: a writer that committed on
        ``after`` finds its commit there (unless ``reads`` others came first) without listing
        the log, which grows by a file a commit for the table's log retention. None: not found."""
        for version in range(after + 1, after + 1 + reads):
            try:
                actions = self.commit(version)
            except FileNotFoundError:
                return None
            if any(a["txn"].get("appId") == app_id and a["txn"].get("version") == txn_version
                   for a in actions if "txn" in a):
                return version
        return None

    def commit_timestamp(self, version: int, actions: Optional[list] = None) -> int:
        """Commit ``version``'s timestamp in ms: its in-commit timestamp when it has one, else its
        file's modification time (commitInfo's timestamp when the store gives none)."""
        if actions is None:
            try:
                actions = self.commit(version)
            except FileNotFoundError:
                actions = []
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        if info.get("inCommitTimestamp") is not None:
            return int(info["inCommitTimestamp"])
        stat = self.fs.get_file_info(self.commit_path(version))
        if stat.mtime_ns is not None:
            return stat.mtime_ns // 1_000_000
        return int(info.get("timestamp") or 0)

    def entries(self) -> list[LogEntry]:
        """The log's files named by a version (commits, checkpoints, checksums), by version."""
        out = []
        for info in self.fs.get_file_info(pafs.FileSelector(self.log_dir, allow_not_found=True)):
            head = info.base_name.split(".", 1)[0]
            if info.type == pafs.FileType.File and head.isdigit() and len(head) == 20:
                out.append(LogEntry(int(head), info.path, info.mtime.timestamp() if info.mtime else None))
        return sorted(out, key=lambda e: (e.version, e.path))

    def latest_version(self) -> int:
        """The table's newest version (-1 when the log has no commit nor checkpoint)."""
        versions = [e.version for e in self.entries()
                    if _COMMIT.match(e.path.rsplit("/", 1)[-1]) or _CHECKPOINT.match(e.path.rsplit("/", 1)[-1])]
        return max(versions, default=-1)

    def last_checkpoint_hint(self) -> Optional[int]:
        """The version ``_last_checkpoint`` names (a hint writers keep), None without one."""
        try:
            with self.fs.open_input_stream(f"{self.log_dir}/_last_checkpoint") as f:
                return int(json.loads(f.read().decode())["version"])
        except (FileNotFoundError, OSError, ValueError, KeyError):
            return None

    def checkpoint(self, at_most: Optional[int] = None) -> Optional[Checkpoint]:
        """The newest complete checkpoint at or before ``at_most`` (any version when None)."""
        found: dict = {}
        for info in self.fs.get_file_info(pafs.FileSelector(self.log_dir, allow_not_found=True)):
            m = _CHECKPOINT.match(info.base_name)
            if not m or (at_most is not None and int(m.group(1)) > at_most):
                continue
            v = int(m.group(1))
            if m.group(4):
                key = (v, "v2", 1)
            elif m.group(2):
                key = (v, "multi-part", int(m.group(3)))
            else:
                key = (v, "classic", 1)
            found.setdefault(key, []).append(info.path)
        for (v, kind, parts), paths in sorted(found.items(), reverse=True):
            if kind == "multi-part" and len(paths) != parts:
                continue                    # an incomplete multi-part checkpoint (a writer died)
            return Checkpoint(v, kind, tuple(sorted(paths)[:1] if kind == "v2" else sorted(paths)))
        return None

    def checkpoint_actions(self, checkpoint: Checkpoint, names: Iterable[str] = SNAPSHOT_ACTIONS) -> list[dict]:
        """The actions ``names`` of a checkpoint, its sidecars' included (each {name: action})."""
        names = tuple(names)
        wanted = names if "sidecar" in names else names + ("sidecar",)
        actions: list = []
        for path in checkpoint.paths:
            if path.endswith(".json"):
                with self.fs.open_input_stream(path) as f:
                    actions += [a for a in _lines(f.read()) if set(a) & set(wanted)]
            else:
                present = [c for c in wanted if c in pq.read_schema(path, filesystem=self.fs).names]
                actions += _rows(pq.read_table(path, columns=present, filesystem=self.fs), present)
        out = [a for a in actions if "sidecar" not in a or "sidecar" in names]
        for action in actions:
            if "sidecar" in action:
                sidecar = f"{self.log_dir}/_sidecars/{unquote(action['sidecar']['path'])}"
                present = [c for c in names if c in pq.read_schema(sidecar, filesystem=self.fs).names]
                out += _rows(pq.read_table(sidecar, columns=present, filesystem=self.fs), present)
        return out

    def snapshot(self, version: Optional[int] = None) -> Snapshot:
        """The protocol, metadata and live files of ``version`` (the newest when None)."""
        version = self.latest_version() if version is None else version
        if version < 0:
            raise FileNotFoundError(f"there is no Delta table at {self.table_path} (its {LOG_DIR} has no commit)")
        checkpoint = self.checkpoint(version)
        protocol = metadata = None
        files: dict = {}

        def apply(actions: list) -> None:
            nonlocal protocol, metadata
            for action in actions:      # a commit's removes first: a file re-added (a new DV) stays
                if "remove" in action:
                    files.pop(unquote(action["remove"]["path"]), None)
            for action in actions:
                if "add" in action:
                    files[unquote(action["add"]["path"])] = action["add"]
                elif "protocol" in action:
                    protocol = Protocol.of(action["protocol"])
                elif "metaData" in action:
                    metadata = Metadata.of(action["metaData"])

        start = -1
        if checkpoint is not None:
            apply(self.checkpoint_actions(checkpoint))
            start = checkpoint.version
        for v in range(start + 1, version + 1):
            apply(self.commit(v))
        return Snapshot(version, protocol or Protocol(), metadata or Metadata(), files)

    def protocol_and_metadata(self, version: Optional[int] = None) -> tuple[Protocol, Metadata]:
        """A version's protocol and metadata: the newest of each, read backwards from ``version``
        to its checkpoint (no file list built)."""
        version = self.latest_version() if version is None else version
        checkpoint = self.checkpoint(version)
        protocol = metadata = None
        for v in range(version, (checkpoint.version if checkpoint else -1), -1):
            for action in self.commit(v):
                if protocol is None and "protocol" in action:
                    protocol = Protocol.of(action["protocol"])
                if metadata is None and "metaData" in action:
                    metadata = Metadata.of(action["metaData"])
            if protocol is not None and metadata is not None:
                return protocol, metadata
        if checkpoint is not None:
            for action in self.checkpoint_actions(checkpoint, ("protocol", "metaData")):
                if protocol is None and "protocol" in action:
                    protocol = Protocol.of(action["protocol"])
                if metadata is None and "metaData" in action:
                    metadata = Metadata.of(action["metaData"])
        return protocol or Protocol(), metadata or Metadata()
