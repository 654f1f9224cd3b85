"""``bin/dev wordcount``, the first command a user runs: its output is the answer (the most
frequent words of the sample text, from the Delta table the DAG wrote, and where the checkpoints
are) and where Airflow's log went; Airflow's and Spark's own lines are in that log file."""
from __future__ import annotations

import collections
import os
import re
import subprocess

from jvm_options import share_spark_classes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bin_dev_wordcount_prints_the_answer_and_keeps_airflows_log_in_a_file(airflow_db, tmp_path):
    from airflow.api.common.delete_dag import delete_dag
    from airflow.exceptions import DagNotFound
    made = ("wordcount", "kafka_windows", "sluice_maintenance", "sluice_savepoint", "sluice_restart_from_checkpoint")
    for dag_id in made:         # another test's dag.test() may have made them (paused, by Airflow's default)
        try:
            delete_dag(dag_id)
        except DagNotFound:
            pass
    share_spark_classes()
    warehouse = tmp_path / "warehouse"
    env = {**os.environ, "SLUICE_SKIP_BOOTSTRAP": "1", "SPARK_LOCAL_IP": "127.0.0.1",
           "AIRFLOW_VAR_SLUICE_WAREHOUSE": str(warehouse)}      # wins over airflow_settings.yaml's
    done = subprocess.run([os.path.join(ROOT, "bin", "dev"), "wordcount"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    log = os.path.join(airflow_db, "logs", "bin-dev-wordcount.log")
    assert done.returncode == 0, done.stdout + done.stderr + open(log).read()[-5000:]
    lines = done.stdout.splitlines()
    text = open(os.path.join(ROOT, "include", "data", "hamlet.txt")).read()
    counts = collections.Counter(text.split())
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:15]
    results = str(warehouse / "wordcount-results")
    checkpoints = str(warehouse / "socket-window-wordcount" / "checkpoints")
    assert lines[0] == ("Running the wordcount DAG with dag.test() (every task, in this process); "
                        f"Airflow's log: {log}")
    assert re.fullmatch(r"DAG run manual__\S+: success", lines[1])
    assert lines[2:] == [
        "", f"The 15 most frequent of {len(counts)} distinct words ({sum(counts.values())} words in all), "
            f"from the Delta table {results}:",
        *(f"  {count:>6}  {word}" for word, count in top),
        "", f"Checkpoint 1 completed; checkpoints are in {checkpoints}",
        "  bin/dev sluice checkpoints include/jobs/wordcount.py   # list them",
        "  bin/dev wordcount                                      # again: resumes from the checkpoint, "
        "reads only new files in include/data"]
    assert done.stderr == ""
    # Airflow's own lines, the settings it loaded and the job's printed windows are in the log.
    kept = open(log).read()
    assert "[DAG TEST] end task" in kept and "pool spark_slots" in kept and "Pushing xcom" not in done.stdout
    # The DAGs it made (dag.test() makes every DAG of the folder) are not paused: `bin/dev airflow`
    # later runs the hourly Kafka job and the daily maintenance on their schedules (issue 50, item 8).
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    with create_session() as session:
        paused = dict(session.query(DagModel.dag_id, DagModel.is_paused).filter(DagModel.dag_id.in_(made)))
    assert paused == {dag_id: False for dag_id in made}
