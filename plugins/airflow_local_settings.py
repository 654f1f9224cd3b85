"""Airflow cluster policies (Airflow imports this module from the plugins folder at start-up)."""
from sluice_airflow.local_airflow import bind_log_servers
from sluice_airflow.policy import task_instance_mutation_hook  # noqa: F401

__all__ = ["task_instance_mutation_hook"]      # what Airflow takes from here: the policy

bind_log_servers()      # bin/dev airflow: the log servers on the loopback address (local_airflow.py)
