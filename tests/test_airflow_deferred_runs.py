"""Streams that outlive Airflow (issue 52, item 3), through a real Airflow as ``bin/dev airflow``
runs it (scheduler with the LocalExecutor's 4 worker slots, DAG processor, API server, triggerer;
tests/real_airflow.py) and a real Sluice JobManager beside it:

- eight unbounded jobs run at once although the executor has 4 worker slots: each run task submits
  its job and defers, so no worker slot is held while the jobs run (the spark_slots pool still
  counts the deferred runs' slots);
- every Airflow process SIGKILLed and started again while the jobs run: the jobs keep running, each
  run task reattaches (its trigger runs again in the new triggerer) and ends when its job ends:
  stopped with a savepoint from the Sluice web view or over the JobManager's REST API (success, the
  savepoint's path in the task log), canceled by marking the deferred task failed in Airflow
  (on_kill -> cancel); each job's sink holds every number exactly once (no epoch lost or doubled);
- two Airflow retries of one run (its task process killed twice while it submits) give one job.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.parse

import pytest

from waiting import wait_until

pytestmark = pytest.mark.slow

JOBS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs")
STREAMS = 8
STREAM_JOB = '''"""stream_@N@: numbers into a Delta table until stopped (tests/test_airflow_deferred_runs.py)."""
import sys
sys.path.insert(0, @JOBS@)
import jobmanager_numbers
from runtime.jobmaster import JobDeployment

DEPLOYMENT = JobDeployment(args=("--sink", "{warehouse}/stream_@N@-numbers", "--rate", "2", "--name", "stream @N@"),
                           parallelism=1)

if __name__ == "__main__":
    jobmanager_numbers.main(sys.argv[1:])
'''


def stream_job(n) -> str:
    return STREAM_JOB.replace("@JOBS@", repr(JOBS)).replace("@N@", str(n))


STREAM_JOBS = {f"stream_{n}.py": stream_job(n) for n in [*range(STREAMS), "retried"]}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The Airflow and its JobManager; the jobs' epochs 4 s long (their drivers inherit the variable),
    so that nine drivers leave the 2-core machine's Airflow time to start again."""
    import real_airflow
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLUICE_EPOCH_INTERVAL_MS", "4000")
        yield from real_airflow.start(tmp_path_factory.mktemp("deferred-airflow"), STREAM_JOBS, jobmanager=True)


def task(site, dag_id: str, run_id: str, task_id: str = "run") -> dict:
    return site.api("GET", f"/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances/{task_id}")


def job_of(site, dag_id: str, run_id: str) -> list[dict]:
    """The JobManager's jobs of a DAG run (by its submission key)."""
    return [j for j in site.jobmanager.client().list_jobs()
            if (j.get("submission-key") or "").split("#")[0] == f"{dag_id}/{run_id}"]


def numbers(site, dag_id: str) -> list[int]:
    from deltalake import DeltaTable
    rows = DeltaTable(str(site.warehouse / f"{dag_id}-numbers")).to_pyarrow_table().to_pylist()
    return sorted(r["n"] for r in rows)


def completed(site, jid: str) -> int:
    return site.jobmanager.client().job_checkpoints(jid)["counts"]["completed"]


def slots_held(site, runs: dict) -> dict:
    """What the running streams hold in Airflow: their run tasks' states, and the spark_slots pool's
    counts (GET /pools). A deferred task holds no executor (worker) slot."""
    states = [task(site, dag_id, run_id)["state"] for dag_id, run_id in runs.items()]
    pool = site.api("GET", "/pools/spark_slots")
    return {"running": states.count("running"), "deferred": states.count("deferred"),
            "pool_deferred_slots": pool["deferred_slots"], "pool_running_slots": pool["running_slots"]}


def cluster_slots(site) -> None:
    """The pool stands for the cluster's slots: room for the 8 one-slot jobs (bin/dev airflow loads
    airflow_settings.yaml's 4 at each start), deferred runs keeping theirs."""
    site.api("PATCH", "/pools/spark_slots", {"pool": "spark_slots", "slots": STREAMS, "include_deferred": True})


def test_eight_streams_on_four_worker_slots_outlive_a_killed_airflow_and_end_with_their_jobs(site):
    assert int(site.env.get("AIRFLOW__CORE__PARALLELISM") or 4) == 4 or os.cpu_count() == 2
    # The pool stands for the cluster's slots: 8 one-slot jobs; deferred runs keep theirs.
    cluster_slots(site)
    dags = [f"stream_{i}" for i in range(STREAMS)]
    runs = {dag_id: site.trigger(dag_id, {}) for dag_id in dags}

    def all_running():
        jobs = {d: job_of(site, d, r) for d, r in runs.items()}
        return all(len(js) == 1 and js[0]["state"] == "RUNNING" for js in jobs.values()) and jobs
    jobs = wait_until(all_running, 900, "eight jobs running in the JobManager", interval=2,
                      log=lambda: site.run_report(dags[-1], runs[dags[-1]]))
    jids = {d: js[0]["jid"] for d, js in jobs.items()}
    wait_until(lambda: all(task(site, d, r)["state"] == "deferred" for d, r in runs.items()), 300,
               "every run task deferred", interval=1, log=site.log)
    for jid in jids.values():
        wait_until(lambda: completed(site, jid) >= 2, 300, f"two checkpoints of job {jid}", interval=1)
    held = slots_held(site, runs)
    print(f"\nAirflow slots held by 8 running streams (deferred): {held}")
    assert held == {"running": 0, "deferred": STREAMS, "pool_deferred_slots": STREAMS, "pool_running_slots": 0}

    # Every Airflow process SIGKILLed: the jobs run on (their checkpoints go on meanwhile).
    before = {d: completed(site, jid) for d, jid in jids.items()}
    site.kill()
    for d, jid in jids.items():
        wait_until(lambda: completed(site, jid) > before[d], 120, f"{d}'s job checkpointing without Airflow",
                   interval=1)
    assert all(site.jobmanager.client().job_details(jid)["state"] == "RUNNING" for jid in jids.values())
    site.launch()
    cluster_slots(site)
    # The run tasks are deferred again: their triggers run in the new triggerer.
    wait_until(lambda: all(task(site, d, r)["state"] == "deferred" for d, r in runs.items()), 300,
               "every run task deferred after the restart", interval=1, log=site.log)

    # The ends: stopped with a savepoint from the Sluice web view (three), over the JobManager's REST
    # API (four), and one canceled by marking its deferred task failed in Airflow.
    for d in dags[:3]:
        status, text = site.request("POST", f"/sluice/jobs/{d}/stop", form={"dag_run_id": runs[d]}, cookie=True)
        assert status == 303, text
    for d in dags[3:7]:
        site.jobmanager.client().stop_with_savepoint(jids[d])
    canceled = dags[7]
    site.api("PATCH", f"/dags/{canceled}/dagRuns/{urllib.parse.quote(runs[canceled])}/taskInstances/run",
             {"new_state": "failed"})
    ends = {d: site.wait_for_run(d, r, timeout=300) for d, r in runs.items()}
    assert ends == {**{d: "success" for d in dags[:7]}, canceled: "failed"}
    assert site.jobmanager.client().wait_for_terminal(jids[canceled], 60)["state"] == "CANCELED"

    retried = {}
    for d in dags:
        [job] = job_of(site, d, runs[d])        # one job per run, through the kill and the restart
        ti = task(site, d, runs[d])
        # Reattached: a later try (should Airflow retry one) follows the same job, never a new one.
        for later in range(2, ti["try_number"] + 1):
            said = [e.get("event", "") for e in site.task_log(d, runs[d], "run", later)]
            assert any(f"Reattaching to job {job['jid']}" in e for e in said), (d, later, said[-20:])
            retried[d] = [e.get("event", "") + " " + str(e.get("error_detail", ""))[:500]
                          for e in site.task_log(d, runs[d], "run", later - 1)][-8:]
        details = site.jobmanager.client().job_details(job["jid"])
        got = numbers(site, d)
        assert got and got == list(range(len(got))), f"{d}: a number lost or written twice"
        if d == canceled:
            assert details["state"] == "CANCELED"
            continue
        assert details["state"] == "FINISHED" and details["savepoint"]
        log = " ".join(e.get("event", "") for e in site.task_log(d, runs[d], "run", 1))
        assert f"stopped with a savepoint. Path: {details['savepoint']}" in log, log[-3000:]
        assert task(site, d, runs[d], "finish")["state"] == "success"
        # The run's one execution, FINISHED, its last checkpoint the savepoint's: no epoch lost or doubled.
        [execution] = [r for r in site.executions(f"stream {d.split('_')[1]}") if r.dag_run_id == runs[d]]
        assert (execution.state, execution.attempt) == ("FINISHED", 1)
    print(f"\nRun tasks retried by Airflow (each reattached to its job): {len(retried)} of {STREAMS}")
    for d, lines in retried.items():
        print(f"  {d}: the end of the try before:", *lines, sep="\n    ")


def connected_to(port: int, exclude: int) -> set[int]:
    """The pids with a TCP connection to ``port`` on the loopback (but ``exclude``, the server)."""
    out = subprocess.run(["ss", "-Htnp", "state", "established", f"( dport = :{port} )"], capture_output=True,
                         text=True).stdout
    return {int(p) for p in re.findall(r"pid=(\d+)", out)} - {exclude}


def test_two_airflow_retries_of_a_run_give_one_job(site):
    """The run task's process is killed twice while its submit waits on a JobManager that does not
    answer (SIGSTOP): Airflow retries it each time (try 2, try 3). When the JobManager goes on it
    answers the three submits of the same submission key with one job, which try 3 follows."""
    jm = site.jobmanager
    dag_id = "stream_retried"
    run_id = site.trigger(dag_id, {"max_epochs": 3})
    wait_until(lambda: task(site, dag_id, run_id, "deploy")["state"] == "success", 600, "the deploy step",
               interval=0.1, log=lambda: site.run_report(dag_id, run_id))
    os.kill(jm.proc.pid, signal.SIGSTOP)
    try:
        for try_number in (1, 2):
            submitting = wait_until(lambda: task(site, dag_id, run_id)["try_number"] == try_number
                                    and connected_to(jm.port, jm.proc.pid), 300,
                                    f"try {try_number} submitting", interval=0.2, log=site.log)
            for pid in submitting:
                os.kill(pid, signal.SIGKILL)
            wait_until(lambda: task(site, dag_id, run_id)["try_number"] == try_number + 1, 300,
                       f"Airflow's retry {try_number + 1}", interval=0.5, log=site.log)
        wait_until(lambda: connected_to(jm.port, jm.proc.pid), 300, "try 3 submitting", interval=0.2, log=site.log)
    finally:
        os.kill(jm.proc.pid, signal.SIGCONT)
    assert site.wait_for_run(dag_id, run_id, timeout=600) == "success"
    assert len(job_of(site, dag_id, run_id)) == 1
    ti = task(site, dag_id, run_id)
    assert (ti["state"], ti["try_number"]) == ("success", 3)
    got = numbers(site, dag_id)
    assert got and got == list(range(len(got)))
    [job] = job_of(site, dag_id, run_id)
    log = " ".join(e.get("event", "") for e in site.task_log(dag_id, run_id, "run", 3))
    assert f"job {job['jid']}" in log


def test_in_process_each_running_stream_holds_a_worker_slot(site):
    """The contrast (bench/README.md's table): with ``sluice-deploy: in-process`` the same streams run
    their drivers in their run tasks, each holding one of the executor's 4 worker slots for as long
    as it runs, so a fifth waits for one. The scheduler starts the runs' steps wave by wave (compile
    weighs most), so four run tasks take the four slots together and hold them while their drivers
    start and run their epochs: eight epochs (32 s) keep them running long past the check. The
    fifth's run task is then queued, or not yet scheduled when its own earlier steps lost the race."""
    spark = site.api("GET", "/connections/spark_default")
    extra = json.loads(spark.get("extra") or "{}")
    site.api("PATCH", "/connections/spark_default", {**{k: spark[k] for k in ("connection_id", "conn_type", "host")},
                                                     "extra": json.dumps({**extra, "sluice-deploy": "in-process"})})
    cluster_slots(site)
    try:
        dags = [f"stream_{i}" for i in range(5)]
        runs = {d: site.trigger(d, {"max_epochs": 8, "restore_from": "latest"}) for d in dags}
        held = wait_until(lambda: (lambda h: h if h["running"] == 4 else None)(slots_held(site, runs)), 600,
                          "four in-process streams running", interval=1, log=site.log)
        states = [task(site, d, r)["state"] for d, r in runs.items()]
        print(f"\nAirflow slots held by 5 running streams (in-process): {held}; run tasks: {states}")
        # The fifth waits: its run task queued for a slot, or not yet scheduled because one of its
        # earlier steps (compile, deploy) waits for a slot itself (state None).
        waiting_states = (None, "scheduled", "queued")
        assert held["deferred"] == 0 and sum(s in waiting_states for s in states) == 1, states
        # The fifth would start its driver only when one of the four ended: shown, it is not run.
        [waiting] = [d for d, s in zip(runs, states) if s in waiting_states]
        site.api("PATCH", f"/dags/{waiting}/dagRuns/{urllib.parse.quote(runs[waiting])}", {"state": "failed"})
        ends = {d: site.wait_for_run(d, r, timeout=900) for d, r in runs.items()}
        assert {d: e for d, e in ends.items() if d != waiting} == {d: "success" for d in dags if d != waiting}
        # Marking a run failed skips its queued task; the scheduler, recomputing the run from its task
        # instances at the same moment, may end it "success" instead. The task never running is the point.
        assert ends[waiting] in ("failed", "success")
        assert task(site, waiting, runs[waiting])["state"] in ("skipped", "failed")
    finally:
        site.api("PATCH", "/connections/spark_default", {**{k: spark[k] for k in ("connection_id", "conn_type", "host")},
                                                         "extra": json.dumps(extra)})
