"""Take a savepoint of any job (see plugins/sluice_airflow/dag_factory.py)."""
from sluice_airflow.dag_factory import savepoint_dag

dag = savepoint_dag()
