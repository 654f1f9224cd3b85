"""The socket text source against a real TCP server on 127.0.0.1, through real Spark jobs.

Expected lines are written out in each test. The server is a thread that serves each
connection a list of byte chunks and then closes it, as ``nc`` piping a file would.
"""
from __future__ import annotations

import gc
import glob
import json
import os
import pickle
import socket
import threading
import time

import pytest

from runtime.common import Configuration, Row, Types
from runtime.connectors.base import EnumeratorContext
from runtime.connectors.socket import SocketEnumerator, SocketReader, SocketSourceError, read_wal
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import SocketTextSource
from runtime.task.task_context import TaskContext
from runtime.task.task_info import TaskInfo


class LineServer:
    """Serves ``connections[i]`` (byte chunks) to the i-th client, then closes that connection."""

    def __init__(self, connections, pause=0.02):
        self.connections = connections
        self.pause = pause
        self.accepted = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(20)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            for chunks in self.connections:
                conn, _ = self.sock.accept()
                self.accepted += 1
                with conn:
                    for chunk in chunks:
                        conn.sendall(chunk)
                        time.sleep(self.pause)
        except OSError:
            pass
        finally:
            self.sock.close()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)    # wakes a blocked accept()
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def socket_env(tmp_path, **extra) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_string("sluice.warehouse", str(tmp_path / "warehouse"))
    conf.set_string("sluice.spark.master", "local[2]")
    conf.set_string("sluice.epoch.interval", "100")
    conf.set_string("sluice.epoch.max-epochs", "300")        # a safety net: the input ends long before
    for key, value in extra.items():
        conf.set_string(key, str(value))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    return env


def read_delta_rows(path) -> list[dict]:
    from deltalake import DeltaTable
    dt = DeltaTable(str(path))
    rows = dt.to_pyarrow_table().to_pylist()
    # delta-rs's filesystem handler can abort the interpreter at exit if it is still alive then
    # (delta-io/delta-rs#2184): drop it now.
    del dt
    gc.collect()
    return rows


# The bytes the server sends: CRLF and LF endings, a line split across two sends (in the middle
# of a UTF-8 character), an empty line, and a last line with no delimiter.
CHUNKS = [b"to be or\r\n", b"not to be\n", b"caf\xc3", b"\xa9 ol\xc3\xa9\n\n", b"that is", b" the question"]
LINES = ["to be or", "not to be", "café olé", "", "that is the question"]


def test_lines_arrive_once_in_order_through_a_job(spark, tmp_path):
    server = LineServer([CHUNKS])
    env = socket_env(tmp_path)
    got = list(env.socket_text_stream("127.0.0.1", server.port).execute_and_collect("socket lines"))
    server.close()
    assert got == LINES
    assert server.accepted == 1


def test_a_job_maps_socket_lines_into_a_delta_table(spark, tmp_path):
    server = LineServer([[b"a\nbb\n", b"ccc\r\n", b"dddd"]])
    table = str(tmp_path / "lines")
    env = socket_env(tmp_path)
    (env.socket_text_stream("127.0.0.1", server.port)
        .map(lambda line: Row(line=line, length=len(line)),
             output_type=Types.ROW_NAMED(["line", "length"], [Types.STRING(), Types.LONG()]))
        .sink_to(table))
    result = env.execute("socket to delta")
    server.close()
    rows = read_delta_rows(table)
    assert sorted(rows, key=lambda r: r["line"]) == [
        {"line": "a", "length": 1}, {"line": "bb", "length": 2},
        {"line": "ccc", "length": 3}, {"line": "dddd", "length": 4}]
    # Every commit carries the sink's app transaction, one version per epoch that wrote files.
    txns = []
    for log in sorted(glob.glob(os.path.join(table, "_delta_log", "*.json"))):
        with open(log) as f:
            txns += [json.loads(line)["txn"] for line in f if '"txn"' in line]
    assert txns and {t["appId"] for t in txns} == {txns[0]["appId"]}
    assert txns[0]["appId"].startswith("sluice-socket-to-delta-")
    assert [t["version"] for t in txns] == sorted({t["version"] for t in txns})
    assert max(t["version"] for t in txns) <= len(result.epochs)


def test_the_write_ahead_log_holds_the_lines_and_a_replayed_plan_reads_them_again(spark, tmp_path):
    server = LineServer([[b"one\ntwo\n", b"three\n", b"four\nfive\n"]], pause=0.15)
    env = socket_env(tmp_path)
    got = list(env.socket_text_stream("127.0.0.1", server.port).execute_and_collect("wal job"))
    server.close()
    expected = ["one", "two", "three", "four", "five"]
    assert got == expected
    (wal,) = glob.glob(str(tmp_path / "warehouse" / "wal-job" / "sources" / "socket-*"))
    wal_rows = sorted(read_delta_rows(wal), key=lambda r: r["seq"])
    assert [(r["seq"], r["line"]) for r in wal_rows] == list(enumerate(expected))
    assert all(isinstance(r["arrival_ms"], int) for r in wal_rows)
    # Replay every epoch from its write-ahead plan: the same lines, in the same order.
    replayed, ranges = [], []
    reader = SocketReader(SocketTextSource("127.0.0.1", server.port), TaskContext(TaskInfo("Socket", 0, 1, 1, 0), 0, {}))
    log = sorted((r for r in read_delta_rows(str(tmp_path / "warehouse" / "wal-job" / "epoch_log"))
                  if r["kind"] == "epoch"), key=lambda r: r["epoch"])
    for row in log:
        (split,) = pickle.loads(row["plan"]).values()
        (split,) = split
        ranges.append((split.start, split.end))
        replayed += [line for values, _ in reader.read(split, 2) for line in values]
    assert replayed == expected
    assert ranges[0][0] == 0 and ranges[-1][1] == 5
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))      # contiguous, no overlap


def test_reconnects_while_retries_remain(spark, tmp_path):
    server = LineServer([[b"one\ntwo\n"], [b"three\nfour"]])
    env = socket_env(tmp_path)
    got = list(env.socket_text_stream("127.0.0.1", server.port, max_retry=2).execute_and_collect())
    server.close()
    assert got == ["one", "two", "three", "four"]
    assert server.accepted == 2


def test_without_retries_the_stream_ends_with_the_connection(tmp_path):
    server = LineServer([[b"one\ntwo"], [b"never read\n"]])
    lines = _run_enumerator(SocketTextSource("127.0.0.1", server.port, "\n", 0), tmp_path)
    server.close()
    assert lines == ["one", "two"]
    assert server.accepted == 1


def test_custom_delimiter_keeps_carriage_returns(tmp_path):
    server = LineServer([[b"a\r;b;", b"c"]])
    lines = _run_enumerator(SocketTextSource("127.0.0.1", server.port, ";", 0), tmp_path)
    server.close()
    assert lines == ["a\r", "b", "c"]       # only the "\n" delimiter drops a "\r", as in Flink


def test_a_refused_connection_names_host_port_and_the_fix(spark, tmp_path):
    port = free_port()
    env = socket_env(tmp_path)
    with pytest.raises(SocketSourceError) as info:
        env.socket_text_stream("127.0.0.1", port).execute_and_collect()
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message
    assert f"nc -lk {port}" in message and "max_retry" in message
    assert isinstance(info.value, ConnectionError)


def test_a_refused_first_connection_is_retried_when_retries_are_allowed(tmp_path):
    port = free_port()
    source = SocketTextSource("127.0.0.1", port, "\n", 3)
    enumerator = SocketEnumerator(source, EnumeratorContext(parallelism=1, work_dir=str(tmp_path), operator_id="s"))
    try:
        enumerator.plan_epoch(0)            # the first attempt was refused, but 2 remain
        deadline = time.time() + 5
        while time.time() < deadline:
            time.sleep(0.1)
            try:
                enumerator.plan_epoch(1)
            except SocketSourceError as e:
                assert f"127.0.0.1:{port}" in str(e)
                break
        else:
            pytest.fail("three refused attempts did not fail the source")
    finally:
        enumerator.close()


def _run_enumerator(source, tmp_path) -> list[str]:
    """Plan epochs until the input ends, reading each plan as a task would."""
    enumerator = SocketEnumerator(source, EnumeratorContext(parallelism=1, work_dir=str(tmp_path), operator_id="s"))
    reader = SocketReader(source, TaskContext(TaskInfo("Socket", 0, 1, 1, 0), 0, {}))
    lines = []
    try:
        for epoch in range(100):
            (split,) = enumerator.plan_epoch(epoch)[0]
            lines += [line for values, _ in reader.read(split, 100) for line in values]
            enumerator.complete_epoch({split.split_id: reader.end_state(split)})
            if enumerator.input_ends_with_plan:
                break
            time.sleep(0.05)
        assert enumerator.finished
        # The WAL holds exactly what was read.
        assert read_wal(enumerator.wal_path, 0, 1 << 40).column("line").to_pylist() == lines
    finally:
        enumerator.close()
    return lines


def test_a_restored_offset_beyond_the_log_is_where_new_lines_start(tmp_path):
    server = LineServer([[b"late\n"]])
    source = SocketTextSource("127.0.0.1", server.port, "\n", 0)
    enumerator = SocketEnumerator(source, EnumeratorContext(parallelism=1, work_dir=str(tmp_path), operator_id="s"))
    enumerator.restore({"socket": {"offset": 7}})
    reader = SocketReader(source, TaskContext(TaskInfo("Socket", 0, 1, 1, 0), 0, {}))
    lines = []
    try:
        for epoch in range(100):
            (split,) = enumerator.plan_epoch(epoch)[0]
            assert split.start >= 7
            lines += [line for values, _ in reader.read(split, 100) for line in values]
            enumerator.complete_epoch({split.split_id: reader.end_state(split)})
            if enumerator.input_ends_with_plan:
                break
            time.sleep(0.05)
    finally:
        enumerator.close()
        server.close()
    assert lines == ["late"]
    assert read_wal(enumerator.wal_path, 0, 100).column("seq").to_pylist() == [7]
