"""Source readers and enumerators, sink writers and committers, for the connector descriptors
(looked up by the descriptor's type).

The driver (``runtime.execution``) looks them up here and hands a task the reader and writer
classes it needs in its deployment descriptor: the task layer knows their interfaces only. A
sink's committer stays on the driver: the checkpoint coordinator (or, without checkpoints, the
executor after each epoch) commits what the writers returned."""
from __future__ import annotations

from runtime.datastream import connectors as api
from runtime.datastream.functions import SinkFunction
from runtime.datastream.operators import KeyedCollect, PrintSink


def _table():
    # Imported on first use: a task loads only the engine, not every connector's library, at start.
    from runtime.connectors import collection, delta, files, generators, kafka_source, socket
    return {
        api.CollectionSource: (collection.CollectionEnumerator, collection.CollectionReader),
        api.FileSource: (files.FileEnumerator, files.FileReader),
        api.NumberSequenceSource: (generators.NumberSequenceEnumerator, generators.NumberSequenceReader),
        api.DataGeneratorSource: (generators.DataGeneratorEnumerator, generators.DataGeneratorReader),
        api.SocketTextSource: (socket.SocketEnumerator, socket.SocketReader),
        api.DeltaSource: (delta.DeltaSourceEnumerator, delta.DeltaSourceReader),
        api.KafkaSource: (kafka_source.KafkaSourceEnumerator, kafka_source.KafkaSourceReader),
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


def _sinks():
    from runtime.connectors import collect_sink, delta, file_sink, function_sink, kafka_sink, print_sink
    from runtime.connectors.base import Committer
    return {
        api.DeltaSink: (delta.DeltaSinkWriter, delta.DeltaCommitter),
        api.FileSink: (file_sink.FileSinkWriter, file_sink.FileCommitter),
        api.KafkaSink: (kafka_sink.KafkaSinkWriter, kafka_sink.KafkaCommitter),
        PrintSink: (print_sink.PrintWriter, print_sink.PrintCommitter),
        SinkFunction: (function_sink.SinkFunctionWriter, Committer),
        # execute_and_collect's sink: its descriptor is the id of the stream it collects.
        int: (collect_sink.CollectWriter, collect_sink.CollectCommitter),
        KeyedCollect: (collect_sink.KeyedCollectWriter, collect_sink.CollectCommitter),
    }


def _sink_entry(sink):
    sinks = _sinks()
    for kind in type(sink).__mro__:     # a SinkFunction is the user's subclass
        if kind in sinks:
            return sinks[kind]
    raise TypeError(f"Sluice cannot run the sink {type(sink).__name__} yet")


def writer_class(sink) -> type:
    """The task-side writer of a sink descriptor (a SinkWriter: ``write(values)``,
    ``finish() -> committable``)."""
    return _sink_entry(sink)[0]


def committer_class(sink) -> type:
    """The driver-side committer of a sink descriptor (a Committer: ``commit(committables, version)``)."""
    return _sink_entry(sink)[1]
