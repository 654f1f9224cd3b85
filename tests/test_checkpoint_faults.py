"""Kill the job at each point of an epoch and its checkpoint, restore, and check that the
sinks and the final state equal those of a run without failures: nothing lost, nothing twice.

The job runs in a driver process of its own (`sluice run`, forked from a server that has the
engine's imports done: tests/checkpoint_harness.py), with its own JVM; when it reaches the chosen
point it stops there (runtime.common.faults) and the test kills its whole process group with
SIGKILL. A chain kills one run after another at several points, each run restoring the latest
checkpoint; the last run completes in this process. SLUICE_FAULT_SEEDS=N runs N chains (default 2).
"""
import collections
import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest
from deltalake import DeltaTable

from checkpoint_harness import (
    JOB, LINES_PER_EPOCH, expected_running, expected_windows, job_args, kill_at, sink_checkpoints, table_rows,
    write_input)
from runtime.checkpoint.savepoint import read_state
from runtime.checkpoint.storage import CheckpointStorage
from runtime.client import run_job
from runtime.common.faults import POINTS

SEEDS = int(os.environ.get("SLUICE_FAULT_SEEDS", "2"))


def schedule(seed: int) -> list[tuple[str, object]]:
    """Every kill point once over the 4 data epochs (0..3), in the order a run reaches them. A
    kill after an epoch's record leaves the epoch done; the state tables' commits and retention
    follow the records of several epochs at once (and a restored run's start), so they come
    last: after-state-commit at epoch 3, during-retention at the first retention that discards
    ("*": it needs a 4th checkpoint, 3 are retained). The others take any epoch before: a kill
    before the record replays its epoch."""
    r = random.Random(seed)
    epochs = {p: r.randint(0, 2) for p in POINTS if p not in ("after-state-commit", "during-retention")}
    return sorted(epochs.items(), key=lambda pe: (pe[1], POINTS.index(pe[0]))) + [
        ("after-state-commit", 3), ("during-retention", "*")]


def backend(seed: int) -> dict:
    """Odd seeds keep state in RocksDB stores that stay with their tasks, checkpointed
    incrementally (the default there); even seeds on the heap, checkpointed whole."""
    return {"state.backend.type": "rocksdb"} if seed % 2 else {}


def chain(tmp_path, seed: int) -> list[str]:
    outcomes = []
    extra = [arg for key, value in backend(seed).items() for arg in ("-D", f"{key}={value}")]
    for i, (point, epoch) in enumerate(schedule(seed)):
        outcomes.append(f"{point}@{epoch}: {kill_at(tmp_path, point, epoch, i > 0, *extra)}")
    return outcomes


def test_killed_runs_restore_to_the_same_sinks_and_state(spark, tmp_path):
    folders = [tmp_path / f"seed-{s}" for s in range(SEEDS)]
    inputs = [write_input(folder / "in", seed=100 + s) for s, folder in enumerate(folders)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(chain, folders, range(SEEDS)))
    for seed, (folder, events, outcome) in enumerate(zip(folders, inputs, outcomes)):
        assert all("killed" in o for o in outcome), outcome
        result = run_job(JOB, job_args(folder), warehouse=str(folder / "warehouse"), master="local[2]", quiet=True,
                         max_records_per_split=LINES_PER_EPOCH, restore_from="latest", configuration=backend(seed))
        assert result.epochs[-1].watermark > 10 ** 12          # ran to the end of the input
        assert table_rows(folder / "windows") == expected_windows(events), outcome
        assert table_rows(folder / "running") == expected_running(events), outcome
        # The final checkpoint's state: every word's total count, once.
        store = CheckpointStorage(str(folder / "warehouse" / "checkpointed-counts"))
        state = {r["key"]: r["value"] for r in read_state(store, "running-count") if r["state"] == "count"}
        assert state == dict(collections.Counter(w for w, _ in events))
        statuses = collections.Counter(r.status for r in store.checkpoints.history())
        assert statuses["COMPLETED"] == 3           # retained; older ones DISCARDED


def test_a_kill_with_the_sinks_committed_and_the_record_not_restores_exactly_once(spark, tmp_path):
    """The sinks commit while the sources' positions are written: held with checkpoint 2's sinks
    committed (after-sink-commit) while its positions are written and its record not
    (after-state-files), the driver is killed. The restore takes checkpoint 1 and replays epoch 1
    as checkpoint 2: its state is committed then, its sinks' commits are no-ops, every row once."""
    events = write_input(tmp_path / "in", seed=54)
    assert kill_at(tmp_path, "after-state-files", 1, False, also=[("after-sink-commit", 1)]) == "killed"
    store = CheckpointStorage(str(tmp_path / "warehouse" / "checkpointed-counts"))
    assert [r.checkpoint_id for r in store.checkpoints.completed()] == [1]
    assert max(sink_checkpoints(tmp_path / "running")) == 2        # the sink holds checkpoint 2
    state = tmp_path / "warehouse" / "checkpointed-counts" / "state"
    tables = [str(state / t) for t in os.listdir(state) if DeltaTable.is_deltatable(str(state / t))]
    assert tables and all("2" not in {p["checkpoint_id"] for p in DeltaTable(t).partitions()} for t in tables)
    result = run_job(JOB, job_args(tmp_path), warehouse=str(tmp_path / "warehouse"), master="local[2]", quiet=True,
                     max_records_per_split=LINES_PER_EPOCH, restore_from="latest")
    assert result.restored_from == 1 and result.epochs[0].checkpoint_id == 2
    assert table_rows(tmp_path / "windows") == expected_windows(events)
    assert table_rows(tmp_path / "running") == expected_running(events)


def test_a_kill_after_the_record_and_before_the_state_tables_commit_is_caught_up_by_the_next_run(spark, tmp_path):
    """A checkpoint's state tables commit its files after its record: killed in between
    (after-checkpoint-record), checkpoint 2 is complete and restored from, while its tables lack
    its partition; the next run's first checkpoint commits it, every row once."""
    events = write_input(tmp_path / "in", seed=55)
    assert kill_at(tmp_path, "after-checkpoint-record", 1, False) == "killed"
    store = CheckpointStorage(str(tmp_path / "warehouse" / "checkpointed-counts"))
    assert [r.checkpoint_id for r in store.checkpoints.completed()] == [1, 2]
    state = tmp_path / "warehouse" / "checkpointed-counts" / "state"
    tables = [str(state / t) for t in os.listdir(state) if DeltaTable.is_deltatable(str(state / t))]
    assert tables and all({p["checkpoint_id"] for p in DeltaTable(t).partitions()} == {"1"} for t in tables)
    second = store.checkpoints.completed()[-1]
    own = [op["table"] for op in second.operators if any(f["path"].startswith("checkpoint_id=2/") for f in op["files"])]
    result = run_job(JOB, job_args(tmp_path), warehouse=str(tmp_path / "warehouse"), master="local[2]", quiet=True,
                     max_records_per_split=LINES_PER_EPOCH, restore_from="latest")
    assert result.restored_from == 2 and result.epochs[0].checkpoint_id == 3
    assert table_rows(tmp_path / "windows") == expected_windows(events)
    assert table_rows(tmp_path / "running") == expected_running(events)
    assert own
    # Checkpoint 2's files went into its tables (retention may have discarded them since) ...
    for table in own:
        dt = DeltaTable(str(state / table))
        assert any({"checkpoint_id": "2"} in DeltaTable(str(state / table), version=v).partitions()
                   for v in range(dt.version() + 1)), table
    # ... and every completed checkpoint's own files are in their table.
    listed = {(op["table"], str(r.checkpoint_id)) for r in store.checkpoints.completed() for op in r.operators
              if any(f["path"].startswith(f"checkpoint_id={r.checkpoint_id}/") for f in op["files"])}
    assert listed and all(cid in {p["checkpoint_id"] for p in DeltaTable(str(state / table)).partitions()}
                          for table, cid in listed)
