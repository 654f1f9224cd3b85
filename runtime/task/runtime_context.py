"""The RuntimeContext a user function is opened with (Flink's StreamingRuntimeContext): the
subtask's names and indexes, job parameters, keyed state and metrics, read from its operator.
Its own module because operators and window functions (runtime.task.window_operator) both
hand one out."""
from __future__ import annotations

from runtime.datastream import functions as fn


class StreamingRuntimeContext(fn.RuntimeContext):
    def __init__(self, operator):     # a TaskOperator (runtime.task.operators imports this module)
        self._op = operator

    def get_task_name(self) -> str:
        return self._op.ctx.task_name

    def get_number_of_parallel_subtasks(self) -> int:
        return self._op.ctx.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._op.ctx.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self._op.ctx.subtask_index

    def get_attempt_number(self) -> int:
        return self._op.ctx.attempt_number

    def get_task_name_with_subtasks(self) -> str:
        return f"{self._op.ctx.task_name} {self._op.ctx.subtask_label}"

    def get_job_parameter(self, key: str, default_value=None):
        return self._op.ctx.job_parameters.get(key, default_value)

    def _state(self, descriptor):
        backend = self._op.backend
        if backend is None:
            raise RuntimeError(
                f"Keyed state can only be used on a 'keyed stream', i.e., after a 'key_by()' "
                f"operation: '{self._op.name}' is not keyed.")
        return backend.get_partitioned_state(descriptor)

    get_state = get_list_state = get_map_state = get_reducing_state = get_aggregating_state = _state

    def get_metrics_group(self):
        return self._op.ctx.metrics.group(self._op.name)
