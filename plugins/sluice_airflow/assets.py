"""Sluice's Delta tables as Airflow Assets (data-aware scheduling).

Outputs: every job DAG ends in ``sink_assets`` (after ``finish``; it runs only when the whole run
succeeded), whose outlet is the job's AssetAlias ``sluice-sinks:<dag id>``. It adds one Asset
event per sink table the DAG run committed new versions to (``runtime.jobmaster.assets``), its
extra the table's Delta ``version`` and the ``checkpoint_id`` that committed it; a failed run or
one that committed nothing new adds none. The Asset of a table is its location as a URI
(``table_asset``): a DAG scheduled on ``Asset("file:///data/warehouse/orders")`` runs on it.

Inputs: a job whose deployment says ``schedule="on-inputs"`` is scheduled on the Assets of the
Delta tables its DeltaSources read, ``schedule=[table, ...]`` on those tables: it runs when any
of them gets an event.
"""
from __future__ import annotations

from airflow.sdk import Asset, AssetAlias, AssetAny, BaseOperator

from runtime.jobmaster import JobSpec
from runtime.jobmaster.assets import ON_INPUTS, input_tables, run_commits, table_uri


def table_asset(table: str) -> Asset:
    """The Asset of a Delta table (a path or a URI): its location as a URI."""
    return Asset(table_uri(table))


def sink_alias(dag_id: str) -> AssetAlias:
    """The alias a job DAG's sink events are emitted through: its sink tables are known only
    once a run commits to them."""
    return AssetAlias(f"sluice-sinks:{dag_id}")


def dag_schedule(spec: JobSpec, warehouse: str, profile=None):
    """The DAG's schedule: the deployment's, or, for tables, when any of them changes (the tables
    the job reads: as its last compile found them, ``profile``; None before any)."""
    schedule = spec.deployment.schedule
    if schedule != ON_INPUTS and not isinstance(schedule, tuple):
        return schedule
    tables = input_tables(spec, warehouse, profile)
    return AssetAny(*(table_asset(t) for t in tables)) if tables else None


class SinkAssetsOperator(BaseOperator):
    """Emit an Asset event for each sink table the DAG run committed new versions to."""

    ui_color = "#d5f5e3"

    def __init__(self, *, dag_id: str, **kwargs):
        super().__init__(outlets=[sink_alias(dag_id)], **kwargs)
        self.alias = sink_alias(dag_id)

    def execute(self, context) -> list:
        run = context["ti"].xcom_pull(task_ids="run") or {}
        commits = run_commits(run["job_dir"], context["run_id"]) if run.get("job_dir") else ()
        events = context["outlet_events"][self.alias]
        for commit in commits:
            events.add(table_asset(commit.table), extra={"version": commit.version,
                                                         "checkpoint_id": commit.checkpoint_id,
                                                         "job": run["job_name"]})
            self.log.info("Asset event %s: version %s, checkpoint %s", commit.uri, commit.version,
                          commit.checkpoint_id)
        if not commits:
            self.log.info("No sink table has a version this run committed: no Asset event.")
        return [commit.to_json() for commit in commits]
