"""Per-job execution settings (``pyflink.common.ExecutionConfig``)."""
from __future__ import annotations

from typing import Optional


class ExecutionConfig:
    def __init__(self):
        self.auto_watermark_interval = 200
        self.global_job_parameters: dict[str, str] = {}

    def set_auto_watermark_interval(self, interval: int) -> "ExecutionConfig":
        # Watermarks advance once per epoch batch; the interval is kept for compatibility.
        if interval < 0:
            raise ValueError(f"auto watermark interval must not be negative, got {interval}")
        self.auto_watermark_interval = int(interval)
        return self

    def get_auto_watermark_interval(self) -> int:
        return self.auto_watermark_interval

    def set_global_job_parameters(self, parameters: dict) -> "ExecutionConfig":
        self.global_job_parameters = {str(k): str(v) for k, v in dict(parameters).items()}
        return self

    def get_global_job_parameters(self) -> dict[str, str]:
        return dict(self.global_job_parameters)

    def enable_object_reuse(self) -> "ExecutionConfig":
        return self

    def disable_object_reuse(self) -> "ExecutionConfig":
        return self
