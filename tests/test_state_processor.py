"""The state processor (runtime/state_processor): a checkpoint's state read as Arrow and Spark
DataFrames, savepoints written from data, state schema evolution on restore. Every test runs
tests/jobs/every_state.py on the shared Spark session and checks against what its input implies.
"""
import collections
import os

import pytest

from checkpoint_harness import LINES_PER_EPOCH, first_lines, table_rows, write_input
from runtime.checkpoint.incremental import INCREMENTAL
from runtime.client import run_job
from runtime.state.backend import STATE_BACKEND
from runtime.state_processor.reader import SavepointReader

JOB = os.path.join(os.path.dirname(__file__), "jobs", "every_state.py")
JOB_NAME = "every-state"


def run(tmp_path, *extra, backend="hashmap", incremental=True, **options):
    options.setdefault("max_records_per_split", LINES_PER_EPOCH)
    configuration = {STATE_BACKEND: backend, INCREMENTAL: str(incremental).lower()}
    args = ["--input", str(tmp_path / "in"), "--running", str(tmp_path / "running"),
            "--windows", str(tmp_path / "windows"), *extra]
    return run_job(JOB, args, warehouse=str(tmp_path / "warehouse"), master="local[2]", quiet=True,
                   configuration=configuration, **options)


def job_dir(tmp_path) -> str:
    return str(tmp_path / "warehouse" / JOB_NAME)


def by_word(events) -> dict:
    out = collections.defaultdict(list)
    for w, ts in events:
        out[w].append(ts)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("incremental", [True, False])
def test_every_state_kind_and_the_timers_read_as_the_input_implies(spark, tmp_path, backend, incremental):
    write_input(tmp_path / "in", seed=3)
    run(tmp_path, max_epochs=1, backend=backend, incremental=incremental)
    run(tmp_path, max_epochs=1, backend=backend, incremental=incremental, restore_from="latest")
    seen = by_word(first_lines(tmp_path / "in", 2 * LINES_PER_EPOCH))
    reader = SavepointReader.read(job_dir(tmp_path))
    assert reader.point.record.checkpoint_id == 2
    assert set(reader.state_names("every-state")) >= {"count", "last", "stamps", "buckets", "max_ts", "total"}

    def column(name, field="value"):
        rows = reader.keyed_state("every-state", name).to_pylist()
        assert len(rows) == len({r["key"] for r in rows}), "one row per key"
        return {r["key"]: r[field] for r in rows}

    assert column("count") == {w: len(ts) for w, ts in seen.items()}
    assert column("max_ts") == {w: max(ts) for w, ts in seen.items()}
    assert column("total") == {w: sum(ts) for w, ts in seen.items()}
    assert {w: sorted(v) for w, v in column("stamps").items()} == {w: sorted(ts) for w, ts in seen.items()}
    assert {w: dict(v) for w, v in column("buckets").items()} == {
        w: dict(collections.Counter(f"b{t % 3}" for t in ts)) for w, ts in seen.items()}
    assert {w: v["seen"] for w, v in column("last").items()} == {w: float(len(ts)) for w, ts in seen.items()}
    timers = reader.timers("every-state").to_pylist()
    assert {(t["key"], t["timestamp"]) for t in timers} == {
        (w, t + 10 ** 12) for w, ts in seen.items() for t in ts}
    assert {t["domain"] for t in timers} == {"event"}
    # Window contents: one row per key and window, the window decoded.
    windows = reader.keyed_state("window-counts", "window-contents").to_pylist()
    assert windows and all(r["window_end"] - r["window_start"] == 10_000 for r in windows)
    assert all(r["value"]["word"] == r["key"] for r in windows)
    # The same as a DataFrame, typed by the descriptors.
    df = reader.read_keyed_state(spark, "every-state", "buckets")
    assert dict(df.dtypes)["value"] == "map<string,bigint>" and df.count() == len(seen)
    last = reader.read_keyed_state(spark, "every-state", "last")
    assert dict(last.dtypes)["value"] == "struct<ts:int,seen:float>"
