"""PyFlink 2.3 in a scratch virtual environment, for the scripts that compare with it
(bench/wordcount.py, bench/pyflink_examples.py). Standard library only: the scripts' PyFlink
roles import it under PyFlink's interpreter too."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from competitor import tail

HERE = os.path.dirname(os.path.abspath(__file__))
PYFLINK_VENV = os.path.join(HERE, ".venv-pyflink")
PYFLINK_VERSION = "2.3.0"


def ensure_pyflink_venv(log_path, venv=PYFLINK_VENV):
    """``venv`` with apache-flink==2.3.0 (made on first use); returns (python, None) or (None, why not)."""
    python = os.path.join(venv, "bin", "python")
    check = [python, "-c", "import pyflink.version as v; print(v.__version__)"]
    if os.path.exists(python):
        r = subprocess.run(check, capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip() == PYFLINK_VERSION:
            return python, None
    if shutil.which("java") is None:
        return None, "no `java` on PATH (PyFlink needs Java 11 or 17)"
    print(f"== pyflink: creating {venv} with apache-flink=={PYFLINK_VERSION} "
          f"(a few minutes; log: {log_path})", flush=True)
    base = getattr(sys, "_base_executable", None) or sys.executable
    with open(log_path, "w") as log:
        for cmd in ([base, "-m", "venv", venv],
                    [python, "-m", "pip", "install", "--upgrade", "pip"],
                    [python, "-m", "pip", "install", f"apache-flink=={PYFLINK_VERSION}"]):
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            try:
                r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=1800)
            except subprocess.TimeoutExpired:
                return None, f"`{' '.join(cmd)}` timed out"
            if r.returncode != 0:
                return None, f"`{' '.join(cmd)}` failed (exit {r.returncode}):\n{tail(log_path, 15)}"
    r = subprocess.run(check, capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"pyflink does not import in the new venv: {r.stderr.strip()[-500:]}"
    return python, None
