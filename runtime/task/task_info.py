"""Which subtask a task is (Flink's TaskInfo): fixed for the task's life, shared by its operators
and its source reader, so an immutable value of its own beside the task's context."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskInfo:
    task_name: str
    subtask_index: int
    parallelism: int
    max_parallelism: int
    attempt_number: int = 0

    @property
    def subtask_label(self) -> str:
        return f"({self.subtask_index + 1}/{self.parallelism})"

