"""Paths and URIs as pyarrow file systems: the connectors write through ``pyarrow.fs``, so a local
folder and an object store (``s3://``, ``gs://``...) take the same code."""
from __future__ import annotations

import os
from urllib.parse import unquote

import pyarrow.fs as pafs


def filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """(pyarrow file system, root path inside it) of a local path, ``file://`` URI or other URI."""
    if "://" in path and not path.startswith("file://"):
        fs, root = pafs.FileSystem.from_uri(path)
        return fs, root.rstrip("/")
    if path.startswith("file://"):
        path = unquote(path[len("file://"):])
    return pafs.LocalFileSystem(), os.path.abspath(path)
