"""The rows of a state table: what an operator's snapshot looks like on disk.

One Delta table per stateful operator (named by its uid), partitioned by ``checkpoint_id``.
A task writes one Parquet file per operator per snapshot; a row is one of

* keyed state: ``key_group``, ``state_name``, ``namespace``, ``key``, and the value;
* a timer: ``state_name`` ``_timer_state/event`` or ``_timer_state/processing``, key,
  namespace and ``timestamp``;
* operator state (per subtask, no key group): ``state_name``, ``distribution`` (``split``
  list state is dealt round-robin on restore, ``union`` given whole to every subtask), value.

Keys are stored as strings when they are strings (``key_bytes`` holds the pickled key
otherwise, ``key`` a readable rendering). A value goes to the column ``value_<state name>``
typed as its descriptor declares, and pickled into ``value`` when no type is declared, so
the tables read naturally in Spark, DuckDB or pandas. The declared types travel in the file's
metadata, so a restore decodes values before the operator registers its descriptors.

Pure pyarrow: this runs inside Spark tasks and on the driver.
"""
from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import pickle
import re
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from runtime.common.arrow import arrow_to_records, records_to_arrow
from runtime.common.pickling import dumps_each
from runtime.common.typeinfo import PickledBytesTypeInfo, TypeInformation
from runtime.datastream.window import GlobalWindow, TimeWindow
from runtime.state.backend import TOMBSTONE, KeyedColumns, chunked, rows_by_state
from runtime.storage.delta_files import FileStats
from runtime.storage.filesystems import file_writer, filesystem, join

TIMER_PREFIX = "_timer_state/"
SNAPSHOT_CHUNK = 100_000        # keyed rows or timers turned into Arrow columns at a time
RESTORE_CHUNK = 100_000         # restored keyed rows decoded into Python objects at a time
OPERATOR_PREFIX = "_operator/"
SOURCE_STATE = "SourceReaderState"      # Flink's name for a source's list state of splits
SPLIT, UNION = "split", "union"
TYPES_METADATA = b"sluice.state_types"
# The engine's own keyed states, typed by the engine (from the stream's type), not by the user.
WINDOW_CONTENTS = "window-contents"     # a window's elements, or its pre-aggregate
ROLLING_AGGREGATE = "_op_state"         # a keyed sum/min/max/reduce's running value
ENGINE_STATES = frozenset({WINDOW_CONTENTS, ROLLING_AGGREGATE})

BASE_SCHEMA = pa.schema([
    pa.field("subtask", pa.int32()),
    pa.field("key_group", pa.int32()),
    pa.field("state_name", pa.string()),
    pa.field("namespace", pa.string()),
    pa.field("key", pa.string()),
    pa.field("key_bytes", pa.binary()),
    pa.field("timestamp", pa.int64()),
    pa.field("distribution", pa.string()),
    pa.field("value", pa.binary()),
])


class StateSerializationException(TypeError):
    """A state value does not fit the type its descriptor declares."""


def state_table_name(node) -> str:
    """The folder of an operator's state table: its uid when it has one, else its operator id."""
    return re.sub(r"[^0-9A-Za-z_.-]", "-", node.uid) if node.uid else node.operator_id


def value_column(state_name: str) -> str:
    return "value_" + re.sub(r"[^0-9A-Za-z_]", "_", state_name)


def _declared(type_info: Optional[TypeInformation]) -> bool:
    return type_info is not None and not isinstance(type_info, PickledBytesTypeInfo)


# ---- keys and namespaces -------------------------------------------------------------------

def encode_namespace(ns) -> Optional[str]:
    if ns is None:
        return None
    if type(ns) is TimeWindow:
        return f"TimeWindow({ns.start}, {ns.end})"
    if isinstance(ns, GlobalWindow):
        return "GlobalWindow"
    return "pickle:" + base64.b64encode(pickle.dumps(ns, protocol=5)).decode("ascii")


_TIME_WINDOW = re.compile(r"TimeWindow\((-?\d+), (-?\d+)\)$")


def decode_namespace(text: Optional[str]):
    if text is None:
        return None
    m = _TIME_WINDOW.match(text)
    if m:
        return TimeWindow(int(m.group(1)), int(m.group(2)))
    if text == "GlobalWindow":
        return GlobalWindow.get()
    if text.startswith("pickle:"):
        return pickle.loads(base64.b64decode(text[7:]))
    raise ValueError(f"unreadable state namespace {text!r}")


def _namespaces(values: list) -> pa.Array:
    cache: dict = {}
    out = []
    for ns in values:
        try:
            text = cache[ns]
        except KeyError:
            text = cache[ns] = encode_namespace(ns)
        except TypeError:       # an unhashable namespace
            text = encode_namespace(ns)
        out.append(text)
    return pa.array(out, pa.string())


def _keys(keys: list) -> tuple[pa.Array, pa.Array]:
    """The key column (text), and the exact key pickled where text cannot hold it: a key that
    is not a str, or a str with a lone surrogate (bytes decoded with surrogateescape), which
    UTF-8 cannot encode."""
    try:
        return pa.array(keys, pa.string()), pa.nulls(len(keys), pa.binary())
    except (pa.ArrowTypeError, pa.ArrowInvalid, TypeError, UnicodeEncodeError):
        pass
    text = [k is None or _is_text(k) for k in keys]
    readable = [k if t else repr(k)[:200] for k, t in zip(keys, text)]
    exact = [None if t else pickle.dumps(k, protocol=5) for k, t in zip(keys, text)]
    return pa.array(readable, pa.string()), pa.array(exact, pa.binary())


def _is_text(key) -> bool:
    if type(key) is not str:
        return False
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _pylist(column) -> list:
    """Python values of a column; through NumPy when it has no nulls (10x faster than to_pylist)."""
    if column.null_count:
        return column.to_pylist()
    return column.to_numpy(zero_copy_only=False).tolist()


def decode_keys(table: pa.Table) -> list:
    keys = _pylist(table.column("key"))
    if table.column("key_bytes").null_count == table.num_rows:
        return keys
    return [k if b is None else pickle.loads(b) for k, b in zip(keys, table.column("key_bytes").to_pylist())]


# ---- values --------------------------------------------------------------------------------

def _encode_typed(values: list, type_info: TypeInformation, state_name: str, operator: str) -> pa.Array:
    try:
        batch = records_to_arrow(values, type_info)
    except (TypeError, ValueError, pa.ArrowException) as e:
        bad = next((v for v in values if not _fits(v, type_info)), None)
        raise StateSerializationException(
            f"{operator}: state '{state_name}' is declared as {type_info} but holds "
            f"{bad!r} ({type(bad).__name__}): {e}. Declare the state with the type of its values, "
            f"or without a type to store it pickled.") from e
    if batch.num_columns == 1 and batch.schema.names == ["f0"] and not type_info.is_composite_type():
        return batch.column(0)
    return pa.StructArray.from_arrays(batch.columns, fields=list(batch.schema))


def _fits(value, type_info) -> bool:
    try:
        records_to_arrow([value], type_info)
        return True
    except Exception:
        return False


def _decode_typed(array: pa.ChunkedArray, type_info: TypeInformation) -> list:
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    if isinstance(array, pa.StructArray) and type_info.is_composite_type():
        return arrow_to_records(pa.RecordBatch.from_struct_array(array), type_info)
    return arrow_to_records(pa.RecordBatch.from_arrays([array], names=["f0"]), type_info)


def _pickled(values: list) -> pa.Array:
    return pa.array(dumps_each(values), pa.binary())


# ---- writing -------------------------------------------------------------------------------

def _part(n: int, subtask: int, state_name: str, columns: dict) -> pa.Table:
    base = {"subtask": pa.array([subtask] * n, pa.int32()), "state_name": pa.array([state_name] * n, pa.string())}
    base.update(columns)
    arrays, fields = [], []
    for f in BASE_SCHEMA:
        arrays.append(base.pop(f.name) if f.name in base else pa.nulls(n, f.type))
        fields.append(f)
    for name, array in base.items():
        arrays.append(array)
        fields.append(pa.field(name, array.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _key_columns(key_groups, namespaces, keys) -> dict:
    key, key_bytes = _keys(list(keys))
    return {"key_group": pa.array(key_groups, pa.int32()), "namespace": _namespaces(list(namespaces)),
            "key": key, "key_bytes": key_bytes}


def _keyed_part(rows: list, name: str, type_info, subtask: int, operator: str) -> list[pa.Table]:
    """One state's rows of a chunk: deletions (an increment's) with key columns only, the other
    rows with their values typed by the state's declared type, else pickled."""
    parts = []
    gone = [r for r in rows if r[4] is TOMBSTONE]
    if gone:
        kgs, _, nss, keys, _ = zip(*gone)
        parts.append(_part(len(gone), subtask, name, {
            **_key_columns(kgs, nss, keys), "deleted": pa.array([True] * len(gone))}))
        rows = [r for r in rows if r[4] is not TOMBSTONE]
        if not rows:
            return parts
    kgs, _, nss, keys, values = zip(*rows)
    columns = _key_columns(kgs, nss, keys)
    typed = None
    if _declared(type_info):
        try:
            typed = _encode_typed(list(values), type_info, name, operator)
        except StateSerializationException:
            if name not in ENGINE_STATES:
                raise
            # The engine typed its own state from the stream's declared type, which the
            # records do not keep to: store them pickled rather than fail the checkpoint.
    if typed is not None:
        columns[value_column(name)] = typed
    else:
        columns["value"] = _pickled(list(values))
    parts.append(_part(len(rows), subtask, name, columns))
    return parts


def _keyed_blocks(keyed) -> Iterator[tuple]:
    """(state name, its rows or KeyedColumns) of each chunk of ``SNAPSHOT_CHUNK`` entries; a
    backend's scan with ``column_chunks`` decodes its chunks itself."""
    if hasattr(keyed, "column_chunks"):
        yield from keyed.column_chunks(SNAPSHOT_CHUNK)
        return
    for chunk in chunked(keyed, SNAPSHOT_CHUNK):
        by_state = rows_by_state(chunk)
        del chunk
        yield from by_state.items()


def _columns_part(block: KeyedColumns, name: str, type_info, subtask: int, operator: str) -> Optional[list]:
    """A state's entries given as columns, when their values are already the column
    ``_keyed_part`` would type them as; else None."""
    n = len(block.keys)
    if not n or not _declared(type_info):
        return None
    typed_as = _encode_typed([block.values[0].as_py()], type_info, name, operator).type
    if block.values.type != typed_as:
        return None
    return [_part(n, subtask, name, {
        "key_group": block.key_groups, "namespace": pa.nulls(n, pa.string()), "key": block.keys,
        "key_bytes": pa.nulls(n, pa.binary()), value_column(name): block.values})]


def _columns_rows(block: KeyedColumns, name: str) -> list:
    return list(zip(block.key_groups.to_pylist(), itertools.repeat(name), itertools.repeat(None),
                    block.keys.to_pylist(), block.values.to_pylist()))


def snapshot_to_table(snapshot: dict, subtask: int, operator: str) -> Optional[pa.Table]:
    """An operator's snapshot (``TaskOperator.snapshot()``) as rows of its state table."""
    used_types: dict = {}
    parts = list(_snapshot_parts(snapshot, subtask, operator, used_types))
    if not parts:
        return None
    table = pa.concat_tables(parts, promote_options="default") if len(parts) > 1 else parts[0]
    return table.replace_schema_metadata(_types_metadata(used_types)) if used_types else table


def _types_metadata(types: dict) -> dict:
    return {TYPES_METADATA: base64.b64encode(pickle.dumps(types, protocol=5))}


def _snapshot_parts(snapshot: dict, subtask: int, operator: str, used_types: dict) -> Iterator[pa.Table]:
    """The tables of an operator's snapshot, one state's chunk at a time; ``used_types`` gets the
    declared types of the states written in typed columns.

    Keyed rows and timers may come as iterators (a store's scan): they are taken in chunks of
    ``SNAPSHOT_CHUNK`` rows, so a task holds one chunk of them as Python objects at a time and
    the rest as Arrow columns (a few dozen bytes a row instead of a few hundred)."""
    types: dict = snapshot.get("types", {})
    for name, block in _keyed_blocks(snapshot.get("keyed", ())):
        if isinstance(block, KeyedColumns):
            part = _columns_part(block, name, types.get(name), subtask, operator)
            if part is None:    # not of the declared type's column: typed (or refused) as rows
                part = _keyed_part(_columns_rows(block, name), name, types.get(name), subtask, operator)
        else:
            part = _keyed_part(block, name, types.get(name), subtask, operator)
        if any(value_column(name) in p.column_names for p in part):
            used_types[name] = types[name]
        yield from part
    # Timer rows: (key_group, domain, timestamp, key, namespace), and in an increment a sixth
    # field, TOMBSTONE for a removed timer.
    for chunk in chunked(snapshot.get("timers", ()), SNAPSHOT_CHUNK):
        by_domain: dict[tuple, list] = {}
        for row in chunk:
            by_domain.setdefault((row[1], len(row) > 5 and row[5] is TOMBSTONE), []).append(row[:5])
        for (domain, deleted), rows in by_domain.items():
            kgs, _, timestamps, keys, nss = zip(*rows)
            columns = {**_key_columns(kgs, nss, keys), "timestamp": pa.array(timestamps, pa.int64())}
            if deleted:
                columns["deleted"] = pa.array([True] * len(rows))
            yield _part(len(rows), subtask, TIMER_PREFIX + domain, columns)
    for name, value in snapshot.items():
        if name in ("keyed", "timers", "types", "operator_state"):
            continue
        yield _part(1, subtask, OPERATOR_PREFIX + name, {
            "distribution": pa.array([UNION], pa.string()), "value": _pickled([value])})
    for name, (distribution, values) in snapshot.get("operator_state", {}).items():
        yield _part(len(values), subtask, name, {
            "distribution": pa.array([distribution] * len(values), pa.string()), "value": _pickled(values)})


@dataclass(frozen=True)
class StateFile:
    """A snapshot file of one operator of one subtask: the handle a task acknowledges."""

    operator_id: str
    subtask: int
    path: str                  # absolute
    size: int
    rows: int
    key_group_min: Optional[int]
    key_group_max: Optional[int]
    schema: Any                # pa.Schema of the file (typed columns included)
    stats: str                 # Delta statistics of the file
    checksum: str = ""         # "sha256:<hex>" of the file's bytes, verified when a restore reads it
    increment: bool = False    # the changes since the previous snapshot (incremental checkpoints)


def write_state_file(table: pa.Table, directory: str, operator_id: str, subtask: int,
                     increment: bool = False) -> StateFile:
    return _write_parts([table], table.schema, directory, operator_id, subtask, increment)


def write_snapshot(snapshot: dict, directory: str, operator_id: str, subtask: int, operator: str,
                   increment: bool = False) -> Optional[StateFile]:
    """An operator's snapshot written as its state file a chunk at a time (a Parquet row group
    each): a task holds one chunk's columns and the file's compressed bytes, never the whole
    table (about 300 MB for 5,000,000 entries, beside the state). The file has a typed value
    column for every state declared with a type, and a ``deleted`` column in an increment."""
    types = {n: t for n, t in snapshot.get("types", {}).items() if _declared(t)}
    parts = _snapshot_parts(snapshot, subtask, operator, {})
    first = next(parts, None)
    if first is None:
        return None
    fields = list(BASE_SCHEMA) + [pa.field(value_column(n), _encode_typed([], t, n, operator).type)
                                  for n, t in types.items()]
    if increment:
        fields.append(pa.field("deleted", pa.bool_()))
    schema = pa.schema(fields, metadata=_types_metadata(types) if types else None)
    return _write_parts((_conformed(p, schema) for p in itertools.chain([first], parts)), schema,
                        directory, operator_id, subtask, increment)


def _conformed(part: pa.Table, schema: pa.Schema) -> pa.Table:
    """``part`` with ``schema``'s columns: its own (cast when typed otherwise), the others null."""
    unknown = set(part.column_names) - set(schema.names)
    if unknown:
        raise ValueError(f"state file columns {sorted(unknown)} are not in its schema {schema.names}")
    n = part.num_rows
    return pa.Table.from_arrays(
        [(part.column(f.name) if part.column(f.name).type == f.type else part.column(f.name).cast(f.type))
         if f.name in part.column_names else pa.nulls(n, f.type) for f in schema], schema=schema)


def _write_parts(parts: Iterable[pa.Table], schema: pa.Schema, directory: str, operator_id: str, subtask: int,
                 increment: bool) -> StateFile:
    label = f"{subtask:05d}" if subtask >= 0 else "enumerator"     # -1: written by the driver
    path = join(directory, f"part-{label}-{uuid.uuid4().hex}.parquet")
    stats = FileStats()
    # Streamed to the file as the writer makes its pages (a build's full snapshot held ~30 MB of
    # compressed bytes, and twice that as the buffer grew, beside the state), and never a
    # half-written file under the final name (file_writer).
    with file_writer(path) as out:
        sink = _Digesting(out)
        with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
            for part in parts:
                writer.write_table(part)
                stats.add(part.drop_columns([c for c in part.column_names if c.startswith("value")]))
    lo, hi = stats.mins.get("key_group"), stats.maxs.get("key_group")
    return StateFile(operator_id, subtask, path, sink.size, stats.rows, lo, hi, schema, stats.json(),
                     sink.checksum(), increment)


class _Digesting:
    """A file's writer that also takes its bytes' checksum (``checksum_of``) and size."""

    closed = False

    def __init__(self, out):
        self.out = out
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data) -> int:
        n = memoryview(data).nbytes
        self.digest.update(data)
        self.size += n
        self.out.write(data)
        return n

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass

    def close(self) -> None:       # the file is file_writer's to close
        self.closed = True

    def checksum(self) -> str:
        return _named(self.digest)


def checksum_of(data) -> str:
    """SHA-256 of a file's bytes. Measured on 100 MB (2 shared cores with SHA extensions):
    SHA-256 71 ms, zlib.crc32 45 ms, BLAKE2b 179 ms, against 200-300 ms to decode the file;
    SHA-256 costs little more than a CRC and also tells a file replaced by another one."""
    return _named(hashlib.sha256(data))


def _named(digest) -> str:
    return "sha256:" + digest.hexdigest()


# ---- reading -------------------------------------------------------------------------------

class CorruptStateException(IOError):
    """A state file is missing, unreadable, or not the bytes its checkpoint recorded.

    ``damaged_files`` maps the path to what is wrong with it (the message)."""

    def __init__(self, path: str, what: str):
        super().__init__(f"state file {path} {what}")
        self.path = path
        self.damaged_files = {path: str(self)}


CHECKSUM_MISMATCH = "is corrupt (its bytes differ from the checksum recorded with the checkpoint)"


def read_state_file(path: str, key_group_range=None, checksum: Optional[str] = None) -> pa.Table:
    """The rows of a state file; with ``checksum`` (recorded when the file was written) its bytes
    are verified on the way, as they are read: one read, not a check and then a read."""
    with _corrupt_as(path):
        fs, inside = filesystem(path)
        table = pq.read_table(_verified(path, checksum)) if checksum else pq.read_table(inside, filesystem=fs)
    return _in_range(table, key_group_range)


def read_state_parts(path: str, key_group_range=None, checksum: Optional[str] = None) -> Iterator:
    """The rows of a state file a row group (a writer's chunk) at a time, for a restore that
    loads them as they come: row groups outside ``key_group_range`` are not decoded, a column
    null throughout a row group comes as a null-typed column (no buffers: a 5,000,000-row file's
    null columns took about 150 MB), and a row group of one keyed state comes as a
    ``DeferredPart``, decoded when a backend loads it (``table_to_snapshot`` keeps it as it is):
    a restore holds the file's compressed bytes and one row group, not every row group at once.
    Each part names its file (``FILE_METADATA``)."""
    with _corrupt_as(path):
        fs, inside = filesystem(path)
        source = pa.BufferReader(_verified(path, checksum)) if checksum else fs.open_input_file(inside)
        parquet = pq.ParquetFile(source)
        metadata = {**(parquet.schema_arrow.metadata or {}), FILE_METADATA: path.encode()}
        names = parquet.schema_arrow.names
        for i in range(parquet.num_row_groups):
            group = parquet.metadata.row_group(i)
            # Statistics are per leaf column (a struct value has several): by path.
            stats = {group.column(j).path_in_schema: group.column(j).statistics for j in range(group.num_columns)}
            kg = stats.get("key_group")
            if key_group_range is not None and kg is not None and kg.has_min_max and group.num_rows and (
                    kg.max < key_group_range.start_key_group or kg.min > key_group_range.end_key_group):
                continue
            null = {name for name in names if name in _NULLABLE_BASE and stats.get(name) is not None
                    and stats[name].null_count == group.num_rows}

            def load(i=i, null=null) -> pa.Table:
                with _corrupt_as(path):
                    part = _in_range(parquet.read_row_group(i, columns=[n for n in names if n not in null]),
                                     key_group_range)
                columns = {n: part.column(n) if n not in null else pa.nulls(part.num_rows) for n in names
                           if not (n == "deleted" and n in null)}
                return pa.table(columns).replace_schema_metadata(metadata)

            state = stats.get("state_name")
            if state is not None and state.has_min_max and state.min == state.max and kg is not None \
                    and kg.null_count == 0 and not state.min.startswith(TIMER_PREFIX):
                yield DeferredPart(state.min, load, "deleted" in names and "deleted" not in null, metadata)
            else:
                yield load()


@dataclass(frozen=True)
class DeferredPart:
    """A row group of one keyed state of a state file, decoded by ``load()`` when needed."""

    name: str
    load: Any
    deletions: bool         # whether some rows may be deletions (an increment's)
    metadata: dict


FILE_METADATA = b"sluice.state_file"
# Base columns a restore reads as null-typed when null throughout a row group (never key_group,
# key, state_name: every row has them, or a row group without them is operator state).
_NULLABLE_BASE = frozenset({"namespace", "key_bytes", "timestamp", "distribution", "value", "deleted"})


@contextlib.contextmanager
def _corrupt_as(path: str):
    try:
        yield
    except FileNotFoundError as e:
        raise CorruptStateException(path, "is missing") from e
    except (OSError, pa.ArrowException) as e:
        if isinstance(e, CorruptStateException):
            raise
        raise CorruptStateException(path, f"is corrupt: {e}") from e


def _verified(path: str, checksum: str) -> pa.Buffer:
    fs, inside = filesystem(path)
    with fs.open_input_stream(inside) as source:    # read, not mapped: a file cut short is no SIGBUS
        data = source.read_buffer()
    if checksum_of(memoryview(data)) != checksum:
        raise CorruptStateException(path, CHECKSUM_MISMATCH)
    return data


def _in_range(table: pa.Table, key_group_range) -> pa.Table:
    if key_group_range is None:
        return table
    kg = table.column("key_group")
    if not len(kg):
        return table
    if kg.null_count == 0 and key_group_range.start_key_group <= pc.min(kg).as_py() \
            and pc.max(kg).as_py() <= key_group_range.end_key_group:
        return table        # all in range: no copy
    # Kleene logic: rows without a key group (operator state) are kept, not nulled away.
    keep = pc.or_kleene(pc.is_null(kg), pc.and_(pc.greater_equal(kg, key_group_range.start_key_group),
                                          pc.less_equal(kg, key_group_range.end_key_group)))
    return table.filter(keep)


def state_types(table: pa.Table) -> dict:
    return _types_of(table.schema.metadata or {})


def _types_of(metadata: dict) -> dict:
    meta = metadata.get(TYPES_METADATA)
    return pickle.loads(base64.b64decode(meta)) if meta else {}


class KeyedRows:
    """Restored keyed state, column-wise per state: iterates as (key_group, name, namespace,
    key, value) rows; the backends load ``column_chunks()`` without building the rows.

    ``chunks`` holds decoded chunks (name, key_groups, namespaces, keys, values), or parts of
    state tables, decoded ``RESTORE_CHUNK`` rows at a time as they are loaded: a rebuild holds
    its state as Arrow columns and one chunk of it as Python objects."""

    def __init__(self):
        self.chunks: list = []
        self.deletions = False              # some values are TOMBSTONEs: apply in order

    def column_chunks(self, skip=frozenset()) -> Iterator[tuple]:
        """Decoded chunks (name, key_groups, namespaces, keys, values), but of the states ``skip``."""
        for chunk in self.chunks:
            if _state_of(chunk) in skip:
                continue
            if isinstance(chunk, _StatePart):
                yield from chunk.decode()
            else:
                yield chunk

    def state_names(self) -> list:
        return list(dict.fromkeys(map(_state_of, self.chunks)))

    def _parts_of(self, name: str) -> list:
        return [c for c in self.chunks if _state_of(c) == name]

    def single_part(self, name: str) -> bool:
        """Whether state ``name`` comes from one snapshot (a full snapshot's: each key once)."""
        parts = self._parts_of(name)
        return len(parts) <= 1 or (all(isinstance(p, _StatePart) for p in parts)
                                   and len({p.file for p in parts}) == 1 and parts[0].file is not None)

    def text_key_columns(self, name: str) -> Optional[tuple]:
        """(keys, values) of state ``name`` as chunked Arrow columns (string; int64 or float64, a
        chunk per row group, not copied into one) when it comes from one snapshot (each key once)
        of text keys in the void namespace with values in their typed column: what a backend loads
        without a Python object per entry; else None."""
        parts = self._parts_of(name)
        if not parts or not self.single_part(name) or not all(isinstance(p, _StatePart) and name in p.types
                                                             for p in parts):
            return None
        column = value_column(name)
        keys, values = [], []
        for p in parts:
            part = p.table()
            n = part.num_rows
            if column not in part.column_names or part.column(column).null_count \
                    or part.column("namespace").null_count < n or part.column("key_bytes").null_count < n \
                    or ("value" in part.column_names and part.column("value").null_count < n) \
                    or ("deleted" in part.column_names and _deleted(part) is not None):
                return None
            wide = {pa.int64(): pa.int64(), pa.int32(): pa.int64(), pa.float64(): pa.float64()}.get(
                part.column(column).type)
            if wide is None or part.column("key").type != pa.string():
                return None
            keys.extend(part.column("key").chunks)
            values.extend(part.column(column).cast(wide).chunks)
        return pa.chunked_array(keys, pa.string()), pa.chunked_array(values, values[0].type if values else pa.int64())

    def __iter__(self):
        for name, kgs, nss, keys, values in self.column_chunks():
            for kg, ns, key, value in zip(kgs, nss, keys, values):
                yield kg, name, ns, key, value

    def __len__(self):
        return sum(c.table().num_rows if isinstance(c, _StatePart) else len(c[1]) for c in self.chunks)


def _state_of(chunk) -> str:
    """The state name of a KeyedRows chunk: a _StatePart, or a decoded (name, ...) tuple."""
    return chunk.name if isinstance(chunk, _StatePart) else chunk[0]


@dataclass(frozen=True)
class _StatePart:
    """One state's rows of a state table, not decoded yet (``part``), or not read yet (``load``:
    read each time it is needed, so a restore never holds every row group)."""

    name: str
    part: Optional[pa.Table]
    types: dict
    file: Optional[bytes] = None    # the state file it was read from (read_state_parts)
    load: Any = None

    def table(self) -> pa.Table:
        return self.part if self.part is not None else self.load()

    def decode(self) -> Iterator[tuple]:
        table = self.table()
        for start in range(0, table.num_rows, RESTORE_CHUNK):
            rows = table.slice(start, RESTORE_CHUNK)
            values = decode_values(rows, self.name, self.types)
            deleted = _deleted(rows)
            if deleted is not None:
                values = [TOMBSTONE if gone else v for v, gone in zip(values, deleted)]
            yield (self.name, _pylist(rows.column("key_group")), _decode_namespaces(rows.column("namespace")),
                   decode_keys(rows), values)


def _decode_namespaces(column) -> list:
    if column.null_count == len(column):
        return [None] * len(column)
    cache: dict = {}
    return [cache[t] if t in cache else cache.setdefault(t, decode_namespace(t)) for t in column.to_pylist()]


def decode_values(part: pa.Table, state_name: str, types: dict) -> list:
    """The values of one state's rows: typed from its column when declared, else unpickled."""
    column = value_column(state_name)
    if state_name in types and column in part.column_names:
        values = _decode_typed(part.column(column), types[state_name])
        if "value" in part.column_names and part.column("value").null_count < part.num_rows:
            # Chunks where the engine's typing of its own state fell back to pickling.
            values = [v if b is None else pickle.loads(b) for v, b in zip(values, part.column("value").to_pylist())]
        return values
    return [None if b is None else pickle.loads(b) for b in part.column("value").to_pylist()]


def _deleted(part: pa.Table) -> Optional[list]:
    """Which rows of an incremental snapshot are deletions (None: none are)."""
    if "deleted" not in part.column_names or not pc.any(part.column("deleted")).as_py():
        return None
    return part.column("deleted").fill_null(False).to_pylist()


def table_to_snapshot(tables: Iterable[pa.Table]) -> dict:
    """Keyed rows and timers of state tables, and operator state as {name: [(subtask, value)]}.

    ``tables`` are a chain in order (a full snapshot, then increments): a deleted keyed entry
    comes as a TOMBSTONE value after the rows it deletes (backends apply the rows in order);
    timers are given as they stand at the end of the chain."""
    keyed, timers, operator_state = KeyedRows(), {}, {}
    for table in tables:
        if isinstance(table, DeferredPart):
            keyed.deletions = keyed.deletions or table.deletions
            keyed.chunks.append(_StatePart(table.name, None, _types_of(table.metadata),
                                           table.metadata.get(FILE_METADATA), table.load))
            continue
        types = state_types(table)
        names = table.column("state_name")
        states = names.unique().to_pylist()
        for name in states:
            # A table of one state (most are) is its own part: no copy of a whole state.
            part = table if len(states) == 1 else table.filter(pc.equal(names, name))
            deleted = _deleted(part)
            if name.startswith(TIMER_PREFIX):
                domain = name[len(TIMER_PREFIX):]
                keys = decode_keys(part)
                nss = _decode_namespaces(part.column("namespace"))
                rows = zip(part.column("key_group").to_pylist(), [domain] * part.num_rows,
                           part.column("timestamp").to_pylist(), keys, nss)
                if deleted is None:
                    timers.update((row, None) for row in rows)
                else:
                    for row, gone in zip(rows, deleted):
                        if gone:
                            timers.pop(row, None)
                        else:
                            timers[row] = None
            elif part.column("key_group").null_count == part.num_rows:
                operator_state.setdefault(name, []).extend(
                    zip(part.column("subtask").to_pylist(), decode_values(part, name, types)))
            else:
                keyed.deletions = keyed.deletions or deleted is not None
                # Only the columns a decode reads stay until the backend loads the part.
                part = part.select([c for c in part.column_names if c not in ("subtask", "state_name")])
                keyed.chunks.append(_StatePart(name, part, types, (table.schema.metadata or {}).get(FILE_METADATA)))
    return {"keyed": keyed, "timers": list(timers), "operator_state": operator_state}
