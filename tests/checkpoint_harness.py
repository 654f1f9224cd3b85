"""Inputs and expected answers for the checkpoint tests (tests/jobs/checkpointed_counts.py)."""
import collections
import os
import random
import signal
import subprocess
import sys
import time

from deltalake import DeltaTable

from jvm_options import share_spark_classes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join(os.path.dirname(__file__), "jobs", "checkpointed_counts.py")
LINES_PER_EPOCH = 40        # per file: the job's input is cut into epochs of this many lines


def write_input(folder, seed: int, files: int = 2, lines: int = 160, words: int = 25) -> list[tuple[str, int]]:
    """Files of "word timestamp" lines, out of order by up to 1.5 s (within the 2 s bound)."""
    r = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(words)]
    events = []
    os.makedirs(folder, exist_ok=True)
    for f in range(files):
        with open(os.path.join(folder, f"part-{f}.txt"), "w") as out:
            for i in range(lines):
                word, ts = r.choice(vocabulary), i * 250 + r.randint(0, 1500)
                out.write(f"{word} {ts}\n")
                events.append((word, ts))
    return events


def expected_windows(events) -> collections.Counter:
    """(word, count) per 10 s window, as a multiset."""
    per_window = collections.Counter((w, ts - ts % 10_000) for w, ts in events)
    return collections.Counter((w, n) for (w, _), n in per_window.items())


def expected_running(events) -> collections.Counter:
    totals = collections.Counter(w for w, _ in events)
    return collections.Counter((w, k) for w, n in totals.items() for k in range(1, n + 1))


def table_rows(path) -> collections.Counter:
    rows = DeltaTable(str(path)).to_pyarrow_table(columns=["word", "count"]).to_pylist()
    return collections.Counter((r["word"], r["count"]) for r in rows)


def job_args(tmp_path, *extra) -> list[str]:
    return ["--input", str(tmp_path / "in"), "--windows", str(tmp_path / "windows"),
            "--running", str(tmp_path / "running"), *extra]


def kill_at(tmp_path, point: str, epoch: int, restore: bool, *extra: str, job: str = JOB, args=None) -> str:
    """Run the job with ``sluice run`` until it reaches ``point`` in ``epoch``, then SIGKILL its
    process group ("killed"); "finished" if it ended first. ``restore``: --restore-from latest.
    ``job`` and its ``args``: another job script than checkpointed_counts (``job_args``)."""
    share_spark_classes()
    marker = tmp_path / f"halted-{point}-{epoch}"
    env = {**os.environ, "SLUICE_HALT_AT": f"{point}:{epoch}", "SLUICE_HALT_MARKER": str(marker),
           "PYTHONPATH": ROOT}
    cmd = [sys.executable, "-m", "runtime.cli", "run", job, "--warehouse", str(tmp_path / "warehouse"),
           "--master", "local[1]", "--max-records-per-split", str(LINES_PER_EPOCH)]
    if restore:
        cmd += ["--restore-from", "latest"]
    cmd += list(extra)
    with open(tmp_path / f"log-{point}-{epoch}.txt", "w") as log:
        proc = subprocess.Popen(cmd + ["--", *(job_args(tmp_path) if args is None else args)], env=env, cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 240
        while not marker.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        halted = marker.exists()
        try:
            os.killpg(proc.pid, signal.SIGKILL)     # the driver, its JVM and their children
        except ProcessLookupError:
            pass                                    # it ended by itself: its log says how
        if halted:
            pid = int(marker.read_text().split(":")[2])
            try:
                os.kill(pid, signal.SIGKILL)        # a halted Spark worker has its own group
            except ProcessLookupError:
                pass
        proc.wait()
    assert halted or proc.returncode == 0, (tmp_path / f"log-{point}-{epoch}.txt").read_text()[-3000:]
    return "killed" if halted else "finished"
