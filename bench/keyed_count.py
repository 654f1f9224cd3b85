"""The keyed-count job of bench/checkpoint.py and bench/keyed_state.py, and what the two share to
run it: words from an unbounded DataGeneratorSource (uid "words") -> key_by(word) -> a
KeyedProcessFunction (uid "word-counts") keeping the count per word in ValueState[LONG] and emitting
nothing, so an epoch is about the state."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

STATE_UID = "word-counts"
SOURCE_UID = "words"


def build_graph(word_of, parallelism, job_name, checkpoint_every_epoch=True, configuration=None):
    """The job's StreamGraph. ``word_of(i)`` is the word of record index i; ``configuration``,
    settings (str -> str) for the job's Configuration.

    Spark's Python workers cannot import modules under bench/, and a class or function of an
    importable module is pickled by reference: so the job's classes and functions are defined in
    this body, which cloudpickle ships by value (and ``word_of`` must come from the running script,
    ``__main__``, for the same reason). The engine is imported here, not at module level, so that
    a script's roles without Sluice can import this module."""
    from runtime.common import Types, WatermarkStrategy
    from runtime.datastream import KeyedProcessFunction, StreamExecutionEnvironment
    from runtime.datastream.connectors import DataGeneratorSource
    from runtime.datastream.state import ValueStateDescriptor

    class WordCount(KeyedProcessFunction):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

        def process_element(self, value, ctx):
            count = self.count.value()
            self.count.update(1 if count is None else count + 1)

    def word_key(word):
        return word

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    for key, value in (configuration or {}).items():
        env.get_configuration().set_string(key, value)
    if checkpoint_every_epoch:
        env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    source = DataGeneratorSource(word_of, None, type_info=Types.STRING())
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "words").uid(SOURCE_UID)
     .key_by(word_key, key_type=Types.STRING())
     .process(WordCount()).uid(STATE_UID))
    return env.get_stream_graph(job_name, clear_transformations=True)


def run_job(spark, graph, parallelism, warehouse, epochs, records_per_split, verbose=False, restore=False,
            before_run=None):
    """One run of ``graph`` on ``spark``, or a run restored from the latest checkpoint whose driver
    part (Recovery.restore) is timed; ``before_run(runner)`` may adjust the runner first.
    Returns (JobRunner, JobExecutionResult, driver restore ms or None)."""
    from runtime.execution.executor import JobRunner
    from runtime.execution.options import ExecutionOptions
    options = ExecutionOptions(master=f"local[{parallelism}]", warehouse=warehouse, epoch_interval_ms=1,
                               max_epochs=epochs, max_records_per_split=records_per_split, quiet=not verbose,
                               restore_from="latest" if restore else None)
    runner = JobRunner(graph, options, spark=spark)
    if before_run is not None:
        before_run(runner)
    timing = {}
    if restore:
        original = runner.recovery.restore

        def timed_restore(*a, **kw):
            t = time.perf_counter()
            try:
                return original(*a, **kw)
            finally:
                timing["restore_ms"] = (time.perf_counter() - t) * 1000
        runner.recovery.restore = timed_restore
    result = runner.run()
    return runner, result, timing.get("restore_ms")


def epoch_costs(epochs):
    """What each epoch costs, in ms (EpochSummary objects, or their dicts): a checkpoint completes
    while the next epoch runs, so an epoch costs the time from its start to the next one's (its
    wait for the previous checkpoint included); the last one, its own time plus its checkpoint's."""
    get = (lambda e, k: e[k]) if epochs and isinstance(epochs[0], dict) else getattr
    gaps = [(get(b, "started_at") - get(a, "started_at")) * 1000 for a, b in zip(epochs, epochs[1:])]
    return gaps + [get(epochs[-1], "duration_ms") + get(epochs[-1], "checkpoint_ms")] if epochs else []


def parse_sizes(text):
    """--sizes: numbers of keys, comma-separated, with k and m suffixes ("10k,1m")."""
    sizes = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        if part:
            mult = {"k": 1_000, "m": 1_000_000}.get(part[-1], 1)
            sizes.append(int(float(part[:-1] if mult != 1 else part) * mult))
    if not sizes or any(s < 1 for s in sizes):
        raise argparse.ArgumentTypeError(f"--sizes: positive numbers, got {text!r}")
    return sizes


def make_workdir(workdir, prefix):
    """``workdir``, or a new temp folder when None. Also points Spark's Python workers at this
    interpreter (the venv's, with the engine's dependencies), for this process and its children."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    workdir = workdir or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(workdir, exist_ok=True)
    return workdir
