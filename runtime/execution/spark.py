"""The one SparkSession of a run, and the TaskManagers (executors) it offers."""
from __future__ import annotations

import os
import threading

from runtime.scheduler.slots import TaskManager

_lock = threading.Lock()


def get_spark_session(master: str, app_name: str = "sluice"):
    """The process's SparkSession, created on first use (start-up is paid once per run)."""
    from pyspark.sql import SparkSession
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        # Python workers must run this interpreter (the project's virtual environment).
        os.environ.setdefault("PYSPARK_PYTHON", _python())
        builder = (SparkSession.builder.master(master).appName(app_name)
                   .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.python.worker.reuse", "true")
                   # Acknowledgements carry printed and collected records: up to this size they
                   # come back with the task's status instead of through the block manager.
                   .config("spark.task.maxDirectResultSize", "64m"))
        if master.startswith("local"):
            builder = builder.config("spark.ui.enabled", "false")
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        _start_python_workers(session.sparkContext)
        return session


def _warm_up(rows):
    import pyarrow as pa
    import runtime.connectors.files  # noqa: F401  (imports the task side: operators, state, windows)
    import runtime.task.stream_task  # noqa: F401
    pa.array(["x"])     # pyarrow imports pandas lazily on first use: do it now
    return [(i, b"") for i in rows]


def _start_python_workers(sc) -> None:
    """Start one Python worker per slot with the engine imported, and take the JVM once through
    a shuffle and a collect as an epoch does, as TaskManagers start before jobs: the first epoch
    pays neither the interpreter start and imports nor the JVM's first shuffle (loading Kryo,
    the shuffle writer and reader: ~0.7 s of its first stage boundary)."""
    slots = sc.defaultParallelism
    sc.parallelize(range(slots), slots).mapPartitions(_warm_up).partitionBy(slots).keys().collect()


def _python() -> str:
    import sys
    return sys.executable


def task_managers(spark, slots_required: int = 1) -> tuple[TaskManager, ...]:
    """Spark executors as TaskManagers, one slot per core, read from the running cluster.

    Local mode is Flink's MiniCluster: one TaskManager with as many slots as the job needs
    (at least one per core); Spark queues the extra tasks on the cores.
    """
    sc = spark.sparkContext
    total = sc.defaultParallelism
    if sc.master.startswith("local"):
        return (TaskManager("driver", "localhost", max(total, slots_required)),)
    import time
    deadline = time.time() + 60
    # Executors register after the session starts; wait for them before counting slots.
    while sc._jsc.sc().getExecutorMemoryStatus().size() < 2 and time.time() < deadline:
        time.sleep(0.2)
    total = sc.defaultParallelism
    status = sc._jsc.sc().getExecutorMemoryStatus()
    hosts = [status.keys().toList().apply(i) for i in range(status.size())]
    driver = f"{sc.getConf().get('spark.driver.host')}:"
    executors = [h for h in hosts if not h.startswith(driver)] or hosts
    per = max(1, total // len(executors))
    return tuple(TaskManager(f"executor-{i}", h.split(":")[0], per) for i, h in enumerate(sorted(executors)))
