"""The JobMaster's work, as steps an orchestrator calls: what Flink's Dispatcher and JobMaster
do (compile, schedule, deploy, restart) as plain functions over small JSON, so Airflow tasks
(or any other scheduler) can run them. Nothing here imports Airflow."""
from runtime.jobmaster.deployment import JobDeployment, JobSpec, discover_jobs, find_job, load_job_spec

__all__ = ["JobDeployment", "JobSpec", "discover_jobs", "find_job", "load_job_spec"]
