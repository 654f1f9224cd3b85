"""A local session's Python daemons are forked from the driver's fork server, which has the engine
imported (runtime.execution.daemon_fork_server): its workers run as Spark's own would (their
pinned pools' environments, PySpark's hash seed), and a daemon that could differ from Spark's own
is Spark's own."""
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

import pytest
from pyspark import cloudpickle

from runtime.execution import daemon_fork_server
from runtime.execution.python_rdds import PythonRDDs
from waiting import wait_until

cloudpickle.register_pickle_by_value(sys.modules[__name__])     # the workers cannot import tests

HASHED = "sluice"


def _where(index, rows):
    import os
    import sys
    daemon = os.getppid()
    with open(f"/proc/{daemon}/stat") as f:
        server = int(f.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{server}/cmdline", "rb") as f:
        server_command = f.read().split(b"\0")
    return [(index, os.environ.get("SLUICE_SLOT"), server_command, "runtime.task.stream_task" in sys.modules,
             hash(HASHED), os.environ.get("PYTHONHASHSEED"))]


def _hash_with_seed(seed: str) -> int:
    return int(subprocess.run([sys.executable, "-c", f"print(hash({HASHED!r}))"], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONHASHSEED=seed), check=True).stdout)


def test_a_local_sessions_workers_are_forked_from_the_fork_server_with_their_own_pools(spark):
    py = PythonRDDs(spark.sparkContext)
    rows = py.collect([py.source(2, pinned=2, pool_group=7).then(_where)])
    seed = rows[0][5]
    assert seed is not None
    for index, slot, command, preloaded, hashed, _ in sorted(rows):
        assert slot == f"7-{index}"                      # the pinned pool's own environment
        assert command[1:4] == [b"-m", daemon_fork_server.MODULE.encode(), b"serve"], command
        assert preloaded                                 # imported before the task came
        assert hashed == _hash_with_seed(seed)           # the seed Spark gives its workers, in effect


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A fork server of this process's (the one its session started, or a new one)."""
    path = daemon_fork_server.start(str(tmp_path_factory.mktemp("fork")), {
        "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0"), "OMP_NUM_THREADS": "1"})
    wait_until(lambda: os.path.exists(path), 60, "the fork server's socket")
    return path


@pytest.fixture
def sockets():
    """A short folder for a daemon's socket, as Spark's (a Unix socket's path has at most 107
    bytes, and pytest's tmp_path may be longer)."""
    folder = tempfile.mkdtemp(prefix="sluice-test-", dir="/tmp")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _daemon(server_path, sockets, **env):
    """The client as Spark's JVM starts it: ``python -m MODULE pyspark.worker``, its stdin a pipe
    the JVM keeps, the daemon's socket path on its stdout."""
    full = dict(os.environ, PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED", "0"), OMP_NUM_THREADS="1",
                PYTHONUNBUFFERED="YES", PYTHON_UNIX_DOMAIN_ENABLED="true", PYTHON_WORKER_FACTORY_SOCK_DIR=sockets,
                PYTHON_WORKER_FACTORY_SECRET="s", **{daemon_fork_server.SERVER_VARIABLE: server_path})
    full.update(env)
    process = subprocess.Popen([sys.executable, "-m", daemon_fork_server.MODULE, "pyspark.worker"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full)
    length = struct.unpack("!i", process.stdout.read(4))[0]
    return process, process.stdout.read(length).decode()


def _worker_pid(socket_path: str) -> int:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(socket_path)
        return struct.unpack("!i", s.recv(4))[0]


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _gone(pid: int, within: float = 10) -> bool:
    deadline = time.time() + within
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_forked_daemon_serves_workers_and_ends_with_sparks_sigterm(server, sockets):
    client, path = _daemon(server, sockets)
    worker = _worker_pid(path)
    daemon = _parent(worker)
    assert daemon != client.pid and _parent(daemon) != client.pid      # forked by the server
    client.terminate()                  # Spark's stopDaemon: SIGTERM to the process it started
    assert client.wait(10) == 0
    assert _gone(daemon) and _gone(worker)
    assert b"own Python daemon" not in client.stderr.read()


def test_a_daemon_ends_when_the_jvm_closes_its_stdin(server, sockets):
    client, path = _daemon(server, sockets)
    worker = _worker_pid(path)
    daemon = _parent(worker)
    client.stdin.close()                # the JVM is gone
    assert client.wait(10) == 0
    assert _gone(daemon) and _gone(worker)


@pytest.mark.parametrize("env, why", [
    ({"PYTHONHASHSEED": "12345"}, "its environment sets PYTHONHASHSEED otherwise"),
    ({"OMP_NUM_THREADS": "4"}, "its environment sets OMP_NUM_THREADS otherwise"),
    ({"PYTHONPATH": "{shadow}"}, "PYTHONPATH folder {shadow} holds numpy, imported here already"),
])
def test_a_daemon_that_could_differ_is_sparks_own(server, sockets, tmp_path, env, why):
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "numpy.py").write_text("raise ImportError('a numpy of its own')\n")
    env = {k: v.format(shadow=shadow) for k, v in env.items()}
    client, path = _daemon(server, sockets, **env)
    worker = _worker_pid(path)
    assert _parent(worker) == client.pid            # Spark's own daemon, in the client's process
    client.stdin.close()
    client.wait(10)                                 # (its exit status on stdin's end is 1, Spark's way)
    assert why.format(shadow=shadow) in client.stderr.read().decode()
