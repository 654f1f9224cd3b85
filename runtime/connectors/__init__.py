"""Source readers and enumerators, and sink writers, for the connector descriptors."""
from __future__ import annotations

from runtime.datastream import connectors as api


def _table():
    # Imported on first use: a task loads only the engine, not every connector's library, at start.
    from runtime.connectors import collection, delta, files, generators, socket
    return {
        api.CollectionSource: (collection.CollectionEnumerator, collection.CollectionReader),
        api.FileSource: (files.FileEnumerator, files.FileReader),
        api.NumberSequenceSource: (generators.NumberSequenceEnumerator, generators.NumberSequenceReader),
        api.DataGeneratorSource: (generators.DataGeneratorEnumerator, generators.DataGeneratorReader),
        api.SocketTextSource: (socket.SocketEnumerator, socket.SocketReader),
        api.DeltaSource: (delta.DeltaSourceEnumerator, delta.DeltaSourceReader),
    }


def _entry(source):
    entry = _table().get(type(source))
    if entry is None:
        raise TypeError(f"Sluice cannot run the source {type(source).__name__} yet")
    return entry


def create_enumerator(source, context):
    return _entry(source)[0](source, context)


def create_reader(source, ctx):
    return _entry(source)[1](source, ctx)
