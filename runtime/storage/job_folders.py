"""A job folder of the warehouse is one job's: claimed by its script, and no table's.

A job's folder is named after its ``env.execute()`` name (``layout.job_dir``), so two job
scripts that give one name would share checkpoints, state and history. The first script that
compiles or runs the job in a warehouse claims its folder (``program.json``); another script
giving the same name is refused, naming both and the fix. A script that moved or was renamed
(the claimed one is gone) takes the folder over.

Nor may a source or sink path overlap a job folder (be it, lie inside it or hold it): a
``VACUUM`` of a table there deletes every file its log does not track, Sluice's own included.
"""
from __future__ import annotations

import json
import os
from typing import Optional

from runtime.storage.filesystems import absolute, exists, is_uri, join, read_bytes, write_bytes

PROGRAM = "program.json"                # in a job folder: the script that claimed it
MARKERS = (PROGRAM, "checkpoints")      # what makes a folder of the warehouse a job folder
PLANS = "plans"                         # the warehouse's own folder of DAG plan pointers


class JobFolderException(ValueError):
    """A job folder would be shared (by two scripts, or with a table); names both and the fix."""


def owner(job_dir: str) -> Optional[str]:
    """The script that claimed ``job_dir``, or None."""
    path = join(job_dir, PROGRAM)
    return json.loads(read_bytes(path))["program"] if exists(path) else None


def claim(job_dir: str, job_name: str, program: str) -> None:
    """The script ``program`` compiles or runs the job ``job_name``: its folder is that script's,
    unless another script that still exists claimed it first (``check_claim``)."""
    if check_claim(job_dir, job_name, program):
        write_bytes(join(job_dir, PROGRAM), json.dumps({"program": os.path.realpath(program),
                                                        "job_name": job_name}).encode())


def check_claim(job_dir: str, job_name: str, program: str) -> bool:
    """Whether the script ``program`` may claim the folder of job ``job_name`` anew (False: it is
    its already); refused, writing nothing, when another script that still exists claimed it."""
    program = os.path.realpath(program)
    current = owner(job_dir)
    if current == program:
        return False
    if current is not None and os.path.exists(current):
        raise JobFolderException(
            f"Job '{job_name}' of {program} has the name of the job of {current}: both would share the "
            f"job folder {job_dir} (checkpoints, state, history). Give one of them another name in "
            f"env.execute(...), or run it with another warehouse (--warehouse, SLUICE_WAREHOUSE, the "
            f"sluice_warehouse variable). If {program} replaces {current}, delete {join(job_dir, PROGRAM)}.")
    return True


def overlap(a: str, b: str) -> bool:
    """Whether two locations (paths or URIs) are one, or one lies inside the other."""
    a, b = _normal(a), _normal(b)
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def own_folder(location: str, warehouse: str, job_dir: str) -> Optional[str]:
    """The job folder (or the warehouse's plan pointers) that ``location`` overlaps, or None:
    ``job_dir`` itself, the warehouse (which holds every job folder), or a folder of the
    warehouse that holds a job's checkpoints or claim."""
    for own in (job_dir, join(warehouse, PLANS)):
        if overlap(location, own):
            return own
    if overlap(location, warehouse) and not _inside(location, warehouse):
        return warehouse
    if _inside(location, warehouse):
        top = join(warehouse, _normal(location)[len(_normal(warehouse)) + 1:].split("/", 1)[0])
        if any(exists(join(top, marker)) for marker in MARKERS):
            return top
    return None


def _inside(location: str, folder: str) -> bool:
    return _normal(location).startswith(_normal(folder) + "/")


def _normal(location: str) -> str:
    location = absolute(location)
    return location if is_uri(location) else os.path.realpath(location)
