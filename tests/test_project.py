"""The installed project: pinned dependencies, a working local Spark, the console script."""
import subprocess
import sys
from importlib import metadata


def test_pyspark_and_client_are_pinned_to_one_version():
    assert metadata.version("pyspark") == metadata.version("pyspark-client") == "4.2.0"
    assert metadata.version("apache-airflow").startswith("3.3.")


def test_local_spark_session_runs_a_job(spark):
    rows = spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], ["k", "v"]) \
        .groupBy("k").sum("v").orderBy("k").collect()
    assert [(r["k"], r["sum(v)"]) for r in rows] == [("a", 4), ("b", 2)]
    assert spark.version == "4.2.0"


def test_api_and_compilers_do_not_import_spark_or_airflow():
    code = ("import sys, runtime.datastream, runtime.common, runtime.client, runtime.cli, "
            "runtime.scheduler.slots; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('pyspark', 'airflow')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
