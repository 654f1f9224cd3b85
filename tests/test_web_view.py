"""The Airflow web view, end to end: a real ``airflow api-server`` with the ``sluice`` plugin
and the SimpleAuthManager, a warehouse written by real runs of
tests/jobs/checkpointed_counts.py, and headless Chromium (Debian's chromium and
chromedriver, driven by Selenium) logging in through Airflow's own login page.

The warehouse's history: a first run (Airflow's DAG run DAG_RUN_ID) that fails in its third
epoch with a traceback, a savepoint of its last checkpoint, and a run that restores the
savepoint and reads to the end of the input. Their file source reports the files it read
(bytes read, file size, lag) through its enumerator's ``split_metrics``, as a Kafka source
reports its partitions', so the page draws per-split history without a broker.

One api-server and one browser for the module; the first test sees the browser before it
logs in, so the tests run in file order.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from checkpoint_harness import JOB, LINES_PER_EPOCH, job_args, write_input
from runtime.client import run_job
from runtime.execution.job_execution_result import JobExecutionException
from runtime.jobmaster import overview
from runtime.jobmaster.deployment import JOBS_FOLDER_ENV
from waiting import wait_until

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).parent / "artifacts"
USER = "admin"
JOB_NAME = "checkpointed_counts"        # the job module's name: its DAG id
BROKEN_JOB = "counts_without_args"      # a module whose DEPLOYMENT forgets the job's arguments
DAG_RUN_ID = "manual__web-view-test"

# A job module as include/jobs holds them: the test job, with its deployment's arguments.
JOB_MODULE = '''"""Word counts with a checkpoint per epoch (tests/jobs/checkpointed_counts.py)."""
import runpy

from runtime.jobmaster import JobDeployment

DEPLOYMENT = JobDeployment(args={args!r})

if __name__ == "__main__":
    runpy.run_path({job!r}, run_name="__main__")
'''

# The same job with a map that fails on the first event at or after 25 s (the third epoch's),
# with no restart: the first run's failure, with its traceback.
FAILING_JOB = '''import sys
sys.path.insert(0, {jobs!r})
import checkpointed_counts as cc
from runtime.common import RestartStrategies
from runtime.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
env.set_restart_strategy(RestartStrategies.no_restart())
cc.build(env, {input!r}, {windows!r}, {running!r}, 2, fail=cc.FailAt(25_000))
env.execute("checkpointed counts")
'''

# The same job under another name, whose third epoch waits until the test creates the file ``gate``:
# a run the view sees RUNNING, with its first epochs logged.
WAITING_JOB = '''import os
import sys
import time
sys.path.insert(0, {jobs!r})
import checkpointed_counts as cc
from runtime.datastream import StreamExecutionEnvironment


def wait_at_25_s(event):
    while event.ts >= 25_000 and not os.path.exists({gate!r}):
        time.sleep(0.05)
    return event


env = StreamExecutionEnvironment.get_execution_environment()
env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
cc.build(env, {input!r}, {windows!r}, {running!r}, 2, fail=wait_at_25_s)
env.execute("waiting counts")
'''
SEPARATORS = "_-:./+@"      # where an id may wrap (the view's breakable filter)

# Stands in for the DAG dags/ builds for the job: a restore only needs the DAG id to exist.
DAG_MODULE = f'''from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

with DAG({JOB_NAME!r}, schedule=None):
    EmptyOperator(task_id="run")
'''


@dataclass
class Site:
    url: str
    root: Path
    warehouse: Path
    job: overview.JobOverview       # what the view should show, read here from the same tables


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None         # the test looks at the redirect itself


_opener = urllib.request.build_opener(_NoRedirects)


def _get(url: str, token: str | None = None, data: bytes | None = None, cookie: bool = False, headers=None):
    """(status, body, headers) of a request, with the JWT as a bearer header or as the UI's cookie."""
    request = urllib.request.Request(url, data=data, headers=headers or {})
    if token:
        request.add_header(*(("Cookie", f"_token={token}") if cookie else ("Authorization", f"Bearer {token}")))
    try:
        with _opener.open(request, timeout=30) as response:
            return response.status, response.read().decode(), response.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers


def _start_api_server(root: Path, warehouse: Path, jobs: Path) -> tuple[subprocess.Popen, str, Path]:
    passwords = root / "passwords.json"
    passwords.write_text(json.dumps({USER: secrets.token_urlsafe(12)}))
    port = _free_port()
    env = {**os.environ,
           "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
           "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
           # The sluice_warehouse variable, from the environment: whatever the shared
           # metadata database holds, this server reads this test's warehouse.
           "AIRFLOW_VAR_SLUICE_WAREHOUSE": str(warehouse),
           JOBS_FOLDER_ENV: str(jobs)}
    log = root / "api-server.log"
    airflow = os.path.join(os.path.dirname(sys.executable), "airflow")
    with open(log, "w") as out:     # a session of its own, so that its uvicorn workers stop with it
        proc = subprocess.Popen([airflow, "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, f"http://127.0.0.1:{port}", log


def _wait_until_up(proc: subprocess.Popen, url: str, log: Path, timeout: float = 180) -> None:
    wait_until(lambda: _get(url + "/api/v2/monitor/health")[0] == 200, timeout, "the airflow api-server's answer",
               interval=0.2, log=log, proc=proc, ignoring=(OSError,))


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def site(spark, airflow_db, tmp_path_factory):
    root = tmp_path_factory.mktemp("web-view")
    warehouse, jobs = root / "warehouse", root / "jobs"
    jobs.mkdir()
    args = job_args(root, "--parallelism", "2")
    (jobs / f"{JOB_NAME}.py").write_text(JOB_MODULE.format(args=tuple(args), job=JOB))
    (jobs / f"{BROKEN_JOB}.py").write_text(JOB_MODULE.format(args=(), job=JOB))
    write_input(root / "in", seed=11)
    proc, url, log = _start_api_server(root, warehouse, jobs)     # boots while the job runs
    try:
        # A run failing in its third epoch (2 checkpoints done), a savepoint of its last
        # checkpoint, a run restoring the savepoint to the end of the input: completed
        # checkpoints, a failed one, older ones discarded, two executions.
        common = dict(warehouse=str(warehouse), master="local[2]", quiet=True, max_records_per_split=LINES_PER_EPOCH)
        failing = root / "failing_counts.py"
        failing.write_text(FAILING_JOB.format(jobs=os.path.dirname(JOB), input=args[1], windows=args[3], running=args[5]))
        with pytest.raises(JobExecutionException, match="injected failure"):
            run_job(str(failing), dag_run_id=DAG_RUN_ID, **common)
        failing.unlink()        # the job's script is JOB from now on (a job folder is one script's)
        from runtime.checkpoint.savepoint import take_savepoint
        from runtime.checkpoint.storage import CheckpointStorage
        take_savepoint(CheckpointStorage(str(warehouse / "checkpointed-counts")), str(root / "savepoints" / "sp-1"))
        run_job(JOB, args, restore_from=str(root / "savepoints" / "sp-1"), **common)
        job = overview.find_job(JOB_NAME, str(warehouse), str(jobs))
        _wait_until_up(proc, url, log)
        yield Site(url, root, warehouse, job)
    finally:
        _stop(proc)


def _written(record) -> int:
    """The bytes checkpoint ``record`` wrote: the files in its own partition (its chains' earlier
    files are other checkpoints')."""
    own = f"checkpoint_id={record.checkpoint_id}/"
    return sum(f.get("size", 0) for op in record.operators for f in op["files"] if f["path"].startswith(own))


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.fail(f"{CHROMIUM} and {CHROMEDRIVER} are needed: run `bin/dev test`, which installs "
                    "Debian's chromium and chromium-driver.")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,1000",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def _wait(driver, condition, what: str, timeout: float = 60):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition)
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {what}; at {driver.current_url}:\n"
                             f"{driver.find_element(By.TAG_NAME, 'body').text[:2000]}") from None


@pytest.fixture(scope="module")
def token(site, browser) -> str:
    """Log in through Airflow's login page; the UI keeps the JWT in the ``_token`` cookie."""
    password = json.loads((site.root / "passwords.json").read_text())[USER]
    browser.get(f"{site.url}/auth/login/?next=/sluice/")
    _wait(browser, lambda d: d.find_elements(By.NAME, "username"), "the login form")
    browser.find_element(By.NAME, "username").send_keys(USER)
    browser.find_element(By.NAME, "password").send_keys(password)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait(browser, lambda d: d.find_elements(By.ID, "jobs"), "the jobs page after logging in")
    return browser.get_cookie("_token")["value"]


def test_anonymous_users_are_refused(site, browser):
    browser.get(f"{site.url}/sluice/jobs/{JOB_NAME}")
    _wait(browser, lambda d: "/auth/login" in d.current_url, "the redirect to the login page")
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(browser.current_url).query)
    assert query["next"] == [f"/sluice/jobs/{JOB_NAME}"]
    for path in ("/sluice/api/jobs", f"/sluice/api/jobs/{JOB_NAME}/checkpoints"):
        status, body, _ = _get(site.url + path)
        assert (status, json.loads(body)) == (401, {"detail": "Not authenticated"})
    status, _, headers = _get(f"{site.url}/sluice/jobs/{JOB_NAME}/restore", data=b"checkpoint=latest")
    assert status == 303 and headers["Location"].startswith("/auth/login")
    assert _get(site.url + "/sluice/api/jobs", "not-a-jwt")[0] == 403


def test_jobs_page_lists_the_jobs_with_their_latest_checkpoint_and_execution(site, browser, token):
    assert browser.current_url == f"{site.url}/sluice/"
    rows = {r.get_attribute("data-job"): r.text for r in browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")}
    assert set(rows) == {JOB_NAME, BROKEN_JOB}
    latest = overview.latest_completed(site.job.checkpoints)
    assert "checkpointed counts" in rows[JOB_NAME] and f"#{latest.checkpoint_id}" in rows[JOB_NAME]
    assert site.job.executions[0].state == "FINISHED" and "FINISHED" in rows[JOB_NAME]
    assert "exited with status 2" in rows[BROKEN_JOB] and "DEPLOYMENT.args" in rows[BROKEN_JOB]
    assert str(site.warehouse) in browser.find_element(By.TAG_NAME, "main").text


def test_job_page_draws_the_graph_and_lists_checkpoints_and_executions(site, browser, token):
    browser.get(f"{site.url}/sluice/")
    browser.find_element(By.LINK_TEXT, JOB_NAME).click()
    _wait(browser, lambda d: d.find_elements(By.ID, "graph"), "the job page")
    assert browser.find_element(By.ID, "job-name").text == JOB_NAME

    graph = site.job.compiled.job_graph
    vertices = browser.find_elements(By.CSS_SELECTOR, "#graph svg g.vertex")
    assert [v.find_element(By.TAG_NAME, "title").get_attribute("textContent") for v in vertices] == \
        [v.name for v in graph.vertices]
    assert [int(v.get_attribute("data-parallelism")) for v in vertices] == [v.parallelism for v in graph.vertices]
    assert "Parallelism: 2 (max 128)" in browser.find_element(By.ID, "graph").text
    assert "Source: Custom File Source" in browser.find_element(By.ID, "graph").text
    edges = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#graph svg g.edge")]
    # The keyed windows and running counts read hashed edges; the source and its map chain run at
    # the default parallelism (the machine's cores), so other edges depend on the machine.
    assert sorted(edges) == sorted(e.ship_strategy for e in graph.edges) and edges.count("HASH") == 2

    shown = [(int(r.get_attribute("data-checkpoint-id")), r.get_attribute("data-status"))
             for r in browser.find_elements(By.CSS_SELECTOR, "#checkpoints tbody tr")]
    stored = [(r.checkpoint_id, r.status) for r in reversed(site.job.checkpoints) if r.kind != "SAVEPOINT"]
    assert shown == stored and {"COMPLETED", "DISCARDED"} <= {s for _, s in stored}
    # Which operator runs at what, and who set it; the restart strategy the job runs under.
    vertex_rows = browser.find_elements(By.CSS_SELECTOR, "#vertices tbody tr")
    assert [(r.get_attribute("data-vertex"), int(r.get_attribute("data-parallelism"))) for r in vertex_rows] == \
        [(v.name, v.parallelism) for v in graph.vertices]
    assert {r.get_attribute("data-parallelism-from") for r in vertex_rows} <= {"operator", "run"}
    assert "At most 3 restart attempts" in browser.find_element(By.ID, "restart-strategy").text
    # How long a run that keeps failing takes to give up, with the failed run's attempt measured.
    assert re.search(r"gives up after 4 attempt\(s\) with [\d.]+ s of delays and about [\d.]+ s per attempt "
                     r"as measured", browser.find_element(By.ID, "give-up-time").text)
    buttons = browser.find_elements(By.CSS_SELECTOR, "#checkpoints form.restore")
    assert len(buttons) == sum(overview.is_restorable(r) for r in site.job.checkpoints)

    executions = browser.find_elements(By.CSS_SELECTOR, "#executions tbody tr")
    assert [(e.get_attribute("data-run-id"), e.get_attribute("data-state")) for e in executions] == \
        [(e.run_id, e.state) for e in site.job.executions]
    first_run = site.job.executions[-1]
    assert first_run.dag_run_id == DAG_RUN_ID and DAG_RUN_ID in executions[-1].text
    assert site.job.executions[0].restored_from == first_run.last_checkpoint

    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "web_view_job.png"
    browser.set_window_size(1400, browser.execute_script("return document.documentElement.scrollHeight") + 120)
    browser.save_screenshot(str(screenshot))
    browser.set_window_size(1400, 1000)
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 20_000


def test_job_page_shows_the_latest_runs_epochs_and_metrics(site, browser, token):
    """The epoch log's metrics of the latest run (the restored one): built-in per epoch, and the
    job's counter, which started at 0 with that run (Flink's rule) and counted every event it read."""
    browser.get(f"{site.url}/sluice/jobs/{JOB_NAME}")
    _wait(browser, lambda d: d.find_elements(By.ID, "epochs"), "the metrics tables")
    latest = site.job.executions[0]
    epochs = browser.find_elements(By.CSS_SELECTOR, "#epochs tbody tr")
    assert len(epochs) == latest.epochs
    assert sum(int(r.get_attribute("data-records-in")) for r in epochs) == latest.records_in
    lines = sum(len(p.read_text().splitlines()) for p in (site.root / "in").iterdir())
    read_before = 2 * 2 * LINES_PER_EPOCH       # the first run: 2 epochs of LINES_PER_EPOCH per file
    assert latest.records_in == lines - read_before
    [row] = [r for r in browser.find_elements(By.CSS_SELECTOR, "#user-metrics tbody tr")
             if r.get_attribute("data-metric").endswith(".running.events")]
    assert row.get_attribute("data-kind") == "counter"
    assert int(row.get_attribute("data-value")) == lines - read_before
    assert f"{lines - read_before} (+" in row.text


def _charts(browser) -> dict:
    """Each chart's series as drawn: {chart id: {series name: [(x tick, y), ...]}}."""
    return browser.execute_script("""
        const out = {};
        for (const f of document.querySelectorAll('figure.chart[data-chart]')) {
          out[f.dataset.chart] = {};
          for (const g of f.querySelectorAll('g.series'))
            out[f.dataset.chart][g.dataset.series] = [...g.querySelectorAll('circle')].map(c => [c.dataset.x, Number(c.dataset.y)]);
        }
        return out;""")


def test_charts_draw_every_epoch_of_both_runs_and_every_checkpoint(site, browser, token):
    """Over epochs and across runs: the failed run's 2 epochs, then the restored run's, one point
    each per vertex; each run's start marked; every checkpoint taken (not the failed one)."""
    browser.get(f"{site.url}/sluice/jobs/{JOB_NAME}")
    _wait(browser, lambda d: d.find_elements(By.ID, "charts"), "the charts")
    charts = _charts(browser)
    failed, restored = site.job.executions[-1], site.job.executions[0]
    assert (failed.state, failed.epochs, restored.state) == ("FAILED", 2, "FINISHED")
    vertices = [v.name for v in site.job.compiled.job_graph.vertices]
    source = next(v.name for v in site.job.compiled.job_graph.vertices if v.is_input_vertex)
    # The failed run's source chain had the failing map in it: a vertex of its own name.
    records_in = charts["records-in"]
    [failing_source] = set(records_in) - set(vertices)
    assert "-> Map -> Map ->" in failing_source and set(vertices) <= set(records_in)
    lines = sum(len(p.read_text().splitlines()) for p in (site.root / "in").iterdir())
    assert [x for x, _ in records_in[failing_source]] == ["0", "1"]
    assert sum(y for _, y in records_in[failing_source]) == 2 * 2 * LINES_PER_EPOCH
    assert len(records_in[source]) == restored.epochs and sum(y for _, y in records_in[source]) == restored.records_in
    assert sum(y for _, y in records_in[failing_source] + records_in[source]) == lines
    for name in set(vertices) - {source}:       # downstream: the same vertex in both runs
        assert len(records_in[name]) == len(charts["records-out"][name]) == failed.epochs + restored.epochs
    # The running counts write a row per event they count: every event, once, across the two runs.
    running = next(v for v in vertices if v.startswith("KeyedProcess"))
    assert sum(y for _, y in charts["records-out"][running]) == lines
    runs = [r.get_attribute("data-run") for r in browser.find_elements(By.CSS_SELECTOR, "#chart-records-in g.run")]
    assert runs == [failed.run_id, restored.run_id]
    [durations] = charts["epoch-duration"].values()
    assert len(durations) == failed.epochs + restored.epochs and all(y > 0 for _, y in durations)
    # Watermark lag: the epoch's processing time (now) minus the event-time watermark (seconds
    # after 1970), for each vertex whose watermark the epoch log has, end of input left out.
    expected: dict = {}
    for row in site.job.epoch_history:
        for name, v in row["vertices"].items():
            if v["watermark"] is not None and v["watermark"] < 2 ** 63 - 1:
                expected[name] = expected.get(name, 0) + 1
    lag = charts["watermark-lag"]
    assert {name: len(points) for name, points in lag.items()} == expected and set(vertices) <= set(expected)
    assert all(y > 1e12 for points in lag.values() for _, y in points)
    # Source lag: each epoch's bytes left in the input files, summed, per source vertex.
    summed = {}
    for row in site.job.epoch_history:
        for name, v in row["vertices"].items():
            if v.get("splits"):
                summed.setdefault(name, []).append([str(row["epoch"]), sum(f["lag"] for f in v["splits"].values())])
    assert charts["source-lag"] == summed and set(summed) == {failing_source, source}
    # Each chart names what its values count: a file's lag is bytes, records are records.
    units = {f.get_attribute("data-chart"): f.find_element(By.CSS_SELECTOR, "svg text.y-unit").text
             for f in browser.find_elements(By.CSS_SELECTOR, "figure.chart[data-chart]:not(.bars)")
             if f.find_elements(By.CSS_SELECTOR, "svg")}
    assert (units["source-lag"], units["records-in"], units["watermark-lag"]) == ("bytes", "records", "time")
    assert {units[c] for c in units if c.startswith("split-lag")} == {"bytes"}
    assert "in bytes" in browser.find_element(By.CSS_SELECTOR, "#chart-source-lag figcaption").text
    assert "once for each output and each sink" in \
        browser.find_element(By.CSS_SELECTOR, "#chart-records-out figcaption").text
    # Checkpoints: every one taken, in id order; its size is its whole state (a chain of snapshots
    # with incremental checkpoints), what it wrote is the files in its own partition.
    taken = [r for r in site.job.checkpoints if r.kind == "CHECKPOINT" and r.status != "FAILED"]
    assert any(r.status == "FAILED" for r in site.job.checkpoints)
    assert charts["checkpoint-duration"] == {"duration": [[str(r.checkpoint_id), r.duration_ms] for r in taken]}
    assert charts["checkpoint-size"] == {"state size": [[str(r.checkpoint_id), r.state_bytes] for r in taken],
                                         "written": [[str(r.checkpoint_id), _written(r)] for r in taken]}
    runs = [r.get_attribute("data-run") for r in browser.find_elements(By.CSS_SELECTOR, "#chart-checkpoint-size g.run")]
    assert runs == [failed.run_id, restored.run_id]
    legend = browser.find_elements(By.CSS_SELECTOR, "#chart-records-in ul.legend li")
    assert sorted(li.text for li in legend) == sorted(records_in)

    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "web_view_charts.png"
    browser.set_window_size(1400, browser.execute_script("return document.documentElement.scrollHeight") + 120)
    browser.find_element(By.ID, "metrics-section").screenshot(str(screenshot))
    browser.set_window_size(1400, 1000)
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 20_000


def test_each_epochs_time_is_stacked_by_phase_beside_its_latency_percentiles(site, browser, token):
    """Where each epoch's time went (the epoch log's timings): a bar per epoch of both runs, a
    segment per phase (the Spark job by stage), adding up to the epoch's time; beside it, the
    latency of the records each checkpoint made visible (the job's event timestamps)."""
    from runtime.metrics.epoch_timings import stack_rank, stacked
    browser.get(f"{site.url}/sluice/jobs/{JOB_NAME}")
    _wait(browser, lambda d: d.find_elements(By.ID, "chart-epoch-phases"), "the epoch phases chart")
    drawn = browser.execute_script("""
        const out = {};
        for (const g of document.querySelectorAll('#chart-epoch-phases g.series.stack'))
          out[g.dataset.series] = [...g.querySelectorAll('rect')].map(r => [r.dataset.x, Number(r.dataset.y)]);
        return out;""")
    rows = site.job.epoch_history
    assert rows and all(r.get("timings") for r in rows)
    parts = [dict(stacked(r["timings"])) for r in rows]
    names = sorted((n for n in dict.fromkeys(n for p in parts for n in p) if any(p.get(n) for p in parts)),
                   key=stack_rank)
    # A part an epoch lacks (the failed run's source chain was another vertex) is 0 there.
    assert drawn == {n: [[str(r["epoch"]), p.get(n, 0.0)] for r, p in zip(rows, parts)] for n in names}
    for phase in ("planning", "state snapshot", "source positions", "checkpoint record"):
        assert phase in drawn, sorted(drawn)
    stages = [name for name in drawn if name.startswith("stage: ")]
    assert stages and all(len(drawn[s]) == len(rows) for s in stages)
    # Each bar is its epoch's time, from the epoch before to its checkpoint's record.
    for i, r in enumerate(rows):
        assert sum(points[i][1] for points in drawn.values()) == pytest.approx(r["timings"]["total_ms"], abs=1.0)
    # Stacked in the order the phases run, bottom up; the legend says them in that order.
    order = [g.get_attribute("data-series") for g in browser.find_elements(By.CSS_SELECTOR, "#chart-epoch-phases g.stack")]
    legend = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#chart-epoch-phases ul.legend li")]
    assert order == legend == names and names[:2] == ["planning", stages[0]] and names[-1] == "other"
    latency = _charts(browser)["epoch-latency"]
    # The job's event times are seconds after 1970: its records' latency is some 56 years. An
    # epoch that read nothing (the end of input) has none.
    with_latency = [r for r in rows if r["timings"]["latency"]]
    assert len(with_latency) >= len(rows) - 1
    assert latency == {q: [[str(r["epoch"]), r["timings"]["latency"][q]] for r in with_latency]
                       for q in ("p50", "p90", "p99", "max")}
    assert all(p50 <= mx for (_, p50), (_, mx) in zip(latency["p50"], latency["max"]))
    # Side by side: the latency chart right of the stack, on the same row.
    phases, beside = (browser.find_element(By.ID, f"chart-{c}").rect for c in ("epoch-phases", "epoch-latency"))
    assert phases["y"] == beside["y"] and beside["x"] > phases["x"]


def test_each_sources_splits_over_epochs_with_the_checkpointed_offset(site, browser, token):
    """Per source vertex (the failed run's chain had another name): a lag chart with a series per
    input file and a row per epoch and file, newest first. The failed run stopped after 2 epochs
    of LINES_PER_EPOCH lines per file; the restored run read each file to its end. Each epoch
    checkpoints, so its checkpointed offset is its own offset in a checkpoint that completed."""
    browser.get(f"{site.url}/sluice/jobs/{JOB_NAME}")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "section.splits"), "the splits sections")
    files = sorted(str(p) for p in (site.root / "in").iterdir())
    failed, restored = site.job.executions[-1], site.job.executions[0]
    source = next(v.name for v in site.job.compiled.job_graph.vertices if v.is_input_vertex)
    sections = {s.get_attribute("data-source"): s for s in browser.find_elements(By.CSS_SELECTOR, "section.splits")}
    [failing_source] = set(sections) - {source}
    charts = _charts(browser)
    status = {r.checkpoint_id: r.status for r in site.job.checkpoints if r.kind == "CHECKPOINT"}
    # The restored run goes on from the epoch after the savepoint's.
    for name, run, epochs, first in ((failing_source, failed, failed.epochs, 0),
                                     (source, restored, restored.epochs, failed.epochs)):
        chart = sections[name].find_element(By.CSS_SELECTOR, "figure.chart").get_attribute("data-chart")
        assert sorted(charts[chart]) == files and all(len(p) == epochs for p in charts[chart].values())
        assert [g.get_attribute("data-run") for g in sections[name].find_elements(By.CSS_SELECTOR, "g.run")] == [run.run_id]
        rows = [{k: r.get_attribute(f"data-{k}") for k in ("run", "epoch", "split", "offset", "latest", "lag",
                                                           "checkpointed-offset", "checkpointed-id")}
                for r in sections[name].find_elements(By.CSS_SELECTOR, "tbody tr")]
        assert {r["run"] for r in rows} == {run.run_id} and len(rows) == epochs * len(files)
        assert [int(r["epoch"]) for r in rows[::len(files)]] == list(range(first + epochs - 1, first - 1, -1))
        for r in rows:
            assert int(r["offset"]) + int(r["lag"]) == int(r["latest"]) == os.path.getsize(r["split"])
            assert r["checkpointed-offset"] == r["offset"] and status[int(r["checkpointed-id"])] in ("COMPLETED", "DISCARDED")
        newest = {r["split"]: int(r["offset"]) for r in rows[:len(files)]}
        if run is failed:       # 2 epochs of LINES_PER_EPOCH lines per file read
            assert newest == {f: len(b"".join(open(f, "rb").readlines()[:2 * LINES_PER_EPOCH])) for f in files}
        else:                   # every file read to its end
            assert newest == {f: os.path.getsize(f) for f in files}
    epoch_cells = browser.find_elements(By.CSS_SELECTOR, f'section.splits[data-source="{source}"] td[data-status]')
    assert {c.get_attribute("data-status") for c in epoch_cells} <= {"COMPLETED", "DISCARDED"}
    assert "COMPLETED" in {c.get_attribute("data-status") for c in epoch_cells}


def test_a_checkpoint_per_operator_and_subtask(site, browser, token):
    """The latest checkpoint's state per operator and subtask (the sources' positions, written by
    the driver, too) adds up to its size; each subtask's snapshot time; another checkpoint by its link."""
    browser.get(f"{site.url}/sluice/jobs/{JOB_NAME}")
    latest = overview.latest_completed(site.job.checkpoints)
    breakdown = browser.find_element(By.ID, "checkpoint-breakdown")
    assert int(breakdown.get_attribute("data-checkpoint-id")) == latest.checkpoint_id
    bars = browser.find_elements(By.CSS_SELECTOR, "#chart-checkpoint-state g.bar")
    files = {(op["uid"], f["subtask"]) for op in latest.operators for f in op["files"]}
    assert len(bars) == len(files) > 0
    assert sum(int(b.get_attribute("data-value")) for b in bars) == latest.state_bytes
    assert sum(int(b.get_attribute("data-part")) for b in bars) == latest.state_bytes     # all written by it
    assert any("the sources' positions" in b.get_attribute("data-label") for b in bars)
    snapshots = browser.find_elements(By.CSS_SELECTOR, "#chart-checkpoint-snapshots g.bar")
    assert len(snapshots) == sum(v.parallelism for v in site.job.compiled.job_graph.vertices)
    # The labels drawn are short, but no two bars read alike: the subtask stays whole.
    for chart in (bars, snapshots):
        drawn = [b.find_element(By.TAG_NAME, "text").text for b in chart]
        assert len(set(drawn)) == len(drawn), drawn
        assert all(re.search(r"\((\d+/\d+|driver)\)$", label) for label in drawn), drawn
    assert all(float(b.get_attribute("data-value")) >= 0 for b in snapshots)
    older = next(r for r in site.job.checkpoints if r.status == "DISCARDED")
    browser.find_element(By.CSS_SELECTOR, f'#checkpoints tr[data-checkpoint-id="{older.checkpoint_id}"] a').click()
    _wait(browser, lambda d: d.find_element(By.ID, "checkpoint-breakdown").get_attribute("data-checkpoint-id")
          == str(older.checkpoint_id), "the older checkpoint's breakdown")
    bars = browser.find_elements(By.CSS_SELECTOR, "#chart-checkpoint-state g.bar")
    assert sum(int(b.get_attribute("data-value")) for b in bars) == older.state_bytes


def test_tables_fit_tracebacks_fold_and_the_savepoint_restored_is_named(site, browser, token):
    """At 1,400 px no table runs off the page (all within 1,280 px); the failed run's traceback
    waits in a closed <details>; the run that restored the savepoint names it; an epoch's state
    written is what its checkpoint wrote."""
    browser.get(f"{site.url}/sluice/jobs/{JOB_NAME}")
    _wait(browser, lambda d: d.find_elements(By.ID, "executions"), "the job page")
    assert browser.execute_script("return window.innerWidth") <= 1400
    rights = browser.execute_script(
        "return [...document.querySelectorAll('table')].map(t => [t.id, t.getBoundingClientRect().right])")
    assert rights and all(right <= 1280 for _, right in rights), rights
    assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")

    failed = site.job.executions[-1]
    row = browser.find_element(By.CSS_SELECTOR, f'#executions tr[data-run-id="{failed.run_id}"]')
    details = row.find_element(By.CSS_SELECTOR, "td.failure details")
    assert details.get_attribute("open") is None
    assert "injected failure" in details.find_element(By.TAG_NAME, "summary").text
    trace = details.find_element(By.TAG_NAME, "pre")
    assert not trace.is_displayed() and "original traceback" in trace.get_attribute("textContent")

    restored = site.job.executions[0]
    path = str(site.root / "savepoints" / "sp-1")
    assert (restored.restored_savepoint, restored.restored_from) == (path, failed.last_checkpoint)
    cell = browser.find_element(By.CSS_SELECTOR, f'#executions tr[data-run-id="{restored.run_id}"] td.restored')
    assert cell.get_attribute("data-savepoint") == path
    assert cell.text == f"savepoint sp-1 (of checkpoint {failed.last_checkpoint})"
    failed_cell = browser.find_element(By.CSS_SELECTOR, f'#executions tr[data-run-id="{failed.run_id}"] td.restored')
    assert failed_cell.text == ""
    # An attempt's row says the decision; the strategy is said once, above the tables.
    restart = browser.find_element(By.CSS_SELECTOR, f'#executions tr[data-run-id="{failed.run_id}"] td.restart')
    assert restart.text == "gave up" and restart.get_attribute("title") == failed.restart
    assert "Restart deactivated" in failed.restart and "deactivated" not in browser.find_element(By.ID, "executions").text
    [records_out] = [th for th in browser.find_elements(By.CSS_SELECTOR, "#epochs th") if th.text.startswith("Records out")]
    assert "once per sink" in records_out.text and "counts twice" in records_out.get_attribute("title")

    sizes = {r.checkpoint_id: _written(r) for r in site.job.checkpoints if r.kind == "CHECKPOINT"}
    written = [(int(r.get_attribute("data-checkpoint-id")), int(r.get_attribute("data-state-bytes-written")))
               for r in browser.find_elements(By.CSS_SELECTOR, "#epochs tbody tr")
               if r.get_attribute("data-checkpoint-id")]
    assert written and all(size == sizes[checkpoint] for checkpoint, size in written), (written, sizes)


def test_json_api_matches_the_tables(site, token):
    def api(path):
        status, body, _ = _get(f"{site.url}/sluice/api{path}", token)
        assert status == 200, body
        return json.loads(body)

    def as_json(value):
        return json.loads(json.dumps(value))

    jobs = {j["name"]: j for j in api("/jobs")}
    assert jobs[JOB_NAME]["job_name"] == "checkpointed counts"
    latest = overview.latest_completed(site.job.checkpoints)
    assert jobs[JOB_NAME]["latest_checkpoint"]["checkpoint_id"] == latest.checkpoint_id
    assert jobs[BROKEN_JOB]["error"] and jobs[BROKEN_JOB]["job_dir"] is None
    assert api(f"/jobs/{JOB_NAME}/checkpoints") == as_json([overview.checkpoint_json(r) for r in site.job.checkpoints])
    assert api(f"/jobs/{JOB_NAME}/executions") == as_json([r.to_json() for r in site.job.executions])
    assert api(f"/jobs/{JOB_NAME}/graph") == as_json(overview.graph_json(site.job))
    assert api(f"/jobs/{JOB_NAME}") == as_json(overview.job_details(site.job))
    assert api(f"/jobs/{JOB_NAME}/metrics") == as_json(overview.charts_json(overview.job_charts(site.job)))
    status, body, _ = _get(f"{site.url}/sluice/api/jobs/nope", token)
    assert status == 404 and "no job module nope.py" in json.loads(body)["detail"]


@contextlib.contextmanager
def _registered_dag(root: Path):
    """What the DAG processor does with a DAG file: its DAG serialized into the metadata
    database; removed afterwards, as the database is shared by the test run."""
    from airflow.api.common.delete_dag import delete_dag
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    folder = root / "dags"
    folder.mkdir(exist_ok=True)
    (folder / f"{JOB_NAME}_dag.py").write_text(DAG_MODULE)
    DagBundlesManager().sync_bundles_to_db()
    bag = DagBag(dag_folder=str(folder), bundle_path=folder, bundle_name="dags-folder")
    assert set(bag.dags) == {JOB_NAME}, bag.import_errors
    sync_bag_to_db(bag, "dags-folder", None)
    try:
        yield
    finally:
        delete_dag(JOB_NAME)


def test_restore_triggers_a_dag_run_of_the_job(site, browser, token):
    restorable = [r.checkpoint_id for r in site.job.checkpoints if overview.is_restorable(r)]
    discarded = next(r.checkpoint_id for r in site.job.checkpoints if r.status == "DISCARDED")

    def click_restore(checkpoint_id):
        browser.get(f"{site.url}/sluice/jobs/{JOB_NAME}")
        row = browser.find_element(By.CSS_SELECTOR, f'#checkpoints tr[data-checkpoint-id="{checkpoint_id}"]')
        row.find_element(By.TAG_NAME, "button").click()

    # Before the DAG processor has seen the job's DAG: an error page naming the DAG and the fix.
    click_restore(restorable[0])
    _wait(browser, lambda d: d.find_elements(By.ID, "error"), "the error page")
    message = browser.find_element(By.ID, "error").text
    assert f"no DAG '{JOB_NAME}'" in message and "airflow dags reserialize" in message

    # A discarded checkpoint has no files left: refused, naming the ones that can be restored.
    restore = f"{site.url}/sluice/jobs/{JOB_NAME}/restore"
    status, body, _ = _get(restore, token, f"checkpoint={discarded}".encode(), cookie=True)
    assert status == 400 and f"completed checkpoints are {', '.join(map(str, restorable))}" in body
    # A form posted from another site with the user's cookie: refused.
    status, body, _ = _get(restore, token, b"checkpoint=latest", cookie=True, headers={"Origin": "http://elsewhere"})
    assert status == 403 and "another site" in body

    with _registered_dag(site.root):
        click_restore(restorable[0])
        _wait(browser, lambda d: f"/dags/{JOB_NAME}/runs/" in d.current_url, "Airflow's page of the new DAG run")
        run_id = urllib.parse.unquote(browser.current_url.rsplit("/runs/", 1)[1])
        status, body, _ = _get(f"{site.url}/api/v2/dags/{JOB_NAME}/dagRuns/{urllib.parse.quote(run_id)}", token)
    assert status == 200, body
    run = json.loads(body)
    assert run["conf"] == {"restore_from": str(restorable[0])}
    assert run["run_type"] == "manual" and run["triggered_by"] == "ui" and run["triggering_user_name"] == USER


def test_savepoints_are_listed_with_their_path_and_restored_from_the_view(site, browser, token):
    """A savepoint is a row of its own (not a second row of its checkpoint): its path, the checkpoint
    it copies, and a Restore button that triggers the job's DAG with restore_from=<its path>."""
    [savepoint] = [r for r in site.job.checkpoints if r.kind == "SAVEPOINT"]
    path = str(site.root / "savepoints" / "sp-1")
    assert savepoint.external_path == path
    browser.get(f"{site.url}/sluice/jobs/{JOB_NAME}")
    [row] = browser.find_elements(By.CSS_SELECTOR, "#savepoints tbody tr")
    assert row.get_attribute("data-savepoint") == path and path in row.text
    assert str(savepoint.checkpoint_id) in row.text.split()
    # Only the job's own savepoints: any other path is refused.
    restore = f"{site.url}/sluice/jobs/{JOB_NAME}/restore"
    status, body, _ = _get(restore, token, urllib.parse.urlencode({"checkpoint": "/etc"}).encode(), cookie=True)
    assert status == 400
    button = browser.find_element(By.CSS_SELECTOR, "#savepoints tbody tr button")
    assert button.get_attribute("title") == "Runs until stopped (or its input ends), the deployment's defaults"
    with _registered_dag(site.root):
        # The savepoint's checkpoint was taken by the DAG run DAG_RUN_ID, triggered from the form with
        # Epochs left empty (until stopped) at parallelism 2: its restore goes on so.
        from airflow.api.common.trigger_dag import trigger_dag
        from airflow.utils.types import DagRunTriggeredByType
        trigger_dag(JOB_NAME, run_id=DAG_RUN_ID, triggered_by=DagRunTriggeredByType.TEST,
                    conf={"restore_from": "none", "parallelism": 2, "max_epochs": None,
                          "allow_non_restored_state": True})
        browser.get(f"{site.url}/sluice/jobs/{JOB_NAME}")
        button = browser.find_element(By.CSS_SELECTOR, "#savepoints tbody tr button")
        assert button.get_attribute("title") == \
            "Runs until stopped (or its input ends) at parallelism 2, as the run that took it did"
        button.click()
        _wait(browser, lambda d: f"/dags/{JOB_NAME}/runs/" in d.current_url, "Airflow's page of the new DAG run")
        run_id = urllib.parse.unquote(browser.current_url.rsplit("/runs/", 1)[1])
        status, body, _ = _get(f"{site.url}/api/v2/dags/{JOB_NAME}/dagRuns/{urllib.parse.quote(run_id)}", token)
    assert status == 200, body
    assert json.loads(body)["conf"] == {"restore_from": path, "parallelism": 2, "max_epochs": None}


def test_jobs_page_maps_each_dag_to_its_warehouse_folder(site, browser, token):
    browser.get(f"{site.url}/sluice/")
    row = browser.find_element(By.CSS_SELECTOR, f'#jobs tr[data-job="{JOB_NAME}"]')
    assert row.find_element(By.CSS_SELECTOR, "td.folder").text == "checkpointed-counts/"


def test_the_plugin_is_registered_and_shown_inside_airflow(site, browser, token):
    status, body, _ = _get(f"{site.url}/api/v2/plugins", token)
    assert status == 200, body
    plugin = next(p for p in json.loads(body)["plugins"] if p["name"] == "sluice")
    assert [(a["name"], a["url_prefix"]) for a in plugin["fastapi_apps"]] == [("Sluice", "/sluice")]
    view = plugin["external_views"][0]
    assert (view["name"], view["href"], view["destination"], view["url_route"]) == \
        ("Sluice jobs", "/sluice/", "nav", "sluice")
    # Airflow's UI embeds the view: /plugin/<url_route> frames the href.
    browser.get(f"{site.url}/plugin/sluice")
    frame = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, 'iframe[src*="/sluice/"]'), "the view's frame")[0]
    browser.switch_to.frame(frame)
    try:
        _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f'#jobs tr[data-job="{JOB_NAME}"]'),
              "the framed jobs page")
    finally:
        browser.switch_to.default_content()


def test_job_modules_compile_once_per_version(tmp_path):
    """The view compiles a job module once, again only when the file changes."""
    module = tmp_path / f"{JOB_NAME}.py"
    module.write_text(JOB_MODULE.format(args=tuple(job_args(tmp_path)), job=JOB))
    first = overview.find_job(JOB_NAME, str(tmp_path), str(tmp_path))
    assert overview.find_job(JOB_NAME, str(tmp_path), str(tmp_path)).compiled is first.compiled
    module.write_text(module.read_text().replace("args=", "parallelism=3, args="))
    os.utime(module, (time.time() + 5, time.time() + 5))
    again = overview.find_job(JOB_NAME, str(tmp_path), str(tmp_path))
    assert again.compiled is not first.compiled
    assert {v.parallelism for v in again.compiled.job_graph.vertices} == {2, 3}     # the windows set 2
    assert first.job_dir == again.job_dir == str(tmp_path / "checkpointed-counts")
    assert overview.job_summary(again)["doc"].startswith("Word counts")


def test_narrow_columns_wrap_ids_after_a_separator_and_failures_between_words(site, browser, token):
    """At 900 px the executions' run and DAG run ids wrap, after a separator (``_-:./+@``), never
    inside a word; a failure and its failed tasks wrap between words or after a separator: not
    "Timestamps/Waterm|arks"."""
    browser.set_window_size(900, 1000)
    try:
        browser.get(f"{site.url}/sluice/jobs/{JOB_NAME}")
        _wait(browser, lambda d: d.find_elements(By.ID, "executions"), "the job page")
        # For each id cell: its text, and where a new line starts (by the characters' rectangles).
        cells = browser.execute_script("""
            const ids = '#executions td.id, #savepoints td.wrap', failures = 'td.failure summary, td.failure div.muted';
            return [...document.querySelectorAll(ids + ', ' + failures)].map(td => {
              const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT), range = document.createRange();
              let text = '', breaks = [], top = null;
              for (let node; (node = walker.nextNode());)
                for (let i = 0; i < node.length; i++) {
                  range.setStart(node, i); range.setEnd(node, i + 1);
                  const rect = range.getClientRects()[0];
                  if (rect && top !== null && rect.top > top + 2) breaks.push(text.length);
                  if (rect) top = rect.top;
                  text += node.data[i];
                }
              return [text, breaks, td.matches(failures)];
            })""")
    finally:
        browser.set_window_size(1400, 1000)
    assert any(breaks for _, breaks, failure in cells if not failure), cells       # some do wrap at this width
    assert any(breaks for _, breaks, failure in cells if failure), cells
    for text, breaks, failure in cells:
        allowed = SEPARATORS + " " if failure else SEPARATORS
        assert all(text[i - 1] in allowed for i in breaks), (text, [text[:i] for i in breaks])


def test_a_running_execution_shows_the_epochs_it_has_run(site, browser, token):
    """A run the view sees RUNNING (its third epoch waits): its row counts the epochs and records its
    epoch log has, as the charts do, not the 0 its history row holds until it ends."""
    import threading
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.execution.history import ExecutionHistory
    from runtime.storage.layout import job_dir
    name, root = "waiting_counts", site.root / "waiting"
    args = job_args(root)
    write_input(root / "in", seed=11)
    script, gate = root / "waiting_counts.py", root / "gate"
    script.write_text(WAITING_JOB.format(jobs=os.path.dirname(JOB), gate=str(gate), input=args[1], windows=args[3],
                                         running=args[5]))
    module = site.root / "jobs" / f"{name}.py"
    module.write_text(JOB_MODULE.format(args=(), job=str(script)))
    directory = job_dir(str(site.warehouse), "waiting counts")
    run = threading.Thread(target=run_job, args=(str(script), []), daemon=True,
                           kwargs=dict(warehouse=str(site.warehouse), master="local[2]", quiet=True,
                                       max_records_per_split=LINES_PER_EPOCH))
    run.start()
    try:
        # An epoch's metrics row is committed with a later epoch's plan: the epochs before the waiting one.
        wait_until(lambda: CheckpointStorage(directory).epoch_log.epoch_metrics(), 240, "the waiting run's first epochs logged")
        [execution] = ExecutionHistory(directory).executions()
        assert (execution.state, execution.epochs, execution.records_in) == ("RUNNING", 0, 0)   # what it records
        browser.get(f"{site.url}/sluice/jobs/{name}")
        _wait(browser, lambda d: d.find_elements(By.ID, "executions"), "the waiting job's page")
        row = browser.find_element(By.CSS_SELECTOR, f'#executions tr[data-run-id="{execution.run_id}"]')
        assert row.get_attribute("data-state") == "RUNNING"
        records_in = _charts(browser)["records-in"]
        source = next(s for s in records_in if s.startswith("Source"))
        logged = CheckpointStorage(directory).epoch_log.epoch_metrics()
        assert int(row.get_attribute("data-epochs")) == len(records_in[source]) == len(logged) > 0
        assert int(row.get_attribute("data-records-in")) == sum(y for _, y in records_in[source]) == \
            sum(r["records_in"] for r in logged) == len(logged) * 2 * LINES_PER_EPOCH
    finally:
        gate.touch()
        run.join(240)
        module.unlink()
    assert not run.is_alive()
    assert ExecutionHistory(directory).executions()[0].state == "FINISHED"
