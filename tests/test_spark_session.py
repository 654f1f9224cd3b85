"""A local session's JVM options (runtime.execution.spark.with_local_jvm_options): the serial
collector from a 64 MB heap and C1 alone, unless the user's options choose a collector, an initial
heap or a compiler; and the class-data archive bin/dev makes, mapped when it is there."""
import os
import re
import subprocess
import sys

import pytest

import jvm_options
from runtime.execution.spark import (CLASS_ARCHIVE_ENV, DRIVER_JAVA_OPTIONS, JVM_OPTION_VARIABLES, with_local_jvm_options,
                                     without_class_data)


@pytest.mark.parametrize("given, expected", [
    ({}, "-XX:+UseSerialGC -Xms64m -XX:TieredStopAtLevel=1"),
    ({DRIVER_JAVA_OPTIONS: "-Dlog4j.debug=true"}, "-XX:+UseSerialGC -Xms64m -XX:TieredStopAtLevel=1 -Dlog4j.debug=true"),
    ({DRIVER_JAVA_OPTIONS: "-XX:+UseG1GC"}, "-Xms64m -XX:TieredStopAtLevel=1 -XX:+UseG1GC"),   # two collectors: no JVM
    ({DRIVER_JAVA_OPTIONS: "-Xms2g -XX:+UseParallelGC"}, "-XX:TieredStopAtLevel=1 -Xms2g -XX:+UseParallelGC"),
    ({DRIVER_JAVA_OPTIONS: "-XX:+TieredCompilation"}, "-XX:+UseSerialGC -Xms64m -XX:+TieredCompilation"),
    ({DRIVER_JAVA_OPTIONS: "-XX:TieredStopAtLevel=4 -Xms1g"}, "-XX:+UseSerialGC -XX:TieredStopAtLevel=4 -Xms1g"),
])
def test_the_users_choice_of_collector_heap_and_compiler_wins(given, expected, monkeypatch):
    for variable in (*JVM_OPTION_VARIABLES, CLASS_ARCHIVE_ENV):
        monkeypatch.delenv(variable, raising=False)
    settings = dict(given)
    with_local_jvm_options(settings)
    assert settings[DRIVER_JAVA_OPTIONS] == expected


def test_a_collector_chosen_in_the_environment_is_left_alone(monkeypatch):
    monkeypatch.delenv(CLASS_ARCHIVE_ENV, raising=False)
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:+UseZGC")
    settings = {}
    with_local_jvm_options(settings)
    assert settings[DRIVER_JAVA_OPTIONS] == "-Xms64m -XX:TieredStopAtLevel=1"


def test_the_suites_session_runs_the_collector_and_compiler_its_options_name(spark):
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    args = list(management.getRuntimeMXBean().getInputArguments())
    collectors = [b.getName() for b in management.getGarbageCollectorMXBeans()]
    if any(re.fullmatch(r"-XX:\+Use\w+GC", a) and a != "-XX:+UseSerialGC" for a in args):
        pytest.skip("a collector chosen outside the tests")
    assert "-XX:+UseSerialGC" in args and "-Xms64m" in args
    assert collectors == ["Copy", "MarkSweepCompact"]
    # The suite's session names the tiered compilers (conftest.py): the options' choice, not C1 alone.
    chosen = [a for a in args if re.match(r"-XX:[+-]?Tiered|-Xint|-Xcomp", a)]
    if chosen not in ([jvm_options.SESSION_COMPILER], ["-XX:TieredStopAtLevel=1"]):
        pytest.skip(f"a compiler chosen outside the tests: {chosen}")
    diagnostics = management.getPlatformMXBean(spark.sparkContext._jvm.java.lang.Class.forName(
        "com.sun.management.HotSpotDiagnosticMXBean"))
    tiered = chosen == [jvm_options.SESSION_COMPILER]      # -XX:+TieredCompilation: up to C2, level 4
    assert diagnostics.getVMOption("TieredStopAtLevel").getValue() == ("4" if tiered else "1")


def test_the_class_archive_is_mapped_when_it_is_there_unless_the_options_choose_class_data(tmp_path, monkeypatch):
    for variable in ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS"):
        monkeypatch.delenv(variable, raising=False)
    archive = tmp_path / "spark-classes.jsa"
    monkeypatch.setenv(CLASS_ARCHIVE_ENV, str(archive))
    settings = {}
    with_local_jvm_options(settings)
    assert "SharedArchiveFile" not in settings[DRIVER_JAVA_OPTIONS]     # not made (yet)
    archive.write_bytes(b"classes")
    for given, mapped in ((None, True), ("-Xshare:off", False), ("-XX:ArchiveClassesAtExit=/tmp/x.jsa", False)):
        settings = {} if given is None else {DRIVER_JAVA_OPTIONS: given}
        with_local_jvm_options(settings)
        assert (f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"
                in settings[DRIVER_JAVA_OPTIONS]) is mapped, settings


def test_the_suites_session_maps_the_class_archive_bin_dev_made(spark):
    archive = os.environ.get(CLASS_ARCHIVE_ENV)
    if not archive or not os.path.isfile(archive):
        pytest.skip("no class archive: the tests did not start through bin/dev")
    from pyspark import SparkContext
    jvm = getattr(SparkContext._gateway, "proc", None)
    if jvm is None:
        pytest.skip("the session's JVM is not this process's child")
    info = subprocess.run(["jcmd", str(jvm.pid), "VM.info"], capture_output=True, text=True, timeout=60).stdout
    mapped = re.search(r"CDS archive\(s\) mapped at: .*, size (\d+)", info)
    # the JDK's own archive (~13 MB) and, above it, the classes of the one bin/dev made
    assert mapped is not None and int(mapped.group(1)) > os.path.getsize(archive), info[:2000]


def test_class_data_options_are_taken_out_of_jvm_options_and_nothing_else():
    assert without_class_data("-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile=/a/b.jsa -Xlog:cds*=off -Xshare:auto "
                              "-XX:ArchiveClassesAtExit=/c.jsa -Dx=1") == "-XX:TieredStopAtLevel=1 -Xlog:cds*=off -Dx=1"
    assert without_class_data("") == ""


def test_an_archive_is_made_whatever_archive_the_environment_names(tmp_path):
    # As a test's Airflow (bin/dev) would have remade it: SPARK_SUBMIT_OPTS names the archive being
    # replaced, gone. The JVM took that as the new archive's base and did not start.
    gone, made = tmp_path / "gone.jsa", tmp_path / "made.jsa"
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{jvm_options.short_lived_jvm()} -XX:SharedArchiveFile={gone} "
           f"{jvm_options.QUIET_CDS}", CLASS_ARCHIVE_ENV: str(gone), "SPARK_LOCAL_IP": "127.0.0.1"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-m", "runtime.execution.class_archive", str(made)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert made.stat().st_size > 20_000_000 and not (tmp_path / "made.jsa.partial").exists()
