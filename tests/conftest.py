"""Shared fixtures. One SparkSession per test run (started on first use)."""
from __future__ import annotations

import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import airflow_env  # noqa: E402  (tests/ is on sys.path: rootdir conftest)
import jvm_options  # noqa: E402
import parallel  # noqa: E402
import run_temp  # noqa: E402

run_temp.use_run_temp()     # first: Airflow's home and the JVMs' options name the folder
airflow_env.configure()     # before anything imports airflow
jvm_options.use_short_lived_jvms()      # for the Spark processes the tests start

# The slow tiers, by file: `bin/dev test -m "not slow"` is the fast loop; `bin/dev test` runs all.
SLOW_TIERS = {
    "cluster": ("test_cluster.py",),
    "airflow": ("test_airflow_control_plane.py", "test_airflow_settings.py", "test_airflow_spark_submit.py",
                "test_geo_alerts_dag.py", "test_web_view.py", "test_airflow_ui_runs.py", "test_dev_airflow.py",
                "test_quickstart.py"),
    "faults": ("test_checkpoint_faults.py", "test_exactly_once_restarts.py", "test_restart_attempts.py"),
    "object_store": ("test_object_store.py",),
    "kafka": ("test_kafka_source.py", "test_kafka_sink.py", "test_kafka_modes.py", "test_kafka_windows_dag.py", "test_kafka_faults.py",
              "test_pyflink_kafka_examples.py"),
}
# delta-spark writing and reading Delta tables through Spark SQL (the jars of .jars/delta).
DELTA_SPARK = (r"test_delta_spark\.py::test_a_sluice_table_reads_in_spark_sql_as_in_delta_rs\[.*\]",
               r"test_delta_spark_tables\.py::(?!test_inline_and_file_deletion_vectors).*",
               r"test_delta_on_inputs\.py::test_.*_in_spark_sql")
# Single tests in a slow tier, by a regular expression on "file::test[parameters]": real process
# kills in files of the fast loop, and whole Spark jobs whose operators a Spark-free test
# (tests/task_harness.py) or another parameter of the same test covers in the fast loop.
SLOW_TESTS = {
    "faults": (r"test_checkpoint_integrity\.py::test_a_kill_during_retention_is_finished_by_the_next_run",
               r"test_file_sink\.py::test_a_kill_and_restart_writes_every_line_exactly_once\[.*\]",
               r"test_delta_upsert\.py::test_kills_.*",
               r"test_long_running_tasks\.py::test_killed_.*"),
    "jobs": (r"test_side_output_yield\.py::.*\[(one epoch|an epoch per record)\]",     # [in tasks] stays
             r"test_count_windows\.py::.*\[one epoch\]",     # [in tasks] stays
             r"test_state_ttl\.py::.*\[hashmap.*\]",    # test_state_backends.py checks hashmap TTL without Spark
             r"test_table_maintenance\.py::test_a_stopped_jobs_own_tables_.*",     # 4 runs; the held job stays
             r"test_delta_upsert\.py::test_a_(rolling_count|null_key_in_a_job).*",    # the merge's unit tests stay
             r"test_cli\.py::test_sluice_(stop|run_restarts|run_in_a_terminal)_.*",     # test_job_stop.py decides stops without Spark
             r"test_spark_session\.py::test_an_archive_is_made_.*",     # a JVM's start and its dump
             r"test_state_cleanup\.py::test_a_jobs_.*"),     # the Spark-free tests cover each operator
    "delta_spark": DELTA_SPARK,
    "kafka": (r"test_kafka_broker\.py::test_sigterm_.*",),     # a real broker; the taken port's test stays
    # The Asset rule's own tests stay; its job DAGs run through dag.test() and the real scheduler.
    "airflow": (r"test_airflow_assets\.py::test_a_job_.*", r"test_delta_on_inputs\.py::.*_real_scheduler_.*",
                # The parse-time test stays: the compile of the profiles and a DAG's dag.test() go.
                r"test_dag_parse\.py::test_(a_dag_takes|the_compile_task)_.*"),
}


def _slow_tiers(file_name, test_name):
    yield from (tier for tier, files in SLOW_TIERS.items() if file_name in files)
    name = f"{file_name}::{test_name}"
    yield from (tier for tier, tests in SLOW_TESTS.items() if any(re.fullmatch(t, name) for t in tests))


@pytest.hookimpl(tryfirst=True)     # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        for tier in _slow_tiers(item.path.name, item.name):
            item.add_marker(tier)
            item.add_marker("slow")
    # The tests of the one real Airflow run together, from the first one's place, and the one that
    # stops it runs last of them.
    airflow = [i for i in items if "real_airflow" in getattr(i, "fixturenames", ())]
    if airflow:
        first = items.index(airflow[0])
        rest = [i for i in items if i not in airflow]
        airflow.sort(key=lambda i: bool(i.get_closest_marker("stops_real_airflow")))
        items[:] = rest[:first] + airflow + rest[first:]
    if getattr(config.option, "loadgroup", False):     # an xdist worker of `--dist loadgroup`
        parallel.group_items(items)


@pytest.hookimpl(optionalhook=True)     # a hook of pytest-xdist's
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") == "loadgroup":
        return parallel.slowest_groups_first(_cost)(config, log)


def _cost(file_name, test_name) -> float:
    """Seconds a test takes, roughly, for the order the workers take the files in: the suite's own
    slowest tests as measured (parallel.LONG_TESTS), another slow-tier test a few, a fast one a
    fraction."""
    name = f"{file_name}::{test_name}"
    known = next((s for pattern, s in parallel.LONG_TESTS.items() if re.fullmatch(pattern, name)), None)
    return known if known is not None else 3.0 if any(_slow_tiers(file_name, test_name)) else 0.1


def pytest_collection_finish(session):
    if any(item.get_closest_marker("slow") for item in session.items):
        jvm_options.want_shared_classes()       # the slow tiers start dozens of Spark drivers


@pytest.fixture(scope="session")
def spark():
    from runtime.execution.spark import get_spark_session
    with pytest.MonkeyPatch.context() as mp:
        if jvm_options.OWNED:
            # It runs all along, and runs the delta-spark tests' Spark SQL: C2 pays there (those
            # files 157-177 s against 182-196 s on C1 alone, Sluice's local default), and the
            # jobs run the same code either way. The rest as Sluice chooses (spark.py).
            mp.setenv(jvm_options.VARIABLE, f"{run_temp.jvm_temp_option()} {jvm_options.SESSION_COMPILER}")
        session = get_spark_session("local[2]", "sluice-tests")
    session.conf.set("spark.sql.shuffle.partitions", "4")
    yield session
    session.stop()


@pytest.fixture
def dspark(spark):
    """The shared session, when it has delta-spark (else the test is skipped)."""
    if "DeltaSparkSessionExtension" not in (spark.conf.get("spark.sql.extensions", "") or ""):
        pytest.skip("the Spark session has no delta-spark (bin/dev's set-up puts its jars in .jars/delta)")
    return spark


@pytest.fixture(params=["tasks", pytest.param("spark", marks=(pytest.mark.slow, pytest.mark.jobs))])
def collect(request):
    """``collect(stream)``: what ``stream.execute_and_collect()`` returns, from the job's tasks run
    in this process without Spark (the fast loop), and from the whole job on Spark (tier jobs)."""
    if request.param == "spark":
        request.getfixturevalue("spark")
        return lambda stream: list(stream.execute_and_collect())
    from task_harness import collect_in_tasks
    return collect_in_tasks


@pytest.fixture
def env():
    from runtime.datastream import StreamExecutionEnvironment
    e = StreamExecutionEnvironment.get_execution_environment()
    e.set_parallelism(1)
    return e


@pytest.fixture(scope="session")
def real_airflow(request, tmp_path_factory):
    """``bin/dev airflow`` running with the shipped wordcount and every collected module's
    ``AIRFLOW_JOBS`` (tests/real_airflow.py); started once, on first use."""
    import real_airflow as site
    jobs = {}
    for module in {item.module for item in request.session.items if hasattr(item, "module")}:
        jobs.update(getattr(module, "AIRFLOW_JOBS", {}))
    yield from site.start(tmp_path_factory.mktemp("airflow-ui"), jobs)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A real one-node Kafka broker on a free loopback port for the test run (tests/kafka_env.py)."""
    import kafka_env
    broker = kafka_env.start(tmp_path_factory.mktemp("kafka"))
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def airflow_db():
    """A migrated Airflow metadata database (SQLite) in this run's AIRFLOW_HOME."""
    airflow_env.migrate()
    return os.environ["AIRFLOW_HOME"]
