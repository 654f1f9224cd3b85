"""The Kafka sink (``KafkaSink``): a writer in each sink subtask, a committer on the driver.

NONE and AT_LEAST_ONCE: the writer produces its records from the task as they come and, for
AT_LEAST_ONCE, flushes at the end of the epoch and fails it on any record the broker did not
acknowledge (a restart from the checkpoint then writes them again: at least once). NONE flushes
too, but only logs what was lost.

EXACTLY_ONCE is Flink's two-phase commit on a Kafka transaction, with the transaction run by the
committer on the driver. Flink's writer opens a transaction in the task, flushes it at the
checkpoint and hands (transactional id, producer id, epoch) to its committer, which resumes the
transaction in another producer through reflection on the Java client. librdkafka has no way to
resume a transaction (no producer-id/epoch setter; KIP-939's keepPreparedTxn is neither in
librdkafka nor in a released broker), and a producer cannot outlive its Spark task reliably (a
task's Python worker is not the next epoch's), so a transaction opened in a task can only be
committed or aborted by that task's process. So the writer serializes the epoch's records
(topic, key, value: the serialization schemas run in the task) and returns them as its
committable; the driver keeps them until the checkpoint that covers the epoch completes and then
writes them in ONE transaction of a producer whose transactional id is the sink's (prefix and
operator id), committing in the same transaction, as the marker of that checkpoint, the offset
``checkpoint id`` for partition 0 of each topic written, in the consumer group
``<prefix>-<the sink's app id>`` (``send_offsets_to_transaction``: atomic with the records).
- A read_committed consumer sees the records only after the checkpoint completed.
- A replay of a checkpoint whose transaction committed (a crash after the Kafka commit, before
  the checkpoint record) finds its marker and writes nothing: every record exactly once.
- A crash before the commit leaves an open transaction; the next run's ``init_transactions`` on
  the same transactional id fences and aborts it, and the replayed epochs write the records again.
- A broker restart: the driver's clients that reported errors since the last commit are made again
  before the next one (librdkafka's may wait minutes for a group coordinator after a restart), and
  a commit whose group coordinator does not answer tries once more with a new producer.
The cost: an exactly-once sink's records cross to the driver (as collected records do), and the
driver's producer writes them; AT_LEAST_ONCE writes from the tasks.
"""
from __future__ import annotations

from runtime.common.faults import fault_point
from runtime.common.phase_timer import KAFKA_TRANSACTION
from runtime.connectors.base import Committer
from runtime.connectors.client_pool import configuration_key
from runtime.connectors.kafka_clients import (ClientErrors, KafkaConnectorError, StuckCall, bounded,
                                              client_config, log, renewed, with_errors)
from runtime.connectors.kafka_producer_pool import PRODUCERS
from runtime.datastream.connectors.base import DeliveryGuarantee
from runtime.task.sink_writer import SinkWriter

CHECK_TIMEOUT_S = 10.0
FLUSH_TIMEOUT_S = 60.0
# The records are delivered by then, so the broker answers: the group coordinator does within
# seconds, or not at all (confluentinc/librdkafka#5456), and the commit tries once more with a new
# producer.
OFFSETS_TIMEOUT_S = 15.0
# Java's default partitioner hashes keys with murmur2; librdkafka's default is CRC32: the Java one,
# so a key lands in the partition a Flink job (or any Java producer) puts it in.
PARTITIONER = "murmur2_random"


def _errors(sink) -> ClientErrors:
    return ClientErrors("Kafka sink", sink.bootstrap_servers or "(no bootstrap servers)",
                        "bootstrap.servers (KafkaSink set_bootstrap_servers)")


def _producer_config(sink, errors: ClientErrors, **overrides) -> dict:
    return client_config(sink.properties, "producer", errors, **{"partitioner": PARTITIONER, **overrides})


def _produce(producer, topic: str, key, value, **kwargs) -> None:
    while True:
        try:
            producer.produce(topic, value, key, **kwargs)
            return
        except BufferError:             # the local queue is full: let deliveries drain it
            producer.poll(0.1)


class KafkaSinkWriter(SinkWriter):
    def __init__(self, sink, context):
        super().__init__(sink, context)
        self.exactly_once = sink.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
        self.records: list = []         # EXACTLY_ONCE: (topic, key, value) for the committer
        self.errors = _errors(sink)
        self.failed: list = []          # records the broker did not take
        self.producer = None

    def _producer(self):
        if self.producer is None:
            from confluent_kafka import Producer
            config = _producer_config(self.sink, self.errors)
            if self.sink.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE:
                config.setdefault("enable.idempotence", True)
            # The worker's producer of this configuration, kept from an earlier epoch: a new
            # idempotent one waits ~0.5 s for its producer id before its first record leaves.
            self.pool_key = configuration_key(config)
            self.producer, self.errors = PRODUCERS.acquire(self.pool_key, lambda: (Producer(config), self.errors))
        return self.producer

    def _delivered(self, error, message) -> None:
        if error is not None:
            self.failed.append((message.topic(), error))

    def write(self, values: list) -> None:
        serializer = self.sink.record_serializer
        out = self.records if self.exactly_once else None
        producer = None if self.exactly_once else self._producer()
        for i, value in enumerate(values):
            try:
                topic, key, payload = serializer.serialize(value)
            except Exception as e:
                self.ctx.fail(e, value, values, i)
            if out is not None:
                out.append((topic, key, payload))
            else:
                _produce(producer, topic, key, payload, on_delivery=self._delivered)
        if producer is not None:
            producer.poll(0)

    def finish(self):
        if self.exactly_once:
            records, self.records = self.records, []
            return records or None
        if self.producer is None:
            return None
        left = self.producer.flush(FLUSH_TIMEOUT_S)
        self.producer.poll(0)
        if left or self.failed:
            what = (f"{left} record(s) not acknowledged within {FLUSH_TIMEOUT_S:.0f} s" if left else
                    f"{len(self.failed)} record(s) refused ({self.failed[0][0]}: {self.failed[0][1].str()})")
            problem = f"{self.ctx.operator_name} {self.ctx.subtask_label}: {what}; {self.errors.describe()}"
            if self.sink.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE:
                raise KafkaConnectorError(f"Kafka sink: {problem}")
            log.warning("Kafka sink (DeliveryGuarantee.NONE): %s", problem)
        else:       # everything delivered: the next epoch's writer in this worker takes it on
            PRODUCERS.release(self.pool_key, self.producer, self.errors)
        self.producer, self.failed = None, []
        return None


class KafkaCommitter(Committer):
    """EXACTLY_ONCE: writes each checkpoint's records in one transaction (see the module)."""

    commit_phase = KAFKA_TRANSACTION

    def __init__(self, sink, context):
        super().__init__(sink, context)
        self.at_checkpoint = sink.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
        self.errors = _errors(sink)
        self.transactional_id = f"{sink.transactional_id_prefix}-{context.operator_id}"
        self.marker_group = f"{sink.transactional_id_prefix}-{context.app_id}"
        self._producer = None
        self._group = None

    def _clients(self):
        if self._producer is not None and renewed(f"Kafka sink (transactional.id {self.transactional_id})",
                                                  self.errors, self._producer, self._group):
            self.close()
        if self._producer is None:
            from confluent_kafka import Consumer, Producer
            self.errors.clear()         # a failure quotes what the new clients meet
            producer = Producer(_producer_config(self.sink, self.errors, **{
                "transactional.id": self.transactional_id}))
            # Fences a producer of an earlier run with this id and aborts its open transaction.
            with_errors(self.errors, f"initializing transactions (transactional.id {self.transactional_id})",
                        lambda t: producer.init_transactions(max(t, 5.0)), 60.0, producer.poll, step_s=10.0)
            group = Consumer(client_config(self.sink.properties, "consumer", self.errors, **{
                "group.id": self.marker_group, "enable.auto.commit": False,
                "isolation.level": "read_committed"}))
            self._producer, self._group = producer, group
        return self._producer, self._group

    def commit(self, committables: list, version: int) -> dict:
        records = [r for c in committables if c for r in c]
        if not self.at_checkpoint or not records:
            return {}
        topics = sorted({topic for topic, _, _ in records})
        for again in (False, True):
            try:
                return self._transaction(records, topics, version)
            except StuckCall:
                # Still blocked in its thread: the producer is dropped, not aborted (a second call
                # into it would wait as well); the next producer fences it, aborting its
                # transaction, and writes the records again.
                self.close()
                if not again:
                    log.warning("Kafka sink: consumer group '%s''s coordinator did not answer checkpoint %d's "
                                "commit within %.0f s: again with a new producer", self.marker_group, version,
                                OFFSETS_TIMEOUT_S)
        raise KafkaConnectorError(
            f"Kafka sink: committing checkpoint {version}'s transaction (transactional.id "
            f"{self.transactional_id}) on {self.sink.bootstrap_servers} failed: the consumer group "
            f"'{self.marker_group}''s coordinator did not answer within {OFFSETS_TIMEOUT_S:.0f} s, twice, "
            f"with a new producer the second time; {self.errors.describe()}")

    def _transaction(self, records: list, topics: list, version: int) -> dict:
        """Checkpoint ``version``'s records and marker in one transaction, unless a run before
        committed it. Raises ``StuckCall`` when the group coordinator did not answer."""
        from confluent_kafka import KafkaException, TopicPartition
        producer, group = self._clients()
        markers = [TopicPartition(t, 0, version) for t in topics]
        # Retried: a new cluster answers "coordinator load in progress" while it makes its offsets topic.
        done = with_errors(self.errors, f"reading the commit markers of consumer group '{self.marker_group}'",
                           lambda t: group.committed([TopicPartition(t_, 0) for t_ in topics], timeout=max(t, 5)),
                           60.0, producer.poll, step_s=10.0)
        if any(tp.offset >= version for tp in done):
            log.info("Kafka sink: checkpoint %d's transaction was committed before (a replay): not written again",
                     version)
            return {}
        try:
            producer.begin_transaction()
            for topic, key, value in records:
                _produce(producer, topic, key, value)
            # Delivered first: the producer's connections are up when it asks for the group's
            # coordinator, which it would otherwise wait for past its timeout (``bounded``).
            producer.flush(FLUSH_TIMEOUT_S)
            bounded(lambda: producer.send_offsets_to_transaction(
                markers, group.consumer_group_metadata(), OFFSETS_TIMEOUT_S), OFFSETS_TIMEOUT_S + 5)
            fault_point("in-kafka-transaction", version)     # records and marker sent, not committed
            producer.commit_transaction(FLUSH_TIMEOUT_S)
        except KafkaException as e:
            error = e.args[0] if e.args else None
            try:
                if error is None or not error.fatal():
                    producer.abort_transaction(30)
            except KafkaException:
                pass
            if error is not None and error.fatal():
                self.close()            # the next commit starts a fresh producer (and fences this one)
            raise KafkaConnectorError(
                f"Kafka sink: committing checkpoint {version}'s transaction ({len(records)} records, "
                f"transactional.id {self.transactional_id}) on {self.sink.bootstrap_servers} failed: "
                f"{error.str() if error is not None else e}; {self.errors.describe()}") from None
        return {}

    def close(self) -> None:
        if self._group is not None:
            self._group.close()
        self._producer, self._group = None, None

    @staticmethod
    def check(sink, name: str, input_type=None) -> None:
        """Reachable servers, accepted credentials and the fixed topic there, before the first epoch."""
        from confluent_kafka.admin import AdminClient
        errors = _errors(sink)
        admin = AdminClient(client_config(sink.properties, "admin", errors))
        topics = with_errors(errors, f"reading the cluster's metadata for the sink '{name}'",
                             lambda t: admin.list_topics(timeout=t), CHECK_TIMEOUT_S, admin.poll).topics
        topic = sink.record_serializer.topic
        if topic is not None and (topic not in topics or topics[topic].error is not None):
            raise KafkaConnectorError(
                f"Kafka sink '{name}': topic '{topic}' does not exist on {sink.bootstrap_servers} "
                f"(KafkaRecordSerializationSchema set_topic): create it or fix the name")
