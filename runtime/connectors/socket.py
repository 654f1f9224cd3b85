"""``socket_text_stream``: Flink's SocketTextStreamFunction as a write-ahead source.

A socket cannot be re-read, so the driver owns the connection: a background thread reads
bytes, decodes them as UTF-8 and cuts records at the delimiter (with the default "\\n", a
"\\r\\n" line ending gives the line without "\\r", as Flink). Data after the last delimiter
stays buffered until more arrives; when the connection ends it is flushed as a last record.

When the connection ends the source reconnects as Flink does: while ``max_retry == -1`` or
attempts < ``max_retry``, waiting 500 ms between attempts (Flink's delay); with
``max_retry == 0`` the stream ends with the connection. Two deviations from Flink: trailing
data is flushed when each connection ends (Flink glues it to the next connection's first
line), and a refused reconnect counts as an attempt instead of failing the job. A refused
*first* connection with no attempts left fails the job with a ``SocketSourceError``.

Each epoch's ``plan_epoch`` first appends the lines that have arrived to a write-ahead Delta
table (seq int64, line string, arrival_ms int64) under
``<work_dir>/socket-<operator_id>``, then plans the seq range [offset, last + 1) for the one
subtask. ``SocketReader`` reads that range from the table in seq order, so a replayed epoch
reads exactly the same lines.
"""
from __future__ import annotations

import codecs
import socket
import threading
import time
from typing import Optional
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from runtime.connectors.base import SourceReader, SplitEnumerator
from runtime.storage.filesystems import filesystem, join
from runtime.task.deployment import SplitRead

SPLIT = "socket"
RETRY_DELAY_S = 0.5             # Flink's SocketTextStreamFunction.DEFAULT_CONNECTION_RETRY_SLEEP
CONNECT_TIMEOUT_S = 10.0
POLL_S = 0.2                    # how often a blocked read checks for close()
WAL_SCHEMA = pa.schema([("seq", pa.int64()), ("line", pa.string()), ("arrival_ms", pa.int64())])


class SocketSourceError(ConnectionError):
    """The socket source could not connect (and has no retries left)."""


def _wal_files(wal_path: str, start: int, end: int) -> list[tuple[str, int, int]]:
    """(file path, min seq, max seq) of the WAL files that may hold seqs in [start, end)."""
    from deltalake import DeltaTable
    if not DeltaTable.is_deltatable(wal_path):
        return []
    actions = pa.table(DeltaTable(wal_path).get_add_actions(flatten=True))
    files = []
    for path, lo, hi in zip(actions.column("path").to_pylist(), actions.column("min.seq").to_pylist(),
                            actions.column("max.seq").to_pylist()):
        if lo is None or hi is None or (hi >= start and lo < end):
            files.append((join(wal_path, unquote(path)), lo, hi))
    return files


def read_wal(wal_path: str, start: int, end: int) -> pa.Table:
    """The WAL rows with seq in [start, end), in seq order."""
    tables = []
    for path, _, _ in _wal_files(wal_path, start, end):
        fs, inside = filesystem(path)
        t = pq.read_table(inside, columns=WAL_SCHEMA.names, filesystem=fs)
        mask = pc.and_(pc.greater_equal(t.column("seq"), start), pc.less(t.column("seq"), end))
        tables.append(t.filter(mask))
    if not tables:
        return WAL_SCHEMA.empty_table()
    return pa.concat_tables(tables).sort_by("seq")


class SocketEnumerator(SplitEnumerator):
    def __init__(self, source, context):
        super().__init__(source, context)
        if not context.work_dir:
            raise ValueError("socket_text_stream needs a work_dir for its write-ahead log")
        self.wal_path = join(context.work_dir, f"socket-{context.operator_id or 'source'}")
        self._lock = threading.Lock()
        self._pending: list[tuple[str, int]] = []      # (line, arrival ms) not yet in the WAL
        self._ended = False                             # the connection is finally gone
        self._error: Optional[BaseException] = None
        self._stop = threading.Event()
        self._first_attempt = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._socket: Optional[socket.socket] = None
        self.next_seq = self._wal_next_seq()

    # ---- the reading thread ------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"socket-source-{self.source.hostname}:{self.source.port}")
        self._thread.start()
        # Wait for the first attempt, so that a refused connection fails the first epoch.
        self._first_attempt.wait(CONNECT_TIMEOUT_S + 1)

    def _retry(self, attempt: int) -> bool:
        max_retry = self.source.max_retry
        return max_retry == -1 or attempt < max_retry

    def _run(self) -> None:
        source = self.source
        attempt = 0
        connected = False
        try:
            while not self._stop.is_set():
                try:
                    sock = socket.create_connection((source.hostname, source.port), timeout=CONNECT_TIMEOUT_S)
                except OSError as e:
                    if self._stop.is_set():
                        break
                    attempt += 1
                    if self._retry(attempt):
                        self._first_attempt.set()
                        if self._stop.wait(RETRY_DELAY_S):
                            break
                        continue
                    if not connected:
                        self._error = SocketSourceError(
                            f"Socket Stream: cannot connect to {source.hostname}:{source.port} ({e}). "
                            f"Start the server first, e.g. `nc -lk {source.port}`, or let the source "
                            f"retry: socket_text_stream('{source.hostname}', {source.port}, max_retry=-1) "
                            "retries forever, max_retry=N makes N attempts.")
                    break
                connected = True
                self._socket = sock
                self._first_attempt.set()
                try:
                    self._read(sock)
                finally:
                    self._socket = None
                    try:
                        sock.close()
                    except OSError:
                        pass
                if self._stop.is_set():
                    break
                attempt += 1
                if not self._retry(attempt) or self._stop.wait(RETRY_DELAY_S):
                    break
        except BaseException as e:      # never leave the driver waiting on a dead thread
            self._error = e
        finally:
            with self._lock:
                self._ended = True
            self._first_attempt.set()

    def _read(self, sock: socket.socket) -> None:
        delimiter = self.source.delimiter
        strip_cr = delimiter == "\n"
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        buffer = ""
        sock.settimeout(POLL_S)
        while not self._stop.is_set():
            try:
                data = sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            if not data:
                break
            buffer += decoder.decode(data)
            if delimiter in buffer:
                *records, buffer = buffer.split(delimiter)
                if strip_cr:
                    records = [r[:-1] if r.endswith("\r") else r for r in records]
                self._add(records)
        if self._stop.is_set():
            return
        buffer += decoder.decode(b"", final=True)
        if buffer:
            self._add([buffer])        # trailing data with no delimiter: a last record, as Flink

    def _add(self, records: list[str]) -> None:
        now = int(time.time() * 1000)
        with self._lock:
            self._pending.extend((r, now) for r in records)

    # ---- the write-ahead log -----------------------------------------------------------

    def _wal_next_seq(self) -> int:
        from deltalake import DeltaTable
        if not DeltaTable.is_deltatable(self.wal_path):
            return 0
        actions = pa.table(DeltaTable(self.wal_path).get_add_actions(flatten=True))
        if not actions.num_rows:
            return 0
        highest = pc.max(actions.column("max.seq")).as_py()
        if highest is None:    # no statistics: read the column
            highest = pc.max(read_wal(self.wal_path, 0, 2 ** 62).column("seq")).as_py()
        return 0 if highest is None else highest + 1

    def _append_to_wal(self, lines: list[tuple[str, int]]) -> None:
        from deltalake import write_deltalake
        seqs = list(range(self.next_seq, self.next_seq + len(lines)))
        table = pa.Table.from_arrays([pa.array(seqs, pa.int64()), pa.array([l for l, _ in lines], pa.string()),
                                      pa.array([t for _, t in lines], pa.int64())], schema=WAL_SCHEMA)
        write_deltalake(self.wal_path, table, mode="append")
        self.next_seq += len(lines)

    # ---- the enumerator ----------------------------------------------------------------

    def plan_epoch(self, epoch):
        self._start()
        with self._lock:
            lines, self._pending = self._pending, []
            ended = self._ended
        if self._error is not None and not lines:
            raise self._error
        if lines:
            try:
                self._append_to_wal(lines)
            except BaseException:
                with self._lock:
                    self._pending[:0] = lines
                raise
        state = dict(self.positions.get(SPLIT, {}))
        start = state.get("offset", 0)
        end = self.next_seq
        if self.max_records_per_split is not None:
            end = min(end, start + self.max_records_per_split)
        self.input_ends_with_plan = ended and self._error is None and end >= self.next_seq
        state["wal"] = self.wal_path
        return {0: (SplitRead(SPLIT, start, end, state),)}

    def restore(self, positions):
        super().restore(positions)
        # A restored offset past this WAL's end (a WAL of another run): new lines follow it.
        self.next_seq = max(self.next_seq, self.positions.get(SPLIT, {}).get("offset", 0))

    def has_input(self) -> Optional[bool]:
        """Lines came that the WAL or the last epoch has not taken."""
        with self._lock:
            return bool(self._pending) or self.next_seq > self.positions.get(SPLIT, {}).get("offset", 0)

    @property
    def finished(self):
        with self._lock:
            return self._ended and not self._pending and self.positions.get(SPLIT, {}).get("offset", 0) >= self.next_seq

    def close(self):
        self._stop.set()
        sock = self._socket
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=2 * POLL_S + RETRY_DELAY_S)


class SocketReader(SourceReader):
    def read(self, split, batch_size):
        wal = split.state.get("wal")
        if not wal:
            raise ValueError("socket source split without its write-ahead log path")
        self.ends[split.split_id] = {"offset": split.end}
        if split.end <= split.start:
            return iter(())
        lines = read_wal(wal, split.start, split.end).column("line").to_pylist()
        if len(lines) != split.end - split.start:
            raise RuntimeError(f"socket source: the write-ahead log {wal} holds {len(lines)} of the "
                               f"{split.end - split.start} lines planned [{split.start}, {split.end})")
        return ((lines[i:i + batch_size], [None] * len(lines[i:i + batch_size]))
                for i in range(0, len(lines), batch_size))
