"""A job's driver: a process of its own per job (one job's crash or memory cannot take another
down), started by the JobManager, as a Flink session cluster runs each job's JobMaster.

The contract with the JobManager is files in the driver's folder (``<warehouse>/jobmanager/
drivers/<driver-id>/``), so that a JobManager restarted after kill -9 finds its drivers again:

    driver.json      {"pid", "started_at", "master"}: written at once
    ready.json       {"pid", "ready_at", "warm_s"}: the SparkSession is up and its Python workers
                     have the task side imported (a warm driver, waiting for a job)
    assignment.json  {"jobid", "job_name", "plan", "options"}: written (atomically) by the JobManager
    result.json      {"jobid", "state", "run_id", "failure", "savepoint"}: the job ended; then it exits
    driver.log       its stdout and stderr (the runtime's lines, Spark's JVM, the Python workers)

It runs the plan as ``runtime.jobmaster.steps.run_step`` does: ``execute_stream_graph``, restarting
its own attempts in its session as the job's restart strategy says. A driver that dies without a
result.json died (kill -9, out of memory): the JobManager restarts the job. SIGTERM cancels: the
Spark jobs are canceled, the run is recorded CANCELED, result.json says so.

The folder is on the JobManager's machine (its process id, its log): a local path.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Optional

from runtime.storage.filesystems import is_uri

DRIVER, READY, ASSIGNMENT, RESULT, LOG = "driver.json", "ready.json", "assignment.json", "result.json", "driver.log"
FINISHED, CANCELED, FAILED = "FINISHED", "CANCELED", "FAILED"
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ASSIGNMENT_POLL_S = 0.02        # how often a ready driver looks for its job (a submit waits up to this)
KEEP_WARM_S = 30.0              # how often a waiting driver uses its Python workers (Spark stops them after 60 s idle)
MODULE = "runtime.jobmanager.driver"
SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"
log = logging.getLogger(MODULE)     # not __name__: run with -m, that is __main__, outside the runtime's logger


def drivers_dir(warehouse: str) -> str:
    """Where the JobManager's drivers keep their folders."""
    if is_uri(warehouse):
        raise ValueError(f"A driver's folder holds its process id and log on this machine, so the JobManager "
                         f"needs a local warehouse folder for them, not {warehouse}: give the JobManager a "
                         f"local --warehouse, or a local folder for its drivers")
    return os.path.join(warehouse, "jobmanager", "drivers")


def launch_driver(directory: str, warehouse: str, master: str, env: Optional[dict] = None) -> subprocess.Popen:
    """Start a driver for ``directory`` in a session of its own (it outlives the JobManager and a
    Ctrl-C of it), its output appended to ``driver.log`` there. The one place that builds its
    command line (``driver_alive`` recognises it by the folder it names)."""
    directory = os.path.abspath(directory)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, LOG), "ab") as out:
        return subprocess.Popen([sys.executable, "-m", MODULE, "--dir", directory, "--warehouse", warehouse,
                                 "--master", master], cwd=PROJECT_ROOT, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def read_json(directory: str, name: str) -> Optional[dict]:
    """One of the driver's files, or None when it is not there (yet)."""
    try:
        with open(os.path.join(directory, name)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def write_json(directory: str, name: str, value: dict) -> None:
    """Whole or not at all (a reader never sees half a file): written beside, then renamed."""
    path = os.path.join(directory, name)
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "w") as f:
        json.dump(value, f)
    os.replace(partial, path)


def write_assignment(directory: str, assignment: dict) -> None:
    """The JobManager gives the driver of ``directory`` its job (it runs it once ready)."""
    Assignment.from_json(assignment)        # refused here, naming what lacks, not in the driver
    write_json(directory, ASSIGNMENT, assignment)


def driver_alive(directory: str) -> bool:
    """Whether the driver of ``directory`` runs: the process driver.json names is alive and is this
    folder's driver (its command line names the folder), not another process that got its pid."""
    info = read_json(directory, DRIVER)
    if not info:
        return False
    return pid_is_driver(int(info["pid"]), directory)


def pid_is_driver(pid: int, directory: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode("utf-8", "replace").split("\0")
        with open(f"/proc/{pid}/stat") as f:
            zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return not zombie and MODULE in argv and os.path.abspath(directory) in argv


def result_of(jobid: Optional[str], state: str, run_id: Optional[str] = None, failure: Optional[str] = None,
              savepoint: Optional[str] = None) -> dict:
    """result.json: how the job ended on this driver."""
    return {"jobid": jobid, "state": state, "run_id": run_id, "failure": failure, "savepoint": savepoint}


@dataclass(frozen=True)
class Assignment:
    """The job the JobManager gives a driver: its plan folder and ExecutionOptions overrides
    (``runtime.jobmaster.steps.run_options``)."""
    jobid: str
    job_name: str
    plan: str
    options: dict

    @staticmethod
    def from_json(value: dict) -> "Assignment":
        missing = [k for k in ("jobid", "plan") if not value.get(k)]
        if missing:
            raise ValueError(f"{ASSIGNMENT} lacks {', '.join(missing)}: the JobManager writes "
                             '{"jobid", "job_name", "plan", "options"}')
        return Assignment(value["jobid"], value.get("job_name") or "", value["plan"], dict(value.get("options") or {}))


class Driver:
    """One driver process: warm up, wait for a job, run it, say how it ended."""

    def __init__(self, directory: str, warehouse: str, master: str) -> None:
        self.directory, self.warehouse, self.master = os.path.abspath(directory), warehouse, master
        self.terminated = threading.Event()     # SIGTERM: cancel the job (or, before one, stop)
        self.phase = "starting"                 # starting, ready (waiting for a job), running
        self.spark = None                       # the warm session, once warm_up started it

    def main(self) -> int:
        signal.signal(signal.SIGTERM, self._sigterm)
        os.makedirs(self.directory, exist_ok=True)
        # A JVM that crashes writes its report into the driver's folder, whichever session started it
        # (Spark's launcher puts SPARK_SUBMIT_OPTS on the driver JVM's command line).
        os.environ[SUBMIT_OPTS] = " ".join(filter(None, (os.environ.get(SUBMIT_OPTS),
                                                         f"-XX:ErrorFile={os.path.join(self.directory, 'hs_err_pid%p.log')}")))
        write_json(self.directory, DRIVER, {"pid": os.getpid(), "started_at": time.time(), "master": self.master})
        if read_json(self.directory, ASSIGNMENT) is None:      # a standby: warm, then wait for a job
            started = time.time()
            self.warm_up()
            write_json(self.directory, READY, {"pid": os.getpid(), "ready_at": time.time(),
                                               "warm_s": round(time.time() - started, 3)})
            log.info("driver ready in %.1f s (%s): waiting for a job", time.time() - started, self.master)
        # else its job came with it (a new driver for a job): the run starts the session the job
        # needs (its jars, its Python workers' pools, its name), as a run in any process does.
        self.phase = "ready"
        try:
            assignment = self.wait_for_assignment()
        except ValueError as e:     # not the JobManager's write_assignment: a failure, not a death to restart
            write_json(self.directory, RESULT, result_of((read_json(self.directory, ASSIGNMENT) or {}).get("jobid"),
                                                         FAILED, failure=str(e)))
            log.error("%s", e)
            return 1
        if assignment is None:
            log.info("stopped before a job was assigned")
            return 0
        result = self.run(assignment)
        write_json(self.directory, RESULT, result)
        log.info("job %s %s", assignment.jobid, result["state"])
        return 0 if result["state"] != FAILED else 1

    def warm_up(self) -> None:
        """The SparkSession, its Python workers with the task side imported in both kinds of pools
        a job's subtasks may run in (Spark's shared pool, and the slots' own: ``epoch_job.shares_slots``),
        and the driver's side of a run imported."""
        from runtime.execution.spark import get_spark_session, warm_python_workers
        settings = {}
        if not self.master.startswith("local"):
            settings["spark.ui.port"] = "0"     # drivers on one machine: each its own free port, no retries
        self.spark = get_spark_session(self.master, "sluice: driver", settings)     # the shared pool's workers
        warm_python_workers(self.spark, slot_pools=True)
        import runtime.execution.executor  # noqa: F401  (the run's modules, imported before the job comes)
        import runtime.jobmaster.plans  # noqa: F401

    def keep_warm(self) -> None:
        """Spark stops a pool's Python workers idle for a minute: a waiting driver uses them."""
        from runtime.execution.spark import warm_python_workers
        for slot_pools in (False, True):
            warm_python_workers(self.spark, slot_pools)

    def wait_for_assignment(self) -> Optional[Assignment]:
        """The job, once the JobManager wrote it; None when stopped first (SIGTERM)."""
        warm_at = time.time() + KEEP_WARM_S
        while True:
            found = read_json(self.directory, ASSIGNMENT)
            if found is not None:       # also when SIGTERM came with it: run() records the cancel
                return Assignment.from_json(found)
            if self.terminated.is_set():
                return None
            if self.spark is not None and time.time() >= warm_at:
                self.keep_warm()
                warm_at = time.time() + KEEP_WARM_S
            time.sleep(ASSIGNMENT_POLL_S)

    def run(self, assignment: Assignment) -> dict:
        """The plan's run (its attempts restarted here, as ``run_step`` does) and how it ended."""
        from runtime.execution.executor import execute_stream_graph
        from runtime.execution.options import ExecutionOptions
        from runtime.jobmaster.plans import load_plan
        from runtime.jobmaster.steps import outcome
        overrides = {"warehouse": self.warehouse, "master": self.master, **assignment.options}
        # The execution history counts a job's attempts by its run: across drivers, the JobManager's job.
        overrides["dag_run_id"] = overrides.get("dag_run_id") or assignment.jobid
        job_name = assignment.job_name
        state, failure, run_id, savepoint = FAILED, None, None, None
        self.phase = "running"
        try:
            if self.terminated.is_set():        # canceled between the assignment and now
                raise KeyboardInterrupt
            job = load_plan(assignment.plan)
            job_name = job.job_graph.job_name
            options = ExecutionOptions.from_configuration(dict(job.stream_graph.settings.configuration))
            self.fit_session(job, overrides["master"])
            result = execute_stream_graph(job.stream_graph, options.with_overrides(**overrides))
            state, run_id, savepoint = FINISHED, result.run_id, result.savepoint
        except KeyboardInterrupt:
            state = CANCELED
        except Exception as e:      # the job's failure, after its restart strategy gave up
            from runtime.execution.spark import cancel_requested
            if cancel_requested():
                state = CANCELED
            else:
                failure = f"{type(e).__name__}: {e}"
                log.error("job %s failed: %s", assignment.jobid, failure)
        if run_id is None and job_name:
            try:
                run_id = outcome(overrides["warehouse"], job_name, dag_run_id=overrides["dag_run_id"]).get("run_id")
            except Exception:       # the history out of reach: the result still says how it ended
                log.warning("the execution history of %s could not be read", job_name, exc_info=True)
        return result_of(assignment.jobid, state, run_id, failure, savepoint)

    def fit_session(self, job, master: str) -> None:
        """Nothing, when the warm session serves the job; a session of another master, or without
        jars the job adds (a SparkContext takes ``spark.jars`` only as it starts), is stopped, so
        that the run starts the one it needs (a new SparkContext; in the same JVM when it lives)."""
        from runtime.execution import dependencies
        from pyspark.sql import SparkSession
        from runtime.execution.spark import discard_session
        spark = SparkSession.getActiveSession()
        if spark is None:
            return
        configuration = dict(job.stream_graph.settings.configuration)
        try:
            dependencies.check_jars(configuration, spark.sparkContext.getConf().get("spark.jars", ""))
            fits = spark.sparkContext.master == master
        except dependencies.DependencyException:
            fits = False
        if not fits:
            log.info("the warm session (%s) does not fit job %s (master %s, jars %s): starting its own",
                     spark.sparkContext.master, job.job_graph.job_name, master, dependencies.jar_paths(configuration))
            discard_session(spark)

    def _sigterm(self, signum, frame) -> None:
        """Flink's cancel: the Spark jobs are canceled from a thread of their own (not inside the
        py4j call the main thread may be in); the run then ends CANCELED."""
        first = not self.terminated.is_set()
        self.terminated.set()
        if self.phase == "running" and first:
            from runtime.jobmaster.steps import cancel_spark_jobs
            threading.Thread(target=cancel_spark_jobs, name="sluice-cancel", daemon=True).start()
        elif self.phase == "starting":      # no need to wait for the session: its JVM goes with this process
            found = read_json(self.directory, ASSIGNMENT)
            if found is not None:
                write_json(self.directory, RESULT, result_of(found.get("jobid"), CANCELED))
            os._exit(0)


def configure_logging() -> None:
    """The runtime's lines, with their time, on stderr (driver.log)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    runtime = logging.getLogger("runtime")
    runtime.addHandler(handler)
    runtime.setLevel(logging.INFO)
    runtime.propagate = False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="the driver's folder")
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--master", required=True, help="the Spark master")
    args = parser.parse_args(argv)
    configure_logging()
    code = Driver(args.dir, args.warehouse, args.master).main()
    logging.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
