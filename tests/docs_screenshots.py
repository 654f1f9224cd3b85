"""Takes the screenshots of the web view in docs/img/ (docs/airflow/web-view.md shows them).

The same set-up as tests/test_web_view.py: real runs of tests/jobs/checkpointed_counts.py (one
failing in its third epoch, a savepoint, a run restoring it), a real ``airflow api-server`` with
the ``sluice`` plugin, and headless Chromium logged in through Airflow's login page. Run it again
when the view changes:

    .venv/bin/python tests/docs_screenshots.py     (after bin/dev's set-up)
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

import airflow_env  # noqa: E402

airflow_env.configure()     # before anything imports airflow

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

import test_web_view as view  # noqa: E402
from checkpoint_harness import JOB, LINES_PER_EPOCH, job_args, write_input  # noqa: E402
from runtime.checkpoint.savepoint import take_savepoint  # noqa: E402
from runtime.checkpoint.storage import CheckpointStorage  # noqa: E402
from runtime.client import run_job  # noqa: E402
from runtime.execution.job_execution_result import JobExecutionException  # noqa: E402

IMG = TESTS.parent / "docs" / "img"


def make_warehouse(root: Path) -> tuple[Path, Path]:
    """The test's history: a run failing in its third epoch, a savepoint, a run restoring it."""
    warehouse, jobs = root / "warehouse", root / "jobs"
    jobs.mkdir()
    args = job_args(root, "--parallelism", "2")
    (jobs / f"{view.JOB_NAME}.py").write_text(view.JOB_MODULE.format(args=tuple(args), job=JOB))
    # Stamped as if written over the last 40 s: the latency chart then shows delays (seconds), not
    # the distance from 1970 that the tests' event times would give; the failure moves with them.
    start_ms = int(time.time() * 1000) - 160 * 250
    write_input(root / "in", seed=11, start_ms=start_ms)
    common = dict(warehouse=str(warehouse), master="local[2]", quiet=True, max_records_per_split=LINES_PER_EPOCH)
    failing = root / "failing_counts.py"
    failing.write_text(view.FAILING_JOB.replace("FailAt(25_000)", f"FailAt({start_ms + 25_000})").format(jobs=os.path.dirname(JOB), input=args[1], windows=args[3],
                                               running=args[5]))
    try:
        run_job(str(failing), dag_run_id=view.DAG_RUN_ID, **common)
    except JobExecutionException:
        pass
    failing.unlink()
    take_savepoint(CheckpointStorage(str(warehouse / "checkpointed-counts")), str(root / "savepoints" / "sp-1"))
    run_job(JOB, args, restore_from=str(root / "savepoints" / "sp-1"), **common)
    return warehouse, jobs


def browser(profile: Path):
    options = webdriver.ChromeOptions()
    options.binary_location = view.CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
                 "--disable-dev-shm-usage", "--window-size=1200,900", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(view.CHROMEDRIVER), options=options)


def shoot(driver, css: str, name: str) -> None:
    element = driver.find_element(By.CSS_SELECTOR, css)
    driver.execute_script("arguments[0].scrollIntoView()", element)
    (IMG / name).write_bytes(element.screenshot_as_png)
    print(f"docs/img/{name}: {(IMG / name).stat().st_size // 1024} KiB")


def main() -> None:
    airflow_env.migrate()
    IMG.mkdir(exist_ok=True)
    root = Path(tempfile.gettempdir()) / "sluice-example"     # a short path: the pages show it
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    try:
        proc, url, log = view._start_api_server(root, *make_warehouse(root))
        driver = browser(root / "profile")
        try:
            view._wait_until_up(proc, url, log)
            password = json.loads((root / "passwords.json").read_text())[view.USER]
            driver.get(f"{url}/auth/login/?next=/sluice/")
            wait = WebDriverWait(driver, 120, poll_frequency=0.2)
            wait.until(lambda d: d.find_elements(By.NAME, "username"))
            driver.find_element(By.NAME, "username").send_keys(view.USER)
            driver.find_element(By.NAME, "password").send_keys(password)
            driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
            wait.until(lambda d: d.find_elements(By.ID, "jobs"))
            shoot(driver, "main", "web-view-jobs.png")
            driver.get(f"{url}/sluice/jobs/{view.JOB_NAME}")
            wait.until(lambda d: d.find_elements(By.ID, "graph"))
            shoot(driver, "#graph", "web-view-graph.png")
            shoot(driver, "#checkpoints", "web-view-checkpoints.png")
            shoot(driver, "#executions", "web-view-executions.png")
            if driver.find_elements(By.ID, "charts"):
                shoot(driver, "#charts", "web-view-charts.png")
        finally:
            driver.quit()
            view._stop(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
