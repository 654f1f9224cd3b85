"""The development Airflow's tooling, run by ``bin/dev`` (not part of the plugin, nor of an image's
Airflow): ``settings`` loads airflow_settings.yaml as ``astro dev start`` does (``bin/dev
airflow-settings``), ``quickstart`` runs the wordcount DAG with ``dag.test()`` (``bin/dev
wordcount``), ``log_servers`` binds the log servers of an Airflow on one host to its loopback
address, ``jobmanager`` starts the Sluice JobManager beside ``bin/dev airflow``."""
