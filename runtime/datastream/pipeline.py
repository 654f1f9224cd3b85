"""What ``env.execute()`` hands over, and who compiles and runs it.

Flink's API knows its executors only through ``PipelineExecutorServiceLoader``: the
``execution.target`` setting names one, found on the class path. The same here, so that the
API depends on nothing above it: a ``Pipeline`` (the transformations and the environment's
settings) goes to the StreamGraph generator and to the pipeline executor that Python entry
points name (groups ``sluice.stream_graph_generators`` and ``sluice.pipeline_executors``; the
built-in ones are defaults, so a copy of ``runtime`` that is not pip-installed still runs).
"""
from __future__ import annotations

import contextvars
import importlib
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any, Callable, Optional, Protocol

from runtime.datastream.transformations import Transformation

GENERATORS = "sluice.stream_graph_generators"
EXECUTORS = "sluice.pipeline_executors"
_BUILT_IN = {
    (GENERATORS, "default"): "runtime.graph.stream_graph:generate_stream_graph",
    (EXECUTORS, "spark"): "runtime.execution.executor:SparkPipelineExecutor",
}


@dataclass(frozen=True)
class PipelineSettings:
    """The environment's settings a StreamGraph carries (Flink's ExecutionConfig and friends)."""
    job_name: str
    default_parallelism: int = 1
    default_max_parallelism: int = -1
    chaining_enabled: bool = True
    runtime_mode: str = "STREAMING"
    checkpoint_config: tuple = ()
    restart_strategy: Any = None
    auto_watermark_interval: int = 200
    job_parameters: tuple = ()
    configuration: tuple = ()       # (key, value) pairs of the environment's Configuration
    # Whether the job's code set the default parallelism (env.set_parallelism), which overrides
    # the client's (Flink's -p), so operators that leave theirs unset do not follow a rescale.
    default_parallelism_set_by_job: bool = False
    # SlotSharingGroups with resources registered on the environment (register_slot_sharing_group).
    slot_sharing_groups: tuple = ()


@dataclass(frozen=True)
class Pipeline:
    transformations: tuple[Transformation, ...]
    settings: PipelineSettings


class PipelineExecutor(Protocol):
    def execute(self, stream_graph) -> Any:
        """Run the compiled job; returns its JobExecutionResult."""


# Set by a client for the job scripts it runs: ``sluice plan`` installs one that captures the
# StreamGraph and stops the script (Flink's StreamPlanEnvironment).
current_executor: contextvars.ContextVar[Optional[PipelineExecutor]] = contextvars.ContextVar(
    "sluice_pipeline_executor", default=None)


@lru_cache(maxsize=None)
def _entry_points(group: str) -> tuple:
    # Reading every installed distribution's metadata takes 5-50 ms (each run looked twice);
    # installed entry points do not change while a process runs.
    return tuple(entry_points(group=group))


def load_service(group: str, name: str) -> Any:
    """The object an entry point of ``group`` names, else the built-in one; a clear error if none."""
    found = [e for e in _entry_points(group) if e.name == name]
    if found:
        return found[0].load()
    target = _BUILT_IN.get((group, name))
    if target is None:
        known = sorted({e.name for e in _entry_points(group)} | {n for g, n in _BUILT_IN if g == group})
        raise ValueError(f"No {group} named {name!r}: set execution.target to one of {', '.join(known)}")
    module, attr = target.split(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as e:     # e.g. an installation without the Spark data plane
        raise RuntimeError(f"This Sluice installation has no {name!r} {group} ({module}: {e}); "
                           "compile with `sluice plan` instead.") from e


def generate(pipeline: Pipeline):
    """The pipeline's StreamGraph."""
    generator: Callable = load_service(GENERATORS, "default")
    return generator(pipeline)


def executor_for(target: str) -> PipelineExecutor:
    return current_executor.get() or load_service(EXECUTORS, target)()
