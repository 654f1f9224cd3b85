"""The Python daemon of Sluice's executors (Spark's ``spark.python.daemon.module``).

PySpark's daemon (``pyspark.daemon``) forks one Python worker per task slot; each worker then
imports what a Sluice task needs (the task side of the runtime, pyarrow, numpy: about 75 MiB of
its own, and a second or so on 2 cores). This daemon imports them once, before it forks, as a
pre-forking server preloads its application: every worker of its pool shares those pages with
it (copy-on-write; frozen, so no collection touches them) and starts without importing. Then it
is PySpark's daemon, unchanged.
"""
from __future__ import annotations

import gc


def preload() -> None:
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import runtime.task.stream_task  # noqa: F401  (the operators, the heap backend, snapshots)
    gc.collect()
    gc.freeze()


def main() -> None:
    preload()
    from pyspark import daemon
    daemon.manager()


if __name__ == "__main__":
    main()
