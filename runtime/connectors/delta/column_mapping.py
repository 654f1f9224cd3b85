"""Column mapping (Delta's ``columnMapping`` feature, name and id modes): a table's data files
hold its columns under physical names (``delta.columnMapping.physicalName``) and field ids
(``delta.columnMapping.id``), so a column renamed or dropped costs no rewrite. ``column_mapping``
maps each logical column to its field; ``file_column`` finds a logical column in a file."""
from __future__ import annotations

from typing import Optional

import pyarrow as pa

from runtime.storage.delta_log import Metadata

PHYSICAL_NAME = "delta.columnMapping.physicalName"
FIELD_ID = "delta.columnMapping.id"


def mapping_mode(metadata: Metadata) -> str:
    return metadata.configuration.get("delta.columnMapping.mode", "none") or "none"


def column_mapping(metadata: Metadata) -> dict:
    """{logical top-level column: its field in the table's schema JSON} when the table maps
    columns (name or id mode), else {} (files hold the logical names)."""
    if mapping_mode(metadata) == "none":
        return {}
    return {f["name"]: f for f in metadata.fields}


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


# ---- writing -------------------------------------------------------------------------------

def physical_table(table: pa.Table, mapping: dict) -> pa.Table:
    """A sink's ``table`` (logical column names) as a column-mapped table's data files hold it:
    each column, and each field of a nested struct, under its physical name and carrying its
    field id (``PARQUET:field_id``), as delta-spark writes them in both modes. ``mapping``:
    ``column_mapping``'s {logical column: field}; {} returns ``table`` as it is."""
    if not mapping:
        return table
    fields, arrays = [], []
    for name, column in zip(table.column_names, table.columns):
        field = mapping.get(name)
        if field is None:
            raise ValueError(f"Delta sink: column {name!r} is not a column of the column-mapped table "
                             f"(its columns are {sorted(mapping)})")
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        array, arrow_field = _physical(array, field, name)
        fields.append(arrow_field)
        arrays.append(array)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _field_id(field: dict) -> dict:
    wanted = (field.get("metadata") or {}).get(FIELD_ID)
    return {} if wanted is None else {b"PARQUET:field_id": str(wanted).encode()}


def _physical(array: pa.Array, field: dict, where: str) -> tuple:
    """(array, Arrow field) of a logical ``array`` under ``field``'s physical name and id."""
    array = _physical_values(array, field["type"], where)
    return array, pa.field(physical_name(field, field["name"]), array.type, field.get("nullable", True),
                           metadata=_field_id(field) or None)


def _physical_values(array: pa.Array, delta_type, where: str) -> pa.Array:
    if isinstance(delta_type, dict) and delta_type.get("type") == "struct" and pa.types.is_struct(array.type):
        by_name = {array.type.field(i).name: i for i in range(array.type.num_fields)}
        children, fields = [], []
        for f in delta_type["fields"]:
            child = array.field(by_name[f["name"]]) if f["name"] in by_name else pa.nulls(len(array))
            child, arrow_field = _physical(child, f, f"{where}.{f['name']}")
            children.append(child)
            fields.append(arrow_field)
        return pa.StructArray.from_arrays(children, fields=fields, mask=array.is_null() if array.null_count else None)
    if isinstance(delta_type, dict) and delta_type.get("type") == "array" and _has_mapping(delta_type["elementType"]):
        values = _physical_values(array.flatten(), delta_type["elementType"], where + "[]")
        return type(array).from_arrays(array.offsets, values, mask=array.is_null() if array.null_count else None)
    if isinstance(delta_type, dict) and delta_type.get("type") == "map" and (
            _has_mapping(delta_type["keyType"]) or _has_mapping(delta_type["valueType"])):
        raise NotImplementedError(
            f"Delta sink: column {where} is a map of structs under column mapping, which Sluice's DeltaSink "
            "does not write; write the table with Spark, or make the column a map of plain values")
    return array
