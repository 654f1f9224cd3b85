"""A local Apache Kafka broker: one KRaft node (broker and controller in one process) on
127.0.0.1, run from the release's jars that bin/dev fetches into .jars/kafka
(include/maven/kafka/pom.xml). The tests' ``kafka_broker`` fixture starts one per test run;
``bin/dev kafka [--port 9092] [--dir DIR]`` runs one in the foreground until Ctrl-C.

Two client listeners: PLAINTEXT on ``port`` (``bootstrap``) and SASL_PLAINTEXT with the PLAIN
mechanism on ``sasl_port`` (``sasl_bootstrap``, user ``sluice``, password ``sluice-secret``), so
a client's refused authentication is a real broker's answer.
"""
from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
JARS = ROOT / ".jars" / "kafka"
SASL_USER, SASL_PASSWORD = "sluice", "sluice-secret"
STARTED = "Kafka Server started"        # what KafkaRaftServer logs once it serves clients
# A broker of a test run or a developer's laptop: a small heap, C1 only (it lives minutes).
JVM_OPTIONS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Djava.awt.headless=true")

LOG4J2 = """\
Configuration:
  Appenders:
    File:
      name: server
      fileName: "{log}"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        ref: server
"""


class KafkaBrokerError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_port_free(port: int, what: str) -> None:
    """Fail at once, in one line, when something listens on 127.0.0.1:``port`` already (another
    broker): the broker itself would keep retrying its bind and fail minutes later with a stack trace.
    SO_REUSEADDR as the JVM binds: only a listening socket takes the port, not a closed connection."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise KafkaBrokerError(f"port {port} on 127.0.0.1 ({what}) is taken: another broker or program listens "
                                   f"there ({e.strerror}); stop it or choose another port (--port)") from None


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    exe = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not exe or not os.access(exe, os.X_OK):
        raise KafkaBrokerError("the Kafka broker needs Java 17 (no `java` on PATH nor in JAVA_HOME): "
                               "install a JDK (Debian: apt-get install openjdk-17-jre-headless)")
    return exe


def classpath() -> str:
    if not (JARS / ".pom-sha256").is_file() or not any(JARS.glob("kafka_2.13-*.jar")):
        raise KafkaBrokerError(f"Kafka's jars are missing from {JARS}: run bin/dev once to fetch them "
                               "(Maven copies include/maven/kafka/pom.xml's dependencies there)")
    return str(JARS / "*")


def cluster_id() -> str:
    """A random cluster id as Kafka's ``Uuid.randomUuid``: 16 bytes, URL-safe base64 without
    padding, never starting with "-" (the storage tool would read it as an option: 1 in 64)."""
    while True:
        made = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not made.startswith("-"):
            return made


class LocalKafkaBroker:
    """One Kafka node on 127.0.0.1. ``start()`` formats ``directory`` on first use and starts the
    broker; ``stop()`` shuts it down cleanly, ``kill()`` with SIGKILL, ``restart()`` starts it again
    on the same log dir and ports (the broker-restart fault test)."""

    def __init__(self, directory: Optional[str] = None, port: Optional[int] = None,
                 sasl_port: Optional[int] = None, controller_port: Optional[int] = None):
        self.directory = Path(directory or tempfile.mkdtemp(prefix="sluice-kafka-"))
        self.port = port or free_port()
        self.sasl_port = sasl_port or free_port()
        self.controller_port = controller_port or free_port()
        self.proc: Optional[subprocess.Popen] = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    @property
    def _data(self) -> Path:
        return self.directory / "data"

    def properties(self) -> str:
        jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{SASL_USER}" password="{SASL_PASSWORD}" user_{SASL_USER}="{SASL_PASSWORD}";')
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": (f"PLAINTEXT://127.0.0.1:{self.port},SASL://127.0.0.1:{self.sasl_port},"
                          f"CONTROLLER://127.0.0.1:{self.controller_port}"),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port},SASL://127.0.0.1:{self.sasl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl.plain.sasl.jaas.config": jaas,
            "log.dirs": str(self._data),
            # One node: every internal topic with one replica.
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "min.insync.replicas": "1",
            "default.replication.factor": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",     # a missing topic is an error, not a new topic
            "num.network.threads": "2",
            "num.io.threads": "2",
            "log.flush.interval.messages": "9223372036854775807",
        }
        return "".join(f"{k}={v}\n" for k, v in settings.items())

    def _java(self, main: str, *args: str, **popen) -> list[str]:
        return [java(), *JVM_OPTIONS, f"-Dlog4j2.configurationFile={self.directory / 'log4j2.yaml'}",
                "-cp", classpath(), main, *args]

    def _format(self) -> None:
        config = self.directory / "server.properties"
        config.write_text(self.properties())
        (self.directory / "log4j2.yaml").write_text(LOG4J2.format(log=self.log_file))
        if (self._data / "meta.properties").is_file():
            return
        done = subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", cluster_id(),
                                         "-c", str(config)),
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise KafkaBrokerError(f"formatting the Kafka log dir {self._data} failed:\n"
                                   f"{done.stdout}{done.stderr}")

    def start(self, timeout: float = 90) -> "LocalKafkaBroker":
        for port, what in ((self.port, "PLAINTEXT listener"), (self.sasl_port, "SASL listener"),
                           (self.controller_port, "controller listener")):
            check_port_free(port, what)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._format()
        started_before = self._log_text().count(STARTED)
        with open(self.directory / "console.log", "ab") as console:
            self.proc = subprocess.Popen(
                self._java("kafka.Kafka", str(self.directory / "server.properties")),
                stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)     # Ctrl-C in `bin/dev kafka` is handled by main()
        deadline = time.monotonic() + timeout
        while self._log_text().count(STARTED) <= started_before:
            if self.proc.poll() is not None:
                raise KafkaBrokerError(f"the Kafka broker exited ({self.proc.returncode}) while starting; "
                                       f"see {self.log_file} and {self.directory / 'console.log'}:\n"
                                       f"{self._log_text()[-3000:]}")
            if time.monotonic() > deadline:
                self.kill()
                raise KafkaBrokerError(f"the Kafka broker did not start within {timeout:.0f} s; "
                                       f"see {self.log_file}")
            time.sleep(0.1)
        return self

    def _log_text(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60) -> None:
        """A clean shutdown (SIGTERM), SIGKILL if it takes longer than ``timeout``."""
        if self.running:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def kill(self) -> None:
        if self.running:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self, timeout: float = 90) -> "LocalKafkaBroker":
        self.stop()
        return self.start(timeout)

    def create_topics(self, partitions_by_topic: dict) -> list[str]:
        """Make the topics that are not there yet (``{name: partitions}``, replication 1); the
        ones made, in order. With confluent-kafka, the project's client."""
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        existing = admin.list_topics(timeout=30).topics
        wanted = [NewTopic(t, n, 1) for t, n in partitions_by_topic.items() if t not in existing]
        for future in (admin.create_topics(wanted).values() if wanted else ()):
            future.result(30)
        return [t.topic for t in wanted]

    def __enter__(self) -> "LocalKafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="bin/dev kafka",
                                     description="A one-node Apache Kafka broker (KRaft) on 127.0.0.1, "
                                                 "in the foreground until Ctrl-C.")
    parser.add_argument("--port", type=int, default=9092, help="the PLAINTEXT listener's port (9092)")
    parser.add_argument("--dir", help="the broker's folder (log dir, config, server.log); "
                                      "kept, so topics survive a restart. Default: a new temporary folder")
    parser.add_argument("--topic", action="append", default=[], metavar="NAME[:PARTITIONS]",
                        help="make this topic once the broker runs, unless it is there (1 partition "
                             "by default); repeatable, e.g. --topic events:4 --topic window-counts")
    args = parser.parse_args(argv)
    try:
        topics = {name: int(n or 1) for name, _, n in (t.partition(":") for t in args.topic)}
    except ValueError:
        parser.error(f"--topic takes NAME or NAME:PARTITIONS (a number), got {args.topic}")
    broker = LocalKafkaBroker(args.dir, port=args.port)
    # SIGTERM as Ctrl-C: it interrupts whatever runs (the start, the wait below), and the broker
    # stops after it. (Stopping it in the handler waited on the Popen whose interrupted wait() holds
    # its lock: a deadlock that only SIGKILL ended.)
    signal.signal(signal.SIGTERM, _interrupt)
    code = None
    try:
        broker.start()
        made = broker.create_topics(topics)
        if made:
            print(f"Topics made: {', '.join(f'{t} ({topics[t]} partitions)' for t in made)}", flush=True)
        print(f"Kafka {broker.bootstrap} (bootstrap.servers); SASL/PLAIN on {broker.sasl_bootstrap} "
              f"as {SASL_USER}/{SASL_PASSWORD}; folder {broker.directory}, log {broker.log_file}. Ctrl-C stops it.",
              flush=True)
        code = broker.proc.wait()
    except KafkaBrokerError as e:
        print(f"bin/dev kafka: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)     # a second one does not cut the clean stop short
        try:
            broker.stop()
        except KeyboardInterrupt:       # a second Ctrl-C: now
            broker.kill()
    if code is not None:
        print(f"bin/dev kafka: the broker exited by itself (exit code {code}); see {broker.log_file}", file=sys.stderr)
        return 1
    print("bin/dev kafka: the broker stopped", file=sys.stderr)
    return 0


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
