"""The bounded in-memory source behind ``from_collection`` (Flink's FromElementsFunction)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from runtime.datastream.connectors.base import Source


@dataclass(frozen=True)
class CollectionSource(Source):
    default_name: ClassVar[str] = "Collection Source"
    parallel: ClassVar[bool] = False

    items: tuple
    type_info: Any = None

    @property
    def produced_type(self):
        return self.type_info
