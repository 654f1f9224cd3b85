"""The row format of a state table: how a checkpoint's or savepoint's state is laid out as rows
of its Delta tables (Flink's canonical savepoint format, as rows): what the snapshot writer
(``runtime.state.snapshot_writer``) writes, the reader (``runtime.state.snapshot_reader``) and
any other reader of a checkpoint decode.

One Delta table per stateful operator (named by its uid), partitioned by ``checkpoint_id``.
A task writes one Parquet file per operator per snapshot; a row is one of

* keyed state: ``key_group``, ``state_name``, ``namespace``, ``key``, and the value;
* a timer: ``state_name`` ``_timer_state/event`` or ``_timer_state/processing``, key,
  namespace and ``timestamp``;
* operator state (per subtask, no key group): ``state_name``, ``distribution`` (``split``
  list state is dealt round-robin on restore, ``union`` given whole to every subtask), value.

An increment (incremental checkpoints) adds a ``deleted`` column: true for a removed entry or timer.

A file may leave out base columns null throughout, and hold ``state_name`` dictionary-encoded
(a bootstrapped value state's file does, ``write_value_state``: fewer columns to encode and to
scan; its row groups have statistics of ``subtask``, ``key_group`` and ``state_name`` only, the
ones readers choose row groups by); a reader takes each file through ``with_base_columns``, which
gives it the base columns every older file has, so files of both layouts read alike.

Keys are stored as strings when they are strings (``key_bytes`` holds the pickled key
otherwise, ``key`` a readable rendering); a namespace as text (``TimeWindow(start, end)``,
``GlobalWindow``, else ``pickle:`` and base64). A value goes to the column ``value_<state name>``
typed as its descriptor declares, and pickled into ``value`` when no type is declared, so
the tables read naturally in Spark, DuckDB or pandas. The declared types travel in the file's
metadata (``TYPES_METADATA``), so a restore decodes values before the operator registers its
descriptors. A file's bytes are named by their checksum (``checksum_of``), recorded with the checkpoint.

Pure pyarrow: this runs inside Spark tasks and on the driver.
"""
from __future__ import annotations

import base64
import hashlib
import pickle
import re
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.common.arrow import arrow_to_records, records_to_arrow
from runtime.common.pickling import dumps_each
from runtime.common.typeinfo import PickledBytesTypeInfo, TypeInformation
from runtime.datastream.window import GlobalWindow, TimeWindow

TIMER_PREFIX = "_timer_state/"
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


def declared(type_info: Optional[TypeInformation]) -> bool:
    return type_info is not None and not isinstance(type_info, PickledBytesTypeInfo)


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


def pylist(column) -> list:
    """Python values of a column; through NumPy when it has no nulls (10x faster than to_pylist)."""
    if column.null_count:
        return column.to_pylist()
    return column.to_numpy(zero_copy_only=False).tolist()


def decode_keys(table: pa.Table) -> list:
    keys = pylist(table.column("key"))
    if table.column("key_bytes").null_count == table.num_rows:
        return keys
    return [k if b is None else pickle.loads(b) for k, b in zip(keys, table.column("key_bytes").to_pylist())]


def decode_namespaces(column) -> list:
    if column.null_count == len(column):
        return [None] * len(column)
    cache: dict = {}
    return [cache[t] if t in cache else cache.setdefault(t, decode_namespace(t)) for t in column.to_pylist()]


def encode_typed(values: list, type_info: TypeInformation, state_name: str, operator: str) -> pa.Array:
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


def pickled(values: list) -> pa.Array:
    return pa.array(dumps_each(values), pa.binary())


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


def deleted_rows(part: pa.Table) -> Optional[list]:
    """Which rows of an incremental snapshot are deletions (None: none are)."""
    if "deleted" not in part.column_names or not pc.any(part.column("deleted")).as_py():
        return None
    return part.column("deleted").fill_null(False).to_pylist()


def with_base_columns(table: pa.Table) -> pa.Table:
    """A state file's rows with every base column (those it left out, null) and its
    dictionary-encoded columns decoded: the rows as every layout reads."""
    missing = [f for f in BASE_SCHEMA if f.name not in table.column_names]
    encoded = [i for i, f in enumerate(table.schema) if pa.types.is_dictionary(f.type)]
    if not missing and not encoded:
        return table
    for i in encoded:
        column = table.column(i)
        table = table.set_column(i, table.schema.field(i).with_type(column.type.value_type),
                                 column.cast(column.type.value_type))
    for f in missing:
        table = table.add_column(min(BASE_SCHEMA.get_field_index(f.name), table.num_columns), f,
                                 pa.nulls(table.num_rows, f.type))
    return table


def state_rows(n: int, subtask: int, state_name: str, columns: dict) -> pa.Table:
    base = {"subtask": pa.array(np.full(n, subtask, np.int32)), "state_name": repeated(state_name, n)}
    base.update(columns)
    arrays, fields = [], []
    for f in BASE_SCHEMA:
        arrays.append(base.pop(f.name) if f.name in base else pa.nulls(n, f.type))
        fields.append(f)
    for name, array in base.items():
        arrays.append(array)
        fields.append(pa.field(name, array.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def repeated(text: str, n: int) -> pa.Array:
    """``text`` ``n`` times as a string array, made from two buffers (pa.array of a list of n
    strings took 0.15 s a million)."""
    data = text.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int64) * len(data)
    kind, offsets = (pa.string(), offsets.astype(np.int32)) if n * len(data) < 2 ** 31 else (pa.large_string(), offsets)
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


def key_columns(key_groups, namespaces, keys) -> dict:
    key, key_bytes = _keys(list(keys))
    return {"key_group": pa.array(key_groups, pa.int32()), "namespace": _namespaces(list(namespaces)),
            "key": key, "key_bytes": key_bytes}


def state_types(table: pa.Table) -> dict:
    return types_of(table.schema.metadata or {})


def types_of(metadata: dict) -> dict:
    meta = metadata.get(TYPES_METADATA)
    return pickle.loads(base64.b64decode(meta)) if meta else {}


def types_metadata(types: dict) -> dict:
    return {TYPES_METADATA: base64.b64encode(pickle.dumps(types, protocol=5))}


def checksum_of(data) -> str:
    """SHA-256 of a file's bytes. Measured on 100 MB (2 shared cores with SHA extensions):
    SHA-256 71 ms, zlib.crc32 45 ms, BLAKE2b 179 ms, against 200-300 ms to decode the file;
    SHA-256 costs little more than a CRC and also tells a file replaced by another one."""
    return named_checksum(hashlib.sha256(data))


def named_checksum(digest) -> str:
    return "sha256:" + digest.hexdigest()
