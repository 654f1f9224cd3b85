"""``bin/dev kafka``, the developer's broker (include/kafka_broker.py), as a person runs it: a
taken port is said at once in one line; SIGTERM (as Ctrl-C) stops the broker and the command."""
import os
import signal
import socket
import subprocess
import sys
import time

import kafka_env  # noqa: F401  (puts include/ on sys.path)
from kafka_broker import free_port  # noqa
from seed import ROOT
from waiting import wait_until

DEV = os.path.join(ROOT, "bin", "dev")


def bin_dev_kafka(*args, **popen):
    env = {**os.environ, "SLUICE_SKIP_BOOTSTRAP": "1",
           "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    return subprocess.Popen([DEV, "kafka", *args], cwd=ROOT, env=env, text=True, **popen)


def test_a_taken_port_is_said_at_once_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        proc = bin_dev_kafka("--port", str(port), "--dir", str(tmp_path / "broker"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and time.monotonic() - started < 30
    assert err.strip().splitlines() == [
        f"bin/dev kafka: port {port} on 127.0.0.1 (PLAINTEXT listener) is taken: another broker or program "
        f"listens there (Address already in use); stop it or choose another port (--port)"]
    assert out == ""


def test_sigterm_stops_the_broker_and_the_command(tmp_path):
    """The handler used to stop the broker from inside the interrupted wait() on it: a deadlock."""
    port = free_port()
    log = tmp_path / "dev-kafka.log"
    with open(log, "w") as out:
        proc = bin_dev_kafka("--port", str(port), "--dir", str(tmp_path / "broker"), stdout=out, stderr=out)
    try:
        wait_until(lambda: "Ctrl-C stops it." in log.read_text(), 120, "bin/dev kafka's ready line",
                   log=log, proc=proc)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass        # the broker serves
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert log.read_text().strip().splitlines()[-1] == "bin/dev kafka: the broker stopped"
    with socket.socket() as s:       # the broker's JVM is gone with it: its port is free
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
