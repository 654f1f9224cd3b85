"""A job folder of the warehouse is one job's (runtime/storage/job_folders.py): a second job script
that gives the same name to env.execute() is refused when it compiles or runs, naming both
scripts and the fix; a source or sink whose path overlaps a job folder is refused too. Both
before Spark starts or anything is written."""
from __future__ import annotations

import os

import pytest

from runtime.cli import main as sluice
from runtime.jobmaster import load_job_spec
from runtime.jobmaster.steps import RunRequest, compile_step
from runtime.storage.job_folders import JobFolderException, own_folder, overlap
from runtime.storage.layout import job_dir
from seed import ROOT

JOB = '''
import sys
from runtime.common import Row, Types, WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import DeltaSource


def main():
    env = StreamExecutionEnvironment.get_execution_environment()
    source, sink = sys.argv[1], sys.argv[2]
    if source == "-":
        stream = env.from_collection([1, 2, 3], type_info=Types.INT())
    else:
        stream = env.from_source(DeltaSource.for_bounded_row_data(source), WatermarkStrategy.no_watermarks(), "rows")
    stream.map(lambda x: Row(n=1), output_type=Types.ROW_NAMED(["n"], [Types.INT()])).sink_to(sink)
    env.execute({name!r})


if __name__ == "__main__":
    main()
'''


def script(folder, file_name: str, job_name: str = "Counts") -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name
    path.write_text(JOB.format(name=job_name))
    return str(path)


def compile_(path: str, warehouse, *args: str) -> dict:
    spec = load_job_spec(path)
    spec = type(spec)(spec.name, spec.path, type(spec.deployment)(args=args), spec.doc)
    return compile_step(spec, RunRequest(), str(warehouse), "manual__1")


def run(path: str, warehouse, capsys, *args: str) -> str:
    """`sluice run` of the script: its one-line refusal (the run never reaches Spark)."""
    assert sluice(["run", path, "--warehouse", str(warehouse), "--", *args]) == 1
    return capsys.readouterr().err


def test_paths_and_uris_overlap_when_one_is_or_holds_the_other(tmp_path):
    assert overlap("s3://b/w/job", "s3://b/w/job/") and overlap("s3://b/w", "s3://b/w/job/state")
    assert overlap("s3://b/w/job/state", "s3://b/w") and not overlap("s3://b/w/job", "s3://b/w/jobs")
    assert not overlap("s3://b/w/job", "gs://b/w/job") and not overlap("s3://b/w/job", "s3://c/w/job")
    assert overlap(str(tmp_path / "w"), f"file://{tmp_path}/w/job")
    assert not overlap(str(tmp_path / "a"), str(tmp_path / "ab"))
    warehouse, own = "s3://b/w", "s3://b/w/counts"
    assert own_folder("s3://b/w/counts", warehouse, own) == own            # the job's own folder
    assert own_folder("s3://b/w/counts/out", warehouse, own) == own        # inside it
    assert own_folder("s3://b/w", warehouse, own) == own                   # the warehouse holds it
    assert own_folder("s3://b/w/plans/x", warehouse, own) == "s3://b/w/plans"
    assert own_folder("s3://b/other/t", warehouse, own) is None            # outside the warehouse
    # Another folder of the warehouse is a job's when it holds a job's checkpoints.
    (tmp_path / "w" / "other-job" / "checkpoints").mkdir(parents=True)
    local = str(tmp_path / "w")
    assert own_folder(f"{local}/other-job/table", local, f"{local}/counts") == f"{local}/other-job"
    assert own_folder(f"{local}/tables/counts", local, f"{local}/counts") is None


def test_a_second_script_with_the_same_job_name_is_refused_naming_both_and_the_fix(tmp_path, capsys):
    warehouse, out = tmp_path / "warehouse", str(tmp_path / "out")
    first, second = script(tmp_path / "a", "counts.py"), script(tmp_path / "b", "other_counts.py")
    assert compile_(first, warehouse, "-", out)["job_name"] == "Counts"
    compile_(first, warehouse, "-", out)        # the same script again: its own folder
    for refuse in (lambda: compile_(second, warehouse, "-", out),):
        with pytest.raises(JobFolderException) as refused:
            refuse()
        message = str(refused.value)
        assert first in message and second in message and "env.execute(...)" in message
        assert "another warehouse" in message and job_dir(str(warehouse), "Counts") in message
    # `sluice run` refuses it the same way, in one line, before Spark starts.
    said = run(second, warehouse, capsys, "-", out)
    assert first in said and second in said and "env.execute(...)" in said
    # Another name, or another warehouse, and it compiles.
    assert compile_(second, tmp_path / "other-warehouse", "-", out)["job_name"] == "Counts"
    renamed = script(tmp_path / "b", "renamed.py", job_name="Other Counts")
    assert compile_(renamed, warehouse, "-", out)["job_name"] == "Other Counts"


def test_a_script_run_with_python_is_refused_too(tmp_path):
    """`python job.py` (env.execute() in the script's own process, no client) is the script's run as
    much as `sluice run job.py`: refused before Spark starts, naming both scripts."""
    import subprocess
    import sys
    warehouse, out = tmp_path / "warehouse", str(tmp_path / "out")
    first, second = script(tmp_path / "a", "counts.py"), script(tmp_path / "b", "other_counts.py")
    compile_(first, warehouse, "-", out)
    done = subprocess.run([sys.executable, second, "-", out], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT, "SLUICE_WAREHOUSE": str(warehouse)})
    assert done.returncode != 0
    assert "JobFolderException" in done.stderr and first in done.stderr and second in done.stderr
    assert "Spark session up" not in done.stderr


def test_a_script_that_moved_takes_its_job_folder_over(tmp_path):
    warehouse, out = tmp_path / "warehouse", str(tmp_path / "out")
    old = script(tmp_path / "old", "counts.py")
    compile_(old, warehouse, "-", out)
    os.rename(old, tmp_path / "old" / "gone.py")
    compile_(script(tmp_path / "new", "counts.py"), warehouse, "-", out)


def test_a_source_or_sink_in_a_job_folder_is_refused(tmp_path, capsys):
    warehouse = tmp_path / "warehouse"
    path = script(tmp_path / "jobs", "counts.py")
    own = job_dir(str(warehouse), "Counts")
    (warehouse / "other-job" / "checkpoints").mkdir(parents=True)
    for source, sink, what in [("-", own, "writes"), ("-", f"{own}/results", "writes"), ("-", str(warehouse), "writes"),
                               (str(warehouse / "other-job" / "t"), str(tmp_path / "out"), "reads")]:
        with pytest.raises(JobFolderException, match="a job folder of the warehouse") as refused:
            compile_(path, warehouse, source, sink)
        assert f"{what} {source if what == 'reads' else sink}, which overlaps" in str(refused.value)
        assert "VACUUM" in str(refused.value) and f"{warehouse}/tables/" in str(refused.value)
        assert "overlaps" in run(path, warehouse, capsys, source, sink)
    assert not os.path.exists(own)      # refused before anything was written
    assert compile_(path, warehouse, "-", str(warehouse / "tables" / "counts"))["job_name"] == "Counts"


def test_the_shipped_kafka_job_writes_its_table_outside_its_job_folder(tmp_path):
    from runtime.jobmaster import find_job
    from runtime.jobmaster.deployment import resolve_args
    spec = find_job(os.path.join(ROOT, "include", "jobs", "kafka_windows.py"))
    compiled = compile_step(spec, RunRequest(), str(tmp_path / "warehouse"), "scheduled__1")
    table = resolve_args(spec.args, str(tmp_path / "warehouse"))[spec.args.index("--table") + 1]
    assert not overlap(table, compiled["job_dir"])
