"""Restart any job from a checkpoint or savepoint (see plugins/sluice_airflow/dag_factory.py)."""
from sluice_airflow.dag_factory import restart_from_checkpoint_dag

dag = restart_from_checkpoint_dag()
