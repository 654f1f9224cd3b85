"""Source readers and enumerators, and sink writers, for the connector descriptors."""
from __future__ import annotations

from runtime.datastream import connectors as api


def _table():
    from runtime.connectors import collection, files, generators
    table = {
        api.CollectionSource: (collection.CollectionEnumerator, collection.CollectionReader),
        api.FileSource: (files.FileEnumerator, files.FileReader),
        api.NumberSequenceSource: (generators.NumberSequenceEnumerator, generators.NumberSequenceReader),
        api.DataGeneratorSource: (generators.DataGeneratorEnumerator, generators.DataGeneratorReader),
    }
    try:
        from runtime.connectors import socket as socket_connector
        table[api.SocketTextSource] = (socket_connector.SocketEnumerator, socket_connector.SocketReader)
    except ImportError:
        pass
    try:
        from runtime.connectors import delta
        table[api.DeltaSource] = (delta.DeltaSourceEnumerator, delta.DeltaSourceReader)
    except ImportError:
        pass
    return table


def _entry(source):
    entry = _table().get(type(source))
    if entry is None:
        raise TypeError(f"Sluice cannot run the source {type(source).__name__} yet")
    return entry


def create_enumerator(source, context):
    return _entry(source)[0](source, context)


def create_reader(source, ctx):
    return _entry(source)[1](source, ctx)
