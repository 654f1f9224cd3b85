"""Flink's State Processor API: a checkpoint's or savepoint's state read as data
(``SavepointReader``) and new savepoints written from data (``SavepointWriter``)."""
