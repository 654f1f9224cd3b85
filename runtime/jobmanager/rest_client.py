"""The JobManager's REST client (Flink's RestClusterClient): what ``sluice run -d``, ``sluice
list``, ``sluice cancel``, ``sluice stop`` and the Airflow plugin call. Synchronous (urllib); the
Airflow trigger calls it through ``asyncio.to_thread``.

Only the standard library and ``runtime.common``: the Airflow plugin imports it.
"""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional

DEFAULT_URL = "http://127.0.0.1:8081"       # Flink's REST port
ADDRESS_FILE = "address.json"               # <warehouse>/jobmanager/address.json: where it listens
TERMINAL = ("FINISHED", "CANCELED", "FAILED")
TOKEN_VARIABLE = "SLUICE_JOBMANAGER_TOKEN"


class JobManagerError(RuntimeError):
    """A request the JobManager refused or could not answer: its HTTP status (0: no answer) and why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def address_file(warehouse: str) -> str:
    return os.path.join(os.path.abspath(warehouse), "jobmanager", ADDRESS_FILE)


def jobmanager_url(warehouse: Optional[str] = None) -> str:
    """The URL of the JobManager a warehouse's address file names, else Flink's default address."""
    if warehouse:
        try:
            with open(address_file(warehouse)) as f:
                return json.load(f)["url"]
        except (FileNotFoundError, KeyError, ValueError):
            pass
    return DEFAULT_URL


class RestClusterClient:
    def __init__(self, url: str = DEFAULT_URL, token: Optional[str] = None, timeout_s: float = 30):
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get(TOKEN_VARIABLE) or None
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body: Optional[dict] = None, query: Optional[dict] = None):
        url = self.url + path + (("?" + urllib.parse.urlencode(query)) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                text = response.read()
                return json.loads(text) if text else {}
        except urllib.error.HTTPError as e:
            raise JobManagerError(e.code, _errors(e.read()) or f"{method} {url}: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            reason = getattr(e, "reason", e)
            raise JobManagerError(0, f"No JobManager answers at {self.url} ({reason}): start one with "
                                     f"`bin/dev jobmanager` (or `sluice jobmanager`), or name another with "
                                     f"--jobmanager URL.") from None

    def overview(self) -> dict:
        return self._call("GET", "/overview")

    def submit_job(self, **body) -> dict:
        """POST /jobs: {"plan": folder} or {"script": path, "args": [...]}, with the run's options;
        returns {"jobid", "existing"}."""
        if body.get("script"):
            body["script"] = os.path.abspath(body["script"])
        return self._call("POST", "/jobs", {k: v for k, v in body.items() if v is not None})

    def list_jobs(self) -> list[dict]:
        """Every job: jid, name, state, start-time, end-time, duration (Flink's /jobs/overview)."""
        return self._call("GET", "/jobs/overview")["jobs"]

    def job_details(self, jobid: str) -> dict:
        return self._call("GET", f"/jobs/{jobid}")

    def job_checkpoints(self, jobid: str) -> dict:
        return self._call("GET", f"/jobs/{jobid}/checkpoints")

    def job_metrics(self, jobid: str) -> list[dict]:
        return self._call("GET", f"/jobs/{jobid}/metrics")

    def find_job(self, submission_key: str) -> Optional[dict]:
        """The job submitted with ``submission_key``, or None."""
        jobs = self._call("GET", "/jobs/overview", query={"submission-key": submission_key})["jobs"]
        return jobs[0] if jobs else None

    def cancel_job(self, jobid: str) -> None:
        self._call("PATCH", f"/jobs/{jobid}", query={"mode": "cancel"})

    def stop_with_savepoint(self, jobid: str, target_directory: Optional[str] = None) -> str:
        """Flink's stop: the job ends after its current epoch with a savepoint; the request id."""
        target = os.path.abspath(target_directory) if target_directory and "://" not in target_directory \
            else target_directory
        return self._call("POST", f"/jobs/{jobid}/stop", {"targetDirectory": target, "drain": False})["request-id"]

    def savepoint_status(self, jobid: str, request_id: str) -> dict:
        return self._call("GET", f"/jobs/{jobid}/savepoints/{request_id}")

    def wait_for_terminal(self, jobid: str, timeout_s: float, interval_s: float = 0.5) -> dict:
        """The job's details once it is FINISHED, CANCELED or FAILED; JobManagerError after ``timeout_s``."""
        deadline = time.time() + timeout_s
        while True:
            details = self.job_details(jobid)
            if details["state"] in TERMINAL:
                return details
            if time.time() > deadline:
                raise JobManagerError(408, f"Job {jobid} is still {details['state']} after {timeout_s:.0f} s.")
            time.sleep(interval_s)

    def wait_for_savepoint(self, jobid: str, request_id: str, timeout_s: float, interval_s: float = 0.5) -> str:
        """The savepoint's path once the stop completed; JobManagerError with its cause if it failed."""
        deadline = time.time() + timeout_s
        while True:
            status = self.savepoint_status(jobid, request_id)
            if status["status"]["id"] == "COMPLETED":
                operation = status["operation"] or {}
                if "location" in operation:
                    return operation["location"]
                raise JobManagerError(500, f"The stop of job {jobid} took no savepoint: {operation.get('failure-cause')}")
            if time.time() > deadline:
                raise JobManagerError(408, f"Job {jobid} has not stopped within {timeout_s:.0f} s; it stops at its "
                                           f"next epoch boundary (the request stays until then).")
            time.sleep(interval_s)


def _errors(body: bytes) -> str:
    try:
        return "; ".join(json.loads(body)["errors"])
    except (ValueError, KeyError, TypeError):
        return body.decode("utf-8", "replace").strip()
