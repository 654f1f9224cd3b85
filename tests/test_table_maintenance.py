"""Table maintenance (issue 32): the sink policy, compaction and vacuum of sink tables with real
delta-rs, `sluice maintain`, and a stopped job's own tables (real Spark runs)."""
import collections
import os
import shutil
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from checkpoint_harness import (JOB, LINES_PER_EPOCH, expected_running, first_lines, job_args, table_rows,
                                write_input)
from runtime.checkpoint.storage import CheckpointStorage
from runtime.client import compile_job, run_job
from runtime.connectors.delta import commit_sink_files, committed_version
from runtime.datastream.connectors import DeltaSink, TableMaintenance
from runtime.jobmaster.maintenance import NO_POLICY, maintain_job, maintain_sink
from runtime.storage.delta_files import file_stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLUICE = os.path.join(os.path.dirname(sys.executable), "sluice")
APP = "sluice-job-sink"


def stage(table, i, rows=3, partition=None):
    """A sink writer's staged file (in the table's folder, listed by no version)."""
    data = pa.table({"x": list(range(i * 100, i * 100 + rows))})
    rel = (f"p={partition}/" if partition is not None else "") + f"part-{i:06d}.parquet"
    os.makedirs(os.path.dirname(os.path.join(table, rel)), exist_ok=True)
    pq.write_table(data, os.path.join(table, rel))
    return {"path": rel, "size": os.path.getsize(os.path.join(table, rel)), "num_records": rows,
            "partition_values": {"p": partition} if partition is not None else {}, "stats": file_stats(data),
            "schema": data.schema if partition is None else data.schema.append(pa.field("p", pa.string())),
            "partition_by": ["p"] if partition is not None else []}


def xs(table):
    return sorted(DeltaTable(str(table)).to_pyarrow_table(columns=["x"]).column("x").to_pylist())


def test_the_policy_is_checked_when_the_job_is_built():
    sink = DeltaSink.for_row_data("/tmp/t")
    policy = TableMaintenance(compact_min_files=10, target_file_size=None)
    kept = sink.with_maintenance(policy)
    assert kept.maintenance == policy and sink.maintenance is None and kept.table_path == sink.table_path
    assert sink.with_maintenance().maintenance == TableMaintenance(50, 128 * 1024 * 1024, 168)
    with pytest.raises(ValueError, match=r"compact_min_files=-1\): must be a whole number of at least 1, or None"):
        TableMaintenance(compact_min_files=-1)
    with pytest.raises(ValueError, match=r"vacuum_retention_hours='a week'\): must be a whole number \(hours\)"):
        TableMaintenance(vacuum_retention_hours="a week")
    with pytest.raises(ValueError, match="target_file_size=0"):
        TableMaintenance(target_file_size=0)
    with pytest.raises(TypeError, match=r"with_maintenance\(policy=\{'compact_min_files': 5\}\): the policy must "
                                        r"be a TableMaintenance"):
        sink.with_maintenance({"compact_min_files": 5})


def test_a_sink_is_compacted_while_a_job_appends_and_its_exactly_once_commits_still_read(tmp_path, monkeypatch):
    import runtime.jobmaster.maintenance as maintenance
    table = str(tmp_path / "sink")
    for checkpoint in range(1, 13):      # 12 checkpoints, a small file each
        commit_sink_files(table, [stage(table, checkpoint)], app_id=APP, version=checkpoint)
    rows = xs(table)
    crowded = maintenance._crowded_partitions

    def job_commits_meanwhile(dt, most):
        # The job commits checkpoint 13 after the maintenance read the table, before its
        # compaction commits: the compaction, committed at exactly the version it read, loses
        # the race and is planned again on the new version, which has the job's file too.
        commit_sink_files(table, [stage(table, 13)], app_id=APP, version=13)
        return crowded(dt, most)
    monkeypatch.setattr(maintenance, "_crowded_partitions", job_commits_meanwhile)
    report = maintain_sink(table, TableMaintenance(compact_min_files=5, vacuum_retention_hours=None))
    monkeypatch.undo()
    assert (report.files_before, report.files_after, report.files_deleted) == (12, 1, 0)
    assert "compacted 13 file(s) into 1" in report.done and "no vacuum" in report.done
    assert xs(table) == sorted(rows + list(range(1300, 1303)))
    again = maintain_sink(table, TableMaintenance(compact_min_files=5, vacuum_retention_hours=None))
    assert "no partition has more than 5 files" in again.done and again.version_after == again.version_before
    assert committed_version(table, APP) == 13
    assert commit_sink_files(table, [stage(table, 14)], app_id=APP, version=13) is False   # a replay: a no-op
    assert commit_sink_files(table, [stage(table, 15)], app_id=APP, version=14) is True
    assert committed_version(table, APP) == 14 and len(xs(table)) == 14 * 3


def test_two_maintenances_racing_never_duplicate_rows(tmp_path):
    from runtime.jobmaster.maintenance import compact_fenced
    table = str(tmp_path / "sink")
    for checkpoint in range(1, 9):
        commit_sink_files(table, [stage(table, checkpoint)], app_id=APP, version=checkpoint)
    rows = xs(table)
    late = DeltaTable(table)        # one maintenance planned on this version ...
    maintain_sink(table, TableMaintenance(compact_min_files=5, vacuum_retention_hours=None))    # ... another won
    assert len(DeltaTable(table).file_uris()) == 1
    metrics = compact_fenced(late, None, 128 * 1024 * 1024)     # planned again on the new version
    assert metrics["numFilesRemoved"] == 0 and xs(table) == rows
    assert committed_version(table, APP) == 8


def test_vacuum_removes_only_files_removed_longer_ago_than_the_retention_never_staged_ones(tmp_path):
    from deltalake.transaction import RemoveAction
    table = str(tmp_path / "sink")
    for checkpoint in range(1, 4):
        commit_sink_files(table, [stage(table, checkpoint)], app_id=APP, version=checkpoint)
    dt = DeltaTable(table)
    now = int(time.time() * 1000)
    old, recent = "part-000001.parquet", "part-000002.parquet"
    removes = [RemoveAction(old, True, now - 200 * 3600 * 1000, os.path.getsize(os.path.join(table, old)), {}),
               RemoveAction(recent, True, now - 3600 * 1000, os.path.getsize(os.path.join(table, recent)), {})]
    dt.create_write_transaction(removes, "append", pa.schema(dt.schema().to_arrow()))
    staged = stage(table, 4)["path"]            # a running job's file, not yet committed, written long ago
    long_ago = time.time() - 300 * 3600
    os.utime(os.path.join(table, staged), (long_ago, long_ago))
    report = maintain_sink(table, TableMaintenance(compact_min_files=None, vacuum_retention_hours=168))
    assert report.deleted == [f"{table}/{old}"] and report.files_deleted == 1
    assert report.bytes_freed == removes[0].size
    assert not os.path.exists(os.path.join(table, old))
    assert os.path.exists(os.path.join(table, recent)) and os.path.exists(os.path.join(table, staged))
    assert xs(table) == list(range(300, 303))
    # With a retention of 0 the recent one goes too; the staged file stays.
    report = maintain_sink(table, TableMaintenance(compact_min_files=None, vacuum_retention_hours=0))
    assert report.deleted == [f"{table}/{recent}"]
    assert os.path.exists(os.path.join(table, staged))
    # The job then commits its staged file.
    commit_sink_files(table, [{**stage(table, 4), "path": staged}], app_id=APP, version=4)
    assert xs(table) == list(range(300, 303)) + list(range(400, 403))


def test_only_partitions_with_more_files_than_the_policy_are_compacted(tmp_path):
    table = str(tmp_path / "sink")
    for checkpoint in range(1, 8):
        files = [stage(table, checkpoint, partition="busy")] + ([stage(table, 100 + checkpoint, partition="calm")]
                                                                 if checkpoint <= 2 else [])
        commit_sink_files(table, files, app_id=APP, version=checkpoint)
    rows = xs(table)
    report = maintain_sink(table, TableMaintenance(compact_min_files=3, vacuum_retention_hours=0))
    assert (report.files_before, report.files_after) == (9, 3)
    assert report.files_deleted == 7 and report.bytes_freed > 0
    assert xs(table) == rows
    calm = [f for f in DeltaTable(table).file_uris() if "p=calm" in f]
    assert sorted(os.path.basename(f) for f in calm) == ["part-000101.parquet", "part-000102.parquet"]


MAINTAINED_JOB = '''
import sys
from runtime.common import Types
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import DeltaSink, TableMaintenance

env = StreamExecutionEnvironment.get_execution_environment()
stream = env.from_collection([1, 2, 3], type_info=Types.INT())
stream.sink_to(DeltaSink.for_row_data(sys.argv[1]).with_maintenance(
    TableMaintenance(compact_min_files=4, vacuum_retention_hours=0))).name("kept")
stream.sink_to(DeltaSink.for_row_data(sys.argv[2])).name("plain")
env.execute("maintained")
'''


def test_sluice_maintain_says_what_it_removed(tmp_path):
    script = tmp_path / "maintained.py"
    script.write_text(MAINTAINED_JOB)
    kept, plain = str(tmp_path / "kept"), str(tmp_path / "plain")
    for checkpoint in range(1, 7):
        commit_sink_files(kept, [stage(kept, checkpoint)], app_id=APP, version=checkpoint)
    commit_sink_files(plain, [stage(plain, 1)], app_id=APP, version=1)
    rows = xs(kept)
    result = subprocess.run([SLUICE, "maintain", str(script), "--warehouse", str(tmp_path / "warehouse"),
                             "--", kept, plain], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Maintenance of job 'maintained'" in out
    line = next(l for l in out.splitlines() if l.startswith(kept + " "))
    assert "6 -> 1" in line and "compacted 6 file(s) into 1" in line and "vacuumed 6 file(s)" in line
    plain_line = next(l for l in out.splitlines() if l.startswith(plain + " "))
    assert NO_POLICY in plain_line
    assert "Own tables: none yet (the job has not run)" in out
    assert "Removed 6 data file(s)" in out
    assert xs(kept) == rows and len(os.listdir(kept)) == 2     # the compacted file and the log
    assert not os.path.exists(tmp_path / "warehouse")


def test_a_kill_inside_a_sinks_compaction_loses_nothing(tmp_path):
    """sluice maintain SIGKILLed after its compacted file is written, before its commit: the table
    is as it was, and the next maintenance compacts it."""
    import signal
    from waiting import wait_until
    script = tmp_path / "maintained.py"
    script.write_text(MAINTAINED_JOB)
    kept, plain = str(tmp_path / "kept"), str(tmp_path / "plain")
    for checkpoint in range(1, 7):
        commit_sink_files(kept, [stage(kept, checkpoint)], app_id=APP, version=checkpoint)
    rows, version = xs(kept), DeltaTable(kept).version()
    marker = tmp_path / "halted"
    command = [SLUICE, "maintain", str(script), "--warehouse", str(tmp_path / "warehouse"), "--", kept, plain]
    env = {**os.environ, "SLUICE_HALT_AT": "during-compaction:*", "SLUICE_HALT_MARKER": str(marker)}
    proc = subprocess.Popen(command, env=env, cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: marker.exists() or proc.poll() is not None, 60, "the compaction's fault point")
        assert marker.exists()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert xs(kept) == rows and DeltaTable(kept).version() == version
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "compacted 6 file(s) into 1" in result.stdout
    assert xs(kept) == rows and len(DeltaTable(kept).file_uris()) == 1


def test_a_job_held_by_a_run_keeps_its_own_tables_untouched(tmp_path):
    script = tmp_path / "maintained.py"
    script.write_text(MAINTAINED_JOB)
    kept, plain = str(tmp_path / "kept"), str(tmp_path / "plain")
    for checkpoint in range(1, 7):
        commit_sink_files(kept, [stage(kept, checkpoint)], app_id=APP, version=checkpoint)
    job = compile_job(str(script), [kept, plain])
    storage = CheckpointStorage(str(tmp_path / "warehouse" / "maintained"))
    storage.lease.claim("the-running-run", lease_timeout_s=600)      # this very process: alive
    for _ in range(3):
        storage.epoch_log.compact()         # more files: something to compact if it were stopped
        storage.epoch_log.log_start("the-running-run", 1)
    before = _files(tmp_path / "warehouse")
    report = maintain_job(job, str(tmp_path / "warehouse"))
    assert report.own_tables.startswith("skipped: run the-running-run (pid ")
    assert "holds the job and maintains them itself each epoch" in report.own_tables
    assert [t.role for t in report.tables] == ["sink", "sink"]      # the sinks are maintained still
    assert _files(tmp_path / "warehouse") == before
    assert len(DeltaTable(kept).file_uris()) == 1
    storage.lease.release("the-running-run", "FINISHED")


def _files(root):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)


def test_a_stopped_jobs_own_tables_are_compacted_and_every_retained_checkpoint_restores_exactly(spark, tmp_path):
    events = write_input(tmp_path / "in", seed=41)
    warehouse = str(tmp_path / "warehouse")
    run_job(JOB, job_args(tmp_path), warehouse=warehouse, master="local[2]", quiet=True,
            max_records_per_split=LINES_PER_EPOCH, max_epochs=3)
    storage = CheckpointStorage(os.path.join(warehouse, "checkpointed-counts"))
    retained = [r.checkpoint_id for r in storage.checkpoints.completed()]
    assert retained == [1, 2, 3]
    before = {t: len(DeltaTable(os.path.join(storage.job_dir, t)).file_uris())
              for t in ("checkpoints", "epoch_log", "executions")}
    assert all(n > 1 for n in before.values())
    report = maintain_job(compile_job(JOB, job_args(tmp_path)), warehouse)
    assert report.own_tables.startswith("maintained")
    by_table = {os.path.relpath(t.table, storage.job_dir): t for t in report.tables if t.role == "own"}
    assert {"checkpoints", "epoch_log", "executions", "state/running-count", "state/window-counts"} <= set(by_table)
    assert by_table["checkpoints"].files_after == 1 and by_table["executions"].files_after == 1
    assert by_table["epoch_log"].files_after == 2      # compacted, then the maintenance's own end
    assert all(by_table[t].files_deleted == before[t] for t in ("checkpoints", "executions"))
    assert all(t.done == NO_POLICY for t in report.tables if t.role == "sink")
    assert storage.lease.running_holder(600) is None
    assert [r.checkpoint_id for r in storage.checkpoints.completed()] == retained
    # A restore from each retained checkpoint, in a copy of the warehouse, with sinks of its own:
    # they get exactly the running counts after that checkpoint.
    for checkpoint in retained:
        copy = tmp_path / f"from-{checkpoint}"
        shutil.copytree(warehouse, copy / "warehouse")
        args = ["--input", str(tmp_path / "in"), "--windows", str(copy / "windows"), "--running", str(copy / "running")]
        result = run_job(JOB, args, warehouse=str(copy / "warehouse"), master="local[2]", quiet=True,
                         max_records_per_split=LINES_PER_EPOCH, restore_from=str(checkpoint))
        assert result.restored_from == checkpoint
        done = first_lines(tmp_path / "in", checkpoint * LINES_PER_EPOCH)
        assert table_rows(copy / "running") == expected_running(events) - expected_running(done)
    # The job itself goes on from its latest checkpoint, exactly once.
    run_job(JOB, job_args(tmp_path), warehouse=warehouse, master="local[2]", quiet=True,
            max_records_per_split=LINES_PER_EPOCH, restore_from="latest")
    assert table_rows(tmp_path / "running") == expected_running(events)



assert collections  # noqa: used by the harness's Counters
