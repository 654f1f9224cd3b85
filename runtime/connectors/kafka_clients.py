"""confluent-kafka (librdkafka) clients for the Kafka source and sink: their configuration from a
descriptor's properties, and errors that name the servers, the setting to fix and what the
broker said.

librdkafka reports connection and authentication failures through its error callback, served
while the client polls, and a request only times out: ``ClientErrors`` collects them, so a
refused password or an unreachable broker fails at once with librdkafka's own words instead of
after a timeout that says "transport failure".
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional

log = logging.getLogger("runtime.connectors.kafka")

# Flink's KafkaSourceOptions and the Java client's class settings: not librdkafka properties.
NOT_CLIENT_PROPERTIES = frozenset({
    "partition.discovery.interval.ms", "commit.offsets.on.checkpoint", "client.id.prefix",
    "register.consumer.metrics", "key.deserializer", "value.deserializer", "key.serializer",
    "value.serializer",
})
CONSUMER_ONLY = frozenset({"group.id", "auto.offset.reset", "isolation.level", "enable.auto.commit",
                           "enable.partition.eof", "session.timeout.ms", "max.poll.interval.ms"})
# Flink's and the Java client's default (librdkafka's is read_committed).
DEFAULT_ISOLATION = "read_uncommitted"
# How long a request may wait for the broker (the Java client's default.api.timeout.ms).
DEFAULT_API_TIMEOUT_MS = 60_000


class KafkaConnectorError(RuntimeError):
    """The Kafka source or sink cannot go on: the message names what to fix."""


class ClientErrors:
    """librdkafka's error callback: fatal, authentication and all-brokers-down errors fail the
    client's next call (``raise_if_failed``); transient transport errors are kept for messages."""

    FAILING = ("_AUTHENTICATION", "_ALL_BROKERS_DOWN", "_FATAL", "SASL_AUTHENTICATION_FAILED",
               "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED",
               "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "_SSL", "_INVALID_ARG")

    def __init__(self, what: str, servers: str, setting: str):
        self.what, self.servers, self.setting = what, servers, setting
        self.errors: list = []

    def __call__(self, error) -> None:
        self.errors.append(error)

    def clear(self) -> list:
        """The errors so far, forgotten: a later failure quotes only what came after them."""
        seen, self.errors = self.errors, []
        return seen

    def failing(self) -> list:
        return [e for e in self.errors if e.fatal() or e.name() in self.FAILING]

    def describe(self, errors: Optional[list] = None) -> str:
        seen = []
        for e in errors if errors is not None else self.errors:
            text = f"{e.name()}: {e.str()}"
            if text not in seen:
                seen.append(text)
        return "; ".join(seen[:4]) or "no answer"

    def error(self, doing: str, cause: str = "") -> KafkaConnectorError:
        failing = self.failing()
        errors = failing + [e for e in self.errors if e not in failing]
        auth = any(e.name() in ("_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED") for e in errors)
        fix = ("check security.protocol, sasl.mechanisms, sasl.username and sasl.password (set_property)"
               if auth else f"check {self.setting} and that the broker runs")
        said = self.describe(errors) if errors else cause
        return KafkaConnectorError(f"{self.what}: {doing} on {self.servers} failed: {said}. Fix: {fix}")

    def raise_if_failed(self, doing: str) -> None:
        if self.failing():
            raise self.error(doing)


def client_config(properties: tuple, kind: str, errors: ClientErrors, **overrides) -> dict:
    """librdkafka's configuration of a ``kind`` ("consumer", "producer", "admin") client from a
    descriptor's properties; ``overrides`` win."""
    config = {k: v for k, v in properties if k not in NOT_CLIENT_PROPERTIES}
    if kind != "consumer":
        config = {k: v for k, v in config.items() if k not in CONSUMER_ONLY}
    config.update(overrides)
    config["error_cb"] = errors
    config["logger"] = _QUIET     # librdkafka's own log lines repeat what error_cb reports
    return config


def _quiet_logger() -> logging.Logger:
    quiet = logging.getLogger("runtime.connectors.kafka.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    quiet.propagate = False
    return quiet


_QUIET = _quiet_logger()


def with_errors(errors: ClientErrors, doing: str, call: Callable, timeout_s: float, poll: Callable,
                step_s: float = 0.5):
    """``call(timeout)`` retried in steps of ``step_s`` until ``timeout_s``, failing at once when
    librdkafka reports an authentication failure or every broker down (served by ``poll``)."""
    from confluent_kafka import KafkaException
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call(min(step_s, max(0.05, deadline - time.monotonic())))
        except KafkaException as e:
            poll(0)
            errors.raise_if_failed(doing)
            if time.monotonic() >= deadline:
                raise errors.error(doing, str(e.args[0].str() if e.args else e)) from None


def served(errors: ClientErrors, *clients) -> list:
    """The errors librdkafka reported to ``clients`` (whose callback ``errors`` is) since they were
    last asked, and forgets them. Each client is polled first: what it queued while it was idle (a
    broker down meanwhile) comes now, not during its next call, whose failure would quote it.
    Driver-side clients make themselves again when there were any (``renewed``)."""
    for client in clients:
        if client is not None:
            client.poll(0)
    return errors.clear()


def renewed(what: str, errors: ClientErrors, *clients) -> bool:
    """Whether ``clients`` (a driver-side set, one ``errors``) reported errors since they were last
    asked, logged: the caller then drops them for new ones. After a broker restart, librdkafka's
    clients may wait for a group coordinator past every timeout (confluentinc/librdkafka#5456,
    #5511); new ones connect afresh, within seconds of the broker's return."""
    seen = served(errors, *clients)
    if seen:
        log.info("%s: new Kafka clients after %s", what, errors.describe(seen))
    return bool(seen)


class StuckCall(Exception):
    """A client call still blocked past its deadline (``bounded``)."""


def bounded(call: Callable, timeout_s: float):
    """``call()``'s result, waiting at most ``timeout_s``: for a librdkafka call that may block past
    its own timeout (``send_offsets_to_transaction`` waits for a group coordinator connection
    that may never come up again after a broker restart, until the broker closes an idle
    connection ten minutes later: confluentinc/librdkafka#5456, #5511). Raises ``StuckCall`` then;
    the call goes on in its (daemon) thread, so its client must not be used again."""
    outcome: list = []

    def run():
        try:
            outcome.append((True, call()))
        except BaseException as e:      # handed to the caller's thread
            outcome.append((False, e))
    thread = threading.Thread(target=run, name="sluice-kafka-call", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not outcome:
        raise StuckCall
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit overflow)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def split_owner(topic: str, partition: int, parallelism: int) -> int:
    """The source subtask that reads a partition: Flink's ``KafkaSourceEnumerator.getSplitOwner``
    (a topic's partitions round-robin from a start that its name's hash picks), so a restore at
    another parallelism redistributes partitions as Flink does."""
    start = ((java_string_hash(topic) * 31) & 0x7FFFFFFF) % parallelism
    return (start + partition) % parallelism
