"""Inputs and expected answers for the checkpoint tests (tests/jobs/checkpointed_counts.py)."""
import collections
import os
import random

from deltalake import DeltaTable

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
