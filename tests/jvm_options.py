"""JVM options for the short-lived Spark JVMs the tests start in processes of their own
(``sluice run``, the kill tests, spark-submit, Airflow's task processes, a standalone cluster's
daemons and executors).

A JVM that lives seconds spends much of them compiling with C2, setting up the parallel collector
and loading Spark's classes: with C1 only and the serial collector, a ``sluice run`` of the seed
WordCount starts and runs in about 60% of the time on a 2-core machine (15 s instead of 25 s,
loaded), and with the classes a local session loads mapped from a class-data archive (CDS) it
takes another 3 s less (11-12 s instead of 14-15 s for a run of tests/jobs/checkpointed_counts.py).
The test run's own session, which lives for the whole run, keeps the JVM's tiered compilers
(conftest.py).

SPARK_SUBMIT_OPTS is what Spark's launcher adds to a driver's command line (in local mode, the
whole of Spark); every process the tests start inherits it. A value set outside the tests wins:
then the tests leave it alone.
"""
import atexit
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile

from run_temp import jvm_temp_option

SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SESSION_COMPILER = "-XX:+TieredCompilation"     # the test run's own session: C1 then C2 (conftest.py)
VARIABLE = "SPARK_SUBMIT_OPTS"
# Set by the test run that set VARIABLE: its xdist workers inherit both and own VARIABLE too, and
# the archive's folder, which they share (tests/parallel.py).
OWNER = "SLUICE_TEST_JVM_FOLDER"
# The JVM logs CDS warnings (an archive it cannot map, a class path that differs) on stdout, where
# tests read what a job printed: an archive that cannot be used is skipped silently.
QUIET_CDS = "-Xlog:cds*=off"
OWNED = VARIABLE not in os.environ or OWNER in os.environ        # set here, not by whoever runs the tests
_archive = {}

def short_lived_jvm() -> str:
    """The options, with the test run's temporary folder (run_temp.py) as the JVM's."""
    return f"{SHORT_LIVED_JVM} {jvm_temp_option()}"


def use_short_lived_jvms() -> None:
    """For conftest.py, before any test starts a process (and before xdist starts its workers)."""
    if OWNED and OWNER not in os.environ:
        os.environ[VARIABLE] = short_lived_jvm()
        os.environ[OWNER] = tempfile.mkdtemp(prefix="sluice-test-jvm-")
        atexit.register(shutil.rmtree, os.environ[OWNER], True)


def want_shared_classes() -> None:
    """The run starts enough drivers for the archive to pay for itself (about 15 s to write when
    bin/dev made none, about 3 s saved in each driver): conftest.py says so when it runs the slow
    tiers."""
    _archive["wanted"] = True


def share_spark_classes() -> None:
    """Once per test run that wants it, before the first process that starts a local Spark
    driver: map a class-data archive in every later driver JVM (spark-submit's too, which
    ``runtime.execution.spark`` does not start): the one bin/dev made at set-up
    (``SLUICE_JVM_CLASS_ARCHIVE``), else one written here by the same module. Without it (not
    wanted, the dump failed, or the variable is not the tests'), drivers start as before."""
    if not OWNED or "wanted" not in _archive or "done" in _archive:
        return
    _archive["done"] = True
    from runtime.execution.spark import CLASS_ARCHIVE_ENV      # here: conftest imports this module first
    path = os.environ.get(CLASS_ARCHIVE_ENV)
    if not path or not os.path.isfile(path):
        path = os.path.join(os.environ[OWNER], "spark-classes.jsa")
        with open(path + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)        # one worker writes it, the others wait and map it
            if not os.path.exists(path):
                env = {**os.environ, VARIABLE: short_lived_jvm(),
                       "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
                root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
                subprocess.run([sys.executable, "-m", "runtime.execution.class_archive", path], cwd=root, env=env,
                               capture_output=True, timeout=600)
    if os.path.exists(path) and os.path.getsize(path) > 0:
        os.environ[VARIABLE] = f"{short_lived_jvm()} -XX:SharedArchiveFile={path} {QUIET_CDS}"
