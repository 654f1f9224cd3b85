"""The warehouse layout: one folder per job, named after the name given to ``env.execute()``.

    <warehouse>/<job>/checkpoints   epoch_log   state/<operator>/   executions   plans/   savepoints/
"""
from __future__ import annotations

import re

from runtime.storage.filesystems import join


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-").lower() or "job"


def job_dir(warehouse: str, job_name: str) -> str:
    """A job's folder in the warehouse: its checkpoints, state, epoch log and history."""
    return join(warehouse, slug(job_name))
