"""What the JobManager survives, with real processes killed by SIGKILL: a job's driver (the job's
restart strategy restarts it in a new driver from its latest checkpoint, or gives up and the job
fails with the cause), and the JobManager itself (a new one adopts the running driver: no job lost,
none run twice). The sinks hold every number exactly once.
"""
import os
import signal
import subprocess

import pytest

from jobmanager_env import NUMBERS, SLUICE, JobManagerProcess, numbers_args, sink_numbers
from seed import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture
def jobmanager(tmp_path):
    jm = JobManagerProcess(tmp_path / "warehouse", tmp_path / "logs").start()
    yield jm
    jm.close()


def attempts(jm: JobManagerProcess, jid: str) -> list:
    from runtime.execution.history import ExecutionHistory
    from runtime.storage.layout import job_dir
    details = jm.client.job_details(jid)
    return ExecutionHistory(job_dir(str(jm.warehouse), details["name"])).attempts(details["dag-run-id"])


def exactly_once(sink) -> list:
    numbers = sink_numbers(sink)
    assert numbers == list(range(len(numbers))), "a number is missing or written twice"
    return numbers


def test_a_killed_driver_restarts_from_the_latest_checkpoint_until_the_strategy_gives_up(jobmanager, tmp_path):
    client = jobmanager.client
    sink = tmp_path / "numbers"
    jid = client.submit_job(script=NUMBERS, args=numbers_args(sink, "--restarts", "1"))["jobid"]
    latest = jobmanager.wait_for_checkpoints(jid, 2)["latest"]["completed"]["id"]
    first = client.job_details(jid)["driver"]["pid"]
    os.kill(first, signal.SIGKILL)

    restarted = jobmanager.wait_for(jid, lambda d: d["attempt"] == 2 and d["drivers"] == 2 and d["state"] == "RUNNING",
                                    120, "attempt 2 in a new driver")
    assert restarted["driver"]["pid"] != first
    assert restarted["restart"].startswith("restarting in 500 ms after failure 1 (Restart with fixed delay")
    dead, second = attempts(jobmanager, jid)
    assert dead.state == "FAILED" and dead.restarting is True and dead.backoff_ms == 500
    assert f"(pid {first}) died without a result (killed by signal 9)" in dead.failure
    assert second.attempt == 2 and second.restored_from >= latest    # the latest completed checkpoint
    stats = jobmanager.wait_for_checkpoints(jid, 3 + len(client.job_checkpoints(jid)["history"]))
    assert stats["counts"]["failed"] == 0

    # The strategy allows one restart: the next death fails the job, with the cause and the decision.
    os.kill(restarted["driver"]["pid"], signal.SIGKILL)
    failed = client.wait_for_terminal(jid, 60)
    assert failed["state"] == "FAILED" and failed["drivers"] == 2
    assert "died without a result (killed by signal 9)" in failed["failure-cause"]
    assert failed["restart"].startswith("not restarting after failure 2: the restart strategy gave up")
    assert [a.state for a in attempts(jobmanager, jid)] == ["FAILED", "FAILED"]
    assert jobmanager.drivers() == []
    exactly_once(sink)


def test_a_killed_jobmanager_adopts_its_running_driver_and_never_runs_a_job_twice(jobmanager, tmp_path):
    sink = tmp_path / "numbers"
    jid = jobmanager.client.submit_job(script=NUMBERS, args=numbers_args(sink))["jobid"]
    jobmanager.wait_for_checkpoints(jid, 1)
    driver = jobmanager.client.job_details(jid)["driver"]["pid"]

    jobmanager.kill()
    assert jobmanager.drivers() == [driver]         # the driver runs on without its JobManager
    jobmanager.start()
    details = jobmanager.client.job_details(jid)
    assert (details["state"], details["driver"]["pid"], details["drivers"]) == ("RUNNING", driver, 1)
    done = jobmanager.client.job_checkpoints(jid)["counts"]["completed"]
    jobmanager.wait_for_checkpoints(jid, done + 2)
    assert jobmanager.drivers() == [driver]
    assert "adopting driver pid" in jobmanager.log.read_text()

    # A second run of the job is refused: over REST, and by the job's lease (its epoch log's claim).
    from runtime.jobmanager.rest_client import JobManagerError
    with pytest.raises(JobManagerError) as again:
        jobmanager.client.submit_job(script=NUMBERS, args=numbers_args(sink))
    assert again.value.status == 409 and f"already running as {jid}" in str(again.value)
    second = subprocess.run([SLUICE, "run", "--plan", details["plan"], "--warehouse", str(jobmanager.warehouse),
                             "--max-epochs", "1", NUMBERS], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert second.returncode == 1 and "is already running" in second.stderr, second.stderr[-2000:]

    # The driver dies while no JobManager watches: the next one restarts the job from its checkpoint.
    jobmanager.kill()
    os.kill(driver, signal.SIGKILL)
    jobmanager.start()
    restarted = jobmanager.wait_for(jid, lambda d: d["attempt"] == 2 and d["state"] == "RUNNING", 120,
                                    "attempt 2 after the JobManager's restart")
    assert restarted["drivers"] == 2 and restarted["driver"]["pid"] != driver
    jobmanager.wait_for_checkpoints(jid, jobmanager.client.job_checkpoints(jid)["counts"]["completed"] + 1)
    jobmanager.client.cancel_job(jid)
    assert jobmanager.client.wait_for_terminal(jid, 60)["state"] == "CANCELED"
    assert jobmanager.drivers() == []
    assert [a.state for a in attempts(jobmanager, jid)] == ["FAILED", "CANCELED"]
    exactly_once(sink)
