"""Common types of the Sluice API, named as ``pyflink.common``."""
from runtime.common.lazy_pandas import defer_pandas_import

defer_pandas_import()       # before anything of the engine converts a list with pyarrow (every part imports this)

from runtime.common.configuration import Configuration
from runtime.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
from runtime.common.serialization import (
    ByteArraySchema, DeserializationSchema, Encoder, SerializationSchema, SimpleStringSchema)
from runtime.common.time import Duration, Time
from runtime.common.typeinfo import TypeInformation, Types
from runtime.common.types import Row, RowKind
from runtime.common.watermark_strategy import TimestampAssigner, WatermarkStrategy

__all__ = [
    "ByteArraySchema", "Configuration", "DeserializationSchema", "Duration", "Encoder",
    "SerializationSchema", "SimpleStringSchema", "RestartStrategies", "RestartStrategyConfiguration", "Row",
    "RowKind", "Time", "TimestampAssigner", "TypeInformation", "Types", "WatermarkStrategy",
]
