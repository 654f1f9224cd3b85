"""Source readers and enumerators, and sink writers, for the connector descriptors.

The driver (``runtime.execution``) looks them up here and hands a task the reader and writer
classes it needs in its deployment descriptor: the task layer knows their interfaces only."""
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


def reader_class(source) -> type:
    """The task-side reader of ``source`` (a SourceReader: ``read``, ``end_state``, ``origin``)."""
    return _entry(source)[1]


def writer_class(sink) -> type:
    """The task-side writer of a sink descriptor (``write(values)``, ``finish() -> committable``)."""
    from runtime.connectors import delta
    writers = {api.DeltaSink: delta.DeltaSinkWriter}
    writer = writers.get(type(sink))
    if writer is None:
        raise TypeError(f"Sluice cannot run the sink {type(sink).__name__} yet")
    return writer
