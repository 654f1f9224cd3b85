"""Slot reservation: the run task of a job takes as many slots of the Spark pool as this run
needs (Flink's slot request), sized when the scheduler creates the run's task instances.

Airflow fixes ``pool_slots`` when a DAG is parsed, but a manual run may ask for another
parallelism. This cluster policy (Airflow's ``task_instance_mutation_hook``, loaded from
plugins/airflow_local_settings.py) recomputes the slots from the run's ``parallelism`` and
the job's slot profile, caps them at the pool's size so the task can never wait forever,
and records the reservation in the run's conf for the allocate-slots task, which fails the
run with the slots-required message when the pool is too small (and for the deploy task, which
warns when a pool that a run deferred to the JobManager keeps holding does not count deferred
tasks: ``include_deferred``).
"""
from __future__ import annotations

RESERVATION_KEY = "slot_reservation"


def task_instance_mutation_hook(task_instance, dag_run=None) -> None:
    task = getattr(task_instance, "task", None)
    profile = getattr(task, "slot_profile", None)
    if not profile or dag_run is None:
        return
    from runtime.jobmaster.dag_profiles import slots_for
    conf = dict(dag_run.conf or {})
    try:
        parallelism = int(conf["parallelism"]) if conf.get("parallelism") not in (None, "") else None
    except (TypeError, ValueError):
        parallelism = None      # the run's own check names the bad value
    required = slots_for(profile, parallelism)
    size, include_deferred = _pool_of(dag_run, task_instance.pool)
    slots = required if size is None or size < 0 else max(1, min(required, size))
    task_instance.pool_slots = slots
    reservation = {"pool": task_instance.pool, "pool_size": size, "pool_slots": slots,
                   "slots_required": required, "include_deferred": include_deferred}
    if conf.get(RESERVATION_KEY) != reservation:
        dag_run.conf = {**conf, RESERVATION_KEY: reservation}


def _pool_of(dag_run, pool: str) -> tuple:
    """The pool's slots and whether it counts deferred tasks, read in the scheduler's own session
    (the hook may not open another); (None, None) without one."""
    from sqlalchemy import select
    from sqlalchemy.orm import object_session
    from airflow.models.pool import Pool
    session = object_session(dag_run)
    row = session.execute(select(Pool.slots, Pool.include_deferred).where(Pool.pool == pool)).first() \
        if session is not None else None
    return (row.slots, row.include_deferred) if row is not None else (None, None)
