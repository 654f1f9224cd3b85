"""Sluice: Flink-style stateful stream processing as epochs of Spark jobs.

Layers, as Flink's runtime: ``common``/``datastream`` (the API), ``graph`` (StreamGraph →
JobGraph → ExecutionGraph), ``scheduler`` (slots), ``state`` (key groups). Nothing here
imports Airflow, and the API and compilers never import pyspark. Importing this package imports
nothing else: Spark's Python daemon module (``runtime.execution.daemon_fork_server``) is started
as a new interpreter for each pool of workers.
"""
__version__ = "0.1.0"
