"""The JobManager's REST endpoint (Flink's WebMonitorEndpoint): HTTP and JSON around the
Dispatcher, which answers. The standard library's ThreadingHTTPServer: a handful of clients
(the CLI, Airflow's triggerer) asking every few seconds need no more.

Bound to 127.0.0.1 unless told otherwise; on another address it refuses to start without a
token, and with a token every request needs ``Authorization: Bearer <token>``. The address it
listens on goes to ``<warehouse>/jobmanager/address.json`` for clients that know the warehouse.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import re
import signal
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

from runtime.jobmanager.dispatcher import Dispatcher, RestHandlerException
from runtime.jobmanager.driver import write_json
from runtime.jobmanager.rest_client import ADDRESS_FILE, address_file
from runtime.jobmanager.standby import StandbyDrivers

log = logging.getLogger(__name__)

JID = r"(?P<jid>[^/]+)"
# (method, path, handler(dispatcher, match, query, body) -> (status, JSON)): Flink's routes, then the web view's.
ROUTES = [
    ("GET", r"/overview", lambda d, m, q, b: (200, d.overview())),
    ("GET", r"/jobs", lambda d, m, q, b: (200, d.list_jobs())),
    ("POST", r"/jobs", lambda d, m, q, b: (202, d.submit(b))),
    ("GET", r"/jobs/overview", lambda d, m, q, b: (200, d.jobs_overview(q.get("submission-key")))),
    ("GET", rf"/jobs/{JID}", lambda d, m, q, b: (200, d.details(m["jid"]))),
    ("PATCH", rf"/jobs/{JID}", lambda d, m, q, b: (202, _patch(d, m["jid"], q))),
    ("GET", rf"/jobs/{JID}/checkpoints", lambda d, m, q, b: (200, d.checkpoints(m["jid"]))),
    ("GET", rf"/jobs/{JID}/metrics", lambda d, m, q, b: (200, d.metrics(m["jid"]))),
    ("POST", rf"/jobs/{JID}/stop", lambda d, m, q, b: (202, d.stop(m["jid"], (b or {}).get("targetDirectory"),
                                                                    bool((b or {}).get("drain"))))),
    ("GET", rf"/jobs/{JID}/savepoints/(?P<rid>[^/]+)", lambda d, m, q, b: (200, d.savepoint_status(m["jid"], m["rid"]))),
    ("GET", r"/sluice/jobs", lambda d, m, q, b: (200, d.web_jobs())),
    ("GET", r"/sluice/jobs/(?P<name>[^/]+)", lambda d, m, q, b: (200, d.web_job(m["name"]))),
    ("GET", r"/sluice/jobs/(?P<name>[^/]+)/(?P<part>[a-z]+)",
     lambda d, m, q, b: (200, d.web_job(m["name"], m["part"], _int(q.get("checkpoint"))))),
]
ROUTES = [(method, re.compile(pattern + r"/?"), handler) for method, pattern, handler in ROUTES]


def _patch(dispatcher: Dispatcher, jobid: str, query: dict) -> dict:
    if query.get("mode", "cancel") != "cancel":
        raise RestHandlerException(400, f"PATCH /jobs/{jobid}?mode={query.get('mode')}: the mode is cancel "
                                        f"(a stop with savepoint is POST /jobs/{jobid}/stop).")
    return dispatcher.cancel(jobid)


def _int(value: Optional[str]) -> Optional[int]:
    if value in (None, ""):
        return None
    if not value.isdigit():
        raise RestHandlerException(400, f"checkpoint={value!r}: a checkpoint id is a whole number.")
    return int(value)


class RefusedBindException(ValueError):
    """A bind the JobManager refuses (another address than loopback without a token)."""


def check_bind(host: str, token: Optional[str]) -> None:
    if token or is_loopback(host):
        return
    raise RefusedBindException(
        f"The JobManager runs any job script it is sent, so on {host} (not this machine's loopback) anyone who "
        f"reaches the port could run code here: give it a token (--token or SLUICE_JOBMANAGER_TOKEN; clients send "
        f"it as 'Authorization: Bearer <token>'), or bind to 127.0.0.1.")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Handler(BaseHTTPRequestHandler):
    server_version = "SluiceJobManager"
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_PATCH(self):
        self._handle("PATCH")

    def _handle(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        try:
            body = self._body()
            self._authorize()
            status, answer = self._route(method, url.path, query, body)
        except RestHandlerException as e:
            status, answer = e.status, {"errors": [str(e)]}
        except Exception as e:      # a bug: the client gets its cause, the log its traceback
            log.exception("%s %s failed", method, self.path)
            status, answer = 500, {"errors": [f"Internal error of the JobManager: {type(e).__name__}: {e}"]}
        data = json.dumps(answer, default=str).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return None
        try:
            return json.loads(self.rfile.read(length))
        except ValueError as e:
            raise RestHandlerException(400, f"The request's body is not JSON: {e}") from None

    def _authorize(self) -> None:
        token = self.server.token
        if token is None:
            return
        sent = self.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            raise RestHandlerException(401, "This JobManager needs its token: send 'Authorization: Bearer <token>' "
                                            "(sluice ... --token T, or SLUICE_JOBMANAGER_TOKEN).")

    def _route(self, method: str, path: str, query: dict, body):
        allowed = []
        for verb, pattern, handler in ROUTES:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if verb == method:
                return handler(self.server.dispatcher, match.groupdict(), query, body)
            allowed.append(verb)
        if allowed:
            raise RestHandlerException(405, f"{method} {path} is not served: use {', '.join(sorted(set(allowed)))}.")
        raise RestHandlerException(404, f"No such endpoint: {path} (see docs/operations/jobmanager.md for the API).")

    def log_message(self, format, *args):       # the access log at debug level, not on stderr
        log.debug("%s %s", self.address_string(), format % args)


class JobManagerServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, dispatcher: Dispatcher, host: str = "127.0.0.1", port: int = 8081,
                 token: Optional[str] = None):
        check_bind(host, token)
        super().__init__((host, port), _Handler)
        self.dispatcher, self.token = dispatcher, token

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    def publish_address(self) -> None:
        """``<warehouse>/jobmanager/address.json``: how clients that know the warehouse find it."""
        folder = os.path.dirname(address_file(self.dispatcher.warehouse))
        os.makedirs(folder, exist_ok=True)
        write_json(folder, ADDRESS_FILE, {"url": self.url, "pid": os.getpid(), "started_at": time.time(),
                                          "token_required": self.token is not None})

    def withdraw_address(self) -> None:
        path = address_file(self.dispatcher.warehouse)
        try:
            with open(path) as f:
                mine = json.load(f).get("pid") == os.getpid()
        except (OSError, ValueError):
            return
        if mine:
            os.remove(path)


def refuse_a_second_jobmanager(warehouse: str) -> None:
    """One JobManager per warehouse: two would both adopt (and restart) the same jobs' drivers."""
    try:
        with open(address_file(warehouse)) as f:
            found = json.load(f)
        with open(f"/proc/{int(found['pid'])}/cmdline", "rb") as f:
            command = f.read().decode("utf-8", "replace").split("\0")
    except (OSError, ValueError, KeyError):
        return
    if "jobmanager" in command and int(found["pid"]) != os.getpid():
        raise RefusedBindException(f"Another JobManager (pid {found['pid']}) serves the warehouse "
                                   f"{os.path.abspath(warehouse)} at {found.get('url')}: use it (sluice list "
                                   f"--jobmanager {found.get('url')}), or stop it first (kill {found['pid']}).")


def serve(warehouse: str, master: str, host: str = "127.0.0.1", port: int = 8081, token: Optional[str] = None,
          standby_drivers: Optional[int] = None) -> int:
    """Run the JobManager until SIGTERM or Ctrl-C; its jobs' drivers run on, for the next one to adopt.
    ``standby_drivers``: warm drivers kept ready (None: the pool's default for the master)."""
    check_bind(host, token)
    refuse_a_second_jobmanager(warehouse)
    pool = StandbyDrivers(os.path.abspath(warehouse), master, standby_drivers)
    dispatcher = Dispatcher(warehouse, master, pool)
    server = JobManagerServer(dispatcher, host, port, token)
    dispatcher.start()
    server.publish_address()
    stopped = threading.Event()

    def stop(signum, frame):
        stopped.set()
        threading.Thread(target=server.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    log.info("JobManager listening on %s (warehouse %s, Spark master %s, %d standby driver(s))%s", server.url,
             dispatcher.warehouse, master, pool.size, "; requests need the token" if token else "")
    print(f"JobManager ready at {server.url}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        server.withdraw_address()
        dispatcher.close()
    return 0
