"""A real S3 endpoint on loopback for the object-store tests: moto's server (``moto[server]``) in
a subprocess, spoken to over HTTP by pyarrow, delta-rs and boto3 as they would speak to S3.
Nothing is mocked inside the test process; the run's settings are the standard AWS variables."""
import contextlib
import os
import socket
import subprocess
import sys
import urllib.request
from dataclasses import dataclass

from waiting import wait_until


@dataclass
class S3Server:
    endpoint: str
    log: str        # the server's request log: one line per request, with its status

    def env(self, **overrides) -> dict:
        """The variables a run needs to reach this server (also what executors are deployed with)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "sluice-test",
                "AWS_SECRET_ACCESS_KEY": "sluice-test-secret", "AWS_REGION": "us-east-1",
                "AWS_ALLOW_HTTP": "true", **overrides}

    def client(self):
        import boto3
        env = self.env()
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=env["AWS_REGION"],
                            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])

    def statuses(self, status: int, path_part: str = "") -> int:
        """How many requests (to paths containing ``path_part``) the server answered with ``status``."""
        with open(self.log, errors="replace") as f:
            return sum(1 for line in f if f'" {status} ' in line and path_part in line)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def moto_server(log_path: str, **env):
    """``python -m moto.server`` on a free loopback port until the block ends. ``env``: the
    server's own settings (INITIAL_NO_AUTH_ACTION_COUNT=0 makes it check credentials)."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env})
    try:
        wait_until(lambda: urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2), 60, "the moto server's answer",
                   interval=0.1, log=log_path, proc=proc, ignoring=(OSError,))
        yield S3Server(endpoint, log_path)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
