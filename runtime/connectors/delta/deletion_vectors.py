"""Deletion vectors (Delta's ``deletionVectors`` feature): an add action's ``deletionVector``
names the rows of its file that are deleted; ``deleted_rows`` decodes it (inline, a
``deletion_vector_<uuid>.bin`` under the table, or an absolute path) into the sorted physical row
indexes to skip. Split offsets keep counting physical rows, so they stay stable across restores.
A snapshot's deletion vectors come from its log (``runtime.storage.delta_log``)."""
from __future__ import annotations

import struct
import uuid
import zlib
from typing import Optional

import pyarrow.fs as pafs

DV_MAGIC = 1681511377
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}


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


