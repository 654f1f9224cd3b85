"""One temporary folder for what a test run's processes write outside ``tmp_path``, removed when
the run ends.

Spark drivers the tests kill cannot clean up after themselves: each local session's ``spark-*``
folder holds a copy of delta-spark's jars (13 MB, ``spark.jars``), beside its block manager's
folder and lz4-java's native library; Airflow homes and state folders made by ``mkdtemp`` stay
too. Left in /tmp, one run of the suite leaves gigabytes behind, and a machine that runs it often
fills its disk. So the run points TMPDIR (Python, Spark's Python workers) and ``java.io.tmpdir``
(the JVMs, ``jvm_options.py``) at a folder of its own. pytest's ``tmp_path`` folders stay where
they were, kept for failed tests (pyproject.toml).
"""
import atexit
import os
import shutil
import tempfile

OWNER = "SLUICE_TEST_TEMP"      # set by the run that made the folder; its xdist workers inherit it


def use_run_temp() -> None:
    """For conftest.py, before anything makes a temporary file or starts a process."""
    if OWNER in os.environ:
        return
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    root = tempfile.mkdtemp(prefix="sluice-test-run-")
    os.environ.update({OWNER: root, "TMPDIR": root})
    tempfile.tempdir = None     # gettempdir() reads TMPDIR again
    atexit.register(shutil.rmtree, root, True)


def jvm_temp_option() -> str:
    return f"-Djava.io.tmpdir={tempfile.gettempdir()}"
