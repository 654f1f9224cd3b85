"""Flink's ``FileSink``: part files in buckets, finished and made visible by the checkpoint that
covers them, exactly once.

Writer (task side, one per subtask and epoch). Each record goes to a bucket (a sub-folder named by
the bucket assigner at the epoch's processing time) and into the bucket's in-progress part file,
which rolls as Flink's ``FileWriterBucket`` rolls it: before a record when the rolling policy says
so, as an epoch starts on time (rollover, inactivity), at a checkpoint barrier
(``should_roll_on_checkpoint``) and at the end of a bounded input (all of them). A part is named
``<prefix>-<bucket uuid>-<counter><suffix>`` and stays hidden until committed.

A task lives for one epoch, so an in-progress part that outlives it is made of *segments*, one
hidden file per epoch that wrote to it (``.<part name>.inprogress.<random uuid>``, Flink's
in-progress name), never appended to or truncated: this works on object stores, and a replayed
epoch writes a new segment instead of cutting a half-written one back. The writer's state (per
bucket: its uuid, part counter and in-progress part with its segments) is the sink operator's
state, snapshotted every epoch and restored with the checkpoint. A rolled part is a committable.

Committer (driver). At the checkpoint (every epoch without checkpoints) it makes each rolled part
visible: a single segment is renamed to the part's name; several are joined into a hidden file
first (bytes for row formats, row groups for Parquet), then renamed. Segments are deleted only
after that, and a part is named by its bucket's uuid and counter, both restored with the writer's
state (a new bucket's uuid derives from the epoch and its logged processing time): a replay after
a crash between the sink's commit and the checkpoint record produces the same names, and a part
already visible whose segments are gone was committed by the attempt that crashed (Flink's rule
for a recovered commit).
"""
from __future__ import annotations

import datetime
import uuid
from typing import Optional

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from runtime.common.arrow import CONVERSION_ERRORS, FieldTypeError, first_misfit, records_to_arrow
from runtime.common.java_time import format_datetime
from runtime.common.serialization import SimpleStringEncoder
from runtime.connectors.base import Committer
from runtime.connectors.java_strings import sink_text
from runtime.storage.filesystems import filesystem
from runtime.task.sink_writer import SinkWriter


def bucket_id(assigner, processing_time: int) -> str:
    """The bucket of a record written at ``processing_time`` (ms since the epoch)."""
    if assigner.kind == "base_path":
        return ""
    if assigner.timezone_id is None:
        moment = datetime.datetime.fromtimestamp(processing_time / 1000)    # the system's zone, as Flink
    else:
        from zoneinfo import ZoneInfo
        moment = datetime.datetime.fromtimestamp(processing_time / 1000, ZoneInfo(assigner.timezone_id))
    return format_datetime(assigner.format_str, moment)


# ---- Flink's rolling policies ------------------------------------------------------------------

def roll_on_event(policy, part: dict) -> bool:
    return policy.kind == "default" and part["size"] > policy.part_size


def roll_on_checkpoint(policy, part: dict) -> bool:
    return policy.kind == "on_checkpoint" or part["size"] > policy.part_size


def roll_on_processing_time(policy, part: dict, now: int) -> bool:
    return policy.kind == "default" and (now - part["created"] >= policy.rollover_interval
                                         or now - part["updated"] >= policy.inactivity_interval)


def restored_states(restored, subtask: int, parallelism: int) -> list:
    """The writer states this subtask continues: per subtask that wrote one, its latest (a chain of
    snapshots lists older ones first); after a rescale, those of subtasks ``i`` with
    ``i % parallelism == subtask``, so every in-progress part goes on in exactly one subtask."""
    latest: dict = {}
    for old, state in restored:
        if old % parallelism == subtask and (old not in latest or state["epoch"] >= latest[old]["epoch"]):
            latest[old] = state
    return [latest[old] for old in sorted(latest)]


class FileSinkWriter(SinkWriter):
    def __init__(self, sink, context):
        super().__init__(sink, context)
        self.fs, self.root = filesystem(sink.base_path)
        self.now = context.processing_time
        self.policy = sink.rolling_policy
        self.bulk = sink.writer_factory is not None
        self.what = f"{context.operator_name} {context.subtask_label} (FileSink to {sink.base_path})"
        self.buckets: dict = {}     # bucket id -> {"uuid", "counter", "part": in-progress part or None}
        self.pending: list = []     # rolled parts: {"path", "segments", "bulk"}, for the committer
        self.segments: dict = {}    # bucket id -> this epoch's open segment: a stream, or records (bulk)
        self.ended = False
        for state in restored_states(context.restored, context.subtask_index, context.parallelism):
            for bucket, b in state["buckets"].items():
                b = {**b, "part": dict(b["part"], segments=list(b["part"]["segments"])) if b["part"] else None}
                if bucket in self.buckets:     # two subtasks' buckets after a rescale: Flink's Bucket.merge
                    self._close(bucket, b)
                else:
                    self.buckets[bucket] = b
        for bucket, b in self.buckets.items():
            if b["part"] is not None and roll_on_processing_time(self.policy, b["part"], self.now):
                self._close(bucket, b)

    # ---- writing -----------------------------------------------------------------------------

    def write(self, values: list) -> None:
        bucket = bucket_id(self.sink.bucket_assigner, self.now)     # one processing time per epoch
        b = self.buckets.get(bucket)
        if b is None:
            seed = f"{self.sink.base_path}|{self.ctx.operator_name}|{self.ctx.subtask_index}|{bucket}|" \
                   f"{self.ctx.epoch}|{self.now}"
            b = self.buckets[bucket] = {"uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, seed)), "counter": 0, "part": None}
        encode = None if self.bulk else self._encoder()
        for i, value in enumerate(values):
            part = b["part"]
            if part is None or roll_on_event(self.policy, part):
                self._close(bucket, b)
                part = b["part"] = self._new_part(bucket, b)
            if encode is None:
                self.segments.setdefault(bucket, []).append(value)
            else:
                data = self._encode(encode, value, values, i)
                self._stream(bucket, part).write(data)
                part["size"] += len(data)
            part["updated"] = self.now

    def _encoder(self):
        encoder = self.sink.encoder
        if isinstance(encoder, SimpleStringEncoder):
            # Flink's SimpleStringEncoder writes the Java record's toString: (hi,1) for a tuple.
            declared = self.ctx.input_type
            return lambda value: encoder.encode(sink_text(value, declared))
        return encoder.encode

    def _encode(self, encode, value, values: list, i: int) -> bytes:
        try:
            data = encode(value)
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise TypeError(f"encode returned {type(data).__name__}, not bytes")
            return data
        except Exception as e:
            self.ctx.fail(ValueError(
                f"the FileSink to {self.sink.base_path} cannot encode the record with {self.sink.encoder!r}: "
                f"{type(e).__name__}: {e}. Convert the records to what the encoder takes (a map before the "
                f"sink), or give the sink another Encoder"), value, values, i)

    def _new_part(self, bucket: str, b: dict) -> dict:
        config = self.sink.output_file_config
        name = f"{config.part_prefix}-{b['uuid']}-{b['counter']}{config.part_suffix}"
        b["counter"] += 1
        return {"path": (bucket + "/" if bucket else "") + name, "segments": [], "size": 0,
                "created": self.now, "updated": self.now}

    def _segment_path(self, part: dict) -> str:
        folder, _, name = part["path"].rpartition("/")
        rel = (folder + "/" if folder else "") + f".{name}.inprogress.{uuid.uuid4()}"
        path = self.root + "/" + rel
        self._io(lambda: self.fs.create_dir(path.rpartition("/")[0], recursive=True), path)
        part["segments"].append(rel)
        return path

    def _stream(self, bucket: str, part: dict):
        stream = self.segments.get(bucket)
        if stream is None:
            path = self._segment_path(part)
            stream = self.segments[bucket] = self._io(lambda: self.fs.open_output_stream(path), path)
        return stream

    def _flush(self, bucket: str, part: dict) -> None:
        """Close this epoch's segment of the bucket's in-progress part."""
        segment = self.segments.pop(bucket, None)
        if segment is None:
            return
        if not self.bulk:
            segment.close()
            return
        table = self._parquet(segment)
        path = self._segment_path(part)
        self._io(lambda: pq.write_table(table, path, filesystem=self.fs), path)
        part["size"] += self.fs.get_file_info(path).size

    def _parquet(self, records: list) -> pa.Table:
        row_type = self.sink.writer_factory.row_type
        try:
            return pa.Table.from_batches([records_to_arrow(records, row_type)])
        except CONVERSION_ERRORS as error:
            found = first_misfit(records, row_type)
            i, e = found if found is not None else (0, error)
            why = f"column {e.column!r} ({e.column_type}): {e.__cause__}" if isinstance(e, FieldTypeError) else str(e)
            self.ctx.fail(TypeError(
                f"the FileSink to {self.sink.base_path} cannot write the record as Parquet of row type "
                f"{row_type}: {why}. Convert the records to the row type (a map before the sink), or "
                f"declare the row type they have"), records[i], records, i)

    def _close(self, bucket: str, b: dict) -> None:
        """Roll the bucket's in-progress part: it becomes a committable."""
        part = b["part"]
        if part is None:
            return
        self._flush(bucket, part)
        if part["segments"]:
            self.pending.append({"path": part["path"], "segments": part["segments"], "bulk": self.bulk})
        b["part"] = None

    def _io(self, action, path: str):
        try:
            return action()
        except OSError as e:
            raise OSError(f"{self.what} cannot write {path}: {e}. Give the sink a base path this job "
                          f"can create and write files in") from e

    # ---- the epoch's end ---------------------------------------------------------------------

    def _end_epoch(self) -> None:
        """Flink's prepareCommit at the epoch's end: roll what the barrier or the end of input
        rolls, and drop buckets with nothing in progress (a later record starts a new one)."""
        if self.ended:
            return
        self.ended = True
        for bucket, b in self.buckets.items():
            part = b["part"]
            if part is None:
                continue
            self._flush(bucket, part)
            if self.ctx.end_of_input or (self.ctx.barrier and roll_on_checkpoint(self.policy, part)):
                self._close(bucket, b)
        self.buckets = {k: b for k, b in self.buckets.items() if b["part"] is not None}

    def snapshot_state(self) -> dict:
        self._end_epoch()
        return {"epoch": self.ctx.epoch, "buckets": self.buckets}

    def finish(self) -> list:
        self._end_epoch()
        pending, self.pending = self.pending, []
        return pending


class FileCommitter(Committer):
    """Makes the parts rolled since the last checkpoint visible under their final names."""

    at_checkpoint = True

    def commit(self, committables: list, version: int) -> dict:
        fs, root = filesystem(self.sink.base_path)
        done = []
        for parts in committables:
            for part in parts or ():
                commit_part(fs, root, part, self.sink.base_path)
                done.append(root + "/" + part["path"])
        if not done and fs.get_file_info(root).type == pafs.FileType.NotFound:
            # No part yet: the folder is there from the first checkpoint, empty (Spark reads an
            # empty folder, not a missing one).
            fs.create_dir(root, recursive=True)
        self.context.result.sink_files.setdefault(self.context.sink_id, []).extend(done)
        return {}

    @staticmethod
    def output_location(sink) -> tuple[str, str]:
        return sink.base_path, "the FileSink's base path (FileSink.for_row_format / for_bulk_format)"


def commit_part(fs: pafs.FileSystem, root: str, part: dict, base_path: str) -> None:
    final = root + "/" + part["path"]
    segments = [root + "/" + s for s in part["segments"]]
    missing = [s for s, info in zip(segments, fs.get_file_info(segments)) if info.type == pafs.FileType.NotFound]
    if missing:
        if fs.get_file_info(final).type != pafs.FileType.File:
            raise FileNotFoundError(
                f"FileSink to {base_path}: cannot finish {final}: its in-progress file(s) {missing} are gone. "
                "Something removed hidden files of the sink's folder while the job ran; restore the job "
                "from an earlier checkpoint or start it over")
        # Made visible by an attempt that crashed before its checkpoint was recorded.
        for s in segments:
            if s not in missing:
                fs.delete_file(s)
        return
    if len(segments) == 1:
        fs.move(segments[0], final)
        return
    folder, _, name = final.rpartition("/")
    joined = f"{folder}/.{name}.inprogress.{uuid.uuid4()}"
    if part["bulk"]:
        tables = [pq.read_table(s, filesystem=fs) for s in segments]
        with pq.ParquetWriter(joined, tables[0].schema, filesystem=fs) as writer:
            for table in tables:
                writer.write_table(table)
    else:
        with fs.open_output_stream(joined) as out:
            for s in segments:
                with fs.open_input_stream(s) as source:
                    while chunk := source.read(1 << 20):
                        out.write(chunk)
    fs.move(joined, final)
    for s in segments:
        fs.delete_file(s)
