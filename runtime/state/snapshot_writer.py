"""Writing an operator's snapshot as rows of its state table (``runtime.state.snapshot_format``):
a task's state file, a chunk of rows at a time (a Parquet row group each), its checksum taken as
it is written.

Pure pyarrow: this runs inside Spark tasks and on the driver.
"""
from __future__ import annotations

import hashlib
import itertools
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from runtime.state.backend import TOMBSTONE, KeyedColumns, chunked, rows_by_state
from runtime.state.snapshot_format import (
    BASE_SCHEMA, ENGINE_STATES, OPERATOR_PREFIX, TIMER_PREFIX, UNION, StateSerializationException, declared,
    encode_typed, key_columns, named_checksum, pickled, state_rows, types_metadata, value_column)
from runtime.storage.delta_files import FileStats
from runtime.storage.filesystems import file_writer, join

SNAPSHOT_CHUNK = 100_000        # keyed rows or timers turned into Arrow columns at a time


def _keyed_part(rows: list, name: str, type_info, subtask: int, operator: str) -> list[pa.Table]:
    """One state's rows of a chunk: deletions (an increment's) with key columns only, the other
    rows with their values typed by the state's declared type, else pickled."""
    parts = []
    gone = [r for r in rows if r[4] is TOMBSTONE]
    if gone:
        kgs, _, nss, keys, _ = zip(*gone)
        parts.append(state_rows(len(gone), subtask, name, {
            **key_columns(kgs, nss, keys), "deleted": pa.array([True] * len(gone))}))
        rows = [r for r in rows if r[4] is not TOMBSTONE]
        if not rows:
            return parts
    kgs, _, nss, keys, values = zip(*rows)
    columns = key_columns(kgs, nss, keys)
    typed = None
    if declared(type_info):
        try:
            typed = encode_typed(list(values), type_info, name, operator)
        except StateSerializationException:
            if name not in ENGINE_STATES:
                raise
            # The engine typed its own state from the stream's declared type, which the
            # records do not keep to: store them pickled rather than fail the checkpoint.
    if typed is not None:
        columns[value_column(name)] = typed
    else:
        columns["value"] = pickled(list(values))
    parts.append(state_rows(len(rows), subtask, name, columns))
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
    if not n or not declared(type_info):
        return None
    typed_as = encode_typed([block.values[0].as_py()], type_info, name, operator).type
    if block.values.type != typed_as:
        return None
    return [state_rows(n, subtask, name, {
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
    return table.replace_schema_metadata(types_metadata(used_types)) if used_types else table


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
            columns = {**key_columns(kgs, nss, keys), "timestamp": pa.array(timestamps, pa.int64())}
            if deleted:
                columns["deleted"] = pa.array([True] * len(rows))
            yield state_rows(len(rows), subtask, TIMER_PREFIX + domain, columns)
    for name, value in snapshot.items():
        if name in ("keyed", "timers", "types", "operator_state"):
            continue
        yield state_rows(1, subtask, OPERATOR_PREFIX + name, {
            "distribution": pa.array([UNION], pa.string()), "value": pickled([value])})
    for name, (distribution, values) in snapshot.get("operator_state", {}).items():
        yield state_rows(len(values), subtask, name, {
            "distribution": pa.array([distribution] * len(values), pa.string()), "value": pickled(values)})


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
    types = {n: t for n, t in snapshot.get("types", {}).items() if declared(t)}
    parts = _snapshot_parts(snapshot, subtask, operator, {})
    first = next(parts, None)
    if first is None:
        return None
    fields = list(BASE_SCHEMA) + [pa.field(value_column(n), encode_typed([], t, n, operator).type)
                                  for n, t in types.items()]
    if increment:
        fields.append(pa.field("deleted", pa.bool_()))
    schema = pa.schema(fields, metadata=types_metadata(types) if types else None)
    return _write_parts((_conformed(p, schema) for p in itertools.chain([first], parts)), schema,
                        directory, operator_id, subtask, increment)


def write_value_state(name: str, type_info, key_groups, keys: pa.Array, values: pa.Array, directory: str,
                      operator_id: str, subtask: int, operator: str, rows=None) -> Optional[StateFile]:
    """One value state's entries given as columns (each key once, in the void namespace, no null
    value) written as a state file: the rows ``write_snapshot`` writes for the same entries, made
    from the columns, without a Python object per entry (a bootstrap's,
    ``runtime.state_processor.bootstrap``). ``rows``: the entries' rows of the columns (ascending
    indexes; default every row), taken a row group at a time: the file's columns are made a row
    group at a time, never whole (a copy of 5,000,000 keys and values took 0.2 s of CPU, most of
    it the kernel's, giving the copies memory). ``values`` are cast to the type ``type_info``
    declares; a column that does not fit is refused, naming the state and both types.

    The file leaves out the base columns null throughout, and holds ``state_name`` as a
    dictionary of one entry (``snapshot_format.with_base_columns`` reads it back as every file):
    pyarrow hashed each row's state name to build that dictionary. Measured on 5,000,000 keys:
    0.74 s of CPU with the ten columns (and a copy of each chunk, and the keys' min and max), 0.37 s now."""
    n = len(keys) if rows is None else len(rows)
    if not n:
        return None
    typed_as = encode_typed([], type_info, name, operator).type
    try:
        values = values if values.type == typed_as else values.cast(typed_as)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise StateSerializationException(
            f"{operator}: state '{name}' is declared as {type_info} ({typed_as}), and its column of type "
            f"{values.type} does not convert to it: {e}. Give a column of the state's type, or declare "
            f"the state with the column's type.") from e
    value = value_column(name)
    # The schema a checkpoint records (the state table's), and the file's own columns.
    schema = pa.schema(list(BASE_SCHEMA) + [pa.field(value, typed_as)], metadata=types_metadata({name: type_info}))
    text = pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)
    key_groups, key_bytes = np.asarray(key_groups, dtype=np.int32), None
    if not text:        # keys rendered as text, and pickled, as Python objects: all at once
        keys, key_bytes = _keys_of(keys if rows is None else keys.take(pa.array(rows)))
        key_groups, values = (key_groups, values) if rows is None else (key_groups[rows], values.take(pa.array(rows)))
        rows = None
    fields = [BASE_SCHEMA.field("subtask"), BASE_SCHEMA.field("key_group"),
              pa.field("state_name", pa.dictionary(pa.int32(), pa.string())), BASE_SCHEMA.field("key")] \
        + ([BASE_SCHEMA.field("key_bytes")] if key_bytes is not None else []) + [pa.field(value, typed_as)]
    file_schema = pa.schema(fields, metadata=schema.metadata)
    # A row group's subtask column and state name indexes: slices of these.
    subtasks = pa.array(np.full(SNAPSHOT_CHUNK, subtask, np.int32))
    state, first_state = pa.array([name]), pa.array(np.zeros(SNAPSHOT_CHUNK, np.int32))

    def row_group(start: int) -> pa.Table:
        m = min(SNAPSHOT_CHUNK, n - start)
        if rows is None:
            groups, pick = key_groups[start:start + m], (lambda column: column.slice(start, m))
        else:
            at = rows[start:start + m]
            groups, pick = key_groups[at], (lambda column, taken=pa.array(at): column.take(taken))
        key = pick(keys)
        return pa.Table.from_arrays(
            [subtasks.slice(0, m), pa.array(groups), pa.DictionaryArray.from_arrays(first_state.slice(0, m), state),
             key if key.type == pa.string() else key.cast(pa.string())]
            + ([pick(key_bytes)] if key_bytes is not None else []) + [pick(values)], schema=file_schema)

    # Keys and values are mostly distinct: a dictionary for them would be built and thrown away.
    # Keys plain (zstd compresses them): 5,000,000 keys took 0.18 s of CPU to encode, 0.24 s as
    # DELTA_BYTE_ARRAY, and read back faster; numbers as deltas (near each other).
    encodings = {"key": "PLAIN"} if text else {}
    if pa.types.is_integer(typed_as):
        encodings[value] = "DELTA_BINARY_PACKED"
    return _write_parts((row_group(start) for start in range(0, n, SNAPSHOT_CHUNK)), file_schema, directory,
                        operator_id, subtask, False, dictionary=["key_group", "state_name"], encodings=encodings,
                        recorded=schema,
                        # Not the keys' or values' min and max (a scan of every key; the rows are not
                        # ordered by key, so they would skip no row group): a file and its row groups
                        # are found by their key groups and state names. Parquet's statistics of the
                        # keys and values took 0.13 s of CPU for 10,000,000 keys, a fifth of the encoding.
                        stats_of=("subtask", "key_group", "state_name"),
                        # Values encoded 16,384 at a time, not pyarrow's 1,024 (a page may pass its
                        # 1 MB by one such batch): 5,000,000 keys' file took 4-6% less CPU.
                        batch_rows=16_384)


def _keys_of(keys: pa.Array) -> tuple[pa.Array, Optional[pa.Array]]:
    """The key column and the pickled keys (None when every key is text) of non-string keys."""
    columns = key_columns([None] * len(keys), [None] * len(keys), keys.to_pylist())
    exact = columns["key_bytes"]
    return columns["key"], (exact if exact.null_count < len(exact) else None)


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
                 increment: bool, dictionary=True, encodings: Optional[dict] = None,
                 recorded: Optional[pa.Schema] = None, stats_of: Optional[tuple] = None,
                 batch_rows: int = 1024) -> StateFile:
    """The parts written as a state file, a row group of at most ``SNAPSHOT_CHUNK`` rows at a
    time; ``recorded``: the schema its checkpoint records, when the file's own (``schema``)
    leaves base columns out; ``stats_of``: the columns with Delta statistics and Parquet row
    group statistics (default: the base columns, and every column's row group statistics);
    ``batch_rows``: the values the Parquet writer encodes at a time (it ends a page after a batch)."""
    label = f"{subtask:05d}" if subtask >= 0 else "enumerator"     # -1: written by the driver
    path = join(directory, f"part-{label}-{uuid.uuid4().hex}.parquet")
    stats = FileStats()
    # Streamed to the file as the writer makes its pages (a build's full snapshot held ~30 MB of
    # compressed bytes, and twice that as the buffer grew, beside the state), and never a
    # half-written file under the final name (file_writer).
    with file_writer(path) as out:
        sink = _Digesting(out)
        with pq.ParquetWriter(sink, schema, compression="zstd", use_dictionary=dictionary,
                              column_encoding=encodings or None, write_batch_size=batch_rows,
                              write_statistics=list(stats_of) if stats_of is not None else True) as writer:
            for part in parts:
                writer.write_table(part, row_group_size=SNAPSHOT_CHUNK)
                _add_stats(stats, part if stats_of is None else part.select(list(stats_of)))
    lo, hi = stats.mins.get("key_group"), stats.maxs.get("key_group")
    return StateFile(operator_id, subtask, path, sink.size, stats.rows, lo, hi, recorded or schema, stats.json(),
                     sink.checksum(), increment)


def _add_stats(stats: FileStats, part: pa.Table) -> None:
    """The Delta statistics of a part's base columns; a dictionary-encoded one's from its
    dictionary (every entry used: ``write_value_state``'s one state name)."""
    encoded = [f.name for f in part.schema if pa.types.is_dictionary(f.type)]
    stats.add(part.drop_columns([c for c in part.column_names if c.startswith("value") or c in encoded]))
    for name in encoded:
        column = part.column(name)
        entries = column.chunk(0).dictionary if column.num_chunks else pa.array([], column.type.value_type)
        if len(entries) and all(c.dictionary.equals(entries) for c in column.chunks):
            mm = pc.min_max(entries)
            stats.mins[name], stats.maxs[name] = mm["min"].as_py(), mm["max"].as_py()
        stats.nulls[name] = stats.nulls.get(name, 0) + column.null_count


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
        return named_checksum(self.digest)
