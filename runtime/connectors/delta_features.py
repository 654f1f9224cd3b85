"""Delta reader features for ``DeltaSource``, read the way Delta's PROTOCOL.md specifies them.

Sluice's Delta source reads each data file's rows itself (pyarrow), so the table features that
change what a file's rows mean are applied here, task side:

- deletion vectors (``deletionVectors``): an add action's ``deletionVector`` names the rows of
  its file that are deleted; ``deleted_rows`` decodes it (inline, a ``deletion_vector_<uuid>.bin``
  under the table, or an absolute path) into the sorted physical row indexes to skip. Split
  offsets keep counting physical rows, so they stay stable across restores.
- column mapping (``columnMapping``, name and id modes): files hold columns under physical names
  (``delta.columnMapping.physicalName``); ``column_mapping`` maps each logical column to them.
- v2 checkpoints (``v2Checkpoint``): the driver replays the log from a checkpoint of any kind
  (classic, multi-part, v2 with sidecars) to find the deletion vectors of a snapshot.

``check_reader_protocol`` fails, before the job starts, on any other reader feature.
"""
from __future__ import annotations

import json
import re
import struct
import uuid
import zlib
from typing import Optional
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

# Reader features Sluice's Delta source reads right. typeWidening: a widened column (int to long,
# float to double, a larger decimal, date to timestamp_ntz) reads by casting the file's narrower
# values to the table's type, which is exact.
READ_FEATURES = frozenset({"deletionVectors", "columnMapping", "v2Checkpoint", "timestampNtz",
                           "vacuumProtocolCheck", "typeWidening", "typeWidening-preview"})
PHYSICAL_NAME = "delta.columnMapping.physicalName"
FIELD_ID = "delta.columnMapping.id"
DV_MAGIC = 1681511377
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}


# ---- protocol ------------------------------------------------------------------------------

def check_reader_protocol(dt, table_path: str, what: str = "Delta source") -> None:
    """Fail naming the table, the feature and the fix when reading ``dt`` needs a reader feature
    Sluice does not implement (reader version 1 needs none, 2 is column mapping, 3 lists them)."""
    protocol = dt.protocol()
    version = protocol.min_reader_version
    features = set(protocol.reader_features or ())
    if version > 3:
        missing = [f"reader version {version}"]
    else:
        missing = sorted(features - READ_FEATURES)
    if missing:
        raise NotImplementedError(
            f"{what}: the Delta table {table_path} needs reader feature(s) {missing} that Sluice's "
            f"DeltaSource does not read (it reads {sorted(READ_FEATURES - {'typeWidening-preview'})}). "
            "Read it with Spark (spark.read.format(\"delta\")) into a table without the feature, or "
            "turn the feature off on the table if Delta allows it (ALTER TABLE ... DROP FEATURE ...)")


# ---- column mapping ------------------------------------------------------------------------

def mapping_mode(dt) -> str:
    return (dt.metadata().configuration or {}).get("delta.columnMapping.mode", "none") or "none"


def column_mapping(dt) -> dict:
    """{logical top-level column: its field in the table's schema JSON} when the table maps
    columns (name or id mode), else {} (files hold the logical names)."""
    if mapping_mode(dt) == "none":
        return {}
    fields = json.loads(dt.schema().to_json())["fields"]
    return {f["name"]: f for f in fields}


def physical_name(field: Optional[dict], logical: str) -> str:
    if not field:
        return logical
    return (field.get("metadata") or {}).get(PHYSICAL_NAME, logical)


def file_column(table: pa.Table, field: Optional[dict], logical: str):
    """The column of a file's ``table`` that holds ``logical`` (its physical name, else by field
    id in id mode), presented under logical names down nested structs; None when the file does
    not have it (a column added after the file was written)."""
    name = physical_name(field, logical)
    if name in table.column_names:
        column = table.column(name)
    else:
        wanted = (field or {}).get("metadata", {}).get(FIELD_ID)
        column = None
        if wanted is not None:
            for f in table.schema:
                if f.metadata and f.metadata.get(b"PARQUET:field_id") == str(wanted).encode():
                    column = table.column(f.name)
                    break
        if column is None:
            return None
    if field is None:
        return column
    return _logical(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column,
                    field["type"], logical)


def _logical(array: pa.Array, delta_type, where: str) -> pa.Array:
    """``array`` (a file's physical layout) with nested struct fields under their logical names."""
    if isinstance(delta_type, dict) and delta_type.get("type") == "struct":
        if not pa.types.is_struct(array.type):
            return array
        children, names = [], []
        by_name = {array.type.field(i).name: i for i in range(array.type.num_fields)}
        for f in delta_type["fields"]:
            physical = physical_name(f, f["name"])
            if physical in by_name:
                child = _logical(array.field(by_name[physical]), f["type"], f"{where}.{f['name']}")
            else:
                child = pa.nulls(len(array))
            children.append(child)
            names.append(f["name"])
        return pa.StructArray.from_arrays(children, names=names, mask=array.is_null() if array.null_count else None)
    if isinstance(delta_type, dict) and delta_type.get("type") == "array":
        if not _has_mapping(delta_type["elementType"]):
            return array
        values = _logical(array.flatten(), delta_type["elementType"], where + "[]")
        offsets = array.offsets
        return type(array).from_arrays(offsets, values, mask=array.is_null() if array.null_count else None)
    if isinstance(delta_type, dict) and delta_type.get("type") == "map":
        if _has_mapping(delta_type["keyType"]) or _has_mapping(delta_type["valueType"]):
            raise NotImplementedError(
                f"Delta source: column {where} is a map of structs under column mapping, which Sluice's "
                "DeltaSource does not read; select the other columns (DeltaSource...(columns=[...]))")
    return array


def _has_mapping(delta_type) -> bool:
    if not isinstance(delta_type, dict):
        return False
    if delta_type.get("type") == "struct":
        return True
    if delta_type.get("type") == "array":
        return _has_mapping(delta_type["elementType"])
    if delta_type.get("type") == "map":
        return _has_mapping(delta_type["keyType"]) or _has_mapping(delta_type["valueType"])
    return False


# ---- deletion vectors ----------------------------------------------------------------------

def z85_decode(text: str) -> bytes:
    if len(text) % 5:
        raise ValueError(f"a Z85 string's length is a multiple of 5, got {len(text)} ({text!r})")
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for c in text[i:i + 5]:
            value = value * 85 + _Z85_VALUE[c]
        out += value.to_bytes(4, "big")
    return bytes(out)


def dv_file(root: str, dv: dict) -> str:
    """Where a deletion vector stored in a file ('u': relative, 'p': absolute) lives."""
    if dv["storageType"] == "p":
        return dv["pathOrInlineDv"]
    encoded = dv["pathOrInlineDv"]
    prefix, id_ = encoded[:-20], encoded[-20:]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(id_))}.bin"
    return f"{root}/{prefix}/{name}" if prefix else f"{root}/{name}"


def dv_key(dv: Optional[dict]) -> Optional[str]:
    if not dv:
        return None
    return f"{dv['storageType']}{dv['pathOrInlineDv']}@{dv.get('offset')}"


def _portable_size(data: bytes, at: int) -> int:
    """Bytes of the portable 32-bit Roaring bitmap serialized at ``data[at:]``."""
    cookie = struct.unpack_from("<I", data, at)[0]
    pos = at + 4
    if cookie & 0xFFFF == 12347:          # SERIAL_COOKIE: has run containers
        size = (cookie >> 16) + 1
        runs = data[pos:pos + (size + 7) // 8]
        pos += (size + 7) // 8
    elif cookie == 12346:                   # SERIAL_COOKIE_NO_RUNCONTAINER
        size = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        runs = b""
    else:
        raise ValueError(f"not a portable Roaring bitmap (cookie {cookie})")
    cards = [struct.unpack_from("<H", data, pos + 4 * i + 2)[0] + 1 for i in range(size)]
    pos += 4 * size
    if not runs or size >= 4:
        pos += 4 * size                     # offset header
    for i, card in enumerate(cards):
        if runs and runs[i // 8] >> (i % 8) & 1:
            pos += 2 + 4 * struct.unpack_from("<H", data, pos)[0]
        elif card > 4096:
            pos += 8192
        else:
            pos += 2 * card
    return pos - at


def decode_bitmap(data: bytes, what: str) -> list:
    """The row indexes of a serialized Delta deletion vector (RoaringBitmapArray: magic, count,
    then per 32-bit bitmap its high key and the bitmap in the portable format), sorted."""
    from pyroaring import BitMap
    magic, count = struct.unpack_from("<iq", data, 0)
    if magic != DV_MAGIC:
        raise ValueError(f"{what}: not a Delta deletion vector (magic {magic}, expected {DV_MAGIC})")
    pos, rows = 12, []
    for _ in range(count):
        high = struct.unpack_from("<i", data, pos)[0]
        pos += 4
        size = _portable_size(data, pos)
        bitmap = BitMap.deserialize(data[pos:pos + size])
        pos += size
        base = high << 32
        rows.extend(base + r for r in bitmap) if base else rows.extend(bitmap)
    return rows


def deleted_rows(fs: pafs.FileSystem, root: str, dv: dict) -> list:
    """The sorted physical row indexes a deletion vector deletes (checked against its
    cardinality and, for a DV file, its CRC)."""
    storage = dv["storageType"]
    if storage == "i":
        data = z85_decode(dv["pathOrInlineDv"])[:dv["sizeInBytes"]]
        where = "an inline deletion vector"
    elif storage in ("u", "p"):
        path = dv_file(root, dv)
        if storage == "p":
            fs, path = pafs.FileSystem.from_uri(path)
        offset = dv.get("offset") or 0
        with fs.open_input_file(path) as f:
            f.seek(offset)
            head = f.read(4)
            size = struct.unpack(">i", head)[0]
            data = f.read(size)
            crc = struct.unpack(">I", f.read(4))[0]
        where = f"the deletion vector {path} (offset {offset})"
        if size != dv["sizeInBytes"] or zlib.crc32(data) != crc:
            raise ValueError(f"Delta source: {where} is damaged (size {size}, expected {dv['sizeInBytes']}, "
                             "or a CRC mismatch); the table's rows cannot be read right")
    else:
        raise NotImplementedError(f"Delta source: deletion vector storage type {storage!r} is not one "
                                  "Delta defines ('u', 'i', 'p')")
    rows = decode_bitmap(data, where)
    if dv.get("cardinality") is not None and len(rows) != dv["cardinality"]:
        raise ValueError(f"Delta source: {where} holds {len(rows)} rows, its add action says "
                         f"{dv['cardinality']}; the table's rows cannot be read right")
    return rows


# ---- the log: a snapshot's deletion vectors ------------------------------------------------

_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?(?:\.([0-9a-fA-F-]{36}))?\.(parquet|json)$")


def _checkpoint_files(fs, root: str, version: int) -> tuple[int, list[str]]:
    """The newest complete checkpoint at or before ``version``: (its version, its files), or
    (-1, []) when there is none."""
    log = f"{root}/_delta_log"
    found: dict = {}
    for info in fs.get_file_info(pafs.FileSelector(log)):
        m = _CHECKPOINT.match(info.base_name)
        if not m or int(m.group(1)) > version:
            continue
        v = int(m.group(1))
        if m.group(4):                      # v2: one top-level file, with sidecars
            found.setdefault((v, "v2"), []).append(info.path)
        elif m.group(2):
            found.setdefault((v, f"multi{int(m.group(3))}"), []).append(info.path)
        else:
            found.setdefault((v, "classic"), []).append(info.path)
    for (v, kind), paths in sorted(found.items(), reverse=True):
        if kind.startswith("multi") and len(paths) != int(kind[5:]):
            continue                        # an incomplete multi-part checkpoint
        return v, (sorted(paths) if kind != "v2" else paths[:1])
    return -1, []


def _actions_of(table: pa.Table) -> list[dict]:
    out = []
    for name in ("add", "sidecar"):
        if name in table.column_names:
            out += [{name: a} for a in table.column(name).to_pylist() if a]
    return out


def _checkpoint_actions(fs, root: str, path: str) -> list[dict]:
    if path.endswith(".json"):
        with fs.open_input_stream(path) as f:
            actions = [json.loads(line) for line in f.read().decode("utf-8").splitlines() if line.strip()]
    else:
        schema = pq.read_schema(path, filesystem=fs)
        columns = [c for c in ("add", "sidecar") if c in schema.names]
        actions = _actions_of(pq.read_table(path, columns=columns, filesystem=fs))
    out = [a for a in actions if "add" in a]
    for action in actions:
        if "sidecar" in action:
            sidecar = f"{root}/_delta_log/_sidecars/{unquote(action['sidecar']['path'])}"
            out += _actions_of(pq.read_table(sidecar, columns=["add"], filesystem=fs))
    return out


def snapshot_deletion_vectors(fs, root: str, version: int, read_commit) -> dict:
    """{unquoted data file path: its deletion vector} of the table's ``version``, replayed from
    its newest checkpoint (classic, multi-part or v2) and the commits after it."""
    start, files = _checkpoint_files(fs, root, version)
    live: dict = {}
    for path in files:
        for action in _checkpoint_actions(fs, root, path):
            add = action["add"]
            live[unquote(add["path"])] = add.get("deletionVector")
    for v in range(start + 1, version + 1):
        actions = read_commit(v)
        for action in actions:          # a commit's removes first: a file re-added with a new DV
            if "remove" in action:
                live.pop(unquote(action["remove"]["path"]), None)
        for action in actions:
            if "add" in action:
                live[unquote(action["add"]["path"])] = action["add"].get("deletionVector")
    return {path: dv for path, dv in live.items() if dv}
