"""``bin/dev``'s set-up says what it does: each step that runs prints a line on stderr as it starts and
one as it ends, with its duration, then the total; a command with everything set up prints nothing
about it. And ``bin/dev docs`` serves the docs site on loopback."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import time
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEV = os.path.join(ROOT, "bin", "dev")
M2 = os.path.expanduser("~/.m2/repository")
# An artifact the project's own pom (include/maven/delta) has Maven put in the local repository.
DELTA_STORAGE = os.path.join(M2, "io/delta/delta-storage/4.4.0/delta-storage-4.4.0.jar")
TINY_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sluice.test</groupId>
  <artifactId>tiny</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.delta</groupId><artifactId>delta-storage</artifactId><version>4.4.0</version>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>
    </dependency>
  </dependencies>
</project>
"""
DURATION = r"(\d+\.\d|\d+ min \d+) s"


def _sourced(script: str, root: str) -> subprocess.CompletedProcess:
    """bin/dev's functions (sourced: its commands do not run) with the project root at ``root``."""
    return subprocess.run(["bash", "-c", f'source "$1"; root="$2"; {script}', "bash", DEV, root],
                          capture_output=True, text=True, timeout=120)


def test_a_command_with_the_set_up_done_prints_nothing_about_it():
    if not os.environ.get("SLUICE_JVM_CLASS_ARCHIVE"):
        pytest.skip("the tests did not start through bin/dev, so its set-up may not be done")
    env = {k: v for k, v in os.environ.items() if k != "SLUICE_SKIP_BOOTSTRAP"}
    done = subprocess.run([DEV, "no-such-command"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == ("unknown command 'no-such-command': use wordcount, airflow, airflow-settings, "
                           "kafka, test, plan, sluice, jobmanager or docs\n")


def test_a_stale_maven_step_prints_its_start_and_end_with_durations_and_the_total(tmp_path):
    if not os.path.exists(DELTA_STORAGE) or subprocess.run(["bash", "-c", "command -v mvn"]).returncode:
        pytest.skip("no mvn, or no delta-storage 4.4.0 in ~/.m2 (bin/dev's set-up puts it there)")
    pom_dir = tmp_path / "include" / "maven" / "tiny"
    (pom_dir / ".mvn").mkdir(parents=True)
    (pom_dir / "pom.xml").write_text(TINY_POM)
    (pom_dir / ".mvn" / "maven.config").write_text("-o\n")     # offline: the jar comes from ~/.m2 only
    (pom_dir / ".mvn" / "jvm.config").write_text("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC\n")    # starts in a third
    step = "Maven jars of include/maven/tiny/pom.xml into .jars/tiny"

    first = _sourced("maven_jars; setup_end", str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert first.stdout == ""
    lines = first.stderr.splitlines()
    assert len(lines) == 3, first.stderr
    assert lines[0] == f"bin/dev: set-up: {step} ..."
    assert re.fullmatch(rf"bin/dev: set-up: {re.escape(step)} done in {DURATION}", lines[1]), lines[1]
    assert re.fullmatch(rf"bin/dev: set-up finished in {DURATION}", lines[2]), lines[2]
    assert (tmp_path / ".jars" / "tiny" / "delta-storage-4.4.0.jar").is_file()

    again = _sourced("maven_jars; setup_end", str(tmp_path))
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")


def test_durations_read_in_seconds_then_minutes():
    said = _sourced('echo "$(since "$(( $(now_us) - 4200000 ))")|$(since "$(( $(now_us) - 150000000 ))")"', ROOT)
    assert said.stdout == "4.2 s|2 min 30 s\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_bin_dev_docs_serves_the_site_on_loopback(tmp_path):
    if not os.path.exists(os.path.join(ROOT, ".venv", "bin", "mkdocs")):
        pytest.skip("no mkdocs in .venv (pyproject's dev extra installs it)")
    port, log = _free_port(), tmp_path / "mkdocs.log"
    with open(log, "w") as out:
        server = subprocess.Popen([DEV, "docs", "-a", f"127.0.0.1:{port}"], env={**os.environ, "SLUICE_SKIP_BOOTSTRAP": "1"},
                                  stdout=out, stderr=out, start_new_session=True)
    try:
        deadline, page = time.monotonic() + 120, None
        while page is None and time.monotonic() < deadline and server.poll() is None:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/performance/", timeout=5).read().decode()
            except OSError:
                time.sleep(0.5)
        assert page is not None, f"mkdocs serve did not answer ({server.poll()=}):\n{log.read_text()[-3000:]}"
        assert "Performance" in page and "words/s" in page     # bench/README.md's tables, included
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
