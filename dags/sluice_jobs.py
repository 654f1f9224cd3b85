"""One DAG per job module in include/jobs/ (see plugins/sluice_airflow/dag_factory.py)."""
from sluice_airflow.dag_factory import job_dags

globals().update(job_dags())
