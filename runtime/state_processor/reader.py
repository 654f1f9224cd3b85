"""``SavepointReader``: an operator's state in a checkpoint or savepoint as Arrow tables and
Spark DataFrames (Flink's State Processor API, ``SavepointReader.read(...).readKeyedState``).

The rows come from the state tables (``runtime.state.snapshot_format``) as the restore sees
them (``runtime.checkpoint.restore.RestorePoint``): an incremental checkpoint's chain is merged
(a later file's entry replaces an earlier one, a deleted one removes it). Values declared with a
type stay in their typed Arrow column (no Python objects on the way: a DataFrame of millions of
keys is a copy of columns); values stored pickled are decoded and inferred.
"""
from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc

from runtime.checkpoint.restore import RestorePoint, choose, load_savepoint
from runtime.checkpoint.checkpoint_record import CheckpointException
from runtime.checkpoint.storage import CheckpointStorage
from runtime.common.arrow import infer_array
from runtime.state.snapshot_format import BASE_SCHEMA, OPERATOR_PREFIX, TIMER_PREFIX, decode_values, state_types, value_column
from runtime.state.snapshot_reader import read_state_file
from runtime.state_processor.dataframe import read_keyed_state_files

TIMERS = ("event", "processing")
_WINDOW = r"^TimeWindow\((?P<window_start>-?\d+), (?P<window_end>-?\d+)\)$"


@dataclass(frozen=True)
class SavepointReader:
    """The state of one checkpoint or savepoint. ``SavepointReader.read(path)`` takes a savepoint
    folder, or a job's folder (its latest completed checkpoint, or ``checkpoint``)."""

    point: RestorePoint

    @staticmethod
    def read(path: str, checkpoint: Optional[int] = None) -> "SavepointReader":
        from runtime.checkpoint.restore import METADATA
        from runtime.storage.filesystems import isfile, join
        if isfile(join(path, METADATA)):
            return SavepointReader(load_savepoint(path))
        point = choose(CheckpointStorage(path), checkpoint if checkpoint is not None else "latest")
        if point is None:
            raise CheckpointException(f"{path}: neither a savepoint (no _metadata.json) nor a job folder with a "
                                      f"completed checkpoint; pass a savepoint folder or a job's checkpoint folder")
        return SavepointReader(point)

    @staticmethod
    def of(storage: CheckpointStorage, which=None) -> "SavepointReader":
        """A job's checkpoint: its latest completed one, a checkpoint id, or a savepoint folder."""
        if which is not None and not str(which).isdigit():
            return SavepointReader(load_savepoint(str(which)))
        point = choose(storage, which if which is not None else "latest")
        if point is None:
            raise CheckpointException(f"{storage.job_dir}: no completed checkpoint")
        return SavepointReader(point)

    # -- what is there

    def operator(self, uid: str) -> dict:
        for op in self.point.record.operators:
            if uid in (op.get("uid"), op["table"], op["operator_id"]):
                return op
        known = ", ".join(sorted(op.get("uid") or op["table"] for op in self.point.record.operators if op["files"]))
        raise CheckpointException(f"checkpoint {self.point.record.checkpoint_id} has no state of operator {uid!r}; "
                                  f"operators with state: {known or 'none'}")

    def state_names(self, uid: str) -> list[str]:
        """The keyed, operator and broadcast states of the operator (timers are ``read_timers``)."""
        names = pc.unique(pa.concat_arrays([t.column("state_name").combine_chunks() for t in self._tables(uid)]
                                           or [pa.array([], pa.string())]))
        return sorted(n for n in names.to_pylist() if not n.startswith(TIMER_PREFIX))

    # -- Arrow

    def keyed_state(self, uid: str, name: str) -> pa.Table:
        """One keyed state (value, list, map, reducing, aggregating): one row per key and
        namespace, ``key``, ``namespace`` (``window_start``/``window_end`` for time windows),
        ``key_group``, and ``value`` typed by the state's descriptor."""
        rows = self._merged(uid, name)
        if rows.num_rows and rows.column("key_group").null_count:
            raise CheckpointException(f"state {name!r} of {uid!r} is operator state: read it with operator_state")
        return _with_windows(rows).append_column(
            "value", _values(rows, name))

    def timers(self, uid: str) -> pa.Table:
        """Each key's registered timers: ``domain`` (event or processing), key, namespace, timestamp."""
        parts = []
        for domain in TIMERS:
            rows = self._merged(uid, TIMER_PREFIX + domain)
            parts.append(_with_windows(rows).append_column(
                "domain", pa.array([domain] * rows.num_rows, pa.string())).append_column(
                "timestamp", rows.column("timestamp")))
        return pa.concat_tables(parts)

    def operator_state(self, uid: str, name: str) -> pa.Table:
        """An operator (list or union) or broadcast state: one row per element, with the subtask
        that wrote it and its ``distribution`` (split, union, broadcast)."""
        rows = [t.filter(pc.equal(t.column("state_name"), name)) for t in self._tables(uid)]
        rows = [r for r in rows if r.num_rows]
        if not rows:
            rows = [t.filter(pc.equal(t.column("state_name"), OPERATOR_PREFIX + name)) for t in self._tables(uid)]
            rows = [r for r in rows if r.num_rows]
        if not rows:
            raise CheckpointException(f"operator {uid!r} has no operator state {name!r}; its states: "
                                      f"{', '.join(self.state_names(uid))}")
        table = pa.concat_tables(rows, promote_options="default")
        values = decode_values(table, table.column("state_name")[0].as_py(), state_types(rows[0]))
        broadcast = [isinstance(v, tuple) and len(v) == 2 and table.column("distribution")[0].as_py() == "broadcast"
                     for v in values[:1]]
        if broadcast and broadcast[0]:      # a broadcast state's element is an entry (key, value)
            out = pa.table({"subtask": table.column("subtask"), "distribution": table.column("distribution"),
                            "key": _inferred([k for k, _ in values]), "value": _inferred([v for _, v in values])})
            return out
        return pa.table({"subtask": table.column("subtask"), "distribution": table.column("distribution"),
                         "value": _inferred(values)})

    # -- Spark

    def read_keyed_state(self, spark, uid: str, name: str):
        """``keyed_state`` as a DataFrame: read by Spark from the state files when their rows are
        the DataFrame as they stand (``runtime.state_processor.dataframe``), else of the Arrow view."""
        op = self.operator(uid)
        files = [f for f in self.point.files() if f["operator_id"] == op["operator_id"]]
        df = read_keyed_state_files(spark, files, name)
        return df if df is not None else to_dataframe(spark, self.keyed_state(uid, name))

    def read_timers(self, spark, uid: str):
        return to_dataframe(spark, self.timers(uid))

    def read_list_state(self, spark, uid: str, name: str):
        return to_dataframe(spark, self.operator_state(uid, name))

    read_union_state = read_list_state
    read_broadcast_state = read_list_state

    def register_views(self, spark, uid: str) -> list[str]:
        """Each state of the operator as a temp view named after it (``timers`` for its timers);
        returns the view names."""
        views = []
        for name in self.state_names(uid):
            view = _view_name(name)
            df = to_dataframe(spark, self.operator_state(uid, name)) if self._is_operator_state(uid, name) else \
                self.read_keyed_state(spark, uid, name)
            df.createOrReplaceTempView(view)
            views.append(view)
        timers = self.timers(uid)
        if timers.num_rows:
            to_dataframe(spark, timers).createOrReplaceTempView("timers")
            views.append("timers")
        return views

    # -- the rows

    def _tables(self, uid: str) -> list[pa.Table]:
        op = self.operator(uid)
        return [read_state_file(f["path"], checksum=f.get("checksum"))
                for f in self.point.files() if f["operator_id"] == op["operator_id"]]

    def _is_operator_state(self, uid: str, name: str) -> bool:
        return any(t.filter(pc.equal(t.column("state_name"), name)).column("key_group").null_count
                   for t in self._tables(uid))

    def _merged(self, uid: str, name: str) -> pa.Table:
        """The rows of state ``name`` as the chain leaves them: the last file's row of each
        (key group, key, namespace; a timer's timestamp too) wins, and a deleted one is gone."""
        parts = [t.filter(pc.equal(t.column("state_name"), name)) for t in self._tables(uid)]
        parts = [p for p in parts if p.num_rows]
        if not parts:
            return _empty(name)
        table = pa.concat_tables(parts, promote_options="default")
        if "deleted" not in table.column_names:
            return table
        # An increment is in the chain: the last row of each entry (keys and namespaces are text).
        ident = zip(table.column("key_group").to_pylist(), table.column("key").to_pylist(),
                    table.column("key_bytes").to_pylist(), table.column("namespace").to_pylist(),
                    table.column("timestamp").to_pylist())      # a timer is its key, namespace and time
        last = {}
        for i, entry in enumerate(ident):
            last[entry] = i
        deleted = table.column("deleted").fill_null(False).to_pylist()
        keep = sorted(i for i in last.values() if not deleted[i])
        return table.take(pa.array(keep, pa.int64()))


def _empty(name: str) -> pa.Table:
    return BASE_SCHEMA.empty_table()


def _keys(rows: pa.Table) -> pa.Array:
    """The keys, typed: the text column, or the pickled keys decoded and inferred."""
    key = rows.column("key").combine_chunks()
    exact = rows.column("key_bytes").combine_chunks()
    if exact.null_count == len(exact):
        return key
    return _inferred([k if b is None else pickle.loads(b) for k, b in zip(key.to_pylist(), exact.to_pylist())])


def _with_windows(rows: pa.Table) -> pa.Table:
    """The key decoded, and a time window's namespace as ``window_start``/``window_end``."""
    out = pa.table({"key_group": rows.column("key_group"), "key": _keys(rows), "namespace": rows.column("namespace")})
    ns = out.column("namespace").combine_chunks()
    if len(ns) and ns.null_count < len(ns) and pc.any(pc.starts_with(ns, "TimeWindow(")).as_py():
        parts = pc.extract_regex(ns, _WINDOW)
        out = out.append_column("window_start", parts.field("window_start").cast(pa.int64())).append_column(
            "window_end", parts.field("window_end").cast(pa.int64()))
    return out


def _values(rows: pa.Table, name: str) -> pa.Array:
    """The state's values: its typed column as it is, else the pickled values decoded."""
    column = value_column(name)
    pickled = "value" in rows.column_names and rows.column("value").null_count < rows.num_rows
    if column in rows.column_names and not pickled:
        return rows.column(column).combine_chunks()
    return _inferred(decode_values(rows, name, state_types(rows)))


def _inferred(values: list) -> pa.Array:
    if not values:
        return pa.array([], pa.null())
    array = infer_array(values)
    if array is None:
        return pa.array([repr(v) for v in values], pa.string())
    return array


def _view_name(state: str) -> str:
    import re
    return re.sub(r"[^0-9A-Za-z_]", "_", state.removeprefix(OPERATOR_PREFIX).removeprefix("_broadcast/"))


def to_dataframe(spark, table: pa.Table):
    """A DataFrame of an Arrow table (Spark 4 takes Arrow as it is)."""
    if table.num_rows == 0 and any(pa.types.is_null(f.type) for f in table.schema):
        table = table.select([f.name for f in table.schema if not pa.types.is_null(f.type)])
    return spark.createDataFrame(table)
