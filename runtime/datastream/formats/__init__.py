"""File formats, as ``pyflink.datastream.formats`` (bulk writers for ``FileSink``)."""
