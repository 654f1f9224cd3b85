"""A checkpoint is trusted only if its files are the ones it wrote: damage is found by the
checksums recorded with the checkpoint (verified where a restore reads the files), the damaged
checkpoint is marked INVALID (kept, never restored), and the restore falls back by itself, but
never past the oldest retained checkpoint into a fresh start over sinks that hold committed
output. Retention finishes after a kill.

The job (tests/jobs/checkpointed_counts.py) writes per-word window counts and every running
count into two Delta sinks, a checkpoint per epoch; the answers come from the input
(checkpoint_harness), so a running count written twice shows up as a duplicate row.
"""
import dataclasses
import os
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from checkpoint_harness import (
    JOB, LINES_PER_EPOCH, expected_running, expected_windows, job_args, kill_at, table_rows, write_input)
from runtime.state.snapshot_reader import CorruptStateException, read_state_file
from runtime.state.snapshot_writer import write_state_file
from runtime.checkpoint.checkpoint_record import COMPLETED, DISCARDED, INVALID, CheckpointException
from runtime.checkpoint.incremental import referenced_partitions
from runtime.checkpoint.storage import CheckpointStorage
from runtime.cli import main as sluice
from runtime.client import compile_job, run_job
from runtime.jobmaster.steps import RunRequest, resolve_restore_point

JOB_DIR = "checkpointed-counts"


def run(folder, **options):
    return run_job(JOB, job_args(folder), warehouse=str(folder / "warehouse"), master="local[2]", quiet=True,
                   max_records_per_split=LINES_PER_EPOCH, **options)


def storage(folder) -> CheckpointStorage:
    return CheckpointStorage(str(folder / "warehouse" / JOB_DIR))


def state_files(folder, record, table="running-count") -> list:
    root = folder / "warehouse" / JOB_DIR / "state" / table
    return [root / f["path"] for op in record.operators if op["table"] == table for f in op["files"]]


def assert_exactly_once(folder, events):
    assert table_rows(folder / "windows") == expected_windows(events)
    assert table_rows(folder / "running") == expected_running(events)


def overwrite_mid_file(path) -> None:
    """Zero 8 bytes in the middle of the file's largest column chunk: same size, footer intact."""
    meta = pq.read_metadata(path)
    chunk = max((meta.row_group(g).column(c) for g in range(meta.num_row_groups)
                 for c in range(meta.num_columns)), key=lambda c: c.total_compressed_size)
    start = (chunk.dictionary_page_offset or chunk.data_page_offset)
    middle = start + chunk.total_compressed_size // 2
    data = bytearray(path.read_bytes())
    data[middle:middle + 8] = b"\xff" * 8 if data[middle:middle + 8] == b"\x00" * 8 else b"\x00" * 8
    path.write_bytes(bytes(data))
    assert pq.read_metadata(path).num_rows == meta.num_rows       # the footer alone finds nothing


def test_reading_a_state_file_verifies_the_bytes_its_checksum_recorded(tmp_path):
    table = pa.table({"key_group": pa.array([3, 7], pa.int32()), "state_name": ["count", "count"],
                      "value": [b"x" * 4000, b"y" * 4000]})
    written = write_state_file(table, str(tmp_path), "op", 0)
    assert written.checksum.startswith("sha256:") and written.size == os.path.getsize(written.path)
    read = read_state_file(written.path, checksum=written.checksum)
    # The columns written, as written; a base column the file left out reads as null.
    assert read.select(table.column_names).equals(table)
    assert all(read.column(c).null_count == 2 for c in read.column_names if c not in table.column_names)
    overwrite_mid_file(tmp_path / os.path.basename(written.path))
    with pytest.raises(CorruptStateException) as damaged:
        read_state_file(written.path, checksum=written.checksum)
    assert damaged.value.damaged_files == {written.path: f"state file {written.path} is corrupt (its bytes "
                                                         f"differ from the checksum recorded with the checkpoint)"}


def test_bytes_overwritten_mid_file_are_found_and_the_restore_falls_back_by_itself(spark, tmp_path, caplog):
    events = write_input(tmp_path / "in", seed=31)
    run(tmp_path, max_epochs=3)
    latest = storage(tmp_path).checkpoints.completed()[-1]
    assert latest.checkpoint_id == 3
    assert all(f["checksum"].startswith("sha256:") for op in latest.operators for f in op["files"])
    victim = state_files(tmp_path, latest)[0]
    overwrite_mid_file(victim)
    result = run(tmp_path, restore_from="latest")
    err = caplog.text       # logged as warnings
    # Found by the task that read the file (size and footer are intact), then the fallback.
    assert ("checkpoint 3: state file {} is corrupt (its bytes differ from the checksum recorded with the "
            "checkpoint); marked INVALID, falling back to checkpoint 2".format(victim)) in err
    assert result.restored_from == 2
    assert_exactly_once(tmp_path, events)
    # Marked INVALID, its files kept. The replayed epoch took checkpoint id 3 again (its logged
    # id, which keeps the sinks' commits exactly once), with new files.
    rows = DeltaTable(str(tmp_path / "warehouse" / JOB_DIR / "checkpoints")).to_pyarrow_table().to_pylist()
    [marked] = [r for r in rows if r["checkpoint_id"] == 3 and r["status"] == INVALID]
    assert str(victim) in marked["failure"] and victim.exists()
    retaken = {r.checkpoint_id: r for r in storage(tmp_path).checkpoints.history()}[3]
    assert retaken.status == COMPLETED and victim not in state_files(tmp_path, retaken)


def test_a_checkpoint_written_before_checksums_is_still_restored(spark, tmp_path):
    events = write_input(tmp_path / "in", seed=34)
    run(tmp_path, max_epochs=2)
    store = storage(tmp_path)
    latest = store.checkpoints.completed()[-1]
    operators = [{**op, "files": [{k: v for k, v in f.items() if k != "checksum"} for f in op["files"]]}
                 for op in latest.operators]
    store.checkpoints.record([dataclasses.replace(latest, operators=operators)])     # as the record was before
    assert not any("checksum" in f for op in store.checkpoints.completed()[-1].operators for f in op["files"])
    assert run(tmp_path, restore_from="latest").restored_from == latest.checkpoint_id
    assert_exactly_once(tmp_path, events)


def test_damage_to_every_retained_checkpoint_refuses_to_start_until_asked_to_start_over(
        spark, tmp_path, capfd, caplog, monkeypatch):
    events = write_input(tmp_path / "in", seed=32, lines=200)
    run(tmp_path, max_epochs=4)                 # 160 of each file's 200 lines
    retained = storage(tmp_path).checkpoints.completed()
    assert [r.checkpoint_id for r in retained] == [2, 3, 4]
    # Each checkpoint's own file (its increment; the chains share their full snapshot).
    victims = [next(f for f in state_files(tmp_path, r) if f"checkpoint_id={r.checkpoint_id}" in str(f))
               for r in retained]
    for victim in victims:
        victim.unlink()
    versions = {t: DeltaTable(str(t)).version()
                for t in (tmp_path / "windows", tmp_path / "running", tmp_path / "warehouse" / JOB_DIR / "epoch_log")}

    import runtime.execution.spark

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark started")
    with monkeypatch.context() as m:
        m.setattr(runtime.execution.spark, "get_spark_session", no_spark)
        with pytest.raises(CheckpointException) as refused:
            run(tmp_path, restore_from="latest")
        message = str(refused.value)
        assert "\n" not in message
        assert message.startswith("Cannot restore job checkpointed counts: every retained checkpoint is damaged (")
        for record in retained:     # each names a missing file of its chain
            named = re.search(rf"checkpoint {record.checkpoint_id}: state file (\S+) is missing", message)
            assert named and named.group(1) in {str(v) for v in victims}
        assert (f"These sinks hold the job's committed output and would receive everything again: "
                f"{tmp_path / 'windows'}, {tmp_path / 'running'}.") in message
        assert "To start over deliberately, run with --restore-from none" in message
        # A run without a restore option resumes, so it refuses the same way; an INVALID
        # checkpoint is never restored, not even by its id.
        with pytest.raises(CheckpointException, match="every retained checkpoint is damaged"):
            run(tmp_path)
        with pytest.raises(CheckpointException,
                           match=f"checkpoint 3 is INVALID \\(state file {victims[1]} is missing\\)"):
            run(tmp_path, restore_from="3")
        # Airflow's check_restore_point step refuses with the same message.
        with pytest.raises(CheckpointException) as in_airflow:
            resolve_restore_point(compile_job(JOB, job_args(tmp_path)), RunRequest(), str(tmp_path / "warehouse"))
        assert str(in_airflow.value) == message
    # Nothing was written: sinks and epoch log as they were; the checkpoints are INVALID, their files kept.
    assert {t: DeltaTable(str(t)).version() for t in versions} == versions
    history = {r.checkpoint_id: r for r in storage(tmp_path).checkpoints.history()}
    assert [history[i].status for i in (1, 2, 3, 4)] == [DISCARDED, INVALID, INVALID, INVALID]
    assert all(f.exists() for r in retained for f in state_files(tmp_path, r) if f not in victims)
    capfd.readouterr()
    assert sluice(["checkpoints", JOB, "--warehouse", str(tmp_path / "warehouse"), "--", *job_args(tmp_path)]) == 0
    listed = capfd.readouterr().out.splitlines()
    for record, victim in zip(retained, victims):
        [line] = [line for line in listed if line.split()[0] == str(record.checkpoint_id)]
        assert line.split()[3] == INVALID and f"state file {victim} is missing" in line

    result = run(tmp_path, restore_from="none")
    assert result.restored_from is None
    assert (f"starting over (restore_from=none): nothing is restored; these sinks already hold this job's "
            f"committed output and will receive everything again: {tmp_path / 'windows'}, "
            f"{tmp_path / 'running'}") in caplog.text
    # Everything again: the running counts of the first four epochs (each file's first 160
    # lines) from the first run, then those of the whole input.
    first_run = events[:160] + events[200:360]
    assert table_rows(tmp_path / "running") == expected_running(first_run) + expected_running(events)


def test_a_kill_during_retention_is_finished_by_the_next_run(spark, tmp_path):
    """Checkpoint 4 (or 5: retention follows the records of a second's checkpoints at once)
    completes and retention marks the oldest DISCARDED; the kill comes before their partitions
    are deleted. The next run deletes them, and writes nothing twice."""
    events = write_input(tmp_path / "in", seed=33)
    assert kill_at(tmp_path, "during-retention", 3, False) == "killed"
    history = {r.checkpoint_id: r.status for r in storage(tmp_path).checkpoints.history()}
    completed = sorted(i for i, s in history.items() if s == COMPLETED)
    discarded = sorted(i for i, s in history.items() if s == DISCARDED)
    assert len(completed) == 3 and 4 in completed and discarded == list(range(1, completed[0])), history
    state = tmp_path / "warehouse" / JOB_DIR / "state"

    def live_partitions() -> dict:
        return {table: sorted(int(p["checkpoint_id"]) for p in DeltaTable(str(state / table)).partitions())
                for table in sorted(os.listdir(state))}
    assert all(1 in ids for ids in live_partitions().values())     # left behind by the kill
    run(tmp_path, restore_from="latest")
    store = storage(tmp_path)
    history = {r.checkpoint_id: r.status for r in store.checkpoints.history()}
    completed = sorted(i for i, s in history.items() if s == COMPLETED)
    read = referenced_partitions(store.checkpoints.completed())     # the retained chains' partitions
    gone = sorted({i for i in history if i < completed[0]} - read)
    assert len(completed) == 3 and completed[-1] >= 5 and all(history[i] == DISCARDED for i in history
                                                               if i < completed[0]), history
    assert 1 in gone and all(set(ids) <= set(completed) | read for ids in live_partitions().values())
    assert store.state.catch_up(store.checkpoints.completed()) == []      # every partition they read is there
    assert all(not (state / table / f"checkpoint_id={i}").exists() for table in os.listdir(state) for i in gone)
    assert_exactly_once(tmp_path, events)
