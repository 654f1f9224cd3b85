"""Airflow cluster policies (Airflow imports this module from the plugins folder at start-up)."""
from sluice_airflow.policy import task_instance_mutation_hook  # noqa: F401
