"""The one SparkSession of a run, and the TaskManagers (executors) it offers.

Spark's JVM writes its log (log4j's console) and its Python workers' stderr to its stderr,
which an orchestrator shows as errors (Airflow's task log marks a task's stderr ERROR). The
JVM this module starts writes into a pipe instead, whose lines are logged by ``runtime.spark``
at the level each line names (``WARN`` as WARNING, ...); Spark's own level is WARN.
"""
from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Callable, Optional, Union

from runtime.common.lazy_pandas import pandas_hidden
from runtime.execution import daemon_fork_server, python_rdds
from runtime.scheduler.slots import TaskManager
from runtime.storage.filesystems import deployment_env

_lock = threading.Lock()
SPARK_LOG_LEVEL = "WARN"
spark_log = logging.getLogger("runtime.spark")
# py4j says INFO for every connection it opens and closes, also from a gateway's __del__ as the
# interpreter exits, when the handlers' streams may be closed already ("--- Logging error ---").
logging.getLogger("py4j").setLevel(logging.WARNING)
_LEVEL = re.compile(r"\b(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\b")
_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
           "WARNING": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}


def jvm_log_level(line: str, previous: int) -> int:
    """The level of a line of the JVM's stderr: the one it names (log4j's ``yy/MM/dd HH:mm:ss WARN
    Class: ...``); a stack trace's or a Python traceback's lines take the level of the line they
    continue; any other line (Spark's start-up notes) is INFO."""
    found = _LEVEL.search(line[:48])
    if found:
        return _LEVELS[found.group(1)]
    if line[:1].isspace() or line.startswith(("Caused by", "...")):
        return previous
    if line.startswith("Traceback"):
        return logging.ERROR
    return previous if previous >= logging.ERROR and re.match(r"\w+(\.\w+)*(Error|Exception)\b", line) else logging.INFO


def _forward_jvm_log(stream) -> None:
    level = logging.INFO
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip()
        if line:
            level = jvm_log_level(line, level)
            # A cancel interrupts the JVM's threads: what it then says (ClosedByInterruptException,
            # tasks killed, lost connections to Python workers) is the cancel's teardown, not news.
            spark_log.log(logging.DEBUG if _cancel_requested.is_set() else level, "%s", line)
    stream.close()


def _launch_jvm(conf) -> None:
    """Start Spark's JVM (the Py4J gateway) with its stderr in a pipe read by ``_forward_jvm_log``.
    Not when the JVM exists already: a driver spark-submit started, or an earlier session's."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway
    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    # glibc gives each thread that allocates an arena of its own (up to 8 a core): the JVM's many
    # threads (shuffle, RPC, tasks) kept ~100 MiB of mostly free arenas. Two suffice for its
    # native allocations (its heap is its own). Read at a process's start: the JVM, and the Python
    # workers it starts, have it from this process's environment.
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")
    _with_forked_daemons(conf)
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=_forward_jvm_log, args=(gateway.proc.stderr,), name="spark-jvm-log",
                     daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


DAEMON_MODULE = "spark.python.daemon.module"


def _with_forked_daemons(conf) -> None:
    """A local master's Python daemons forked from this process's fork server, which has the
    engine imported (runtime.execution.daemon_fork_server), unless the configuration names a daemon
    module of its own. The JVM (and so each daemon) finds the server in its environment
    (bench/python_workers.py measures what it saves)."""
    if not (conf.get("spark.master") or "").startswith("local") or conf.get(DAEMON_MODULE):
        return
    # What Spark gives its workers: PySpark's hash seed (SparkContext's environment), and the
    # OpenMP threads of a task (PythonRunner's, SPARK-42613): the fork server imports numpy with them.
    path = daemon_fork_server.start(tempfile.gettempdir(), {
        "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0"),
        "OMP_NUM_THREADS": conf.get("spark.executorEnv.OMP_NUM_THREADS") or conf.get("spark.task.cpus") or "1"},
        python=conf.get("spark.pyspark.python") or sys.executable)
    os.environ[daemon_fork_server.SERVER_VARIABLE] = path
    conf.set(DAEMON_MODULE, daemon_fork_server.MODULE)


# delta-spark's JVM parts (bin/dev's set-up copies them with Maven from include/maven/delta/pom.xml);
# SLUICE_JARS names another folder of them (a cluster's driver image, a shared mount).
JARS_VARIABLE = "SLUICE_JARS"
# Opt-in fallback when there is no such folder: delta-spark's configure_spark_with_delta_pip,
# which has Spark download the jars (spark.jars.packages) as the session starts.
DELTA_PIP_VARIABLE = "SLUICE_DELTA_PIP"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_said_no_delta = False


SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"


def delta_jars_folder() -> Optional[str]:
    """The folder holding delta-spark's jars: ``$SLUICE_JARS`` when set, else the project's
    ``.jars/delta`` (made by ``bin/dev``'s set-up); None when it does not exist or has no jar."""
    named = os.environ.get(JARS_VARIABLE)
    folder = named or os.path.join(_PROJECT_ROOT, ".jars", "delta")
    if os.path.isdir(folder) and any(f.endswith(".jar") for f in os.listdir(folder)):
        return os.path.abspath(folder)
    if named:
        spark_log.warning("%s=%s holds no jar: Spark starts without delta-spark", JARS_VARIABLE, named)
    return None


def delta_jars() -> list[str]:
    """delta-spark's jars for ``spark.jars``, from ``delta_jars_folder()`` (none without it)."""
    folder = delta_jars_folder()
    if folder is None:
        return []
    return [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".jar")]


def _joined(*values: Optional[str]) -> str:
    """Comma-separated values, each once, in order (``spark.jars``, ``spark.sql.extensions``)."""
    seen: list[str] = []
    for value in values:
        seen.extend(v for v in (value or "").split(",") if v and v not in seen)
    return ",".join(seen)


def _with_delta(builder, settings: dict, local: bool = False):
    """Delta Lake in the session, as a Spark estate has it: the jars from ``delta_jars_folder()``
    with Delta's SQL extension and catalog (``spark.read.format("delta")``, ``DESCRIBE HISTORY``,
    time travel). Without the folder: ``configure_spark_with_delta_pip`` when ``SLUICE_DELTA_PIP``
    opts in (a download as the session starts), else no Delta in Spark (Sluice writes and reads its
    tables with delta-rs and does not need it)."""
    global _said_no_delta
    jars = delta_jars()
    if jars:
        builder = builder.config("spark.jars", _joined(",".join(jars), settings.get("spark.jars")))
    elif os.environ.get(DELTA_PIP_VARIABLE, "").lower() in ("1", "true", "yes"):
        try:
            from delta import configure_spark_with_delta_pip
        except ImportError:
            spark_log.warning("%s is set but delta-spark is not installed: Spark starts without Delta",
                              DELTA_PIP_VARIABLE)
            return builder
        spark_log.info("no delta-spark jars (.jars/delta, %s) and %s is set: Spark downloads them "
                       "(spark.jars.packages) as the session starts", JARS_VARIABLE, DELTA_PIP_VARIABLE)
        builder = configure_spark_with_delta_pip(builder)
    else:
        if not _said_no_delta:
            _said_no_delta = True
            spark_log.info("Spark starts without delta-spark: spark.read.format(\"delta\") needs its jars "
                           "(bin/dev's set-up puts them in .jars/delta; %s names another folder, "
                           "%s=1 has Spark download them)", JARS_VARIABLE, DELTA_PIP_VARIABLE)
        return builder
    builder = (builder.config("spark.sql.extensions", _joined(DELTA_EXTENSION, settings.get("spark.sql.extensions")))
               .config("spark.sql.catalog.spark_catalog", settings.get("spark.sql.catalog.spark_catalog", DELTA_CATALOG)))
    if local and SNAPSHOT_PARTITIONS not in settings:
        # Delta replays a table's log into 50 partitions, sized for a cluster: on a local master
        # every read, DESCRIBE HISTORY or MERGE paid 50 tasks for a log of a few files.
        builder = builder.config(SNAPSHOT_PARTITIONS, "2")
    return builder


def get_spark_session(master: str, app_name: str = "sluice", settings: Optional[dict] = None,
                      slot_pools: Union[bool, Callable[[int], bool]] = False):
    """The process's SparkSession, created on first use (start-up is paid once per run) with
    ``settings`` (Spark configuration keys) on top of Sluice's own. Its Python workers start
    with it where the job it starts for will run them: in the slots' pools, or (``slot_pools``
    false, or false for the session's number of slots: epoch_job.shares_slots) in Spark's shared
    pool."""
    from pyspark.sql import SparkSession
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            _deploy_store_env(active.sparkContext)
            return active
        # Python workers must run this interpreter (the project's virtual environment).
        os.environ.setdefault("PYSPARK_PYTHON", _python())
        builder = (SparkSession.builder.master(master).appName(app_name)
                   .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.python.worker.reuse", "true")
                   # The JVM and its Python workers talk over Unix domain sockets (Spark 4.1+),
                   # not loopback TCP: a stage's round trips to its workers cost about 50 ms less
                   # (a 2-stage PySpark job 81 ms instead of 168-191 ms on the 2-core machine).
                   .config("spark.python.unix.domain.socket.enabled", "true")
                   # Acknowledgements carry printed and collected records: up to this size they
                   # come back with the task's status instead of through the block manager.
                   .config("spark.task.maxDirectResultSize", "64m")
                   # A keyed task goes where its state store is (execution/locality.py), not
                   # where most of its (small) epoch input was written.
                   .config("spark.shuffle.reduceLocality.enabled", "false")
                   # Every epoch is a Spark job: the driver's status store (UI or not) keeps 1,000
                   # jobs and stages, 100,000 tasks and every root RDD's graph by default, so
                   # its memory grew with the job's age. Kept for the last ~100 epochs.
                   .config("spark.ui.retainedJobs", "100")
                   .config("spark.ui.retainedStages", "200")
                   .config("spark.ui.retainedTasks", "10000")
                   .config("spark.ui.dagGraph.retainedRootRDDs", "100")
                   .config("spark.sql.ui.retainedExecutions", "100"))
        settings = dict(settings or {})
        if master.startswith("local"):
            builder = builder.config("spark.ui.enabled", "false")
            with_local_jvm_options(settings)
            with_loopback_driver(settings)
        builder = _with_delta(builder, settings, master.startswith("local"))
        for key in ("spark.jars", "spark.sql.extensions", "spark.sql.catalog.spark_catalog"):
            if key in builder._options:     # merged with Delta's by _with_delta
                settings.pop(key, None)
        for key, value in settings.items():
            builder = builder.config(key, value)
        from pyspark import SparkConf, SparkContext
        with pandas_hidden():
            # py4j's numpy converter imports it at the first call into the JVM; it imports pandas
            # only to say whether the tests of pandas can run.
            import pyspark.testing.utils  # noqa: F401
        conf = SparkConf(loadDefaults=False)
        for key, value in builder._options.items():
            conf.set(key, value)
        interrupts = _interrupts_while_starting()
        try:
            _launch_jvm(conf)
            SparkContext.getOrCreate(conf)      # the session's context, as getOrCreate would make it
        finally:
            _interrupts_while_running(interrupts)       # in place of the handler PySpark's context set
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel(SPARK_LOG_LEVEL)
        _deploy_store_env(session.sparkContext)
        python_rdds.prepare(session.sparkContext)       # the Java objects every run builds its RDDs with
        canceled = KeyboardInterrupt("canceled while the Spark session started")
        if cancel_requested():
            raise canceled
        try:
            _start_python_workers(session.sparkContext, slot_pools)
        except Exception:
            if cancel_requested():      # Ctrl-C while the workers started: a cancel, not a failure
                raise canceled from None
            raise
        return session


def session_active() -> bool:
    """Whether this process has a SparkSession already (``get_spark_session`` then starts none)."""
    from pyspark.sql import SparkSession
    return SparkSession.getActiveSession() is not None


# The collectors a JVM option may choose (two chosen at once stop the JVM from starting).
_COLLECTOR_OPTION = re.compile(r"-XX:\+Use\w+GC\b")
_INITIAL_HEAP_OPTION = re.compile(r"-Xms\d")
_COMPILER_OPTION = re.compile(r"-XX:[+-]?Tiered\w*|-Xint\b|-Xcomp\b")
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# A class-data archive of a local session's JVM (the JDK's AppCDS: its and Spark's classes
# parsed and verified once, mapped at each start), named by this variable: bin/dev makes one at
# set-up (runtime.execution.class_archive). A session starts a third sooner with it (10.1-11.3 s
# instead of 15.9-16.3 on the 2-core machine), which every `sluice run`, Airflow task and test
# process pays.
# The JVM ignores an archive of another JDK or class path.
CLASS_ARCHIVE_ENV = "SLUICE_JVM_CLASS_ARCHIVE"
_CLASS_DATA_OPTION = re.compile(r"-XX:(SharedArchiveFile|ArchiveClassesAtExit)=\S*|-Xshare:\S*")
JVM_OPTION_VARIABLES = ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS")


def without_class_data(options: str) -> str:
    """JVM options without those that choose class data (an archive to map or to write, -Xshare)."""
    return " ".join(_CLASS_DATA_OPTION.sub("", options).split())


def with_local_jvm_options(settings: dict) -> None:
    """A local session's JVM uses the serial collector, starts with a 64 MB heap and compiles
    with C1 alone, unless its options choose otherwise. In local mode the JVM holds no state and
    runs no user code (the Python workers do): it schedules, moves shuffle bytes and answers py4j.
    Its live heap stays under 100 MB, but G1 grows its committed heap with each large epoch's
    shuffle and keeps its own remembered sets, and a JVM starts with 1/64 of the machine's memory
    (384 MB on 24 GB) that the serial collector keeps: the JVM 50 to 100 MiB smaller at 10,000,000
    keys, epochs as fast. And C2 kept compiling a long tail of Spark's methods in every epoch,
    0.3-1.3 s of a core per word-count epoch beside the two Python workers on two cores; C1 alone
    0.2-0.5 s (bench/README.md, issue 35). It maps the class-data archive ``CLASS_ARCHIVE_ENV``
    names, when that file is there and the options choose no class data of their own. A cluster's
    JVMs keep Spark's defaults."""
    chosen = " ".join((settings.get(DRIVER_JAVA_OPTIONS, ""), *(os.environ.get(v, "") for v in JVM_OPTION_VARIABLES)))
    ours = [option for option, pattern in (("-XX:+UseSerialGC", _COLLECTOR_OPTION), ("-Xms64m", _INITIAL_HEAP_OPTION),
                                           ("-XX:TieredStopAtLevel=1", _COMPILER_OPTION))
            if not pattern.search(chosen)]
    archive = os.environ.get(CLASS_ARCHIVE_ENV)
    if archive and os.path.isfile(archive) and not _CLASS_DATA_OPTION.search(chosen):
        # quietly: an archive the JVM cannot use (another JDK, another class path) is not an error
        ours.append(f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off")
    if ours:
        settings[DRIVER_JAVA_OPTIONS] = " ".join(filter(None, (*ours, settings.get(DRIVER_JAVA_OPTIONS))))


LOOPBACK = "127.0.0.1"
LOCAL_IP_VARIABLE = "SPARK_LOCAL_IP"


def with_loopback_driver(settings: dict) -> None:
    """A local master's driver (its RPC endpoint and block manager, the whole of Spark in local mode)
    listens on the loopback address, unless the settings or ``SPARK_LOCAL_IP`` name another: nothing
    outside the machine talks to it. Without this Spark binds to the address of the machine's first
    interface and warns, in every run, that the hostname resolves to a loopback address. Spark's
    JVM reads ``SPARK_LOCAL_IP`` from this process's environment (and its Python workers inherit it).
    A cluster's driver keeps its address: executors elsewhere connect to it."""
    address = os.environ.setdefault(LOCAL_IP_VARIABLE, LOOPBACK)
    settings.setdefault("spark.driver.bindAddress", address)
    settings.setdefault("spark.driver.host", address)


def session_usable(spark) -> bool:
    """Whether a session can run another attempt: its JVM answers and its context is not stopped."""
    try:
        return not spark.sparkContext._jsc.sc().isStopped()
    except Exception:       # the gateway is gone (the JVM died) or the context was torn down
        return False


def discard_session(spark) -> bool:
    """Forget a session that is no longer usable, so that the next ``get_spark_session`` starts a
    fresh one (a new JVM when the old one died). False when this process cannot start one: the
    JVM was spark-submit's (the process's parent), not this module's."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if "PYSPARK_GATEWAY_PORT" in os.environ and proc is None:
        return False
    try:
        spark.stop()
    except Exception:       # its JVM is gone: nothing to stop there
        pass
    if proc is not None and proc.poll() is not None or not _gateway_answers(gateway):
        try:
            gateway.shutdown()
        except Exception:
            pass
        if proc is not None and proc.poll() is None:
            proc.kill()
        SparkContext._gateway = SparkContext._jvm = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = SparkSession._activeSession = None
    return True


def _gateway_answers(gateway) -> bool:
    try:
        gateway.jvm.System.currentTimeMillis()
        return True
    except Exception:
        return False


def _deploy_store_env(sc) -> None:
    """The object store's settings (this process's AWS_*, AZURE_*, GOOGLE_* variables) go with
    every task: PySpark ships ``sc.environment`` with each Python function to the executors and
    sets it in their Python workers, so a session started before (or elsewhere) gets them too;
    nothing is written to a file for them."""
    sc.environment.update(deployment_env())


def _warm_up(index, rows):     # rows: none (a source stage read its empty input)
    import gc

    import importlib
    for name in daemon_fork_server.ENGINE_MODULES:
        importlib.import_module(name)
    # The imports stay for the worker's life: out of the cyclic collector's scans (epoch_job's
    # settling of a worker's first run then collects only what that run made).
    gc.collect()
    gc.freeze()
    return [(index, b"")]


def _start_python_workers(sc, slot_pools: Union[bool, Callable[[int], bool]]) -> None:
    """Start a Python worker per slot with the engine imported, in the slots' pools
    (python_rdds.SLOT_POOLS) or in Spark's shared pool, and take the JVM once through a shuffle
    and a collect as an epoch does, as TaskManagers start before jobs: the first epoch pays
    neither the interpreter start and imports nor the JVM's first shuffle (loading Kryo, the
    shuffle writer and reader: ~0.7 s of its first stage boundary)."""
    slots = sc.defaultParallelism
    if callable(slot_pools):
        slot_pools = slot_pools(slots)
    pinned = (slots, python_rdds.SLOT_POOLS) if slot_pools else (0, 0)
    py = python_rdds.PythonRDDs(sc)
    started = py.source(slots, *pinned).then(_warm_up)
    py.collect([py.rows(py.partition_by([started], slots), *pinned).then(python_rdds.read_to_end)])


def warm_python_workers(spark, slot_pools: bool) -> None:
    """Start the session's Python workers with the engine imported, in the slots' pools or in
    Spark's shared pool (``_start_python_workers``), or keep them: Spark stops a pool's workers
    once it was idle for a minute. A warm driver waiting for a job calls it (runtime.jobmanager)."""
    _start_python_workers(spark.sparkContext, slot_pools)


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


_cancel_requested = threading.Event()


def _not_cancel_teardown(record: logging.LogRecord) -> bool:
    """False for py4j's records once a cancel was requested (a filter of the root logger)."""
    return not (_cancel_requested.is_set() and f"{os.sep}py4j{os.sep}" in record.pathname)


def _quiet_teardown() -> None:
    """A cancel is requested: from now on py4j's and pyspark's own complaints (a reset connection to
    the JVM as it goes) are the cancel's teardown, and the run says once that it was canceled. py4j
    logs some through the root logger (logging.exception), hence the root logger's filter."""
    _cancel_requested.set()
    for name in ("py4j", "pyspark"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    if _not_cancel_teardown not in logging.root.filters:
        logging.root.addFilter(_not_cancel_teardown)


def cancel_all_jobs() -> None:
    """Cancel every running Spark job of this process's SparkContext, if it has one (Flink's
    Cancel). Remembered: whatever the run meets next (a canceled job, a JVM already stopped by
    the same signal) ends it as CANCELED, not as a failure to restart."""
    from pyspark import SparkContext
    _quiet_teardown()
    sc = SparkContext._active_spark_context
    if sc is not None:
        # pyspark's accumulator server prints a traceback on stderr (socketserver's handle_error)
        # when the JVM's connection to it ends mid-update, as it does when a cancel stops the JVM.
        server = getattr(sc, "_accumulatorServer", None)
        if server is not None:
            server.handle_error = _accumulator_update_lost
        try:
            sc.cancelAllJobs()
        except Exception:       # the JVM went first: nothing left to cancel
            pass


def _interrupts_while_starting():
    """Ctrl-C (SIGINT) while the session starts ends the process at once, quietly (py4j reports a
    KeyboardInterrupt in its calls with a traceback), where Python's own handler is in place. Returns
    the handler that was, for ``_interrupts_while_running``; None outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return None
    before = signal.getsignal(signal.SIGINT)
    if before is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_starting)
    return before


def _interrupts_while_running(before) -> None:
    """Once the session is up, Ctrl-C cancels the run as Flink's cancel does: its Spark jobs are
    canceled from a thread of their own, the run ends CANCELED at once (a canceled Spark job) or at
    its next epoch boundary and says so in one line; a second Ctrl-C interrupts at once. PySpark's
    own handler (SparkContext's, which replaced whatever was there) canceled the jobs from inside the
    py4j call the main thread is in, a reentrant call that py4j reports with pages of tracebacks.
    A program's own handler, or SIGINT ignored (a background process), is put back as it was."""
    if before is None:      # not the main thread, or a handler Python did not install
        return
    signal.signal(signal.SIGINT, _interrupted if before in (signal.default_int_handler, _interrupted_starting)
                  else before)


def _interrupted_starting(signum, frame) -> None:
    _quiet_teardown()
    raise KeyboardInterrupt


def _interrupted(signum, frame) -> None:
    if _cancel_requested.is_set():
        raise KeyboardInterrupt
    _quiet_teardown()
    threading.Thread(target=cancel_all_jobs, name="sluice-cancel", daemon=True).start()


def _accumulator_update_lost(request, client_address) -> None:
    logging.getLogger(__name__).debug("an accumulator update from the JVM was cut off by the cancel")


def cancel_requested() -> bool:
    return _cancel_requested.is_set()
