"""The Sluice web view: a FastAPI app (``app``) that the ``sluice`` Airflow plugin mounts in
Airflow's API server at ``/sluice``: pages and a JSON API of jobs, their graphs,
checkpoints and executions, and a restore from a checkpoint that triggers the job's DAG."""
