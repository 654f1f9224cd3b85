"""File and record formats, as ``pyflink.datastream.formats``: bulk writers for ``FileSink``
(``parquet``) and the row schemas of connectors such as Kafka (``json``, ``csv``, ``avro``)."""
