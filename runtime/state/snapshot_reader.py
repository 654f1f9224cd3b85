"""Reading state files back (``runtime.state.snapshot_format``): a file whole or a row group at a
time, its bytes verified against the checksum its checkpoint recorded, and a chain of files (a
full snapshot, then increments) as the keyed rows, timers and operator state a restore loads.

Pure pyarrow: this runs inside Spark tasks and on the driver.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from runtime.state.backend import TOMBSTONE
from runtime.state.snapshot_format import (
    BASE_SCHEMA, TIMER_PREFIX, checksum_of, decode_keys, decode_namespaces, decode_values, deleted_rows, pylist,
    state_types, types_of, value_column, with_base_columns)
from runtime.storage.filesystems import filesystem

RESTORE_CHUNK = 100_000         # restored keyed rows decoded into Python objects at a time


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
    return _in_range(with_base_columns(table), key_group_range)


def read_state_parts(path: str, key_group_range=None, checksum: Optional[str] = None, regrouping=None) -> Iterator:
    """The rows of a state file a row group (a writer's chunk) at a time, for a restore that
    loads them as they come: row groups outside ``key_group_range`` are not decoded, a column
    null throughout a row group comes as a null-typed column (no buffers: a 5,000,000-row file's
    null columns took about 150 MB), and a row group of one keyed state comes as a
    ``DeferredPart``, decoded when a backend loads it (``table_to_snapshot`` keeps it as it is):
    a restore holds the file's compressed bytes and one row group, not every row group at once.
    Each part names its file (``FILE_METADATA``); a base column the file left out comes as a
    null-typed column too, a dictionary-encoded one decoded (``with_base_columns``).

    ``regrouping`` (runtime.state.key_regrouping.KeyRegrouping): the file's keys were hashed
    with another key type than the job's; every row group is read and its rows' key groups
    recomputed before they are kept to ``key_group_range``."""
    with _corrupt_as(path):
        fs, inside = filesystem(path)
        source = pa.BufferReader(_verified(path, checksum)) if checksum else fs.open_input_file(inside)
        parquet = pq.ParquetFile(source)
        metadata = {**(parquet.schema_arrow.metadata or {}), FILE_METADATA: path.encode()}
        stored = parquet.schema_arrow.names
        names = BASE_SCHEMA.names + [n for n in stored if n not in BASE_SCHEMA.names]     # left out: null
        for i in range(parquet.num_row_groups):
            group = parquet.metadata.row_group(i)
            # Statistics are per leaf column (a struct value has several): by path.
            stats = {group.column(j).path_in_schema: group.column(j).statistics for j in range(group.num_columns)}
            kg = stats.get("key_group")
            # (Regrouped rows may land in any key group: every row group is read.)
            if key_group_range is not None and kg is not None and kg.has_min_max and group.num_rows \
                    and not regrouping and (kg.max < key_group_range.start_key_group
                                            or kg.min > key_group_range.end_key_group):
                continue
            null = {name for name in names if name not in stored or name in _NULLABLE_BASE
                    and stats.get(name) is not None and stats[name].null_count == group.num_rows}

            def load(i=i, null=null) -> pa.Table:
                with _corrupt_as(path):
                    part = parquet.read_row_group(i, columns=[n for n in names if n not in null])
                    part = part if regrouping else _in_range(part, key_group_range)
                columns = {n: part.column(n) if n not in null else pa.nulls(part.num_rows) for n in names
                           if not (n == "deleted" and n in null)}
                part = with_base_columns(pa.table(columns).replace_schema_metadata(metadata))
                return _in_range(regrouping.regrouped(part), key_group_range) if regrouping else part

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


def read_state_metadata(path: str) -> pq.FileMetaData:
    """A state file's footer: its schema and its row groups' statistics."""
    with _corrupt_as(path):
        fs, inside = filesystem(path)
        return pq.read_metadata(inside, filesystem=fs)


def recorded_schema(path: str) -> pa.Schema:
    """The columns a checkpoint records for a state file (its state table's): the base columns as
    ``BASE_SCHEMA`` types them (a file may leave null ones out, or keep one dictionary-encoded),
    then the file's value columns."""
    stored = read_state_metadata(path).schema.to_arrow_schema()
    return pa.schema(list(BASE_SCHEMA) + [f for f in stored if f.name not in BASE_SCHEMA.names],
                     metadata=stored.metadata)


def verify_state_file(path: str, checksum: str) -> None:
    """Raise CorruptStateException unless the file's bytes are those its checkpoint recorded (for
    a reader that hands the file to another engine, Spark)."""
    with _corrupt_as(path):
        _verified(path, checksum)


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


class KeyedRows:
    """Restored keyed state, column-wise per state: iterates as (key_group, name, namespace,
    key, value) rows; the backends load ``column_chunks()`` without building the rows.

    ``chunks`` holds decoded chunks (name, key_groups, namespaces, keys, values), or parts of
    state tables, decoded ``RESTORE_CHUNK`` rows at a time as they are loaded: a rebuild holds
    its state as Arrow columns and one chunk of it as Python objects."""

    def __init__(self):
        self.chunks: list = []
        self.deletions = False              # some values are TOMBSTONEs: apply in order

    def stored_types(self) -> dict:
        """State name -> the declared type its state files stored it as (schema_evolution)."""
        types: dict = {}
        for chunk in self.chunks:
            if isinstance(chunk, _StatePart) and chunk.name in chunk.types:
                types.setdefault(chunk.name, chunk.types[chunk.name])
        return types

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
                    or ("deleted" in part.column_names and deleted_rows(part) is not None):
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
            deleted = deleted_rows(rows)
            if deleted is not None:
                values = [TOMBSTONE if gone else v for v, gone in zip(values, deleted)]
            yield (self.name, pylist(rows.column("key_group")), decode_namespaces(rows.column("namespace")),
                   decode_keys(rows), values)


def table_to_snapshot(tables: Iterable[pa.Table]) -> dict:
    """Keyed rows and timers of state tables, and operator state as {name: [(subtask, value)]}.

    ``tables`` are a chain in order (a full snapshot, then increments): a deleted keyed entry
    comes as a TOMBSTONE value after the rows it deletes (backends apply the rows in order);
    timers are given as they stand at the end of the chain."""
    keyed, timers, operator_state = KeyedRows(), {}, {}
    for table in tables:
        if isinstance(table, DeferredPart):
            keyed.deletions = keyed.deletions or table.deletions
            keyed.chunks.append(_StatePart(table.name, None, types_of(table.metadata),
                                           table.metadata.get(FILE_METADATA), table.load))
            continue
        types = state_types(table)
        names = table.column("state_name")
        states = names.unique().to_pylist()
        for name in states:
            # A table of one state (most are) is its own part: no copy of a whole state.
            part = table if len(states) == 1 else table.filter(pc.equal(names, name))
            deleted = deleted_rows(part)
            if name.startswith(TIMER_PREFIX):
                domain = name[len(TIMER_PREFIX):]
                keys = decode_keys(part)
                nss = decode_namespaces(part.column("namespace"))
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
