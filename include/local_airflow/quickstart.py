"""The main-job command (``bin/dev wordcount``): the seed WordCount through Airflow, end to end.

Prepares a plain Airflow in AIRFLOW_HOME (metadata database, airflow_settings.yaml), runs
the ``wordcount`` DAG with ``dag.test()`` (every task for real, in this process: compile,
execution graph, slot allocation, deploy, epochs on local Spark with checkpoints in the
Delta warehouse, finish), then prints the answer: the most frequent words and where the
checkpoints are. Airflow's and Spark's own output goes to a log file (LOG_NAME in AIRFLOW_HOME's
logs), whose path is printed.

    python -m include.local_airflow.quickstart [--top 15]

Every task runs in this process, the run's driver too: spark_default's ``sluice-deploy`` extra is
``in-process`` for this run (``in_process``), whatever the metadata database's spark_default and
sluice_default say (``bin/dev airflow`` deploys the same DAG's runs to its JobManager).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys

LOG_NAME = "bin-dev-wordcount.log"      # the last run's log, in $AIRFLOW_HOME/logs/

from runtime.jobmaster.deployment import PROJECT_ROOT


def prepare_airflow() -> None:
    """Migrate the metadata database (idempotent) and load the project's airflow_settings.yaml."""
    from include.local_airflow.settings import load_airflow_settings
    airflow = os.path.join(os.path.dirname(sys.executable), "airflow")
    subprocess.run([airflow, "db", "migrate"], check=True, stdout=subprocess.DEVNULL)
    for change in load_airflow_settings(os.path.join(PROJECT_ROOT, "airflow_settings.yaml")):
        print(f"{change.kind} {change.name}: {change.action}")


def in_process(conn_id: str = "spark_default") -> None:
    """This process's runs deploy in-process: the Spark connection as the database has it, with
    ``sluice-deploy: in-process``, in the environment (Airflow reads a connection there first)."""
    import json
    from airflow.models import Connection
    conn = Connection.get_connection_from_secrets(conn_id)
    value = json.loads(conn.as_json())
    value["extra"] = {**conn.extra_dejson, "sluice-deploy": "in-process"}
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(value)


@contextlib.contextmanager
def output_to(path: str):
    """Everything this process writes meanwhile (Python, Airflow's loggers, the Spark JVM it
    starts) goes to ``path``: the file descriptors are redirected, not only sys.stdout."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "w") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd)
                os.close(copy)


def run_dag(dag_id: str):
    """``dag.test()`` of the DAG, once the jobs' DAG profiles are compiled (as ``bin/dev airflow``
    does at start: a parse of the DAG files never compiles), so its run reserves the slots it needs."""
    from airflow.dag_processing.dagbag import DagBag
    from sluice_airflow.dag_factory import main as refresh_profiles
    refresh_profiles()
    bag = DagBag(dag_folder=os.path.join(PROJECT_ROOT, "dags"))
    if bag.import_errors:
        raise SystemExit(f"DAG import errors: {bag.import_errors}")
    return bag.dags[dag_id].test()


def finish_summary(run) -> dict:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids="finish",
                                                 key="return_value")).first()
        return XComModel.deserialize_value(row) if row is not None else {}


def print_results(summary: dict, top: int) -> None:
    from deltalake import DeltaTable
    for sink in summary.get("sinks", ()):
        rows = DeltaTable(sink).to_pyarrow_dataset().to_table(use_threads=False).to_pylist()
        totals: dict = {}
        for r in rows:
            totals[r["word"]] = totals.get(r["word"], 0) + r["count"]
        shown = f"The {top} most frequent" if len(totals) > top else "All"
        print(f"\n{shown} of {len(totals)} distinct words ({sum(totals.values())} words in all), "
              f"from the Delta table {sink}:")
        for word, count in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
            print(f"  {count:>6}  {word}")
    print(f"\nCheckpoint {summary.get('checkpoint_id')} completed; checkpoints are in {summary.get('checkpoints')}")
    print("  bin/dev sluice checkpoints include/jobs/wordcount.py   # list them")
    print("  bin/dev wordcount                                      # again: resumes from the checkpoint, "
          "reads only new files in include/data")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=15, help="how many of the most frequent words to print")
    args = parser.parse_args(argv)
    log = os.path.join(os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow"), "logs", LOG_NAME)
    print(f"Running the wordcount DAG with dag.test() (every task, in this process); Airflow's log: {log}")
    with output_to(log):
        prepare_airflow()
        in_process()
        run = run_dag("wordcount")
        summary = finish_summary(run)
    print(f"DAG run {run.run_id}: {run.state}")
    if run.state != "success":
        print(f"The tasks' errors are in {log}; the run's history is in the web view (/sluice/ in `bin/dev airflow`).")
        return 1
    print_results(summary, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
