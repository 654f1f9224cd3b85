"""The installed project: pinned dependencies, a working local Spark, the console script, the image."""
import os
import re
import subprocess
import sys
from importlib import metadata

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from seed import ROOT


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
            "runtime.scheduler.slots, runtime.cep; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('pyspark', 'airflow')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_builds_what_pyproject_pins():
    """The image runs what the tests ran: pyproject's Airflow on a Python it allows, Java 17 for
    Spark, the project installed with its pins, and the Astro project's folders copied in."""
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        dockerfile = f.read()
    base = re.search(r"^FROM apache/airflow:(\S+)-python(\d+\.\d+)\s*$", dockerfile, re.M)
    assert base, "Dockerfile: expected FROM apache/airflow:<airflow version>-python<X.Y>"
    pins = {r.name: str(r.specifier) for r in map(Requirement, metadata.requires("sluice")) if not r.marker}
    assert pins["apache-airflow"] == f"=={base[1]}"
    assert base[2] in SpecifierSet(metadata.metadata("sluice")["Requires-Python"])
    assert re.search(r"apt-get install .*openjdk-17-jre", dockerfile)
    assert re.search(r"^ENV JAVA_HOME=\S*java-17", dockerfile, re.M)
    assert re.search(r"^RUN pip install .* \.$", dockerfile, re.M), "the project, with its pins"
    copied = {src for args in re.findall(r"^COPY (?:--\S+ )*(.+)$", dockerfile, re.M) for src in args.split()[:-1]}
    assert {"pyproject.toml", "README.md", "runtime", "dags", "plugins", "include",
            "airflow_settings.yaml"} <= copied
