"""How a job runs: Spark master, warehouse, epoch sizing, the clock.

Read from the job's Configuration (``sluice.*`` keys), then environment variables, then
defaults, so a job script, a CLI flag or an Airflow variable can each set them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Optional

from runtime.checkpoint.incremental import FULL_EVERY, FULL_RATIO
from runtime.state.backend import HEAP_COMPACT_AFTER
from runtime.storage.maintenance import COMPACT_AFTER_FILES, LOG_RETENTION_S
from runtime.task.task_context import DEFAULT_BATCH_SIZE

# Sluice's keys that configure the job rather than its run (read where the job graph is).
JOB_KEYS = (FULL_EVERY, FULL_RATIO, HEAP_COMPACT_AFTER)

EPOCH_TRIGGERS = ("input", "interval")
EPOCH_TASKS = ("per-epoch", "long-running")
DEFAULT_WAREHOUSE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                 "warehouse")


def _boolean(raw) -> bool:
    if isinstance(raw, bool):
        return raw
    if str(raw).lower() in ("true", "1", "yes"):
        return True
    if str(raw).lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {raw!r}")


def _parse(key: str, kind, raw):
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"Configuration '{key}' must be a {getattr(kind, '__name__', kind).strip('_')}, "
                         f"got {raw!r}") from None


@dataclass(frozen=True)
class ExecutionOptions:
    master: str = "local[*]"
    warehouse: str = DEFAULT_WAREHOUSE
    epoch_interval_ms: int = 1000           # the longest an unbounded epoch waits for input
    # "input": an unbounded source's epoch starts as soon as records are there (Structured
    # Streaming's default trigger); "interval": each epoch waits out the interval (its ProcessingTime).
    epoch_trigger: str = "input"
    # "per-epoch": each epoch is a Spark job; "long-running": a run's tasks are deployed once and
    # run epoch after epoch (runtime.execution.long_running_tasks).
    epoch_tasks: str = "per-epoch"
    max_epochs: Optional[int] = None        # stop an unbounded job after this many epochs
    max_records_per_split: Optional[int] = None   # cut bounded input into several epochs
    batch_size: int = DEFAULT_BATCH_SIZE    # records per batch down a task's operator chain
    clock_start_ms: Optional[int] = None    # pin processing time (tests, replays)
    clock_step_ms: int = 1000
    quiet: bool = False                     # no progress lines
    # "latest" (also when unset: a run resumes, as Structured Streaming from its checkpoint
    # location), "none" (start over), a checkpoint id, or a savepoint path.
    restore_from: Optional[str] = None
    allow_non_restored_state: bool = False  # skip checkpointed state no operator claims
    lease_timeout_s: float = 600.0          # a run on another host is presumed dead after this
    # Sluice's append-only tables (checkpoints, epoch log, executions) are compacted into one
    # file once they hold more (runtime.storage.maintenance).
    compact_after_files: int = COMPACT_AFTER_FILES
    # Their Delta log entries that a Delta checkpoint covers are deleted once this old (seconds).
    log_retention_s: float = LOG_RETENTION_S
    # Set by the control plane: which Airflow run and try this is, and the subtasks' attempt
    # numbers after earlier failures (JSON {"vertex/subtask": n}), for the execution history.
    dag_run_id: Optional[str] = None
    attempt: int = 1
    subtask_attempts: Optional[str] = None
    # Where subtasks keep their local state stores (Flink's state.backend.rocksdb.localdir);
    # unset: the executor's Spark local dirs, removed with the application.
    state_local_dir: Optional[str] = None

    KEYS = {
        "sluice.spark.master": ("master", str, "SLUICE_SPARK_MASTER"),
        "sluice.warehouse": ("warehouse", str, "SLUICE_WAREHOUSE"),
        "sluice.epoch.interval": ("epoch_interval_ms", int, "SLUICE_EPOCH_INTERVAL_MS"),
        "sluice.epoch.trigger": ("epoch_trigger", str, "SLUICE_EPOCH_TRIGGER"),
        "sluice.epoch.tasks": ("epoch_tasks", str, "SLUICE_EPOCH_TASKS"),
        "sluice.epoch.max-epochs": ("max_epochs", int, "SLUICE_MAX_EPOCHS"),
        "sluice.epoch.max-records-per-split": ("max_records_per_split", int, None),
        "sluice.task.batch-size": ("batch_size", int, None),
        "sluice.clock.start": ("clock_start_ms", int, None),
        "sluice.clock.step": ("clock_step_ms", int, None),
        "execution.savepoint.path": ("restore_from", str, "SLUICE_RESTORE_FROM"),
        "execution.savepoint.ignore-unclaimed-state": ("allow_non_restored_state", _boolean, None),
        "sluice.lease-timeout": ("lease_timeout_s", float, None),
        "sluice.maintenance.compact-after-files": ("compact_after_files", int, None),
        "sluice.maintenance.log-retention": ("log_retention_s", float, None),
        "sluice.airflow.dag-run-id": ("dag_run_id", str, "SLUICE_DAG_RUN_ID"),
        "sluice.airflow.attempt": ("attempt", int, "SLUICE_ATTEMPT"),
        "sluice.subtask-attempts": ("subtask_attempts", str, "SLUICE_SUBTASK_ATTEMPTS"),
        "state.backend.rocksdb.localdir": ("state_local_dir", str, None),
    }

    @staticmethod
    def from_configuration(configuration: dict) -> "ExecutionOptions":
        values = {}
        for key, (attr, kind, env) in ExecutionOptions.KEYS.items():
            raw = configuration.get(key)
            if raw is None and env:
                raw = os.environ.get(env)
            if raw is not None:
                values[attr] = _parse(key, kind, raw)
        options = ExecutionOptions(**values)
        options.validate()
        return options

    @staticmethod
    def split_properties(properties: list[str]) -> tuple[dict, dict]:
        """Flink's dynamic properties (``-D key=value``): (fields of these options, from the keys
        of KEYS; the rest as the job's configuration, e.g. state.backend.type)."""
        overrides, configuration = {}, {}
        for prop in properties:
            key, sep, raw = prop.partition("=")
            key = key.strip()
            if not sep or not key:
                raise ValueError(f"-D {prop}: expected KEY=VALUE (e.g. -D state.backend.type=rocksdb)")
            if key in ExecutionOptions.KEYS:
                attr, kind, _ = ExecutionOptions.KEYS[key]
                overrides[attr] = _parse(key, kind, raw)
            elif key.startswith("sluice.") and key not in JOB_KEYS:     # Sluice's own: a typo
                raise ValueError(f"-D {prop}: unknown option; Sluice's are {', '.join([*ExecutionOptions.KEYS, *JOB_KEYS])}")
            else:
                configuration[key] = raw
        return overrides, configuration

    @staticmethod
    def to_properties(overrides: dict) -> list[str]:
        """``overrides`` (field -> value; None: unset) as ``sluice run`` arguments, ``-D key=value``
        each: what the control plane passes to a spark-submitted run."""
        keys = {attr: key for key, (attr, _, _) in ExecutionOptions.KEYS.items()}
        return [arg for name, value in overrides.items() if value is not None
                for arg in ("-D", f"{keys[name]}={value}")]

    def validate(self) -> None:
        for name in ("epoch_interval_ms", "batch_size", "clock_step_ms", "attempt"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.epoch_trigger not in EPOCH_TRIGGERS:
            raise ValueError(f"sluice.epoch.trigger must be one of {', '.join(EPOCH_TRIGGERS)}, got "
                             f"{self.epoch_trigger!r} ('input': an epoch starts when records are there, "
                             "'interval': each epoch waits out sluice.epoch.interval)")
        if self.epoch_tasks not in EPOCH_TASKS:
            raise ValueError(f"sluice.epoch.tasks must be one of {', '.join(EPOCH_TASKS)}, got {self.epoch_tasks!r} "
                             "('per-epoch': a Spark job per epoch, 'long-running': tasks deployed once per run)")
        for name in ("max_epochs", "max_records_per_split"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1 (or unset), got {value}")

    def with_overrides(self, **overrides) -> "ExecutionOptions":
        options = replace(self, **{k: v for k, v in overrides.items() if v is not None})
        options.validate()
        return options
