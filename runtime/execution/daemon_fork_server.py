"""PySpark's worker daemons forked from a process that has the engine imported.

Spark starts a Python daemon (``pyspark.daemon``) per worker environment, and Sluice gives each
slot and each keyed subtask's store a pool of its own (``python_rdds``: pinned stages): a job of
two keyed operators at parallelism 2 starts six daemons, each a new interpreter that imports
pyspark, then forks a worker that imports the engine (pyarrow, numpy, the operators) at its first
task, at every driver start and for every new subtask of a rescale. Forked from this module's
server, a driver of four keyed operators at parallelism 2, then 3, took 12 CPU-seconds of the
2-core machine instead of 27, and its run at parallelism 3 2.1 s instead of 10.0
(bench/python_workers.py).

With a local master the driver starts this module's *fork server* once: a process that imports
what a worker needs and then waits. Spark's daemon module is this module's client
(``spark.python.daemon.module``), an interpreter that imports nothing heavy: it hands the fork
server its standard streams (``SCM_RIGHTS``), its environment, arguments and folder, and the
fork server forks a daemon that takes them over and runs ``pyspark.daemon.manager()`` as
Spark's own would, its workers forked from it with the engine imported. The client stays as the
process Spark knows: it passes Spark's SIGTERM on and ends when the daemon does.

The client falls back to Spark's own daemon, in its own process, whenever the forked one could
differ from it: no fork server named in its environment (an executor on another machine), another
interpreter or checkout of the engine, other interpreter settings (``PYTHONHASHSEED``, ...), or
a ``PYTHONPATH`` folder that holds a module the fork server imported already.

    python -m runtime.execution.daemon_fork_server serve SOCKET     # the fork server
    python -m runtime.execution.daemon_fork_server                  # Spark's daemon module
"""
from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from typing import Optional

MODULE = "runtime.execution.daemon_fork_server"
SERVER_VARIABLE = "SLUICE_DAEMON_FORK_SERVER"       # the fork server's socket, in the daemons' environment
# The engine's side of a Python worker (operators, state, windows, the connectors' readers), which
# runtime.execution.spark's warm-up task imports in workers Spark forks itself.
ENGINE_MODULES = ("runtime.connectors.files", "runtime.task.stream_task")
PRELOAD = ("pyspark.daemon", "pyspark.worker", *ENGINE_MODULES)
# Read by the interpreter, the C library or the native libraries as a process starts: a forked
# daemon keeps the fork server's, so they must equal the client's.
_STARTUP_VARIABLES = ("LD_PRELOAD", "LD_LIBRARY_PATH", "MALLOC_ARENA_MAX", "LANG", "LC_ALL", "LC_CTYPE",
                      "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_HEADER = struct.Struct("!I")
START_TIMEOUT_S = 60        # for the fork server's imports
_REFUSED = -1


def startup_settings(env) -> dict:
    """The settings a process takes from its environment as it starts (CPython's PYTHON*
    variables but PYTHONPATH, which the forked daemon applies itself)."""
    return {k: v for k, v in env.items()
            if k in _STARTUP_VARIABLES or (k.startswith("PYTHON") and k[6:].isalpha() and k != "PYTHONPATH")}


# ---------------------------------------------------------------------------------------------
# The driver's side: one fork server a process, importing while the JVM starts


_server: Optional[subprocess.Popen] = None


def start(folder: str, worker_env: dict, python: str = sys.executable) -> str:
    """Start this process's fork server (once) with a socket in a folder of its own in ``folder``
    (only this user may connect: a connection asks for a process of this user's); the socket's
    path, which the JVM's daemons must find under ``SERVER_VARIABLE``. ``worker_env``: the
    variables Spark adds to its Python workers' environment that a process reads as it starts
    (``PYTHONHASHSEED``, ``OMP_NUM_THREADS``); ``python``: the workers' interpreter.

    It returns at once: the server imports while the JVM starts, and a daemon asked for before the
    server listens (or if it never does, which is logged) is Spark's own."""
    global _server
    if _server is not None and _server.poll() is None:
        return _server.args[-1]
    private = tempfile.mkdtemp(prefix="sluice-daemons-", dir=folder if len(folder) < 60 else "/tmp")
    path = os.path.join(private, "fork.sock")
    env = dict(os.environ, **worker_env, PYTHONUNBUFFERED="YES")     # Spark's daemons run unbuffered
    env.pop(SERVER_VARIABLE, None)
    # Its stdin is this process's pipe: it ends when this process does, however that ends (a
    # Ctrl-C at the terminal is the driver's to handle: the server ignores it).
    _server = subprocess.Popen([python, "-m", MODULE, "serve", path], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, env=env)
    threading.Thread(target=_await_ready, args=(_server,), name="daemon-fork-server-start", daemon=True).start()
    return path


def _await_ready(server: subprocess.Popen) -> None:
    started = select.select([server.stdout], [], [], START_TIMEOUT_S)[0]
    if started and server.stdout.readline().strip() == b"ready":
        return
    server.kill()
    server.wait()
    logging.getLogger(__name__).warning(
        "The Python daemons' fork server did not start: each worker pool starts Spark's own daemon")


# ---------------------------------------------------------------------------------------------
# The fork server


def serve(path: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import gc
    import importlib
    for name in PRELOAD:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()         # the imports' objects: no copy-on-write of their pages by the collector
    preloaded = frozenset(name.partition(".")[0] for name in sys.modules)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bound and listening under another name, then renamed: a client that finds the path finds a
    # socket that listens (one that connects between bind and listen is refused).
    listener.bind(path + ".new")
    listener.listen(64)
    os.rename(path + ".new", path)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)       # the daemons are reaped as they end
    sys.stdout.buffer.write(b"ready\n")
    sys.stdout.flush()
    try:
        while True:
            ready, _, _ = select.select([listener, 0], [], [])
            if 0 in ready and not os.read(0, 4096):
                return      # the driver is gone
            if listener in ready:
                connection, _ = listener.accept()
                connection.settimeout(10)
                with connection:
                    _fork_daemon(connection, listener, preloaded)
    finally:
        os.remove(path)
        os.rmdir(os.path.dirname(path))


def _fork_daemon(connection: socket.socket, listener: socket.socket, preloaded: frozenset) -> None:
    fds: list = []
    try:
        message, fds, _, _ = socket.recv_fds(connection, _HEADER.size, 3)
        request = json.loads(_read(connection, _HEADER.unpack(message)[0]))
        why = _differs(request, preloaded) or (None if len(fds) == 3 else "no standard streams given")
        if why:
            _send(connection, {"pid": _REFUSED, "why": why})
            return
        try:
            pid = os.fork()
        except OSError as e:
            _send(connection, {"pid": _REFUSED, "why": f"fork failed: {e}"})
            return
        if pid == 0:
            listener.close()
            connection.close()
            _become_daemon(request, fds)        # never returns
        _send(connection, {"pid": pid})
    except (OSError, ValueError, KeyError, struct.error):
        return      # the client gave up or sent nonsense: it runs Spark's own daemon
    finally:
        for fd in fds:
            os.close(fd)


def _differs(request: dict, preloaded: frozenset) -> Optional[str]:
    """Why a daemon forked from here would not be the one the client's own interpreter makes."""
    if request.get("executable") != sys.executable:
        return f"another interpreter ({request.get('executable')})"
    if request.get("module") != os.path.abspath(__file__):
        return f"another checkout of the engine ({request.get('module')})"
    env = request["env"]
    theirs, mine = startup_settings(env), startup_settings(os.environ)
    if theirs != mine:
        names = sorted(k for k in {*theirs, *mine} if theirs.get(k) != mine.get(k))
        return f"its environment sets {', '.join(names)} otherwise"
    for folder in _new_path_entries(env):
        if _bundled_with_pyspark(folder):
            continue
        try:
            names = os.listdir(folder) if os.path.isdir(folder) else []
        except OSError:
            continue
        shadowing = sorted({n.partition(".")[0] for n in names} & preloaded)
        if shadowing:
            return f"PYTHONPATH folder {folder} holds {shadowing[0]}, imported here already"
    return None


def _new_path_entries(env: dict) -> list:
    return [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]


def _bundled_with_pyspark(entry: str) -> bool:
    """pyspark's own archives of itself and py4j (Spark puts them first on its workers' path):
    the code the fork server imported from the installed package."""
    import pyspark
    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    return entry.endswith(".zip") and os.path.abspath(entry).startswith(os.path.join(home, "python", "lib") + os.sep)


def _become_daemon(request: dict, fds: list) -> None:
    """In the forked child: the client's streams, environment, folder and arguments, then Spark's
    daemon, as ``python -m pyspark.daemon`` would run it there."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.argv = list(request["argv"])
        sys.path[:0] = _new_path_entries(request["env"])
        from pyspark import daemon
        daemon.manager()        # exits through sys.exit
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _send(connection: socket.socket, message: dict) -> None:
    body = json.dumps(message).encode()
    connection.sendall(_HEADER.pack(len(body)) + body)


def _receive(connection: socket.socket) -> dict:
    return json.loads(_read(connection, _HEADER.unpack(_read(connection, _HEADER.size))[0]))


def _read(connection: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = connection.recv(n - len(data))
        if not chunk:
            raise OSError("connection closed")
        data += chunk
    return bytes(data)


# ---------------------------------------------------------------------------------------------
# The client: Spark's daemon module


def client() -> None:
    # Out of the JVM's process group, as Spark's daemon goes (pyspark.daemon.manager): a Ctrl-C at
    # the driver's terminal is the driver's to handle, not its Python daemons'.
    os.setpgid(0, 0)
    pid, why = _request_daemon(os.environ.get(SERVER_VARIABLE))
    if pid is None:
        if why:
            print(f"sluice: Spark's own Python daemon, not a forked one: {why}", file=sys.stderr)
        from pyspark import daemon
        daemon.manager()
        return
    # The daemon has this process's streams; this process is what Spark holds: it passes
    # Spark's SIGTERM (stopping the daemon) on, and ends when the daemon ends.
    signal.signal(signal.SIGTERM, lambda *_: _signal(pid, signal.SIGTERM))
    try:
        watch = os.pidfd_open(pid)
    except ProcessLookupError:
        return      # it ended already
    select.select([watch], [], [])      # readable once the daemon has ended


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _request_daemon(path: Optional[str]) -> tuple[Optional[int], Optional[str]]:
    if not path:
        return None, None
    request = json.dumps({"env": dict(os.environ), "argv": sys.argv, "cwd": os.getcwd(),
                          "executable": sys.executable, "module": os.path.abspath(__file__)}).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(path)
            socket.send_fds(connection, [_HEADER.pack(len(request))], [0, 1, 2])
            connection.sendall(request)
            answer = _receive(connection)
    except (OSError, ValueError) as e:
        return None, f"the fork server at {path} did not answer ({e})"
    if answer.get("pid", _REFUSED) == _REFUSED:
        return None, answer.get("why", "refused")
    return answer["pid"], None


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2])
    else:
        client()
