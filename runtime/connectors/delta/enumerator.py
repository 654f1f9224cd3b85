"""The Delta source's split enumerator (driver side): each data file (an ``add`` action) of the
version read is a split; its offset is the next row to read, so an epoch reads rows [start, end)
of a file and a replay reads the same rows.

A bounded source reads one version (``starting_version``, else the latest). A continuous source
reads the latest version's files first (or, with ``starting_version``, the files added from that
version on, as Flink's Delta connector), then, each epoch, the files that later commits added;
the last version read is kept in the enumerator's positions. A bounded source restored from a
checkpoint reads as Structured Streaming's ``availableNow`` trigger does: the files the commits
after its checkpointed version added, up to the version that was the latest when the run started.

Change data feed (``DeltaSource.for_change_data_feed``): each commit's change rows, as Spark's
change feed reads them: its ``cdc`` files, else its adds as inserts and removes as deletes (and
the rows a replaced deletion vector newly deletes as deletes). The commits, checkpoints and
commit timestamps come from the table's log (``runtime.storage.delta_log``).
"""
from __future__ import annotations

import json
from typing import Optional
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from runtime.connectors.base import SplitEnumerator
from runtime.connectors.delta.table import data_path, open_table
from runtime.storage.delta_log import DeltaLog
from runtime.task.deployment import SplitRead

TABLE_KEY = "_table"            # positions entry holding the source's table progress


def _snapshot_files(dt, log: DeltaLog) -> list[dict]:
    """The data files of a loaded table version: path, rows (physical: with deleted ones),
    partition values and, on a table with deletion vectors, the file's deletion vector."""
    actions = pa.table(dt.get_add_actions(flatten=False))
    paths = actions.column("path").to_pylist()
    rows = actions.column("num_records").to_pylist()
    if "partition" in actions.column_names:
        parts = actions.column("partition").to_pylist()
    else:
        parts = [{}] * len(paths)
    dvs: dict = {}
    if "deletionVectors" in set(dt.protocol().reader_features or ()):
        dvs = log.snapshot(dt.version()).deletion_vectors()
        unknown = set(dvs) - {unquote(p) for p in paths}
        if unknown:
            raise ValueError(f"Delta source: the log of {log.root} gives deletion vectors for files the "
                             f"snapshot does not list ({sorted(unknown)[:3]}); refusing to guess its rows")
    return [{"path": p, "num_rows": n, "partition": dict(pv or {}), "dv": dvs.get(unquote(p))}
            for p, n, pv in zip(paths, rows, parts)]



def _stats_rows(action: dict) -> Optional[int]:
    stats = action.get("stats")
    return json.loads(stats).get("numRecords") if stats else None


class DeltaSourceEnumerator(SplitEnumerator):
    def __init__(self, source, context):
        super().__init__(source, context)
        self._log = DeltaLog(source.table_path)
        self._fs, self._root = self._log.fs, self._log.root
        self._table = None
        self._end: Optional[int] = None     # a bounded source's last version, pinned as the run starts

    # positions: split id -> {"offset", "num_rows", "partition", "index", "version", "dv"}
    #            (a change feed's splits also "path", "change", "timestamp"; their id is
    #            "<version>:<change>:<path>"; a file whose deletion vector a commit replaced,
    #            "newly_deleted" and "dv_before": its deletes are the rows "dv" adds)
    #            TABLE_KEY -> {"version": last version read, "files": number of splits,
    #                          a bounded source's "end": the last version this run reads}

    def check(self) -> None:
        """The table exists and Sluice reads its reader features (before Spark starts)."""
        source = self.source
        dt = open_table(source.table_path)
        if source.starting_version is not None:
            open_table(source.table_path, source.starting_version)
        if source.change_data_feed:
            if (dt.metadata().configuration or {}).get("delta.enableChangeDataFeed", "false").lower() != "true":
                raise ValueError(
                    f"Delta source: {source.table_path} does not record a change data feed; turn it on "
                    "(ALTER TABLE ... SET TBLPROPERTIES (delta.enableChangeDataFeed = true)) and read the "
                    "changes from a version after that, or read its rows with for_bounded_row_data")

    def _files(self) -> list[tuple[str, dict]]:
        return sorted(((k, v) for k, v in self.positions.items() if k != TABLE_KEY),
                      key=lambda kv: kv[1].get("index", 0))

    def _add_file(self, path: str, num_rows: Optional[int], partition: dict, version: int,
                  dv: Optional[dict] = None, split_id: Optional[str] = None, **extra) -> None:
        split_id = split_id or path
        if split_id in self.positions:
            return
        if num_rows is None:
            num_rows = pq.ParquetFile(data_path(self._root, path), filesystem=self._fs).metadata.num_rows
        table = self.positions.setdefault(TABLE_KEY, {})
        index = table.get("files", 0)
        table["files"] = index + 1
        state = {"offset": 0, "num_rows": int(num_rows), "partition": partition, "index": index,
                 "version": version}
        if dv:
            state["dv"] = dict(dv)
        if split_id != path:
            state["path"] = path
        state.update(extra)
        self.positions[split_id] = state

    def _discover(self) -> None:
        source = self.source
        table = self.positions.get(TABLE_KEY)
        fresh = table is None or "version" not in table
        if fresh:
            self.positions.setdefault(TABLE_KEY, {})
            if source.starting_version is not None and (source.continuous or source.change_data_feed):
                # Flink's Delta connector (and Spark's change feed): a starting version reads
                # changes from it on.
                open_table(source.table_path, source.starting_version)    # checks it exists
                self.positions[TABLE_KEY]["version"] = source.starting_version - 1
            else:
                dt = open_table(source.table_path,
                                 None if source.continuous or source.change_data_feed else source.starting_version)
                version = dt.version()
                extra = {}
                if source.change_data_feed:     # no starting version: the snapshot as inserts
                    extra = {"change": "insert", "timestamp": self._log.commit_timestamp(version)}
                for f in _snapshot_files(dt, self._log):
                    split_id = f"{version}:insert:{f['path']}" if source.change_data_feed else None
                    self._add_file(f["path"], f["num_rows"], f["partition"], version, f["dv"], split_id, **extra)
                self.positions[TABLE_KEY]["version"] = version
                self._table = dt
        if not source.continuous and self._end is None:
            # A bounded run reads up to the version that was the latest as it started (Structured
            # Streaming's availableNow): a fresh run of the rows, the snapshot it read; a change
            # feed, or a run restored from a checkpoint, the commits since its version too.
            if fresh and not source.change_data_feed:
                self._end = self.positions[TABLE_KEY]["version"]
            else:
                latest = self._table if fresh and self._table is not None else open_table(source.table_path)
                self._end = max(latest.version(), self.positions[TABLE_KEY]["version"])
            self.positions[TABLE_KEY]["end"] = self._end
        if source.continuous:
            if self._table is None:
                self._table = open_table(source.table_path)
            else:
                self._table.update_incremental()
        latest = self._table.version() if source.continuous else self._end
        last = self.positions[TABLE_KEY]["version"]
        for version in range(last + 1, latest + 1):
            actions = self._commit(version)
            if source.change_data_feed:
                self._discover_changes(version, actions)
            else:
                self._discover_appends(version, actions)
            self.positions[TABLE_KEY]["version"] = version

    def _commit(self, version: int) -> list[dict]:
        try:
            return self._log.commit(version)
        except FileNotFoundError as e:
            raise FileNotFoundError(
                f"Delta source: {e}, so the changes of version {version} cannot be read; restart the "
                "source from a later starting_version") from None

    def snapshot(self) -> dict:
        """The positions a checkpoint records: the splits not read to their end, and the table's
        progress. A split read to its end is never planned again (discovery goes by version), so
        the positions of a job that runs on each new version do not grow with its age."""
        return {k: dict(v) for k, v in self.positions.items()
                if k == TABLE_KEY or v.get("offset", 0) < v["num_rows"]}

    def restore(self, positions: dict) -> None:
        super().restore(positions)
        self._end = None        # pinned again: the restored run's start

    def _discover_appends(self, version: int, actions: list[dict]) -> None:
        for action in actions:
            if "add" in action and action["add"].get("dataChange", True):
                add = action["add"]
                self._add_file(add["path"], _stats_rows(add), dict(add.get("partitionValues") or {}), version,
                               add.get("deletionVector"))
            elif "remove" in action and action["remove"].get("dataChange", True):
                path = action["remove"].get("path")
                with_dv = action["remove"].get("deletionVector") or any(
                    "add" in a and a["add"].get("deletionVector") for a in actions)
                how = (" with deletion vectors (a DELETE, UPDATE or MERGE on a table with "
                       "delta.enableDeletionVectors)" if with_dv else "")
                following = ("a continuous Delta source" if self.source.continuous else
                             "a bounded Delta source restored from a checkpoint (an on-inputs run)")
                raise ValueError(
                    f"Delta source: version {version} of {self.source.table_path} removes data{how} "
                    f"({path}); {following} reads the versions after its own as appends only, as Flink's "
                    "(start it without its checkpoint, restore_from 'none', to read the table as it is now, "
                    "or from a starting_version after that change, or read the table's changes with "
                    "DeltaSource.for_change_data_feed on a table with delta.enableChangeDataFeed)")

    def _discover_changes(self, version: int, actions: list[dict]) -> None:
        """A commit's change rows, as Spark's change feed reads them (Delta's PROTOCOL.md, Change
        Data Files): its ``cdc`` files when it has some, else its data-changing adds as inserts
        and removes as deletes."""
        timestamp = self._log.commit_timestamp(version, actions)
        cdc = [a["cdc"] for a in actions if "cdc" in a]
        if cdc:
            for c in cdc:
                self._add_file(c["path"], None, dict(c.get("partitionValues") or {}), version, None,
                               f"{version}:cdc:{c['path']}", change="cdc", timestamp=timestamp)
            return
        adds = [a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)]
        removes = [a["remove"] for a in actions if "remove" in a and a["remove"].get("dataChange", True)]
        removed = {unquote(r["path"]): r for r in removes}
        both = {unquote(a["path"]) for a in adds} & set(removed)
        for a in adds:
            if unquote(a["path"]) not in both:
                continue
            # A file whose deletion vector the commit replaced (a DELETE with deletion vectors
            # writes no change files): the rows the new vector deletes and the old one did not
            # are the commit's deletes, as Spark's change feed derives them.
            before = removed[unquote(a["path"])].get("deletionVector")
            if not a.get("deletionVector"):
                raise ValueError(
                    f"Delta source: version {version} of {self.source.table_path} dropped the deletion vector "
                    f"of {a['path']} without change data files (rows deleted before come back), which Sluice's "
                    "change feed does not read; read the changes from a later starting_version")
            self._add_file(a["path"], _stats_rows(a), dict(a.get("partitionValues") or {}), version,
                           a["deletionVector"], f"{version}:delete:{a['path']}", change="delete",
                           timestamp=timestamp, newly_deleted=True, dv_before=before)
        adds = [a for a in adds if unquote(a["path"]) not in both]
        removes = [r for r in removes if unquote(r["path"]) not in both]
        for r in removes:
            self._add_file(r["path"], _stats_rows(r), dict(r.get("partitionValues") or {}), version,
                           r.get("deletionVector"), f"{version}:delete:{r['path']}", change="delete",
                           timestamp=timestamp)
        for a in adds:
            self._add_file(a["path"], _stats_rows(a), dict(a.get("partitionValues") or {}), version,
                           a.get("deletionVector"), f"{version}:insert:{a['path']}", change="insert",
                           timestamp=timestamp)

    def plan_epoch(self, epoch):
        self._discover()
        plan: dict[int, list] = {s: [] for s in range(self.parallelism)}
        everything = True
        cut = None          # a change feed: no version after one this epoch reads in part
        for path, state in self._files():
            start, total = state.get("offset", 0), state["num_rows"]
            if start >= total:
                continue
            if cut is not None and state["version"] > cut:
                everything = False
                break
            end = total if self.max_records_per_split is None else min(total, start + self.max_records_per_split)
            everything &= end >= total
            if end < total and self.source.change_data_feed:
                cut = state["version"]
            plan[state["index"] % self.parallelism].append(SplitRead(path, start, end, dict(state)))
        self.input_ends_with_plan = not self.source.continuous and everything
        return {s: tuple(reads) for s, reads in plan.items()}

    @property
    def finished(self):
        if self.source.continuous:
            return False
        if TABLE_KEY not in self.positions:
            return False
        return all(state.get("offset", 0) >= state["num_rows"] for _, state in self._files())
