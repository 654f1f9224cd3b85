"""Compact and vacuum jobs' tables, daily (see plugins/sluice_airflow/dag_factory.py)."""
from sluice_airflow.dag_factory import maintenance_dag

dag = maintenance_dag()
