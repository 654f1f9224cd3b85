"""Checkpoint settings (``pyflink.datastream.CheckpointConfig``)."""
from __future__ import annotations

import enum


class CheckpointingMode(enum.Enum):
    # Epoch boundaries are aligned barriers by construction, so both modes give exactly-once.
    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1


class ExternalizedCheckpointCleanup(enum.Enum):
    DELETE_ON_CANCELLATION = 0
    RETAIN_ON_CANCELLATION = 1
    NO_EXTERNALIZED_CHECKPOINTS = 2


class CheckpointConfig:
    """How often checkpoints are taken and how many are kept.

    ``checkpoint_interval`` is in milliseconds as in Flink (-1: disabled). Sluice runs in
    epochs, so an epoch ending at least ``interval`` ms after the last checkpoint takes
    one; ``set_checkpoint_interval_epochs(n)`` asks for one every n epochs instead.
    """

    def __init__(self):
        self.checkpoint_interval = -1
        self.checkpoint_interval_epochs: int | None = None
        self.checkpointing_mode = CheckpointingMode.EXACTLY_ONCE
        self.checkpoint_timeout = 600_000
        self.min_pause_between_checkpoints = 0
        self.max_concurrent_checkpoints = 1
        self.tolerable_checkpoint_failure_number = 0
        self.max_retained_checkpoints = 3
        self.externalized_checkpoint_cleanup = ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION
        self.checkpoint_storage: str | None = None

    def is_checkpointing_enabled(self) -> bool:
        return self.checkpoint_interval > 0 or self.checkpoint_interval_epochs is not None

    def get_checkpoint_interval(self) -> int:
        return self.checkpoint_interval

    def set_checkpoint_interval(self, checkpoint_interval: int) -> "CheckpointConfig":
        if checkpoint_interval < 10:
            raise ValueError(
                f"Checkpoint interval must be larger than or equal to 10 ms, got {checkpoint_interval}")
        self.checkpoint_interval = int(checkpoint_interval)
        return self

    def set_checkpoint_interval_epochs(self, epochs: int) -> "CheckpointConfig":
        if epochs < 1:
            raise ValueError(f"checkpoint interval in epochs must be at least 1, got {epochs}")
        self.checkpoint_interval_epochs = int(epochs)
        return self

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self.checkpointing_mode

    def set_checkpointing_mode(self, mode: CheckpointingMode) -> "CheckpointConfig":
        self.checkpointing_mode = mode
        return self

    def get_checkpoint_timeout(self) -> int:
        return self.checkpoint_timeout

    def set_checkpoint_timeout(self, checkpoint_timeout: int) -> "CheckpointConfig":
        if checkpoint_timeout < 1:
            raise ValueError(f"Checkpoint timeout must be larger than 0, got {checkpoint_timeout}")
        self.checkpoint_timeout = int(checkpoint_timeout)
        return self

    def get_min_pause_between_checkpoints(self) -> int:
        return self.min_pause_between_checkpoints

    def set_min_pause_between_checkpoints(self, min_pause: int) -> "CheckpointConfig":
        if min_pause < 0:
            raise ValueError(f"Pause value must be zero or positive, got {min_pause}")
        self.min_pause_between_checkpoints = int(min_pause)
        return self

    def get_max_concurrent_checkpoints(self) -> int:
        return self.max_concurrent_checkpoints

    def set_max_concurrent_checkpoints(self, n: int) -> "CheckpointConfig":
        if n < 1:
            raise ValueError(f"The maximum number of concurrent attempts must be at least 1, got {n}")
        self.max_concurrent_checkpoints = int(n)
        return self

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return self.tolerable_checkpoint_failure_number

    def set_tolerable_checkpoint_failure_number(self, n: int) -> "CheckpointConfig":
        if n < 0:
            raise ValueError(f"The tolerable failure checkpoint number must be non-negative, got {n}")
        self.tolerable_checkpoint_failure_number = int(n)
        return self

    def get_max_retained_checkpoints(self) -> int:
        return self.max_retained_checkpoints

    def set_max_retained_checkpoints(self, n: int) -> "CheckpointConfig":
        if n < 1:
            raise ValueError(f"The number of retained checkpoints must be at least 1, got {n}")
        self.max_retained_checkpoints = int(n)
        return self

    def set_externalized_checkpoint_cleanup(self, cleanup: ExternalizedCheckpointCleanup) -> "CheckpointConfig":
        self.externalized_checkpoint_cleanup = cleanup
        return self

    def set_checkpoint_storage_dir(self, path: str) -> "CheckpointConfig":
        self.checkpoint_storage = str(path)
        return self

    def get_checkpoint_storage_dir(self) -> str | None:
        return self.checkpoint_storage

    def to_dict(self) -> dict:
        return {
            "interval_ms": self.checkpoint_interval,
            "interval_epochs": self.checkpoint_interval_epochs,
            "mode": self.checkpointing_mode.name,
            "timeout_ms": self.checkpoint_timeout,
            "min_pause_ms": self.min_pause_between_checkpoints,
            "max_concurrent": self.max_concurrent_checkpoints,
            "tolerable_failures": self.tolerable_checkpoint_failure_number,
            "max_retained": self.max_retained_checkpoints,
            "storage": self.checkpoint_storage,
        }
