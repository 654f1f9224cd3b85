"""Airflow cluster policies (Airflow imports this module from the plugins folder at start-up)."""
import os

from sluice_airflow.policy import task_instance_mutation_hook  # noqa: F401

__all__ = ["task_instance_mutation_hook"]      # what Airflow takes from here: the policy

# bin/dev airflow (the development tooling, include/local_airflow/): the log servers on the loopback address.
if os.environ.get("SLUICE_LOG_SERVER_HOST"):
    from include.local_airflow.log_servers import bind_log_servers
    bind_log_servers()
