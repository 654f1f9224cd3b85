"""Flink's FileSink (runtime.datastream.connectors.file_system) on real jobs: part file names and
contents, rolling by size, in-progress files hidden until their checkpoint, exactly once after a
kill, Parquet read back with pyarrow, bad input. The expected files are worked out in each test
from the input and the rolling rule (a part rolls before a record once it holds more than
``part_size`` bytes)."""
from __future__ import annotations

import collections
import json
import os
import re
import time

import pyarrow.parquet as pq
import pytest

from checkpoint_harness import ROOT, kill_at
from runtime.client import run_job
from runtime.common import Encoder, Row, SimpleStringSchema, Types
from runtime.connectors.file_sink import FileCommitter, FileSinkWriter
from runtime.connectors.base import CommitterContext
from runtime.datastream.connectors import BucketAssigner, FileSink, OutputFileConfig, RollingPolicy
from runtime.datastream.formats.parquet import ParquetBulkWriters
from runtime.execution.job_execution_result import JobExecutionResult
from runtime.task.sink_writer import WriterInitContext
from runtime_env import CLOCK_START, job_env

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
LINES_JOB = os.path.join(ROOT, "tests", "jobs", "file_sink_lines.py")


def visible(folder) -> list[str]:
    return sorted(f for f in os.listdir(folder) if not f.startswith("."))


def hidden(folder) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.startswith("."))


def chunks_by_size(lines: list[str], part_size: int) -> list[list[str]]:
    """Part files as Flink's default rolling policy cuts them: a new part before a record once
    the current one holds more than ``part_size`` bytes."""
    parts, size = [], None
    for line in lines:
        if size is None or size > part_size:
            parts.append([])
            size = 0
        parts[-1].append(line)
        size += len(line.encode()) + 1
    return parts


def row_sink(path, part_size=50, assigner=None):
    return (FileSink.for_row_format(str(path), Encoder.simple_string_encoder())
            .with_output_file_config(OutputFileConfig.builder().with_part_prefix("pre").with_part_suffix(".txt").build())
            .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=part_size))
            .with_bucket_assigner(assigner or BucketAssigner.base_path_bucket_assigner())
            .build())


def test_row_format_part_names_contents_and_size_rolling(spark, tmp_path):
    """60 lines of 9 bytes, one subtask, 10 records an epoch, a checkpoint every 2 epochs: parts
    roll on size across epochs (a part spans two epochs: its segments are joined at commit)."""
    lines = [f"line-{i:03d}" for i in range(60)]
    env = job_env(tmp_path, epoch__max_records_per_split=10)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(2)
    env.from_collection(lines, type_info=Types.STRING()).sink_to(row_sink(tmp_path / "out")).uid("files")
    result = env.execute("row files")
    assert [e.checkpoint_id is not None for e in result.epochs] == [False, True] * 3
    names = visible(tmp_path / "out")
    expected = chunks_by_size(lines, 50)
    assert len(expected) == 10 and len(names) == len(expected)
    uuids = {re.fullmatch(rf"pre-({UUID})-\d+\.txt", n).group(1) for n in names}
    assert len(uuids) == 1      # one bucket, one in-progress part at a time: one uuid, counters 0..9
    (uid,) = uuids
    for i, chunk in enumerate(expected):
        assert (tmp_path / "out" / f"pre-{uid}-{i}.txt").read_text() == "".join(f"{c}\n" for c in chunk)
    assert hidden(tmp_path / "out") == []       # every segment was committed or joined and removed


def test_simple_string_encoder_writes_javas_to_string_of_declared_records(spark, tmp_path):
    """Flink's SimpleStringEncoder writes the Java record's toString (PyFlink hands Java the record
    as its declared type): Tuple (hi,1,14), Row +I[a, 2.5] (Row.toString: ", "), a double 1.0E7;
    an undeclared record is Python's str (Java would write its pickled bytes as [B@...)."""
    def written(name, records, **declared):
        env = job_env(tmp_path)
        env.from_collection(records, **declared).sink_to(row_sink(tmp_path / name, part_size=1 << 20))
        env.execute(name)
        return "".join((tmp_path / name / f).read_text() for f in visible(tmp_path / name)).splitlines()

    tuples = [("hi", 1, 14), ("yo", 15, 20)]
    assert written("tuples", tuples, type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()])) == \
        ["(" + ",".join(map(str, t)) + ")" for t in tuples]
    rows = [Row("a", 2.5), Row("b", None)]
    assert written("rows", rows, type_info=Types.ROW([Types.STRING(), Types.DOUBLE()])) == ["+I[a, 2.5]", "+I[b, null]"]
    assert written("doubles", [1e7, 0.5], type_info=Types.DOUBLE()) == ["1.0E7", "0.5"]
    assert written("untyped", [("hi", 1)]) == [str(("hi", 1))]


def _listing(folder, out):
    """A map that writes what ``folder`` holds when it sees the first record of an epoch."""
    def record(line):
        if line in ("line-010", "line-020", "line-030"):
            names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
            with open(os.path.join(out, line + ".json"), "w") as f:
                json.dump(names, f)
        return line
    return record


def test_in_progress_files_stay_hidden_until_the_checkpoint_that_covers_them(spark, tmp_path):
    """Checkpoints after epochs 1, 3, 5: while epoch 1 runs nothing is visible (epoch 0's parts
    are in progress or rolled but not committed). The checkpoint after epoch 1 completes in the
    background while epoch 2 runs (as Flink's notifyCheckpointComplete comes when it comes): then
    at most the parts rolled by the end of epoch 1 are visible. Epoch 3 starts after it completed:
    exactly those parts are visible, and the parts rolled or written since are hidden segments."""
    lines = [f"line-{i:03d}" for i in range(40)]
    out = tmp_path / "out"
    env = job_env(tmp_path, epoch__max_records_per_split=10)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(2)
    (env.from_collection(lines, type_info=Types.STRING())
     .map(_listing(str(out), str(tmp_path)), output_type=Types.STRING())
     .sink_to(row_sink(out)))
    env.execute("hidden files")
    during = {e: json.loads((tmp_path / f"line-0{e}0.json").read_text()) for e in (1, 2, 3)}
    assert during[1] and all(re.fullmatch(rf"\.pre-{UUID}-\d\.txt\.inprogress\.{UUID}", n) for n in during[1])
    committed = list(range(len(chunks_by_size(lines[:20], 50)) - 1))  # [0-5], [6-11], [12-17]; [18, 19] in progress

    def shown_parts(names):
        return [int(n.rsplit("-", 1)[1][:-4]) for n in names if not n.startswith(".")]

    def hidden_names(names):
        return [n for n in names if n.startswith(".")]
    assert set(shown_parts(during[2])) <= set(committed)
    assert hidden_names(during[2]) and all(".inprogress." in n for n in hidden_names(during[2]))
    assert shown_parts(during[3]) == committed
    assert hidden_names(during[3]) and all(
        ".inprogress." in n and int(re.search(r"-(\d+)\.txt", n).group(1)) >= len(committed) for n in hidden_names(during[3]))
    assert sorted(line for n in visible(out) for line in (out / n).read_text().splitlines()) == lines


def test_parquet_bulk_files_roll_at_checkpoints_in_date_time_buckets(spark, tmp_path):
    """Bulk Parquet into the default date-time bucket (processing time, yyyy-MM-dd--HH): a part per
    checkpoint; a bucket with nothing in progress after a checkpoint starts anew (new uuid)."""
    row_type = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])
    records = [Row(word=f"w{i % 7}", count=i) for i in range(40)]
    env = job_env(tmp_path, epoch__max_records_per_split=10)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(2)
    (env.from_collection(records, type_info=row_type)
     .sink_to(FileSink.for_bulk_format(str(tmp_path / "out"), ParquetBulkWriters.for_row_type(row_type)).build()))
    env.execute("parquet files")
    bucket = time.strftime("%Y-%m-%d--%H", time.localtime(CLOCK_START / 1000))
    assert os.listdir(tmp_path / "out") == [bucket]
    folder = tmp_path / "out" / bucket
    names = visible(folder)
    assert len(names) == 2 and all(re.fullmatch(rf"part-{UUID}-0", n) for n in names)
    assert hidden(folder) == []
    tables = sorted((pq.read_table(folder / n) for n in names), key=lambda t: t.column("count")[0].as_py())
    assert [t.to_pylist() for t in tables] == [[{"word": r.word, "count": r.count} for r in records[:20]],
                                               [{"word": r.word, "count": r.count} for r in records[20:]]]
    assert tables[0].schema.field("count").type == "int64"


def test_a_record_the_encoder_cannot_encode_fails_naming_the_sink_and_the_record(spark, tmp_path):
    env = job_env(tmp_path)
    (env.from_collection(["plain", "café"], type_info=Types.STRING())
     .sink_to(FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder("ascii")).build()))
    with pytest.raises(Exception) as failure:
        env.execute("bad record")
    message = str(failure.value)
    assert "File Sink (1/1) failed" in message and "'café'" in message
    assert "cannot encode the record with Encoder.simple_string_encoder('ascii')" in message
    assert "give the sink another Encoder" in message
    assert [f for _, _, files in os.walk(tmp_path / "out") for f in files if not f.startswith(".")] == []


def test_an_unwritable_base_path_fails_naming_the_sink_and_the_path(spark, tmp_path):
    (tmp_path / "taken").write_text("a file, not a folder")
    env = job_env(tmp_path)
    env.from_collection(["a"], type_info=Types.STRING()).sink_to(row_sink(tmp_path / "taken" / "out"))
    with pytest.raises(Exception) as failure:
        env.execute("unwritable")
    message = str(failure.value)
    assert f"FileSink to {tmp_path / 'taken' / 'out'}" in message and "cannot write" in message
    assert "base path this job can create and write files in" in message


def test_parts_roll_on_inactivity_as_an_epoch_starts_and_commit_once():
    """Without Spark: a part left in progress by one epoch rolls when the next starts more than
    the inactivity interval later; committing the same part twice (a replayed commit) is a no-op."""
    import tempfile
    base = tempfile.mkdtemp()
    sink = (FileSink.for_row_format(base, Encoder.simple_string_encoder())
            .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=1000, inactivity_interval=5000))
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner()).build())
    first = FileSinkWriter(sink, WriterInitContext("Sink: File Sink", 0, 1, 0, 1000, barrier=True))
    first.write(["a", "b"])
    state = first.snapshot_state()
    assert first.finish() == [] and len(state["buckets"][""]["part"]["segments"]) == 1
    early = FileSinkWriter(sink, WriterInitContext("Sink: File Sink", 0, 1, 1, 5999, restored=((0, state),)))
    assert early.finish() == []     # 4999 ms without a record: still in progress
    late = FileSinkWriter(sink, WriterInitContext("Sink: File Sink", 0, 1, 1, 6000, restored=((0, state),)))
    parts = late.finish()
    assert [p["path"] for p in parts] == [f"part-{state['buckets']['']['uuid']}-0"]
    committer = FileCommitter(sink, CommitterContext("job", 1, "op", "app", JobExecutionResult("j", "job", "r", 0.0, [], None, None)))
    committer.commit([parts], 1)
    committer.commit([parts], 1)    # the segment is gone and the part is there: committed already
    assert visible(base) == [parts[0]["path"]] and hidden(base) == []
    assert open(os.path.join(base, parts[0]["path"])).read() == "a\nb\n"


def test_simple_string_schema_and_encoder():
    schema = SimpleStringSchema()
    assert schema.deserialize(schema.serialize("grüße")) == "grüße"
    assert Encoder.simple_string_encoder("latin-1").encode("é") == b"\xe9\n"
    with pytest.raises(ValueError, match="unknown charset"):
        Encoder.simple_string_encoder("no-such-charset")
    with pytest.raises(ValueError, match="on_checkpoint_rolling_policy"):
        FileSink.for_bulk_format("out", ParquetBulkWriters.for_row_type(
            Types.ROW_NAMED(["a"], [Types.INT()]))).with_rolling_policy(RollingPolicy.default_rolling_policy())


@pytest.mark.parametrize("point,epoch", [("after-sink-commit", 1), ("mid-epoch", 2)])
def test_a_kill_and_restart_writes_every_line_exactly_once(spark, tmp_path, point, epoch):
    """Two subtasks, a checkpoint every epoch, parts of 100 bytes spanning epochs; killed after the
    sink committed checkpoint 2's parts (before its record), or in the middle of epoch 2, then run
    again: the replay makes the same parts visible once, nothing is lost."""
    lines = [f"event number {i:04d} of the input" for i in range(120)]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part-0.txt").write_text("".join(f"{line}\n" for line in lines))
    args = ["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out")]
    assert kill_at(tmp_path, point, epoch, False, job=LINES_JOB, args=args) == "killed"
    run_job(LINES_JOB, args, warehouse=str(tmp_path / "warehouse"), master="local[2]", quiet=True,
            max_records_per_split=40, restore_from="latest")
    out = tmp_path / "out"
    written = collections.Counter(line for n in visible(out) for line in (out / n).read_text().splitlines())
    assert written == collections.Counter(line.upper() for line in lines)
    for name in visible(out):       # each part rolled as the policy says: by size, or as the input ended
        content = (out / name).read_text().splitlines()
        assert sum(len(line) + 1 for line in content[:-1]) <= 100
