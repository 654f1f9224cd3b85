"""The JobManager (runtime/jobmanager/) as its clients use it: a real ``sluice jobmanager`` process
on loopback, jobs submitted over REST and with the ``sluice`` CLI, each run by a driver process of
its own on local Spark. The refusals (a bind without a token, bad requests, no JobManager) run
without Spark; the jobs' tests share one JobManager (tests/jobmanager_env.py).
"""
import json
import os
import re
import socket
import subprocess

import pytest

from jobmanager_env import NUMBERS, SLUICE, JobManagerProcess, numbers_args, sink_numbers
from seed import ROOT


@pytest.fixture(scope="module")
def jobmanager(tmp_path_factory):
    root = tmp_path_factory.mktemp("jobmanager")
    jm = JobManagerProcess(root / "warehouse", root / "logs").start()
    yield jm
    jm.close()


def sluice(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([SLUICE, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- without Spark ---------------------------------------------------------------------------

def test_another_address_than_loopback_needs_a_token_and_every_request_sends_it(tmp_path):
    refused = sluice("jobmanager", "--host", "0.0.0.0", "--port", "0", "--warehouse", str(tmp_path / "w"))
    assert refused.returncode == 1
    assert "give it a token (--token or SLUICE_JOBMANAGER_TOKEN" in refused.stderr
    assert not (tmp_path / "w" / "jobmanager" / "address.json").exists()

    jm = JobManagerProcess(tmp_path / "w", tmp_path / "logs", "local[1]", "--host", "0.0.0.0",
                           "--token", "s3cret").start()
    try:
        from runtime.jobmanager.rest_client import JobManagerError, RestClusterClient
        with pytest.raises(JobManagerError) as without:
            RestClusterClient(jm.url).overview()
        assert without.value.status == 401 and "Authorization: Bearer <token>" in str(without.value)
        with pytest.raises(JobManagerError):
            RestClusterClient(jm.url, token="wrong").list_jobs()
        assert RestClusterClient(jm.url, token="s3cret").overview()["jobs-running"] == 0
        listed = sluice("list", "--jobmanager", jm.url, "--token", "s3cret")
        assert listed.returncode == 0 and "No running jobs." in listed.stdout
        assert json.loads((tmp_path / "w" / "jobmanager" / "address.json").read_text())["token_required"] is True
    finally:
        jm.close()


def test_bad_requests_are_refused_with_what_to_do(jobmanager):
    from runtime.jobmanager.rest_client import JobManagerError
    client = jobmanager.client

    def refusal(call, *args, **kwargs):
        with pytest.raises(JobManagerError) as e:
            call(*args, **kwargs)
        return e.value.status, str(e.value)

    assert refusal(client.job_details, "0" * 32) == (404, f"Job {'0' * 32} not found: list the jobs with GET "
                                                          "/jobs (sluice list -a).")
    status, message = refusal(client.submit_job, script=str(ROOT) + "/no_such_job.py")
    assert status == 400 and "Job script not found" in message
    status, message = refusal(client.submit_job, script=NUMBERS, plan="/somewhere")
    assert status == 400 and "not both or neither" in message
    status, message = refusal(client.submit_job, script=NUMBERS, paralelism=2)
    assert status == 400 and "Unknown field(s) ['paralelism']" in message
    status, message = refusal(client.submit_job, plan=str(jobmanager.warehouse / "no-plan"))
    assert status == 400 and "No compiled plan at" in message
    # A restore point the job does not have fails the submit, before any driver starts.
    status, message = refusal(client.submit_job, script=NUMBERS, args=numbers_args(jobmanager.warehouse / "s"),
                              restore_from="7")
    assert status == 400 and "there is no checkpoint 7 (completed: none)" in message
    status, message = refusal(client.submit_job, script=NUMBERS, args=numbers_args(jobmanager.warehouse / "s"),
                              max_epochs=0)
    assert (status, message) == (400, "max_epochs=0: must be a whole number of at least 1 (or empty for the default).")
    status, message = refusal(client._call, "GET", "/no/such/endpoint")
    assert status == 404 and "jobmanager.md" in message
    status, message = refusal(client._call, "POST", "/overview")
    assert status == 405 and "use GET" in message
    assert client.list_jobs() == []     # nothing refused left a job behind


def test_the_cli_without_a_jobmanager_says_where_it_looked_and_how_to_start_one():
    url = f"http://127.0.0.1:{free_port()}"
    result = sluice("list", "--jobmanager", url)
    assert result.returncode == 1
    assert f"No JobManager answers at {url}" in result.stderr and "bin/dev jobmanager" in result.stderr


# ---- jobs on local Spark ---------------------------------------------------------------------

@pytest.mark.slow
def test_a_bounded_job_submitted_over_rest_runs_in_its_own_driver_once_per_submission_key(jobmanager, tmp_path):
    client = jobmanager.client
    sink = tmp_path / "numbers"
    body = dict(script=NUMBERS, args=numbers_args(sink, "--count", "60", "--name", "bounded"),
                submission_key="numbers_dag/manual__1")
    first = client.submit_job(**body)
    again = client.submit_job(**body)       # a retried task, say: the same job
    assert first["existing"] is False and again == {"jobid": first["jobid"], "existing": True}
    jid = first["jobid"]
    assert re.fullmatch(r"[0-9a-f]{32}", jid)
    assert client.find_job("numbers_dag/manual__1")["jid"] == jid
    assert client.find_job("numbers_dag/manual__2") is None

    details = client.wait_for_terminal(jid, 240)
    assert details["state"] == "FINISHED", jobmanager.driver_log(jid)
    assert details["name"] == "bounded" and details["attempt"] == 1 and details["drivers"] == 1
    assert details["vertices"] == [{"id": details["vertices"][0]["id"], "parallelism": 1,
                                    "name": "Source: numbers -> Map -> Sink: Delta Sink"}]
    assert details["end-time"] >= details["start-time"] > 0
    assert sink_numbers(sink) == list(range(60))
    # Its driver was a process of its own, and it is gone.
    assert details["driver"]["pid"] != jobmanager.process.pid and details["driver"]["pid"] not in jobmanager.drivers()

    checkpoints = client.job_checkpoints(jid)
    assert checkpoints["counts"]["completed"] == 3 and checkpoints["counts"]["failed"] == 0
    assert checkpoints["latest"]["completed"]["id"] == max(h["id"] for h in checkpoints["history"])
    assert checkpoints["latest"]["restored"] is None
    metrics = {m["id"]: m["value"] for m in client.job_metrics(jid)}
    assert (metrics["numEpochs"], metrics["numRecordsIn"], metrics["numRestarts"]) == ("3", "60", "0")
    # Where its latest epoch's time went; its numbers carry no timestamps, so no latency.
    assert int(metrics["lastEpochTime"]) > 0 and metrics["lastEpochLatencyP99"] == "-1"
    assert {"id": jid, "status": "FINISHED"} in client._call("GET", "/jobs")["jobs"]
    assert client.overview()["jobs-finished"] >= 1
    # The web view's data, as the plugin's /api routes give it.
    web = client._call("GET", "/sluice/jobs")
    assert "wordcount" in {j["name"] for j in web}

    # A stored plan (as Airflow's compile step stores one) runs as compiled: from the latest
    # checkpoint, the end of the input, so it finishes with nothing more to write.
    again = client.submit_job(plan=details["plan"], dag_run_id="numbers_dag/manual__2")
    rerun = client.wait_for_terminal(again["jobid"], 240)
    assert (rerun["state"], rerun["dag-run-id"], rerun["attempt"]) == ("FINISHED", "numbers_dag/manual__2", 1)
    assert client.job_checkpoints(again["jobid"])["latest"]["restored"]["id"] == checkpoints["latest"]["completed"]["id"]
    assert sink_numbers(sink) == list(range(60))


@pytest.mark.slow
def test_the_cli_runs_detached_lists_stops_with_a_savepoint_restores_and_cancels(jobmanager, tmp_path):
    sink = tmp_path / "numbers"
    at = ("--jobmanager", jobmanager.url)
    submitted = sluice("run", "-d", NUMBERS, *at, "--", *numbers_args(sink, "--name", "unbounded"))
    assert submitted.returncode == 0, submitted.stderr
    jid = re.fullmatch(r"Job has been submitted with JobID ([0-9a-f]{32})\n", submitted.stdout).group(1)
    jobmanager.wait_for_checkpoints(jid, 2)
    listed = sluice("list", *at)
    assert re.search(rf"^\d\d\.\d\d\.\d{{4}} \d\d:\d\d:\d\d : {jid} : unbounded \(RUNNING\)$", listed.stdout, re.M)

    target = tmp_path / "savepoints"
    stopped = sluice("stop", "--savepoint-path", str(target), *at, jid)
    assert stopped.returncode == 0, stopped.stderr
    path = re.search(r"^Savepoint completed\. Path: (.+)$", stopped.stdout, re.M).group(1)
    assert path.startswith(str(target)) and os.path.isdir(path)
    details = jobmanager.client.job_details(jid)
    assert (details["state"], details["savepoint"]) == ("FINISHED", path)
    before = sink_numbers(sink)
    assert before == list(range(len(before))) and before

    restored = sluice("run", "-d", NUMBERS, *at, "--restore-from", path, "--", *numbers_args(sink, "--name", "unbounded"))
    assert restored.returncode == 0, restored.stderr
    second = restored.stdout.split()[-1]
    stats = jobmanager.wait_for_checkpoints(second, 1)
    assert stats["latest"]["restored"]["is_savepoint"] is True
    assert stats["latest"]["restored"]["external_path"] == path
    canceled = sluice("cancel", *at, second)
    assert canceled.returncode == 0, canceled.stderr
    assert canceled.stdout == f"Cancelling job {second}.\nCancelled job {second}.\n"
    assert jobmanager.client.job_details(second)["state"] == "CANCELED"
    all_jobs = sluice("list", "-a", *at).stdout
    assert f"{jid} : unbounded (FINISHED)" in all_jobs and f"{second} : unbounded (CANCELED)" in all_jobs
    assert f"{second}" not in sluice("list", *at).stdout
    # Restored from the savepoint: the sink goes on where the stop left it, each number once.
    after = sink_numbers(sink)
    assert after == list(range(len(after))) and len(after) > len(before)


def test_a_lost_driver_is_a_failed_attempt_with_the_strategys_decision_counted_once(tmp_path):
    """What the JobMaster records when a driver dies without a result, on a real execution history:
    a new attempt when the driver died before starting one, its RUNNING attempt otherwise, and no
    second failure for a death already recorded (a JobManager killed before acting on it)."""
    from runtime.client import compile_job
    from runtime.execution.history import RUNNING, ExecutionHistory, ExecutionRecord
    from runtime.jobmanager.driver import write_json
    from runtime.jobmanager.job_master import record_lost_driver
    from runtime.jobmanager.job_store import DriverRef, JobRecord
    from runtime.jobmaster.plans import store_plan
    from runtime.storage.layout import job_dir
    warehouse = str(tmp_path / "w")

    def job(restarts: int) -> JobRecord:
        compiled = compile_job(NUMBERS, numbers_args(tmp_path / "sink", "--restarts", str(restarts)))
        plan = store_plan(compiled, warehouse, f"r{restarts}", {})
        driver = tmp_path / f"driver-{restarts}"
        driver.mkdir()
        write_json(str(driver), "driver.json", {"pid": 1, "started_at": 1.0, "master": "local[1]"})
        return JobRecord("a" * 32, "jobmanager numbers", plan, f"run-{restarts}", {}, driver=DriverRef(str(driver), 1))

    record = job(restarts=1)
    history = ExecutionHistory(job_dir(warehouse, "jobmanager numbers"))
    first = record_lost_driver(warehouse, record, "died (killed by signal 9)")
    assert (first.attempt, first.state, first.restarting, first.backoff_ms) == (1, "FAILED", True, 500)
    assert first.restart.startswith("restarting in 500 ms after failure 1")
    assert record_lost_driver(warehouse, record, "again") == history.attempts("run-1")[0]     # counted once
    assert len(history.attempts("run-1")) == 1

    history.record(ExecutionRecord("run-b", "jobmanager numbers", RUNNING, 5.0, "run-1", attempt=2))
    second = record_lost_driver(warehouse, record, "died (killed by signal 9)")
    assert (second.run_id, second.attempt, second.restarting) == ("run-b", 2, False)
    assert second.restart.startswith("not restarting after failure 2: the restart strategy gave up")
    assert [a.state for a in history.attempts("run-1")] == ["FAILED", "FAILED"]


def test_one_jobmanager_per_warehouse(jobmanager):
    second = sluice("jobmanager", "--port", "0", "--standby-drivers", "0", "--warehouse", str(jobmanager.warehouse))
    assert second.returncode == 1
    assert f"Another JobManager (pid {jobmanager.process.pid}) serves the warehouse" in second.stderr
    assert jobmanager.client.overview()["jobs-failed"] >= 0     # the first one still serves
