"""The entry point of a job (``pyflink.datastream.StreamExecutionEnvironment``)."""
from __future__ import annotations

import contextvars
import copy
import enum
import itertools
import os
import sys
import uuid
from typing import Any, Callable, Iterable, Optional

from runtime.common.arrow import to_declared_type
from runtime.common.configuration import Configuration
from runtime.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
from runtime.common.typeinfo import infer_type_info
from runtime.common.watermark_strategy import WatermarkStrategy
from runtime.datastream.checkpoint_config import CheckpointConfig, CheckpointingMode
from runtime.datastream.connectors.base import Source
from runtime.datastream.connectors.collection import CollectionSource
from runtime.datastream.connectors.file_system import FileSource, StreamFormat
from runtime.datastream.connectors.socket import SocketTextSource
from runtime.datastream.data_stream import DataStream
from runtime.datastream.execution_config import ExecutionConfig
from runtime.datastream.job_client import JobClient
from runtime.datastream.operators import SourceSpec
from runtime.datastream.pipeline import Pipeline, PipelineSettings, executor_for, generate
from runtime.datastream.slot_sharing_group import SlotSharingGroup
from runtime.datastream.transformations import (
    SourceTransformation, Transformation, check_max_parallelism)

DEFAULT_JOB_NAME = "Flink Streaming Job"
# PyFlink's configuration keys of a job's dependencies.
PYTHON_FILES, PYTHON_REQUIREMENTS, JARS = "python.files", "python.requirements", "pipeline.jars"


class RuntimeExecutionMode(enum.Enum):
    """Flink's ``execution.runtime-mode``: BATCH runs a bounded job's input as one epoch with final
    results only (no checkpoints, watermarks only at the end); AUTOMATIC is BATCH when every
    source is bounded. Resolved and checked when the job compiles (runtime.graph.stream_graph)."""
    STREAMING = "STREAMING"
    BATCH = "BATCH"
    AUTOMATIC = "AUTOMATIC"


RUNTIME_MODE = "execution.runtime-mode"


# Settings the client passes to the job's environments, below the job's own (Flink's
# -p / -D on `flink run`): e.g. {"parallelism.default": "4"} from `sluice restore --parallelism`.
# The job script the client runs (Flink's key of an application's entry point): the script that
# owns the job's folder in the warehouse (runtime.storage.job_folders).
PROGRAM_KEY = "$internal.application.main"
client_configuration: contextvars.ContextVar[dict] = contextvars.ContextVar("sluice_client_configuration",
                                                                          default={})


def main_script() -> Optional[str]:
    """The job script of ``python job.py`` (no client named one): the program that owns its job
    folders. None in an interactive session, under ``python -m`` (pytest) or Sluice's own CLI."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None) or ""
    if getattr(main, "__spec__", None) is not None or not path.endswith(".py"):
        return None
    path = os.path.realpath(path)
    return None if path.startswith(os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep) else path


class StreamExecutionEnvironment:
    """Builds a job's transformations and runs it (``execute``)."""

    def __init__(self, configuration: Optional[Configuration] = None):
        self._configuration = Configuration()
        for key, value in client_configuration.get().items():
            self._configuration.set_string(key, str(value))
        for key, value in (configuration.to_dict() if configuration else {}).items():
            self._configuration.set_string(key, value)
        script = None if self._configuration.contains_key(PROGRAM_KEY) else main_script()
        if script:
            self._configuration.set_string(PROGRAM_KEY, script)
        # PyFlink's local default: as many subtasks as the machine has cores.
        self._parallelism = self._configuration.get_integer("parallelism.default", os.cpu_count() or 1)
        self._parallelism_set_by_job = False
        self._max_parallelism = self._configuration.get_integer("pipeline.max-parallelism", -1)
        self._chaining_enabled = True
        self._checkpoint_config = CheckpointConfig()
        self._restart_strategy: RestartStrategyConfiguration = RestartStrategies.fall_back_restart()
        mode = self._configuration.get_string(RUNTIME_MODE, "STREAMING").upper()
        if mode not in RuntimeExecutionMode.__members__:
            raise ValueError(f"Configuration '{RUNTIME_MODE}' must be STREAMING, BATCH or AUTOMATIC, got {mode!r}")
        self._runtime_mode = RuntimeExecutionMode[mode]     # -D execution.runtime-mode=BATCH
        self._config = ExecutionConfig()
        self._transformations: list[Transformation] = []
        self._ids = itertools.count(1)
        self._slot_sharing_groups: dict[str, SlotSharingGroup] = {}

    @staticmethod
    def get_execution_environment(configuration: Optional[Configuration] = None) -> "StreamExecutionEnvironment":
        return StreamExecutionEnvironment(configuration)

    # ---- settings ----------------------------------------------------------------------

    def set_parallelism(self, parallelism: int) -> "StreamExecutionEnvironment":
        if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
            raise ValueError(
                f"The parallelism of the environment must be at least 1, got {parallelism!r}. "
                "Use env.set_parallelism(n) with n >= 1.")
        if 0 < self._max_parallelism < parallelism:
            raise ValueError(
                f"The parallelism ({parallelism}) is larger than the maximum parallelism "
                f"({self._max_parallelism}) of the environment.")
        self._parallelism = parallelism
        self._parallelism_set_by_job = True
        return self

    def get_parallelism(self) -> int:
        return self._parallelism

    def register_slot_sharing_group(self, slot_sharing_group: SlotSharingGroup) -> "StreamExecutionEnvironment":
        """Declares the resources of a slot sharing group's slots, for every operator in the group
        by name (a later registration of the name replaces the earlier, as Flink's).

            env.register_slot_sharing_group(
                SlotSharingGroup.builder("heavy").set_cpu_cores(1.0).set_task_heap_memory_mb(512).build())
            ds.map(score).slot_sharing_group("heavy")
        """
        if not isinstance(slot_sharing_group, SlotSharingGroup):
            raise TypeError("register_slot_sharing_group() takes a SlotSharingGroup, e.g. "
                            f"SlotSharingGroup.builder('heavy').set_cpu_cores(1.0)...build(), got {slot_sharing_group!r}")
        if slot_sharing_group.has_resources():      # as Flink: a group without resources declares nothing
            self._slot_sharing_groups[slot_sharing_group.get_name()] = slot_sharing_group
        return self

    def set_max_parallelism(self, max_parallelism: int) -> "StreamExecutionEnvironment":
        check_max_parallelism(max_parallelism, "the environment")
        self._max_parallelism = max_parallelism
        return self

    def get_max_parallelism(self) -> int:
        return self._max_parallelism

    def set_runtime_mode(self, mode: RuntimeExecutionMode) -> "StreamExecutionEnvironment":
        if not isinstance(mode, RuntimeExecutionMode):
            raise TypeError(f"set_runtime_mode() takes RuntimeExecutionMode.STREAMING, BATCH or AUTOMATIC, got {mode!r}")
        self._runtime_mode = mode
        return self

    def get_config(self) -> ExecutionConfig:
        return self._config

    def get_configuration(self) -> Configuration:
        return self._configuration

    def disable_operator_chaining(self) -> "StreamExecutionEnvironment":
        self._chaining_enabled = False
        return self

    def is_chaining_enabled(self) -> bool:
        return self._chaining_enabled

    def enable_checkpointing(self, interval: int, mode: Optional[CheckpointingMode] = None) -> "StreamExecutionEnvironment":
        self._checkpoint_config.set_checkpoint_interval(interval)
        if mode is not None:
            self._checkpoint_config.set_checkpointing_mode(mode)
        return self

    def get_checkpoint_config(self) -> CheckpointConfig:
        return self._checkpoint_config

    def get_checkpoint_interval(self) -> int:
        return self._checkpoint_config.get_checkpoint_interval()

    def is_checkpointing_enabled(self) -> bool:
        return self._checkpoint_config.is_checkpointing_enabled()

    def set_restart_strategy(self, restart_strategy_configuration: RestartStrategyConfiguration) -> "StreamExecutionEnvironment":
        if not isinstance(restart_strategy_configuration, RestartStrategyConfiguration):
            raise TypeError(
                "set_restart_strategy() expects RestartStrategies.fixed_delay_restart(...), "
                f"failure_rate_restart(...), exponential_delay_restart(...) or no_restart(), "
                f"got {restart_strategy_configuration!r}")
        self._restart_strategy = restart_strategy_configuration
        return self

    def get_restart_strategy(self) -> RestartStrategyConfiguration:
        return self._restart_strategy

    # ---- sources -----------------------------------------------------------------------

    def _new_id(self) -> int:
        return next(self._ids)

    def _add(self, transformation: Transformation) -> Transformation:
        self._transformations.append(transformation)
        return transformation

    def _source(self, source: Source, name: str, watermark_strategy=None, type_info=None) -> DataStream:
        t = SourceTransformation(
            id=self._new_id(), name=name, output_type=type_info or source.produced_type,
            operator=SourceSpec(source=source, watermark_strategy=watermark_strategy),
            non_parallel=not source.parallel)
        if not source.parallel:
            t.parallelism = 1
            t.max_parallelism = 1
        return DataStream(self, t)

    def from_collection(self, collection: Iterable, type_info=None) -> DataStream:
        items = tuple(collection)
        if not items:
            raise ValueError("from_collection(): Collection must not be empty")
        if type_info is None:
            type_info = copy.copy(infer_type_info(items))
            type_info.inferred = True
        else:   # as PyFlink: the records become values of the declared type at the source
            items = tuple(to_declared_type(items, type_info, "from_collection()"))
        return self._source(CollectionSource(items, type_info), CollectionSource.default_name,
                            type_info=type_info)

    def socket_text_stream(self, hostname: str, port: int, delimiter: str = "\n",
                           max_retry: int = 0) -> DataStream:
        source = SocketTextSource(hostname, port, delimiter, max_retry)
        return self._source(source, SocketTextSource.default_name)

    def read_text_file(self, file_path: str, charset_name: str = "UTF-8") -> DataStream:
        """Lines of a file, or of every file in a folder; a later run also reads files that arrived since."""
        source = FileSource.for_record_stream_format(
            StreamFormat.text_line_format(charset_name), file_path).build()
        return self._source(source, "Custom File Source")

    def from_source(self, source: Source, watermark_strategy: WatermarkStrategy, source_name: str,
                    type_info=None) -> DataStream:
        if not isinstance(source, Source):
            raise TypeError(
                "from_source() expects a Source (FileSource, DataGeneratorSource, "
                f"NumberSequenceSource, DeltaSource), got {source!r}")
        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise TypeError(
                "from_source() expects a WatermarkStrategy as second argument, e.g. "
                f"WatermarkStrategy.no_watermarks(), got {watermark_strategy!r}")
        if not isinstance(source_name, str) or not source_name:
            raise ValueError(f"from_source() needs a source name, got {source_name!r}")
        return self._source(source, source_name, watermark_strategy, type_info)

    def add_source(self, source_func, source_name: str = "Custom Source", type_info=None):
        raise TypeError(
            "add_source() takes a legacy SourceFunction, which Sluice does not run; use "
            "from_source() with a FileSource, DataGeneratorSource, NumberSequenceSource or DeltaSource.")

    # ---- compilation and execution -----------------------------------------------------

    def get_stream_graph(self, job_name: Optional[str] = None, clear_transformations: bool = False):
        settings = PipelineSettings(
            job_name=job_name or self._configuration.get_string("pipeline.name", DEFAULT_JOB_NAME),
            default_parallelism=self._parallelism,
            default_max_parallelism=self._max_parallelism,
            chaining_enabled=self._chaining_enabled,
            runtime_mode=self._runtime_mode.value,
            checkpoint_config=tuple(sorted(self._checkpoint_config.to_dict().items())),
            restart_strategy=self._restart_strategy,
            auto_watermark_interval=self._config.get_auto_watermark_interval(),
            job_parameters=tuple(sorted(self._config.get_global_job_parameters().items())),
            configuration=tuple(sorted(self._configuration.to_dict().items())),
            default_parallelism_set_by_job=self._parallelism_set_by_job,
            slot_sharing_groups=tuple(self._slot_sharing_groups.values()),
        )
        graph = generate(Pipeline(tuple(self._transformations), settings))
        if clear_transformations:
            self._transformations.clear()
        return graph

    def get_execution_plan(self) -> str:
        """The plan as JSON in the shape of Flink's plan visualizer."""
        return self.get_stream_graph().get_streaming_plan_as_json()

    def execute(self, job_name: Optional[str] = None):
        graph = self.get_stream_graph(job_name, clear_transformations=True)
        return executor_for(self._configuration.get_string("execution.target", "spark")).execute(graph)

    def execute_async(self, job_name: Optional[str] = None) -> JobClient:
        """Starts the job in a thread of this process and returns its JobClient at once.

            client = env.execute_async("orders")
            client.get_job_status().result()            # JobStatus.RUNNING
            client.cancel()                             # ends after the epoch it is in
            client.get_job_execution_result().result()  # the JobExecutionResult (raises if it failed)
        """
        graph = self.get_stream_graph(job_name, clear_transformations=True)
        executor = executor_for(self._configuration.get_string("execution.target", "spark"))
        return JobClient(uuid.uuid4().hex, lambda stop: executor.execute(graph, stop=stop))

    # ---- dependencies (applied to the Spark session by the run: runtime.execution.dependencies)

    def add_python_file(self, file_path: str) -> None:
        """Ships a .py, .zip or .egg file, or a package folder, to the executors
        (``SparkContext.addPyFile``), so the job's functions can import it there."""
        self._append_configured(PYTHON_FILES, ",", os.path.abspath(file_path))

    def set_python_requirements(self, requirements_file_path: str, requirements_cache_dir: Optional[str] = None) -> None:
        """The packages the job needs (a requirements.txt): the run checks the driver's Python
        has them and fails naming the missing ones (Spark installs nothing on executors)."""
        value = os.path.abspath(requirements_file_path)
        if requirements_cache_dir:
            value += "#" + os.path.abspath(requirements_cache_dir)
        self._configuration.set_string(PYTHON_REQUIREMENTS, value)

    def add_jars(self, *jars_path: str) -> None:
        """Jars for the Spark session's JVM (``spark.jars``), given when the run starts it; a
        session already running without them fails the run, saying so."""
        for jar in jars_path:
            self._append_configured(JARS, ";", jar if "://" in jar else "file://" + os.path.abspath(jar))

    def _append_configured(self, key: str, separator: str, value: str) -> None:
        values = [v for v in self._configuration.get_string(key, "").split(separator) if v]
        if value not in values:
            self._configuration.set_string(key, separator.join(values + [value]))

    def _execute_and_collect(self, job_name, collect_sink: Transformation, limit):
        result = self.execute(job_name)
        records = result.get_collected(collect_sink.operator.sink) if hasattr(result, "get_collected") else []
        return CloseableIterator(records[:limit] if limit is not None else records)


class CloseableIterator:
    """What ``execute_and_collect`` returns: iterable, usable in a ``with`` block."""

    def __init__(self, records: list):
        self._records = list(records)
        self._it = iter(self._records)

    def __iter__(self):
        # The list's own iterator: ``list(result)`` runs at C speed; ``next(result)`` shares it.
        return self._it

    def __next__(self):
        return next(self._it)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self._it = iter(())
