"""Sluice's own tables stay small as a job runs (runtime.storage.maintenance): compaction at the
version read, vacuum, Delta log clean-up; and a job whose tables were compacted and cleaned
still restores every retained checkpoint and its savepoint exactly, also after a kill -9 inside
each of them (fault points during-compaction, during-vacuum, during-log-cleanup)."""
import collections
import os
import shutil
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from checkpoint_harness import (JOB, LINES_PER_EPOCH, expected_running, expected_windows, job_args, kill_at,
                                table_rows, write_input)
from runtime.checkpoint.savepoint import read_state, take_savepoint
from runtime.checkpoint.storage import CheckpointStorage
from runtime.client import run_job
from runtime.common.faults import MAINTENANCE_POINTS
from runtime.storage.delta_files import DeltaTables, append, read_table
from runtime.storage.maintenance import (OWN_TABLE_PROPERTIES, ORPHAN_AGE_S, CompactionConflict, clean_log, compact,
                                         vacuum)

MAINTAIN_EVERY_EPOCH = {"sluice.maintenance.compact-after-files": "2", "sluice.maintenance.log-retention": "0"}


def _table(path, commits: int):
    tables = DeltaTables(OWN_TABLE_PROPERTIES)
    for i in range(commits):
        append(str(path), pa.table({"n": [i], "s": [f"row {i}"]}), tables=tables)
    return DeltaTable(str(path))


def _data_files(path) -> set:
    return {f for f in os.listdir(path) if f.endswith(".parquet")}


def test_compaction_rewrites_a_table_as_one_file_and_vacuum_deletes_what_it_removed(tmp_path):
    dt = _table(tmp_path / "t", 6)
    rows = read_table(str(tmp_path / "t"))
    before = _data_files(tmp_path / "t")
    removed = compact(dt, rows)
    assert len(dt.file_uris()) == 1 and len(removed) == 6
    assert sorted(read_table(str(tmp_path / "t")).to_pylist(), key=lambda r: r["n"]) == \
        [{"n": i, "s": f"row {i}"} for i in range(6)]
    deleted = vacuum(dt, removed)
    assert {os.path.basename(p) for p in deleted} == before
    assert _data_files(tmp_path / "t") == {os.path.basename(u) for u in dt.file_uris()}


def test_a_compaction_that_lost_the_race_changes_nothing_and_loses_no_row(tmp_path):
    dt = _table(tmp_path / "t", 3)
    rows = read_table(str(tmp_path / "t"))
    append(str(tmp_path / "t"), pa.table({"n": [99], "s": ["appended meanwhile"]}))     # another writer
    files = _data_files(tmp_path / "t")
    with pytest.raises(CompactionConflict, match="committed to since version"):
        compact(dt, rows)
    assert _data_files(tmp_path / "t") == files         # its own file removed again
    assert sorted(r["n"] for r in read_table(str(tmp_path / "t")).to_pylist()) == [0, 1, 2, 99]


def test_vacuum_deletes_old_orphans_only_never_a_listed_or_young_file(tmp_path):
    dt = _table(tmp_path / "t", 2)
    listed = _data_files(tmp_path / "t")
    for name in ("old-orphan.parquet", "young-orphan.parquet"):
        pq.write_table(pa.table({"n": [1]}), str(tmp_path / "t" / name))
    old = time.time() - ORPHAN_AGE_S - 5
    os.utime(tmp_path / "t" / "old-orphan.parquet", (old, old))
    for name in listed:                                 # old, but listed by the current version
        os.utime(tmp_path / "t" / name, (old, old))
    deleted = vacuum(dt)
    assert [os.path.basename(p) for p in deleted] == ["old-orphan.parquet"]
    assert _data_files(tmp_path / "t") == listed | {"young-orphan.parquet"}


def test_the_log_is_cleaned_behind_its_latest_delta_checkpoint_and_stays_readable(tmp_path):
    path = tmp_path / "t"
    _table(path, 25)        # versions 0..24: Delta checkpoints at 9 and 19
    log_dir = path / "_delta_log"
    assert len([f for f in os.listdir(log_dir) if f.endswith(".json")]) == 25
    assert clean_log(str(path), retention_s=3600) == []         # younger than the retention: kept
    deleted = clean_log(str(path), retention_s=0)
    left = sorted(f for f in os.listdir(log_dir) if f[:20].isdigit())
    # Commits 0..18 and the checkpoint at 9 go; what is left starts at the checkpoint at 19.
    assert len(deleted) == 20 and left[0] == "00000000000000000019.checkpoint.parquet", left
    dt = DeltaTable(str(path))
    assert dt.version() == 24 and sorted(r["n"] for r in read_table(str(path)).to_pylist()) == list(range(25))
    write_deltalake(dt, pa.table({"n": [25], "s": ["after"]}), mode="append")      # and writable
    assert DeltaTable(str(path)).version() == 25


def _copy(src, dst):
    """The job's warehouse and sinks copied; its input stays where the checkpoints' positions say."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("halted-*", "log-*", "in"))
    return dst


def _copy_args(src, copy):
    return ["--input", str(src / "in"), "--windows", str(copy / "windows"), "--running", str(copy / "running")]


def _exact(folder, events):
    assert table_rows(folder / "windows") == expected_windows(events)
    assert table_rows(folder / "running") == expected_running(events)


def _state(folder, savepoint=None):
    store = CheckpointStorage(str(folder / "warehouse" / "checkpointed-counts"))
    return {r["key"]: r["value"] for r in read_state(store, "running-count", savepoint) if r["state"] == "count"}


def _own_table_sizes(job_dir) -> dict:
    sizes = {}
    for table in ("checkpoints", "epoch_log", "executions", "state/running-count"):
        path = os.path.join(job_dir, table)
        sizes[table] = (len(DeltaTable(path).file_uris()),
                        len([f for f in os.listdir(os.path.join(path, "_delta_log")) if f.endswith(".json")]))
    return sizes


@pytest.mark.slow
def test_compacted_tables_restore_every_retained_checkpoint_and_the_savepoint_exactly(spark, tmp_path):
    run = tmp_path / "run"
    events = write_input(run / "in", seed=7, lines=8 * LINES_PER_EPOCH)      # 8 epochs
    common = dict(warehouse=str(run / "warehouse"), master="local[2]", quiet=True,
                  max_records_per_split=LINES_PER_EPOCH, configuration=MAINTAIN_EVERY_EPOCH)
    run_job(JOB, job_args(run), max_epochs=3, **common)
    job_dir = str(run / "warehouse" / "checkpointed-counts")
    savepoint = take_savepoint(CheckpointStorage(job_dir), str(tmp_path / "savepoint"))
    totals = dict(collections.Counter(w for w, _ in events))
    run_job(JOB, job_args(run), **common)
    _exact(run, events)
    assert _state(run) == totals
    # Compacted as it ran: few files in the append-only tables, a short log in every table.
    sizes = _own_table_sizes(job_dir)
    # (the executions table is compacted as a run starts: then each run adds its start and end)
    assert sizes["checkpoints"][0] <= 3 and sizes["epoch_log"][0] <= 3 and sizes["executions"][0] <= 4, sizes
    assert all(entries <= 12 for _, entries in sizes.values()), sizes
    store = CheckpointStorage(job_dir)
    retained = [r.checkpoint_id for r in store.checkpoints.completed()]
    assert len(retained) == 3 and retained[-1] >= 8
    for checkpoint_id in retained:      # each one replays the logged epochs after it: no-op commits
        copy = _copy(run, tmp_path / f"restore-{checkpoint_id}")
        run_job(JOB, _copy_args(run, copy), **{**common, "warehouse": str(copy / "warehouse")},
                restore_from=str(checkpoint_id))
        _exact(copy, events)
        assert _state(copy) == totals
    # The savepoint was taken before every compaction and vacuum since: still whole.
    copy = _copy(run, tmp_path / "from-savepoint")
    run_job(JOB, _copy_args(run, copy), **{**common, "warehouse": str(copy / "warehouse")}, restore_from=savepoint)
    assert _state(copy) == totals


@pytest.mark.slow
def test_a_kill_inside_table_maintenance_loses_nothing(spark, tmp_path):
    """One run killed inside each kind of maintenance in turn (each restoring the last), then the
    input finished: nothing lost or doubled, and every retained checkpoint restores exactly."""
    events = write_input(tmp_path / "in", seed=11, lines=12 * LINES_PER_EPOCH)
    extra = [arg for key, value in MAINTAIN_EVERY_EPOCH.items() for arg in ("-D", f"{key}={value}")]
    for i, point in enumerate(MAINTENANCE_POINTS):
        assert kill_at(tmp_path, point, "*", i > 0, *extra) == "killed", point
    run_job(JOB, job_args(tmp_path), warehouse=str(tmp_path / "warehouse"), master="local[2]", quiet=True,
            max_records_per_split=LINES_PER_EPOCH, configuration=MAINTAIN_EVERY_EPOCH)
    _exact(tmp_path, events)
    assert _state(tmp_path) == dict(collections.Counter(w for w, _ in events))
    store = CheckpointStorage(str(tmp_path / "warehouse" / "checkpointed-counts"))
    for checkpoint_id in [r.checkpoint_id for r in store.checkpoints.completed()]:
        copy = _copy(tmp_path, tmp_path / f"restore-{checkpoint_id}")
        run_job(JOB, _copy_args(tmp_path, copy), warehouse=str(copy / "warehouse"), master="local[2]", quiet=True,
                max_records_per_split=LINES_PER_EPOCH, configuration=MAINTAIN_EVERY_EPOCH,
                restore_from=str(checkpoint_id))
        _exact(copy, events)
