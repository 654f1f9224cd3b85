"""The warehouse on object storage (issue 16), against a real S3 endpoint on loopback: moto's
server in a subprocess (tests/s3_server.py), reached by pyarrow, delta-rs and boto3 over HTTP.
Jobs run as a user runs them (``sluice run``, a process of its own with its own Spark), with
only the standard AWS variables saying where S3 is; nothing is mocked in any process. The DAG's
run, the kill test's last run and the WordCount's resuming run take the test run's session,
started before S3 was known.
"""
import collections
import contextlib
import json
import os
import re
import subprocess
import sys
import time

import pytest

from checkpoint_harness import (
    JOB, LINES_PER_EPOCH, expected_running, expected_windows, kill_at, table_rows, write_input)
from jvm_options import share_spark_classes
from runtime.client import run_job
from runtime.common.faults import POINTS
from s3_server import moto_server
from seed import ROOT, WORDCOUNT

SLUICE = os.path.join(os.path.dirname(sys.executable), "sluice")
BUCKET = "sluice-lake"
JOB_DIR = "socket-window-wordcount"
TEXTS = ["to be or not to be that is the question",
         "the slings and arrows of outrageous fortune or to take arms",
         "against a sea of troubles and by opposing end them to die to sleep"]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """The server, one bucket, and the AWS variables set for this process and every run it starts."""
    share_spark_classes()       # the module's sluice runs start local drivers
    log = str(tmp_path_factory.mktemp("moto") / "requests.log")
    with moto_server(log) as server, pytest.MonkeyPatch.context() as mp:
        for key, value in server.env().items():
            mp.setenv(key, value)
        server.client().create_bucket(Bucket=BUCKET)
        yield server


def sluice(*args, env=None, timeout=600):
    return subprocess.run([SLUICE, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})})


def put_text(s3, key: str, text: str) -> None:
    s3.client().put_object(Bucket=BUCKET, Key=key, Body=text.encode())


def keys(s3, prefix: str) -> list[str]:
    pages = s3.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", ())]


def rows(uri: str) -> collections.Counter:
    from deltalake import DeltaTable
    return collections.Counter((r["word"], r["count"]) for r in DeltaTable(uri).to_pyarrow_table().to_pylist())


def counts(*texts) -> collections.Counter:
    """The rows one bounded run writes for these texts: each word's count (one epoch, one window)."""
    return collections.Counter(collections.Counter(w for t in texts for w in t.split()).items())


def test_a_file_copied_into_the_store_leaves_no_folder_on_the_local_disk(s3, tmp_path, monkeypatch):
    """A savepoint copies its state files into the store: none of the target's path may be made as a
    local folder under the working directory (a store's path without its scheme once was)."""
    from runtime.storage.filesystems import copy_file
    source = tmp_path / "part-0.parquet"
    source.write_bytes(b"state")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    copy_file(str(source), f"s3://{BUCKET}/copied/state/checkpoint_id=2/part-0.parquet")
    assert s3.client().get_object(Bucket=BUCKET, Key="copied/state/checkpoint_id=2/part-0.parquet")["Body"].read() \
        == b"state"
    assert os.listdir(work) == []
    copy_file(str(source), str(tmp_path / "local" / "checkpoint_id=2" / "part-0.parquet"))
    assert (tmp_path / "local" / "checkpoint_id=2" / "part-0.parquet").read_bytes() == b"state"


@pytest.mark.slow
def test_wordcount_with_its_input_sink_and_warehouse_in_s3(spark, s3):
    """Exactly once, listed, restored from an older checkpoint at another parallelism, and from
    a savepoint in S3."""
    prefix = "wordcount"
    warehouse, data, out = (f"s3://{BUCKET}/{prefix}/warehouse", f"s3://{BUCKET}/{prefix}/in",
                            f"s3://{BUCKET}/{prefix}/results")
    job = ["--", "--input", data, "--output", out]
    put_text(s3, f"{prefix}/in/part-0.txt", TEXTS[0] + "\n")
    first = sluice("run", WORDCOUNT, "--warehouse", warehouse, "--master", "local[2]", "-p", "3", *job)
    assert first.returncode == 0, first.stderr[-3000:]
    assert rows(out) == counts(TEXTS[0])

    # A second run (on the test run's session: every command below is a process of its own) reads
    # only the new file, from checkpoint 1 on.
    put_text(s3, f"{prefix}/in/part-1.txt", TEXTS[1] + "\n")
    second = run_job(WORDCOUNT, job[1:], parallelism=3, warehouse=warehouse, master="local[2]", quiet=True)
    assert second.restored_from == 1
    assert rows(out) == counts(TEXTS[0]) + counts(TEXTS[1])
    listed = sluice("checkpoints", WORDCOUNT, "--warehouse", warehouse)
    assert listed.returncode == 0, listed.stderr
    completed = [line.split() for line in listed.stdout.splitlines() if "COMPLETED" in line]
    assert [(c[0], c[2]) for c in completed] == [("1", "CHECKPOINT"), ("2", "CHECKPOINT")], listed.stdout

    # Back to checkpoint 1, with the windows at parallelism 2: the epoch after it is replayed from
    # its logged plan, and its sink commit, already in the table, is not written again.
    again = sluice("restore", WORDCOUNT, "--checkpoint", "1", "--warehouse", warehouse, "--master", "local[2]",
                   "-p", "2", *job)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "restored checkpoint 1 (epoch 0), replaying 1 logged epoch(s)" in again.stderr, again.stderr[-3000:]
    assert rows(out) == counts(TEXTS[0]) + counts(TEXTS[1])

    # A savepoint in S3 of the latest checkpoint, and a restore from it reading only what is new.
    target = f"s3://{BUCKET}/{prefix}/savepoints/before-part-2"
    saved = sluice("savepoint", WORDCOUNT, "--warehouse", warehouse, "--target", target)
    assert saved.returncode == 0, saved.stderr
    assert f"{prefix}/savepoints/before-part-2/_metadata.json" in keys(s3, f"{prefix}/savepoints/")
    put_text(s3, f"{prefix}/in/part-2.txt", TEXTS[2] + "\n")
    restored = sluice("restore", WORDCOUNT, "--savepoint", target, "--warehouse", warehouse,
                      "--master", "local[2]", "-p", "3", *job)
    assert restored.returncode == 0, restored.stderr[-3000:]
    assert f"restored savepoint {target}" in restored.stderr, restored.stderr[-3000:]
    assert rows(out) == counts(TEXTS[0]) + counts(TEXTS[1]) + counts(TEXTS[2])
    history = sluice("checkpoints", WORDCOUNT, "--warehouse", warehouse).stdout
    assert "SAVEPOINT" in history and target in history, history
    # The job's tables and state are in the bucket.
    stored = keys(s3, f"{prefix}/warehouse/{JOB_DIR}/")
    for table in ("checkpoints", "epoch_log", "executions", "state"):
        assert any(k.startswith(f"{prefix}/warehouse/{JOB_DIR}/{table}/") for k in stored), table


def test_two_writers_of_one_table_never_both_commit_a_version(s3, tmp_path):
    """delta-rs 1.x commits a log entry with S3's conditional put (If-None-Match: *), no lock:
    with it turned off it cannot commit at all, and writers racing for the same versions
    (no retries) never both succeed: every success is one version, no row is lost."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    uri = f"s3://{BUCKET}/race/table"
    write_deltalake(uri, pa.table({"writer": [-1], "round": [-1]}))
    with pytest.raises(Exception, match="conditional put is disabled"):
        write_deltalake(uri, pa.table({"writer": [-2], "round": [-2]}), mode="append",
                        storage_options={"conditional_put": "disabled"})
    # The server refuses to overwrite a log entry that exists, as S3 does.
    from botocore.exceptions import ClientError
    with pytest.raises(ClientError, match="PreconditionFailed|412"):
        s3.client().put_object(Bucket=BUCKET, Key="race/table/_delta_log/00000000000000000000.json",
                               Body=b"{}", IfNoneMatch="*")
    writer = tmp_path / "writer.py"
    writer.write_text(RACE_WRITER)
    procs = [subprocess.Popen([sys.executable, str(writer), uri, str(i), "6"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    for p in procs:     # each writer says when it has loaded its libraries; then all get the same instants
        assert p.stdout.readline() == "ready\n", p.stderr.read()[-2000:]
    start = time.time() + 0.5
    for p in procs:
        p.stdin.write(f"{start}\n")
        p.stdin.flush()
    outcomes = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        outcomes.extend(json.loads(out))
    ok = [o for o in outcomes if o[2] == "ok"]
    refused = [o for o in outcomes if o[2] != "ok"]
    assert refused and all(o[2] == "CommitFailedError" for o in refused), outcomes
    table = DeltaTable(uri)
    assert table.version() == len(ok), outcomes          # one version per successful commit
    written = sorted((r["writer"], r["round"]) for r in table.to_pyarrow_table().to_pylist() if r["writer"] >= 0)
    assert written == sorted((o[3], o[0]) for o in ok)  # and each of their rows is there, once


RACE_WRITER = """
import json, sys, time
import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake
uri, me, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
DeltaTable(uri)
print("ready", flush=True)
start = float(sys.stdin.readline())
out = []
for r in range(rounds):
    table = DeltaTable(uri)
    while time.time() < start + r:
        time.sleep(0.001)
    try:
        write_deltalake(table, pa.table({"writer": [me], "round": [r]}), mode="append",
                        commit_properties=CommitProperties(max_commit_retries=0))
        out.append([r, table.version(), "ok", me])
    except Exception as e:
        out.append([r, table.version(), type(e).__name__, me])
print(json.dumps(out))
"""


def test_a_store_error_is_read_by_its_code_not_by_digits_in_a_key_or_request_id(monkeypatch):
    """Error texts in the forms Arrow's S3 filesystem and delta-rs give; the first as a CI run got
    it from moto: a missing bucket's error named a preflight key whose random hex held "403", and
    was read as refused credentials."""
    from runtime.storage.filesystems import diagnose
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:55855")
    missing = ("When initiating multiple part upload for key 'warehouse/.sluice-preflight-9694c89d6e6544faa32a"
               "49880a740390' in bucket 'no-such-bucket': AWS Error NO_SUCH_BUCKET during CreateMultipartUpload "
               "operation: The specified bucket does not exist (Request ID: Q7OBGoJODbY5RcmvSiwimp82JWEzfsyv39L)")
    assert diagnose("s3", "s3://no-such-bucket/warehouse", "sluice.warehouse", missing) == (
        "the bucket 'no-such-bucket' does not exist at http://127.0.0.1:55855: create it, or fix the bucket "
        "in sluice.warehouse")
    refused = ("When getting information for key 'warehouse' in bucket 'b': AWS Error ACCESS_DENIED during "
               "HeadObject operation: No response body. (HTTP status 403)")
    for text in (refused, "Generic S3 error: response error, status: 403 Forbidden"):
        assert diagnose("s3", "s3://b/warehouse", "sluice.warehouse", text).startswith(
            "the credentials were refused by http://127.0.0.1:55855: set AWS_ACCESS_KEY_ID")


def test_file_uri_makes_a_local_path_an_absolute_file_uri_and_leaves_a_uri_as_it_is(tmp_path, monkeypatch):
    """Spark's readers and Airflow's assets take URIs: a path, relative too, becomes file:///abs;
    a location that is a URI already (file:// too) is never prefixed again."""
    from runtime.jobmaster.assets import table_uri
    from runtime.storage.filesystems import file_uri
    monkeypatch.chdir(tmp_path)
    assert file_uri(str(tmp_path / "t")) == f"file://{tmp_path}/t"
    assert file_uri("state/part-0.parquet") == f"file://{tmp_path}/state/part-0.parquet"
    for uri in (f"file://{tmp_path}/t", "s3://bucket/warehouse/t", "gs://b/t/"):
        assert file_uri(uri) == uri
    # An asset's URI: the same for a table named by path, relative path or file:// URI.
    for table in ("t", str(tmp_path / "t"), f"file://{tmp_path}/t/"):
        assert table_uri(table) == f"file://{tmp_path}/t"
    assert table_uri("s3://bucket/t/") == "s3://bucket/t"


@pytest.mark.parametrize("problem", ["no bucket", "wrong credentials", "unreachable endpoint", "no input bucket",
                                     "no output bucket"])
def test_a_store_that_cannot_be_reached_fails_before_the_first_epoch(s3, tmp_path, problem):
    """A clear error naming the URI and the setting to fix, before anything is written."""
    warehouse, source, output = f"s3://{BUCKET}/bad/warehouse", str(tmp_path), str(tmp_path / "results")
    env = {}
    with contextlib.ExitStack() as stack:
        if problem == "no bucket":
            warehouse = "s3://no-such-bucket/warehouse"
            expected = [f"{warehouse} is not writable: the bucket 'no-such-bucket' does not exist", "sluice.warehouse"]
        elif problem == "wrong credentials":     # a second server that checks keys, and knows none
            strict = stack.enter_context(moto_server(str(tmp_path / "strict.log"), INITIAL_NO_AUTH_ACTION_COUNT="0"))
            env = {"AWS_ENDPOINT_URL": strict.endpoint}
            expected = [f"{warehouse} is not writable: the credentials were refused",
                        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"]
        elif problem == "unreachable endpoint":
            env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
            expected = [f"{warehouse} is not writable: the endpoint http://127.0.0.1:9 cannot be reached",
                        "fix AWS_ENDPOINT_URL"]
        elif problem == "no input bucket":
            source = "s3://no-such-input/in"
            expected = [f"{source} cannot be read: the bucket 'no-such-input' does not exist",
                        "the file source's path"]
        else:   # the WordCount's Delta sink (its default name) in a bucket that is not there
            output = "s3://no-such-output/results"
            expected = [f"the sink 'Sink: Delta Sink' cannot write its output: {output} is not writable: "
                        "the bucket 'no-such-output' does not exist", "the Delta sink's table path"]
        result = sluice("run", WORDCOUNT, "--warehouse", warehouse, "--master", "local[1]", "--",
                        "--input", source, "--output", output, env=env, timeout=300)
    assert result.returncode == 1, result.stdout[-2000:]
    assert all(e in result.stderr for e in expected), result.stderr
    assert "Traceback" not in result.stderr and "epoch 0" not in result.stderr
    assert keys(s3, "bad/warehouse") == [] and not (tmp_path / "results").exists()


def test_a_row_format_file_sink_into_s3_finishes_its_parts_at_each_checkpoint(s3):
    """tests/jobs/file_sink_lines.py (two subtasks, a checkpoint every epoch, parts rolled past 100
    bytes) from an input folder in S3 to a FileSink in S3, several epochs: the finished parts,
    listed with pyarrow's S3 file system, are each subtask's file upper-cased and cut as the
    rolling policy cuts it; no in-progress file is left."""
    import pyarrow.fs as pafs
    from test_file_sink import LINES_JOB, chunks_by_size
    prefix = "file-sink"
    words = " ".join(TEXTS).split()
    files = [[f"{k}:{i:02d} {words[(i + k * 7) % len(words)]}" for i in range(30)] for k in range(2)]
    for k, lines in enumerate(files):
        put_text(s3, f"{prefix}/in/part-{k}.txt", "".join(f"{line}\n" for line in lines))
    warehouse = ["--warehouse", f"s3://{BUCKET}/{prefix}/warehouse"]
    job = ["--", "--input", f"s3://{BUCKET}/{prefix}/in", "--output", f"s3://{BUCKET}/{prefix}/out"]
    result = sluice("run", LINES_JOB, *warehouse, "--master", "local[2]", "-p", "2", "--max-records-per-split", "8",
                    *job)
    assert result.returncode == 0, result.stderr[-3000:]
    # 30 lines a split, 8 an epoch: 4 epochs or more, each with its checkpoint (the last ones retained)
    listed = sluice("checkpoints", LINES_JOB, *warehouse, *job)
    completed = [tuple(map(int, line.split()[:2])) for line in listed.stdout.splitlines() if "COMPLETED" in line]
    assert completed and all(c == e + 1 for c, e in completed) and completed[-1][0] >= 4, listed.stdout

    env = s3.env()
    fs = pafs.S3FileSystem(access_key=env["AWS_ACCESS_KEY_ID"], secret_key=env["AWS_SECRET_ACCESS_KEY"],
                           region=env["AWS_REGION"], endpoint_override=s3.endpoint.split("://")[1], scheme="http")
    found = fs.get_file_info(pafs.FileSelector(f"{BUCKET}/{prefix}/out", recursive=True))
    names = sorted(f.base_name for f in found if f.type == pafs.FileType.File)
    assert [n for n in names if n.startswith(".") or "inprogress" in n] == [], names
    parts = collections.defaultdict(dict)        # the writer's uuid -> {counter: lines}
    for name in names:
        uid, counter = re.fullmatch(r"part-([0-9a-f-]{36})-(\d+)\.txt", name).groups()
        with fs.open_input_stream(f"{BUCKET}/{prefix}/out/{name}") as f:
            parts[uid][int(counter)] = f.read().decode().splitlines()
    written = sorted([by_counter[c] for c in sorted(by_counter)] for by_counter in parts.values())
    assert all(sorted(by_counter) == list(range(len(by_counter))) for by_counter in parts.values()), names
    assert written == sorted(chunks_by_size([line.upper() for line in lines], 100) for lines in files)


@pytest.mark.slow
@pytest.mark.cluster
def test_wordcount_on_a_standalone_cluster_that_shares_nothing_but_s3(s3, tmp_path):
    """A master and two workers started without any AWS variable, each worker with its own work
    and local dirs: the executors get the store's settings with their tasks; the input, the sink
    and the warehouse are in S3, and none of their files lands on the workers' disks."""
    from test_cluster import spark_standalone
    text = ["the quick brown fox jumps over the lazy dog"] * 30 + ["the end"] * 3
    put_text(s3, "cluster/in/a.txt", "\n".join(text[:15]) + "\n")
    put_text(s3, "cluster/in/b.txt", "\n".join(text[15:]) + "\n")
    base = f"s3://{BUCKET}/cluster"
    cluster_dirs = tmp_path / "spark"
    cluster_dirs.mkdir()
    no_store = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with spark_standalone(cluster_dirs, no_store) as master:
        result = sluice("run", WORDCOUNT, "--master", master, "-p", "2", "--warehouse", f"{base}/warehouse",
                        "--", "--input", f"{base}/in", "--output", f"{base}/results")
    assert result.returncode == 0, result.stderr[-3000:]
    assert rows(f"{base}/results") == counts(*text)
    assert any(k.startswith(f"cluster/warehouse/{JOB_DIR}/state/") for k in keys(s3, "cluster/warehouse/"))
    assert not [p for p in cluster_dirs.rglob("*.parquet")]     # state and sink files went to S3


# The kill points where a warehouse in S3 takes a path of its own, each killed in its own run:
# state files staged in the bucket and never committed; a sink's commit in S3 whose checkpoint was
# never recorded (the replay's commit check reads the table's log in S3); discarded checkpoints'
# objects half deleted (the next run finishes the deletion in S3). The other three (mid-epoch,
# after-state-commit, during-checkpoint-record) fail the same way wherever the files are: each
# kill point, in every order, on local disk with both state backends, is
# tests/test_checkpoint_faults.py's.
S3_KILLS = (("after-state-files", 0), ("after-sink-commit", 1), ("during-retention", 3))


@pytest.mark.slow
@pytest.mark.faults
def test_kills_at_the_points_that_write_to_s3_restore_exactly_once(spark, s3, tmp_path):
    """The kill machinery of tests/test_checkpoint_faults.py with the job's input, sinks and
    warehouse in S3: each run is killed at its point, the next restores; the last run (on this
    test run's session) finishes the input."""
    assert {point for point, _ in S3_KILLS} <= set(POINTS)
    local = tmp_path / "in"
    events = write_input(local, seed=7)
    for name in os.listdir(local):
        s3.client().upload_file(str(local / name), BUCKET, f"kills/in/{name}")
    base = f"s3://{BUCKET}/kills"
    args = ["--input", f"{base}/in", "--windows", f"{base}/windows", "--running", f"{base}/running"]
    outcomes = [f"{point}@{epoch}: " + kill_at(tmp_path, point, epoch, i > 0, "--warehouse", f"{base}/warehouse",
                                                 args=args)
                for i, (point, epoch) in enumerate(S3_KILLS)]
    assert outcomes == [f"{point}@{epoch}: killed" for point, epoch in S3_KILLS]
    run_job(JOB, args, warehouse=f"{base}/warehouse", master="local[2]", quiet=True,
            max_records_per_split=LINES_PER_EPOCH, restore_from="latest")
    assert table_rows(f"{base}/windows") == expected_windows(events), outcomes
    assert table_rows(f"{base}/running") == expected_running(events), outcomes
    # What the retention killed midway discarded, a later run deleted from the bucket.
    from runtime.checkpoint.checkpoint_record import DISCARDED
    from runtime.checkpoint.storage import CheckpointStorage
    history = CheckpointStorage(f"{base}/warehouse/checkpointed-counts").checkpoints.history()
    discarded = {r.checkpoint_id for r in history if r.status == DISCARDED}
    state = keys(s3, "kills/warehouse/checkpointed-counts/state/")
    assert discarded and state, [(r.checkpoint_id, r.status) for r in history]
    assert [k for k in state if any(f"/checkpoint_id={i}/" in k for i in discarded)] == []


@pytest.mark.slow
@pytest.mark.airflow
def test_the_wordcount_dag_with_its_warehouse_in_s3_and_credentials_from_aws_default(spark, s3, airflow_db, monkeypatch):
    """dag.test() of the seed WordCount with ``sluice_warehouse`` an S3 URI; the worker's
    environment names no endpoint and no keys: Airflow's ``aws_default`` connection has them.
    The run takes the test run's Spark session, started before any of it was known."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models import Connection, Pool, Variable
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from runtime.jobmaster.deployment import JOBS_FOLDER
    warehouse = f"s3://{BUCKET}/airflow/warehouse"
    monkeypatch.setenv("SLUICE_JOBS_FOLDER", JOBS_FOLDER)
    saved = dict(os.environ)
    for key in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ALLOW_HTTP"):
        os.environ.pop(key)
    Variable.set("sluice_warehouse", warehouse)
    Pool.create_or_update_pool("spark_slots", 4, "Spark slots (tests)", include_deferred=False)
    with create_session() as session:
        session.query(Connection).filter(Connection.conn_id.in_(["spark_default", "aws_default"])).delete()
        # In this process (dag.test()), whether or not the database has a JobManager's connection.
        session.add(Connection(conn_id="spark_default", conn_type="spark", host="local[2]",
                               extra='{"sluice-deploy": "in-process"}'))
        session.add(Connection(conn_id="aws_default", conn_type="aws", login="from-aws-default",
                               password="its-secret", extra=json.dumps({"endpoint_url": s3.endpoint,
                                                                         "region_name": "us-east-1"})))
    try:
        bag = DagBag(dag_folder=os.path.join(ROOT, "dags"))
        assert not bag.import_errors, bag.import_errors
        run = bag.dags["wordcount"].test()
        tis = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert run.state == DagRunState.SUCCESS, tis
        assert os.environ["AWS_ACCESS_KEY_ID"] == "from-aws-default"
        assert os.environ["AWS_ENDPOINT_URL"] == s3.endpoint and os.environ["AWS_ALLOW_HTTP"] == "true"
        text = open(os.path.join(ROOT, "include", "data", "hamlet.txt")).read()
        assert rows(f"{warehouse}/wordcount-results") == counts(text)
        stored = keys(s3, f"airflow/warehouse/{JOB_DIR}/")
        for table in ("checkpoints", "epoch_log", "executions", "plans"):
            assert any(k.startswith(f"airflow/warehouse/{JOB_DIR}/{table}/") for k in stored), table
    finally:
        os.environ.clear()
        os.environ.update(saved)
        Variable.delete("sluice_warehouse")
        with create_session() as session:
            session.query(Connection).filter(Connection.conn_id == "aws_default").delete()


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_file_whose_writer_fails_is_never_seen(s3, tmp_path, where):
    # State files are streamed to their place as their pages are made (filesystems.file_writer):
    # one that fails halfway leaves neither the file nor a temporary beside it.
    from runtime.storage.filesystems import file_writer, read_bytes
    folder = f"s3://{BUCKET}/writer-{tmp_path.name}" if where == "s3" else str(tmp_path / "writer")
    with file_writer(f"{folder}/whole.bin") as f:
        f.write(b"a" * 100)
        f.write(b"b")
    with pytest.raises(OSError, match="disk full"):
        with file_writer(f"{folder}/half.bin") as f:
            f.write(b"a" * 100)
            raise OSError("disk full")
    assert read_bytes(f"{folder}/whole.bin") == b"a" * 100 + b"b"
    found = keys(s3, f"writer-{tmp_path.name}/") if where == "s3" else sorted(os.listdir(folder))
    # (pyarrow keeps an emptied folder as its marker object, "writer-.../")
    assert [name.rsplit("/", 1)[-1] for name in found if not name.endswith("/")] == ["whole.bin"]
