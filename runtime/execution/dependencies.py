"""A job's Python files, requirements and jars, as a Spark user ships them.

The environment records them under PyFlink's configuration keys (``add_python_file`` ->
``python.files``, ``set_python_requirements`` -> ``python.requirements``, ``add_jars`` ->
``pipeline.jars``); the run applies them to its SparkSession:

- Python files (a .py, .zip or .egg, or a folder, zipped) go to the executors with
  ``SparkContext.addPyFile``, so the job's functions can import them there.
- Jars go into ``spark.jars`` when the run starts the session. A JVM cannot take jars once it
  runs: when this process's session is already running without them, the run fails saying so
  (start a fresh process, or pass ``--jars`` to spark-submit).
- The job's own modules (its script, modules beside it) are pickled by value with the job
  graph (``dumps_by_value``), as PyFlink ships the job's files: executors cannot import them.
- Requirements: Spark installs no packages on its executors (a Spark user builds an image or
  ships an environment archive); the run checks that the driver's Python has each requirement
  and fails naming the missing ones and the ``pip install -r`` to run, which in local mode is
  the executors' Python too.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from typing import Optional

from runtime.datastream.stream_execution_environment import JARS, PYTHON_FILES, PYTHON_REQUIREMENTS


class DependencyException(RuntimeError):
    pass


def jar_paths(configuration: dict) -> list[str]:
    """Local paths of ``pipeline.jars`` (``file://`` URLs or paths, ``;``-separated)."""
    urls = [u for u in configuration.get(JARS, "").split(";") if u]
    return [os.path.abspath(u[len("file://"):] if u.startswith("file://") else u) for u in urls]


def spark_settings(configuration: dict) -> dict:
    """Spark configuration a new session of this job needs."""
    jars = jar_paths(configuration)
    return {"spark.jars": ",".join(jars)} if jars else {}


def check_jars(configuration: dict, running_jars: str) -> None:
    """Fail if the job's jars are not in the running session's ``spark.jars``."""
    missing = [j for j in jar_paths(configuration) if j not in (running_jars or "").split(",")]
    if missing:
        raise DependencyException(
            f"add_jars(): {', '.join(missing)} cannot be added: this process's SparkSession is already "
            "running and a JVM takes jars only when it starts. Run the job in a new process (sluice "
            "run), or give the jars to the session that starts first (spark.jars / spark-submit --jars).")


def ship_python_files(sc, configuration: dict) -> None:
    for path in [p for p in configuration.get(PYTHON_FILES, "").split(",") if p]:
        if not os.path.exists(path):
            raise DependencyException(f"add_python_file(): {path} does not exist")
        if os.path.isdir(path):
            # A package folder: addPyFile takes files, so it ships zipped, at one path per folder
            # (Spark refuses a file name registered before from another path).
            folder = os.path.abspath(path)
            where = os.path.join(tempfile.gettempdir(), "sluice-python-files",
                                 hashlib.sha256(folder.encode()).hexdigest()[:16])
            os.makedirs(where, exist_ok=True)
            path = shutil.make_archive(os.path.join(where, os.path.basename(folder)), "zip",
                                       os.path.dirname(folder), os.path.basename(folder))
        sc.addPyFile(path)


def check_requirements(configuration: dict) -> None:
    value: Optional[str] = configuration.get(PYTHON_REQUIREMENTS)
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version
    from packaging.requirements import Requirement
    path = value.split("#", 1)[0]
    missing = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("-"):
                continue
            req = Requirement(line)
            try:
                if not req.specifier.contains(version(req.name), prereleases=True):
                    missing.append(f"{line} (found {version(req.name)})")
            except PackageNotFoundError:
                missing.append(line)
    if missing:
        raise DependencyException(
            f"set_python_requirements({path}): not installed in this Python: {', '.join(missing)}. "
            f"Spark ships no packages to its executors: run `pip install -r {path}` (local mode), or "
            "install them in the executors' image.")


def apply(spark, configuration: dict) -> None:
    """Apply the job's dependencies to its running session."""
    # One py4j call: getConf() copies the whole configuration (~180 calls), and spark.conf builds
    # the session's SQL state on first use (30 ms) for a key of the context's own.
    check_jars(configuration, spark.sparkContext._conf.get("spark.jars", ""))
    check_requirements(configuration)
    ship_python_files(spark.sparkContext, configuration)


def _user_modules() -> list:
    """Modules of the job's own code (job scripts, test modules): not importable on executors."""
    import sysconfig
    runtime_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = sysconfig.get_paths()
    roots = (paths["purelib"], paths["stdlib"], paths["platlib"], sys.prefix, sys.base_prefix)
    installed = tuple(p + os.sep for p in {*roots, *map(os.path.realpath, roots)})
    found = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        # The plain prefix test spares most modules a realpath (0.1 s for 800 modules).
        if not path or name == "__main__" or name.startswith("runtime") or path.startswith(installed):
            continue
        real = os.path.realpath(path)
        if real.startswith(runtime_dir + os.sep) or real.startswith(installed):
            continue
        found.append(module)
    return found


def dumps_by_value(obj) -> bytes:
    # Ship the job's own classes and functions by value, as PyFlink ships the job's files.
    import cloudpickle      # the one runtime.common.pickling uses: a class shipped by value keeps its identity
    registered = []
    # Modules the program registered itself stay registered after the job's pickling.
    already = cloudpickle.list_registry_pickle_by_value()
    for module in _user_modules():
        if module.__name__ in already:
            continue
        try:
            cloudpickle.register_pickle_by_value(module)
            registered.append(module)
        except (ValueError, TypeError):
            pass
    try:
        return cloudpickle.dumps(obj)
    finally:
        for module in registered:
            cloudpickle.unregister_pickle_by_value(module)
