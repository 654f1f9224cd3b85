"""The class-data archive of a local Spark session's JVM (the JDK's AppCDS), made once at set-up
by bin/dev: ``python -m runtime.execution.class_archive PATH``. A session started here with
``-XX:ArchiveClassesAtExit`` does what every session's start does (its Python workers' warm-up
takes the JVM through a shuffle and a collect, as an epoch does), and its JVM writes the classes
it loaded to PATH as it exits. Sessions started with ``SLUICE_JVM_CLASS_ARCHIVE=PATH`` map them
instead of loading them (``runtime.execution.spark.with_local_jvm_options``)."""
from __future__ import annotations

import os
import sys

from runtime.execution.spark import (
    CLASS_ARCHIVE_ENV,
    DRIVER_JAVA_OPTIONS,
    JVM_OPTION_VARIABLES,
    get_spark_session,
    without_class_data,
)

EXIT_TIMEOUT_S = 300


def make(path: str) -> None:
    # An archive is made from classes loaded, not mapped: with an archive to map as well (say the
    # one this replaces, named in SPARK_SUBMIT_OPTS), the JVM takes that one as the base of the new
    # one, and does not start when it is gone.
    os.environ.pop(CLASS_ARCHIVE_ENV, None)
    for variable in JVM_OPTION_VARIABLES:
        if variable in os.environ:
            os.environ[variable] = without_class_data(os.environ[variable])
    partial = f"{path}.partial"
    if os.path.exists(partial):
        os.remove(partial)
    spark = get_spark_session("local[2]", "sluice: class archive",
                              {DRIVER_JAVA_OPTIONS: f"-XX:ArchiveClassesAtExit={partial}"})
    from pyspark import SparkContext
    jvm = SparkContext._gateway.proc
    spark.stop()
    jvm.stdin.close()               # PySpark's JVM exits when its driver's pipe closes
    if jvm.wait(EXIT_TIMEOUT_S) != 0 or not os.path.isfile(partial):
        raise RuntimeError(f"the JVM exited with {jvm.returncode} without writing {partial}")
    os.replace(partial, path)       # whole or not at all: a session never maps a half-written one


if __name__ == "__main__":
    make(sys.argv[1])
