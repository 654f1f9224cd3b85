"""The socket text source behind ``socket_text_stream`` (Flink's SocketTextStreamFunction)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from runtime.datastream.connectors.base import Boundedness, Source


@dataclass(frozen=True)
class SocketTextSource(Source):
    default_name: ClassVar[str] = "Socket Stream"
    parallel: ClassVar[bool] = False

    hostname: str
    port: int
    delimiter: str = "\n"
    # Flink: 0 = stop at once when the connection ends, -1 = retry forever.
    max_retry: int = 0

    def __post_init__(self):
        if not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise ValueError(f"socket_text_stream: port out of range: {self.port!r} (use 1..65535)")
        if not self.delimiter:
            raise ValueError("socket_text_stream: the delimiter must not be empty (Flink's default is '\\n')")
        if self.max_retry < -1:
            raise ValueError(
                f"socket_text_stream: max_retry must be -1 (retry forever), 0 (no retry) or positive, "
                f"got {self.max_retry}")

    @property
    def boundedness(self) -> Boundedness:
        return Boundedness.CONTINUOUS_UNBOUNDED

    @property
    def produced_type(self):
        from runtime.common.typeinfo import Types
        return Types.STRING()
