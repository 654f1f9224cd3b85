"""What a job's DAG needs of its compiled job, kept so that parsing the DAG files never runs a job script.

Airflow parses DAG files over and over, each within ``dagbag_import_timeout`` (30 s), and its
guidance is to keep their top-level code cheap. A job compiles by running its script (anything
its author wrote before ``execute()``), so the DAG factory never compiles. Each compile step
stores the DAG's profile instead, ``<warehouse>/plans/<dag id>.profile.json``: the job's name
(its folder), the slot profile its run reserves slots by, its restart strategy and give-up
time, and the Delta tables it reads (an ``on-inputs`` schedule), with the digest of the script
compiled. A parse reads that one small file. A profile is ``current`` while the script is
unchanged; a new or changed job's DAG is built from its deployment and what its last compile
knew (a job never compiled reserves its deployment's parallelism: ``estimated_slot_profile``).
``steps.refresh_profiles`` compiles every job outside any parse (``bin/dev airflow`` does, at start).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from typing import Optional

from runtime.graph.stream_graph import DEFAULT_SLOT_SHARING_GROUP
from runtime.jobmaster.deployment import JobSpec, script_sha256
from runtime.storage.filesystems import isfile, join, read_bytes, write_bytes


@dataclass(frozen=True)
class DagProfile:
    script_sha256: str          # the job script it was compiled from
    job_name: str               # env.execute()'s name: the job's folder in the warehouse
    slot_profile: list          # steps.slot_profile_of: what the run reserves (policy.py)
    restart_strategy: str       # in words
    give_up_time: str           # steps.GiveUpTime.describe(), with the attempts' duration measured then
    input_tables: tuple = ()    # the Delta tables its sources read
    current: bool = True        # False: the script changed since (or the profile is of another)

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "current"}


def profile_path(warehouse: str, dag_id: str) -> str:
    return join(warehouse, "plans", f"{dag_id}.profile.json")


def store_profile(warehouse: str, dag_id: str, profile: DagProfile) -> None:
    write_bytes(profile_path(warehouse, dag_id), json.dumps(profile.to_json(), indent=1).encode())


def read_profile(warehouse: Optional[str], spec: JobSpec) -> Optional[DagProfile]:
    """The DAG's profile as its last compile stored it (``current`` False when the script changed
    since), or None: never compiled in this warehouse, or unreadable (the parse goes on without)."""
    path = profile_path(warehouse, spec.name) if warehouse else None
    try:
        if path is None or not isfile(path):
            return None
        stored = json.loads(read_bytes(path))
        profile = DagProfile(**{**stored, "input_tables": tuple(stored.get("input_tables", ()))})
        return replace(profile, current=profile.script_sha256 == script_sha256(spec.path))
    except (OSError, ValueError, TypeError):
        return None


def slots_for(profile: list, parallelism: Optional[int]) -> int:
    """The slots a run needs at ``parallelism`` (None: the job's own default), by its slot profile."""
    return sum(max(fixed, (parallelism or default) if uses_default else 0)
               for _, fixed, uses_default, default in profile)


def estimated_slot_profile(spec: JobSpec) -> list:
    """The slot profile of a job never compiled: its operators at the deployment's parallelism, else
    at PyFlink's local default (the machine's cores), in one slot sharing group. Exact unless the
    job sets parallelism or groups in its code; an under-reservation only shares the cluster's
    cores for that run (the allocate step checks the slots against the pool, and says so)."""
    return [[DEFAULT_SLOT_SHARING_GROUP, 0, True, spec.deployment.parallelism or os.cpu_count() or 1]]
