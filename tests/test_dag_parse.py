"""Parsing the DAG files (Airflow's DAG processor, every 30 s, within dagbag_import_timeout) runs no
job script: a DAG is built from its job module's DEPLOYMENT and the profile the job's last compile
stored (runtime/jobmaster/dag_profiles.py), so a parse stays short however slow a job's script is
to compile (its time: bench/dag_parse.py); a module that does not import still has its DAG, which says why, and
whose compile task fails with the cause in its log."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from seed import ROOT

SLOW = '''
"""slow: a job whose script takes a long time before execute() (a heavy compile)."""
import time
from runtime.jobmaster import JobDeployment

DEPLOYMENT = JobDeployment(schedule="@hourly", description="slow to compile")


def main():
    open({marker!r}, "w").write("compiled")
    time.sleep(20)
    from runtime.datastream import StreamExecutionEnvironment
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1]).print()
    env.execute("slow")


if __name__ == "__main__":
    main()
'''
BROKEN = '''
"""broken: its module does not import."""
import sluice_no_such_module
'''
# How Airflow's DAG processor parses a file: in a fork of a process with Airflow imported
# (bench/dag_parse.py).
BENCH = os.path.join(ROOT, "bench", "dag_parse.py")


def jobs_folder(tmp_path, *extra: tuple) -> str:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    for name in os.listdir(os.path.join(ROOT, "include", "jobs")):
        if name.endswith(".py"):
            shutil.copy(os.path.join(ROOT, "include", "jobs", name), jobs / name)
    for name, source in extra:
        (jobs / name).write_text(source)
    return str(jobs)


def parse(jobs: str, warehouse, repeat: int = 1) -> dict:
    """Each DAG file's parse (seconds, DAGs, errors), by name."""
    env = {**os.environ, "SLUICE_JOBS_FOLDER": jobs, "SLUICE_WAREHOUSE": str(warehouse),
           "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "plugins")])}
    done = subprocess.run([sys.executable, BENCH, "--json", "--repeat", str(repeat)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def dags_of(parsed: dict) -> dict:
    return {dag_id: dag for file in parsed.values() for dag_id, dag in file["dags"].items()}


def test_parsing_the_dag_files_runs_no_job_script(tmp_path):
    """How long a parse takes is bench/dag_parse.py's (bench/README.md); here, that the slow
    script never runs, which is what keeps it short."""
    marker = tmp_path / "slow-compiled"
    jobs = jobs_folder(tmp_path, ("slow.py", SLOW.format(marker=str(marker))), ("broken.py", BROKEN))
    parsed = parse(jobs, tmp_path / "warehouse")
    assert {name: file["errors"] for name, file in parsed.items() if file["errors"]} == {}
    assert not marker.exists()          # the slow script never ran
    dags = dags_of(parsed)
    assert {"wordcount", "kafka_windows", "geo_alerts", "slow", "broken", "sluice_maintenance",
            "sluice_restart_from_checkpoint", "sluice_savepoint"} <= set(dags)
    # Its DEPLOYMENT's schedule; never compiled: its run reserves the whole pool (policy.py), and
    # its doc says so.
    assert (dags["slow"]["timetable"], dags["slow"]["expression"]) == ("CronTriggerTimetable", "0 * * * *")
    assert dags["slow"]["description"] == "slow to compile" and "Not compiled since" in dags["slow"]["doc"]
    # The module that does not import: its DAG says why.
    assert "ModuleNotFoundError" in dags["broken"]["description"] and "sluice_no_such_module" in dags["broken"]["doc"]


def test_a_dag_takes_what_its_jobs_last_compile_stored(tmp_path):
    """After a compile (a run's compile step, or `python -m sluice_airflow.dag_factory` as bin/dev
    airflow runs it at start) the DAG knows its job's slots and restart strategy; a changed script
    is no longer current."""
    warehouse = tmp_path / "warehouse"
    jobs = jobs_folder(tmp_path)
    env = {**os.environ, "SLUICE_JOBS_FOLDER": jobs, "SLUICE_WAREHOUSE": str(warehouse),
           "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "plugins")])}
    done = subprocess.run([sys.executable, "-m", "sluice_airflow.dag_factory"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    dags = dags_of(parse(jobs, warehouse))
    assert "gives up after" in dags["wordcount"]["doc"] and "Not compiled since" not in dags["wordcount"]["doc"]
    assert dags["kafka_windows"]["pool_slots"] == 2       # its deployment's parallelism
    with open(os.path.join(jobs, "wordcount.py"), "a") as f:
        f.write("\n# a new version\n")
    assert "Not compiled since" in dags_of(parse(jobs, warehouse))["wordcount"]["doc"]


def test_the_compile_task_of_a_module_that_does_not_import_logs_the_cause(airflow_db, tmp_path, monkeypatch, capfd):
    from airflow.dag_processing.dagbag import DagBag
    from airflow.utils.state import DagRunState
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "broken.py").write_text(BROKEN)
    monkeypatch.setenv("SLUICE_JOBS_FOLDER", str(jobs))
    monkeypatch.setenv("SLUICE_WAREHOUSE", str(tmp_path / "warehouse"))
    bag = DagBag(dag_folder=os.path.join(ROOT, "dags"))
    assert not bag.import_errors, bag.import_errors
    run = bag.dags["broken"].test()
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert run.state == DagRunState.FAILED and tis["compile"].state == "failed"
    # The task's log (dag.test() writes it to this process's output): the failure and its cause.
    said = "".join(capfd.readouterr())
    assert "Task failed with exception" in said and "No module named 'sluice_no_such_module'" in said, said[-3000:]


NAMED = '''
"""{module}: a job named "Counts"."""
from runtime.datastream import StreamExecutionEnvironment


def main():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1]).print()
    env.execute("Counts")


if __name__ == "__main__":
    main()
'''


def test_two_job_modules_that_give_one_job_name_say_so_in_their_dags(tmp_path):
    """Both modules still have a DAG (their ids are their file names), each naming the other: only the
    first to compile may run (tests/test_job_folders.py), and the DAGs say why."""
    from runtime.jobmaster import discover_jobs
    from runtime.jobmaster.steps import refresh_profiles
    from sluice_airflow.dag_factory import job_dags
    jobs, warehouse = tmp_path / "jobs", str(tmp_path / "warehouse")
    jobs.mkdir()
    for module in ("counts", "counts_copy", "other"):
        (jobs / f"{module}.py").write_text(NAMED.format(module=module).replace('"Counts"', '"Other"')
                                           if module == "other" else NAMED.format(module=module))
    specs = discover_jobs(str(jobs))
    assert refresh_profiles(specs, warehouse) == []
    dags = job_dags(specs, warehouse)
    assert f"the job of {jobs / 'counts_copy.py'}" in dags["counts"].doc_md
    assert f"the job of {jobs / 'counts.py'}" in dags["counts_copy"].doc_md
    assert "env.execute('Counts')" in dags["counts"].doc_md and "the job of" not in dags["other"].doc_md
