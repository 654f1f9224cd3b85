"""The Kafka source (``KafkaSource``): each topic-partition is a split, as Flink's
KafkaPartitionSplit.

The driver's enumerator plans each epoch's offset range [start, end) per partition: from the
partition's position to its latest offset (the last stable offset under read_committed), at most
``sluice.epoch.max-records-per-split`` records (Structured Streaming's maxOffsetsPerTrigger), and
not past a bounded source's stopping offset. A stopping offset given by
``KafkaOffsetsInitializer.offsets`` is taken as given, as Flink's reader does: past the partition's
end, each epoch reads what has come and the source waits, an epoch interval at a time, until the
partition reaches it. The plan goes to the epoch log before the epoch
runs, so a replay reads exactly the same records. Every partition a subtask owns is planned each
epoch, even with nothing to read, so its watermark generator and idleness clock stay in the
subtask's minimum as Flink's per-split watermarks do. Partitions are owned as Flink assigns them
(``split_owner``): a restore at another parallelism redistributes them. New partitions, and new
topics matching a pattern, are found at the first planning after ``partition.discovery.interval.ms``
and read from their earliest offset (Flink's rule for partitions found later).

The reader (in the Spark task) reads exactly [start, end) with a consumer assigned the partition
(no group membership, no auto commit), kept in the Python worker for the partition's next range
(``kafka_consumer_pool``: it prefetches it meanwhile). "end" is an offset, not a count: with
transactions the log has control records and aborted records a read_committed consumer never
sees, so the read ends at the first record at or past "end", at the partition's end (EOF) at or
past it, or when the consumer's position passes it.

Offsets are in the checkpoint (the enumerator's positions); once a checkpoint completed they are
also committed to the consumer group (Flink's ``commit.offsets.on.checkpoint``), so Kafka's tools
show the job's lag. Offsets the log no longer holds (retention deleted them) fail the epoch's
planning, naming the partition and the lost range, unless ``auto.offset.reset`` says where to go.
"""
from __future__ import annotations

import codecs
import time
from bisect import bisect_left, bisect_right
from functools import partial
from operator import is_not, itemgetter
from typing import Optional

import pyarrow as pa

from runtime.common.arrow import arrow_schema
from runtime.common.serialization import SimpleStringSchema
from runtime.common.typeinfo import Types
from runtime.connectors.base import SourceReader, SplitEnumerator
from runtime.connectors.client_pool import configuration_key
from runtime.connectors.kafka_clients import (DEFAULT_API_TIMEOUT_MS, DEFAULT_ISOLATION, ClientErrors,
                                              KafkaConnectorError, StuckCall, bounded, client_config, log,
                                              renewed, split_owner, with_errors)
from runtime.connectors.kafka_consumer_pool import CONSUMERS, PREFETCH
from runtime.datastream.connectors.kafka import KafkaOffsetResetStrategy
from runtime.task.arrow_batch import ArrowBatch
from runtime.task.deployment import SplitRead

CHECK_TIMEOUT_S = 10.0
# How long a checkpoint's offset commit to the group may take: it is for monitoring only, and a
# group coordinator may not answer for minutes after a broker restart (confluentinc/librdkafka#5456).
COMMIT_TIMEOUT_S = 10.0


def split_id(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"         # Java's TopicPartition.toString


def _isolation(source) -> str:
    return source.setting("isolation.level", DEFAULT_ISOLATION)


def _api_timeout_s(source) -> float:
    return int(source.setting("default.api.timeout.ms", str(DEFAULT_API_TIMEOUT_MS))) / 1000


def _errors(source) -> ClientErrors:
    return ClientErrors("Kafka source", source.bootstrap_servers or "(no bootstrap servers)",
                        "bootstrap.servers (set_bootstrap_servers)")


class KafkaSourceEnumerator(SplitEnumerator):
    def __init__(self, source, context):
        super().__init__(source, context)
        self.errors = _errors(source)
        self._admin = None
        self._consumer = None           # the group's consumer: committed offsets, commits
        self._discovered_at: Optional[float] = None
        self._first_discovery = True
        self._latest_planned: dict = {}   # split id -> the partition's latest offset when last planned
        self._waiting = False           # a bounded source read all there is, short of its stopping offsets
        self._waiting_told: set = set()     # split ids whose wait for their stopping offset was logged

    # ---- clients ---------------------------------------------------------------------------

    @property
    def admin(self):
        if self._admin is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient(client_config(self.source.properties, "admin", self.errors))
        return self._admin

    @property
    def consumer(self):
        if self._consumer is None:
            from confluent_kafka import Consumer
            group = self.source.group_id or f"{self.context.job_name or 'sluice'}-enumerator"
            self._consumer = Consumer(client_config(
                self.source.properties, "consumer", self.errors, **{"group.id": group, "enable.auto.commit": False}))
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._admin = None

    def _renew_clients(self) -> None:
        """New clients when the ones there reported errors since they were last asked (a broker
        down meanwhile): old ones may wait for the broker's coordinator past their timeouts once it
        is back, and fail quoting the outage."""
        if renewed("Kafka source", self.errors, self._admin, self._consumer):
            self.close()

    def _metadata(self):
        return with_errors(self.errors, "reading the cluster's metadata",
                           lambda t: self.admin.list_topics(timeout=t), CHECK_TIMEOUT_S, self.admin.poll)

    # ---- preflight and discovery -----------------------------------------------------------

    def check(self) -> None:
        """Reachable servers, accepted credentials and every named topic (partition) there,
        before Spark starts."""
        topics = self._metadata().topics
        wanted = list(self.source.topics) + [t for t, _ in self.source.partitions]
        for topic in dict.fromkeys(wanted):
            if topic not in topics or topics[topic].error is not None:
                raise KafkaConnectorError(
                    f"Kafka source: topic '{topic}' does not exist on {self.source.bootstrap_servers} "
                    f"(KafkaSource set_topics / set_partitions): create it or fix the name")
        for topic, partition in self.source.partitions:
            if partition not in topics[topic].partitions:
                raise KafkaConnectorError(
                    f"Kafka source: topic '{topic}' has no partition {partition} (it has "
                    f"{len(topics[topic].partitions)}; KafkaSource set_partitions)")

    def _discovery_due(self) -> bool:
        if self._discovered_at is None:
            return True
        interval = self.source.discovery_interval_ms
        return interval > 0 and (time.monotonic() - self._discovered_at) * 1000 >= interval

    def _discover(self) -> list[tuple[str, int]]:
        topics = self._metadata().topics
        if self.source.partitions:
            found = [tp for tp in self.source.partitions if tp[0] in topics]
        elif self.source.topics:
            found = [(t, p) for t in self.source.topics if t in topics for p in topics[t].partitions]
        else:
            import re
            pattern = re.compile(self.source.topic_pattern)
            found = [(t, p) for t in topics if pattern.fullmatch(t) for p in topics[t].partitions]
        self._discovered_at = time.monotonic()
        return sorted(found)

    # ---- offsets ---------------------------------------------------------------------------

    def _list_offsets(self, partitions, spec) -> dict:
        from confluent_kafka import IsolationLevel, TopicPartition
        if not partitions:
            return {}
        level = (IsolationLevel.READ_COMMITTED if _isolation(self.source) == "read_committed"
                 else IsolationLevel.READ_UNCOMMITTED)
        futures = with_errors(self.errors, "listing the partitions' offsets", lambda t: self.admin.list_offsets(
            {TopicPartition(t_, p): spec for t_, p in partitions}, isolation_level=level, request_timeout=30),
            CHECK_TIMEOUT_S, self.admin.poll)
        out = {}
        for tp, future in futures.items():
            try:
                out[(tp.topic, tp.partition)] = future.result().offset
            except Exception as e:
                self.admin.poll(0)
                self.errors.raise_if_failed("listing the partitions' offsets")
                raise KafkaConnectorError(f"Kafka source: listing the offsets of {split_id(tp.topic, tp.partition)} "
                                          f"on {self.source.bootstrap_servers} failed: {e}") from None
        return out

    def _earliest(self, partitions) -> dict:
        from confluent_kafka.admin import OffsetSpec
        return self._list_offsets(partitions, OffsetSpec.earliest())

    def _latest(self, partitions) -> dict:
        from confluent_kafka.admin import OffsetSpec
        return self._list_offsets(partitions, OffsetSpec.latest())

    def _committed(self, partitions) -> dict:
        from confluent_kafka import TopicPartition
        done = with_errors(self.errors, f"reading the offsets of consumer group '{self.source.group_id}'",
                           lambda t: self.consumer.committed([TopicPartition(t_, p) for t_, p in partitions],
                                                             timeout=max(t, 5)),
                           _api_timeout_s(self.source), self.consumer.poll, step_s=10.0)
        return {(tp.topic, tp.partition): tp.offset for tp in done if tp.offset >= 0}

    def _by_timestamp(self, partitions, timestamp_ms: int) -> dict:
        from confluent_kafka import TopicPartition
        done = self.consumer.offsets_for_times([TopicPartition(t, p, timestamp_ms) for t, p in partitions],
                                               timeout=_api_timeout_s(self.source))
        return {(tp.topic, tp.partition): tp.offset for tp in done if tp.offset >= 0}

    def _resolve(self, initializer, partitions, earliest: dict, latest: dict, stopping: bool = False) -> dict:
        """Each partition's offset as ``initializer`` (a KafkaOffsetsInitializer) says. A listed
        stopping offset is taken as given, even past the partition's end (Flink's
        SpecifiedOffsetsInitializer: the reader reads until its position reaches it); a listed
        starting offset outside the log starts where the committed offset or the reset strategy says."""
        kind = initializer.kind
        if kind == "earliest":
            return {tp: earliest[tp] for tp in partitions}
        if kind == "latest":
            return {tp: latest[tp] for tp in partitions}
        if kind == "timestamp":
            found = self._by_timestamp(partitions, initializer.timestamp_ms)
            return {tp: found.get(tp, latest[tp]) for tp in partitions}     # none that late: the end
        found = {}
        if kind == "offsets":
            listed = {(t, p): o for t, p, o in initializer.offsets_by_partition}
            found = {tp: listed[tp] for tp in partitions
                     if tp in listed and (stopping or earliest[tp] <= listed[tp] <= latest[tp])}
        rest = [tp for tp in partitions if tp not in found]
        if rest and self.source.group_id is not None:
            found.update(self._committed(rest))
        out = {}
        for tp in partitions:
            if tp in found:
                out[tp] = found[tp]
            elif initializer.reset_strategy is KafkaOffsetResetStrategy.EARLIEST:
                out[tp] = earliest[tp]
            elif initializer.reset_strategy is KafkaOffsetResetStrategy.LATEST:
                out[tp] = latest[tp]
            else:
                raise KafkaConnectorError(
                    f"Kafka source: partition {split_id(*tp)} has no committed offset in consumer group "
                    f"'{self.source.group_id}' to start from; choose where with "
                    f"KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST) (or LATEST)")
        return out

    # ---- planning --------------------------------------------------------------------------

    def plan_epoch(self, epoch):
        self._renew_clients()
        known = {(s["topic"], s["partition"]) for s in self.positions.values() if "topic" in s}
        partitions = sorted(known)
        if self._discovery_due() or not partitions:
            partitions = sorted(known | set(self._discover()))
        earliest, latest = self._earliest(partitions), self._latest(partitions)
        new = [tp for tp in partitions if tp not in known]
        if new:
            # At the start the starting offsets; partitions found later from their earliest (Flink's).
            initial = self._first_discovery and not known
            if initial:
                starts = self._resolve(self.source.starting_offsets, new, earliest, latest)
            else:
                starts = {tp: earliest[tp] for tp in new}
            stops = ({} if self.source.stopping_offsets is None
                     else self._resolve(self.source.stopping_offsets, new, earliest, latest, stopping=True))
            for tp in new:
                state = {"topic": tp[0], "partition": tp[1], "offset": starts[tp]}
                if tp in stops:
                    state["stop"] = stops[tp]
                self.positions[split_id(*tp)] = state
        self._first_discovery = False
        limit = self.max_records_per_split
        plan: dict[int, list] = {s: [] for s in range(self.parallelism)}
        ends_all = caught_up = True
        for tp in partitions:
            sid = split_id(*tp)
            state = self.positions[sid]
            start = self._in_log(tp, state, earliest[tp])
            end = self._latest_planned[sid] = latest[tp]
            if limit is not None:
                end = min(end, start + limit)
            stop = state.get("stop")
            if stop is not None:
                end = min(end, stop)
            end = max(end, start)
            ends_all = ends_all and stop is not None and end >= stop
            caught_up = caught_up and end >= latest[tp]
            if self.source.bounded and stop is not None and latest[tp] < stop and sid not in self._waiting_told:
                self._waiting_told.add(sid)
                log.info("Kafka source: partition %s ends at offset %d, before its stopping offset %d: the "
                         "bounded source reads what comes until the partition reaches it", sid, latest[tp], stop)
            plan[split_owner(tp[0], tp[1], self.parallelism)].append(SplitRead(sid, start, end, dict(state)))
        self.input_ends_with_plan = self.source.bounded and ends_all
        self._waiting = self.source.bounded and caught_up and not ends_all
        return {s: tuple(reads) for s, reads in plan.items()}

    def _in_log(self, tp, state: dict, earliest: int) -> int:
        """The partition's position, checked against the log's earliest offset: records the job
        has not read that retention deleted fail the job, unless ``auto.offset.reset`` chooses."""
        start = state["offset"]
        if start >= earliest:
            return start
        reset = self.source.setting("auto.offset.reset")
        if reset in ("earliest", "smallest", "beginning"):
            log.warning("Kafka source: partition %s: offsets [%d, %d) are no longer in the log; reading on "
                        "from %d (auto.offset.reset=%s)", split_id(*tp), start, earliest, earliest, reset)
            state["offset"] = earliest
            return earliest
        if reset in ("latest", "largest", "end"):
            end = self._latest([tp])[tp]
            log.warning("Kafka source: partition %s: offsets [%d, %d) are no longer in the log; reading on "
                        "from the latest offset %d (auto.offset.reset=%s)", split_id(*tp), start, earliest, end, reset)
            state["offset"] = end
            return end
        raise KafkaConnectorError(
            f"Kafka source: partition {split_id(*tp)}: the records at offsets [{start}, {earliest}) are no longer "
            f"in the log (retention deleted them; its earliest offset is {earliest}), and the job has not read them. "
            f"Nothing is skipped silently: to go on without them, set the property 'auto.offset.reset' to "
            f"'earliest' (KafkaOffsetResetStrategy.EARLIEST) or 'latest' (KafkaOffsetResetStrategy.LATEST)")

    def has_input(self) -> Optional[bool]:
        """Whether a known partition's latest offset (the last stable one, read_committed) is past
        the position reached: one ListOffsets request. A new partition is found when an epoch is
        planned; a broker that does not answer leaves the question to the interval (the epoch's
        plan then names the failure)."""
        waiting = [(s["topic"], s["partition"], s["offset"], s.get("stop")) for s in self.positions.values()
                   if "topic" in s]
        if not waiting:
            return None
        try:
            latest = self._latest([(t, p) for t, p, _, _ in waiting])
        except Exception:
            return None
        return any(latest[(t, p)] > offset and (stop is None or offset < stop) for t, p, offset, stop in waiting)

    def split_metrics(self) -> dict[str, dict]:
        """Each partition's position, its latest offset when the epoch was planned, and the lag."""
        return {sid: {"offset": self.positions[sid]["offset"], "latest": latest,
                      "lag": max(0, latest - self.positions[sid]["offset"])}
                for sid, latest in self._latest_planned.items() if sid in self.positions}

    @property
    def paced(self) -> bool:
        # A bounded source waiting for records up to its stopping offsets polls as an unbounded one
        # does, an epoch interval at a time, instead of running empty epochs back to back.
        return super().paced or self._waiting

    @property
    def finished(self):
        if not self.source.bounded or not self.positions:
            return False
        return all(s.get("stop") is not None and s["offset"] >= s["stop"] for s in self.positions.values())

    # ---- checkpoints -----------------------------------------------------------------------

    def notify_checkpoint_complete(self, checkpoint_id: int, positions: dict) -> None:
        """Commit the checkpoint's offsets to the consumer group (``commit.offsets.on.checkpoint``)
        so Kafka's tools show the job's lag. The checkpoint, not the group, is what a restore
        reads: a failed commit is logged, as Flink does, and one that does not end within
        COMMIT_TIMEOUT_S leaves its consumer behind (the next commit's is new)."""
        if not self.source.commit_offsets_on_checkpoint:
            return
        from confluent_kafka import TopicPartition
        offsets = [TopicPartition(s["topic"], s["partition"], s["offset"])
                   for s in positions.values() if "topic" in s]
        if not offsets:
            return
        self._renew_clients()
        consumer = self.consumer
        try:
            bounded(lambda: consumer.commit(offsets=offsets, asynchronous=False), COMMIT_TIMEOUT_S)
        except StuckCall:
            self._consumer = None       # still blocked in its thread: not closed (that would wait too)
            log.warning("Kafka source: committing checkpoint %d's offsets to consumer group '%s' did not end "
                        "within %.0f s (%s); the next checkpoint's commit goes with a new consumer",
                        checkpoint_id, self.source.group_id, COMMIT_TIMEOUT_S, self.errors.describe())
        except Exception as e:
            log.warning("Kafka source: committing checkpoint %d's offsets to consumer group '%s' failed: %s",
                        checkpoint_id, self.source.group_id, e)


class KafkaSourceReader(SourceReader):
    """Reads a split's planned range a ``consume()`` batch at a time. A batch's records are made
    from its messages in one go: with ``SimpleStringSchema`` in UTF-8 they are an ``ArrowBatch``
    (the values as one binary array cast to strings, the timestamps one int64 array), which an
    Arrow-batch function downstream takes as it is and a per-record operator gets decoded once;
    any other deserializer runs per record, and a record it turns into None (a JSON ``null``, a
    message skipped with ``ignore_parse_errors``) is left out, as Flink's KafkaSource does."""

    def __init__(self, source, ctx):
        super().__init__(source, ctx)
        # Where each split's records came from, for origin(): per batch (the index of its first
        # record this epoch, its first offset, its offsets when they are not consecutive).
        self.spans: dict[str, list] = {}
        deserializer = source.deserializer
        self.utf8_strings = (type(deserializer) is SimpleStringSchema
                             and codecs.lookup(deserializer.charset).name == "utf-8")

    def _consumer_config(self, errors: ClientErrors) -> dict:
        prefix = self.source.setting("client.id.prefix") or self.source.group_id or "sluice"
        config = dict(PREFETCH)
        config.update(client_config(self.source.properties, "consumer", errors, **{
            "group.id": self.source.group_id or f"{prefix}-reader",
            "client.id": f"{prefix}-{getattr(self.ctx, 'subtask_index', 0)}",
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "enable.partition.eof": True, "auto.offset.reset": "error",
            "isolation.level": _isolation(self.source)}))
        return config

    def _pool_key(self, topic: str, partition: int) -> tuple:
        return configuration_key(self._consumer_config(None)), topic, partition

    def _new_consumer(self) -> tuple:
        from confluent_kafka import Consumer
        errors = _errors(self.source)
        return Consumer(self._consumer_config(errors)), errors

    def read(self, split: SplitRead, batch_size: int):
        spans = self.spans.setdefault(split.split_id, [])
        if split.start >= split.end:
            return
        from confluent_kafka import Message, TopicPartition
        topic, partition = split.state["topic"], split.state["partition"]
        key = self._pool_key(topic, partition)
        pooled = CONSUMERS.acquire(key, topic, partition, split.start, self._new_consumer)
        consumer, errors = pooled.consumer, pooled.errors
        timeout = _api_timeout_s(self.source)
        where = f"partition {split.split_id}, offsets [{split.start}, {split.end})"
        read = 0
        try:
            position, waited_since = split.start, time.monotonic()
            # Records a kept consumer returned past the last range's end: this range's first.
            messages, pooled.pending = pooled.pending, []
            while position < split.end:
                if not messages:
                    messages = consumer.consume(num_messages=min(batch_size, split.end - position), timeout=0.5)
                    errors.raise_if_failed(f"reading {where}")
                if any(map(Message.error, messages)):     # (a KafkaError fails == None: no count(None))
                    messages, at_end = self._without_events(messages, where, split)
                    if at_end:
                        position = split.end
                if messages:
                    last = messages[-1].offset()
                    if last >= split.end:       # past the range: the log went on after control records
                        cut = bisect_left(list(map(Message.offset, messages)), split.end)
                        messages, pooled.pending = messages[:cut], messages[cut:]
                        position = split.end
                    else:
                        position = max(position, last + 1)
                if messages:
                    batch, first, offsets = self.decode(messages)
                    n = len(batch) if type(batch) is ArrowBatch else len(batch[0])
                    if n:
                        spans.append((read, first, offsets))
                        read += n
                        yield batch
                    waited_since = time.monotonic()
                elif position < split.end:
                    # Control records (transaction markers) and aborted records advance the position only.
                    now = consumer.position([TopicPartition(topic, partition)])[0].offset
                    if now >= split.end:
                        position = split.end
                    elif now > position:
                        position, waited_since = now, time.monotonic()
                    elif time.monotonic() - waited_since > timeout:
                        raise KafkaConnectorError(
                            f"Kafka source: no record of {where} arrived from {self.source.bootstrap_servers} "
                            f"within {timeout:.0f} s (at offset {position}; {errors.describe()}). "
                            f"The wait is the property 'default.api.timeout.ms'")
                messages = None
        except BaseException:
            pooled.close()      # where it stands is not known: the next read makes a new one
            raise
        pooled.position = split.end
        CONSUMERS.release(key, pooled)

    def _without_events(self, messages: list, where: str, split: SplitRead) -> tuple[list, bool]:
        """The messages that are records, and whether an end-of-partition event was at or past
        the range's end; any other error fails the read."""
        from confluent_kafka import KafkaError
        records, at_end = [], False
        for m in messages:
            error = m.error()
            if error is None:
                records.append(m)
            elif error.code() == KafkaError._PARTITION_EOF:
                at_end = at_end or m.offset() >= split.end
            else:
                raise self._failed(error, where, split)
        return records, at_end

    def decode(self, messages: list) -> tuple:
        """A batch of records of ``messages`` (records, in one partition, in offset order): an
        ArrowBatch, or (values, timestamps) without the records the deserializer turned into
        None; its first record's offset, and every record's offset when they are not consecutive."""
        from confluent_kafka import Message
        values = list(map(Message.value, messages))
        stamps = list(map(Message.timestamp, messages))
        timestamps = list(map(itemgetter(1), stamps))
        if timestamps and min(timestamps) < 0:        # TIMESTAMP_NOT_AVAILABLE: (0, -1)
            timestamps = [None if kind == 0 else t for kind, t in stamps]
        first, last = messages[0].offset(), messages[-1].offset()
        offsets = None if last - first + 1 == len(messages) else list(map(Message.offset, messages))
        if self.utf8_strings:
            column = _utf8_column(values)
            if column is not None:
                return (ArrowBatch(pa.RecordBatch.from_arrays([column], schema=_STRING_SCHEMA),
                                   pa.array(timestamps, pa.int64()), _STRING), first, offsets)
            # a null value (tombstone) or bad UTF-8: per record, which names the record
        deserialize = self.source.deserializer.deserialize
        records = []
        for i, value in enumerate(values):
            try:
                records.append(deserialize(value))
            except Exception as e:
                m = messages[i]
                raise ValueError(f"Kafka source: the record at topic '{m.topic()}', partition {m.partition()}, "
                                 f"offset {m.offset()} cannot be deserialized by "
                                 f"{type(self.source.deserializer).__name__}: {type(e).__name__}: {e}") from e
        if not all(map(_is_not_none, records)):
            kept = [i for i, r in enumerate(records) if r is not None]
            records = [records[i] for i in kept]
            timestamps = [timestamps[i] for i in kept]
            if not kept:
                return (records, timestamps), first, None
            offsets = [messages[i].offset() for i in kept]
            first = offsets[0]
            if offsets[-1] - first + 1 == len(offsets):
                offsets = None
        return (records, timestamps), first, offsets

    def _failed(self, error, where: str, split: SplitRead) -> KafkaConnectorError:
        from confluent_kafka import KafkaError
        if error.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
            return KafkaConnectorError(
                f"Kafka source: {where}: offset {split.start} is no longer in the log (retention deleted "
                f"the records the job had not read): {error.str()}. Set the property 'auto.offset.reset' to "
                f"'earliest' (KafkaOffsetResetStrategy.EARLIEST) or 'latest' to go on without them")
        return KafkaConnectorError(f"Kafka source: reading {where} from {self.source.bootstrap_servers} failed: "
                                   f"{error.name()}: {error.str()}")

    def origin(self, split: SplitRead, index: int) -> str:
        spans = self.spans.get(split.split_id, ())
        k = bisect_right([s[0] for s in spans], index) - 1
        offset = f"{split.start}+{index}"
        if k >= 0:
            first_index, first, offsets = spans[k]
            if offsets is None:
                offset = first + index - first_index
            elif index - first_index < len(offsets):
                offset = offsets[index - first_index]
        return f"topic '{split.state.get('topic')}', partition {split.state.get('partition')}, offset {offset}"


_STRING = Types.STRING()
_is_not_none = partial(is_not, None)
_STRING_SCHEMA = arrow_schema(_STRING)


def _utf8_column(values: list) -> Optional[pa.Array]:
    """Message values as one string array (one copy, one UTF-8 check), or None when one is null
    or not UTF-8."""
    raw = pa.array(values, pa.binary())
    if raw.null_count:
        return None
    try:
        return raw.cast(pa.string())
    except pa.ArrowInvalid:
        return None
