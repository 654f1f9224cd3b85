"""Loading a job script and compiling it without running it (Flink's PackagedProgram).

A job is a Python script that builds a pipeline and calls ``env.execute()``, as in
PyFlink. To compile it, the script runs with a plan-capturing executor (Flink's
StreamPlanEnvironment): its ``execute()`` hands over the StreamGraph and stops the script.
"""
from __future__ import annotations

import os
import runpy
import sys
from dataclasses import dataclass
from typing import Optional, Sequence

from runtime.datastream.pipeline import EXECUTORS, PipelineExecutor, current_executor, load_service
from runtime.datastream.stream_execution_environment import PROGRAM_KEY, client_configuration
from runtime.graph.execution_graph import ExecutionGraph, build_execution_graph
from runtime.graph.job_graph import JobGraph, create_job_graph
from runtime.graph.stream_graph import StreamGraph


class _ProgramAbort(BaseException):
    """Raised by the capturing executor to stop the job script after ``execute()``.

    A BaseException so that a job's own ``except Exception`` does not swallow it.
    """

    def __init__(self, graph: StreamGraph):
        super().__init__("plan captured")
        self.graph = graph


class JobScriptError(RuntimeError):
    pass


@dataclass(frozen=True)
class CompiledJob:
    stream_graph: StreamGraph
    job_graph: JobGraph
    execution_graph: ExecutionGraph


def _run_script(path: str, args: Sequence[str], executor: PipelineExecutor, parallelism: Optional[int],
                configuration: Optional[dict] = None) -> None:
    """Run the job script with ``executor`` as what its ``execute()`` calls; ``configuration`` (and
    ``parallelism`` as ``parallelism.default``) is the client's, under the job's own (Flink's -D, -p)."""
    if not os.path.isfile(path):
        raise JobScriptError(f"Job script not found: {path}. Pass the path of a .py file, "
                             "e.g. include/jobs/wordcount.py.")
    token = current_executor.set(executor)
    conf_token = client_configuration.set({**(configuration or {}), PROGRAM_KEY: os.path.realpath(path),
                                           **({"parallelism.default": parallelism} if parallelism else {})})
    saved_argv = sys.argv
    sys.argv = [path, *args]
    try:
        runpy.run_path(path, run_name="__main__")
    except SyntaxError as e:
        # The job does not compile: where and what, as an editor shows it (the traceback says no more).
        where = f"{e.filename}, line {e.lineno}" + (f", column {e.offset}" if e.offset else "")
        text = f": {e.text.strip()}" if e.text and e.text.strip() else ""
        raise JobScriptError(f"{where}: {type(e).__name__}: {e.msg}{text}") from e
    finally:
        sys.argv = saved_argv
        current_executor.reset(token)
        client_configuration.reset(conf_token)


def _no_execute(path: str) -> JobScriptError:
    return JobScriptError(f"The job script {path} finished without calling execute(): build the pipeline "
                          "and end with env.execute('job name'), as in PyFlink.")


class _PlanCapture:
    """Flink's StreamPlanEnvironment: ``execute()`` hands over the StreamGraph and stops the script."""

    def execute(self, stream_graph: StreamGraph):
        raise _ProgramAbort(stream_graph)


class _Collecting:
    """Runs each ``execute()`` of the script on ``executor`` and keeps the results."""

    def __init__(self, executor: PipelineExecutor):
        self.executor, self.results = executor, []

    def execute(self, stream_graph: StreamGraph):
        self.results.append(self.executor.execute(stream_graph))
        return self.results[-1]


def load_stream_graph(path: str, args: Sequence[str] = (), parallelism: Optional[int] = None,
                      configuration: Optional[dict] = None) -> StreamGraph:
    """Run the job script at ``path`` until its ``execute()`` and return its StreamGraph."""
    try:
        _run_script(path, args, _PlanCapture(), parallelism, configuration)
    except _ProgramAbort as abort:
        return abort.graph
    raise _no_execute(path)


def run_job(path: str, args: Sequence[str] = (), parallelism: Optional[int] = None, target: str = "spark",
            configuration: Optional[dict] = None, **overrides):
    """Run the job script at ``path`` on the pipeline executor ``target`` (Spark); ``overrides``
    replace ExecutionOptions fields, ``parallelism`` is the default parallelism of operators the
    job does not set (``-p``), ``configuration`` the client's keys under the job's own (``-D``).

    Returns the JobExecutionResult of the script's (last) ``execute()``.
    """
    run = _Collecting(load_service(EXECUTORS, target)(**overrides))
    _run_script(path, args, run, parallelism, configuration)
    if not run.results:
        raise _no_execute(path)
    return run.results[-1]


def compile_job(path: str, args: Sequence[str] = (), parallelism: Optional[int] = None,
                configuration: Optional[dict] = None) -> CompiledJob:
    stream_graph = load_stream_graph(path, args, parallelism, configuration)
    job_graph = create_job_graph(stream_graph)
    return CompiledJob(stream_graph, job_graph, build_execution_graph(job_graph))
