"""Sluice: Flink-style stateful stream processing as epochs of Spark jobs.

Layers, as Flink's runtime: ``common``/``datastream`` (the API), ``graph`` (StreamGraph →
JobGraph → ExecutionGraph), ``scheduler`` (slots), ``state`` (key groups). Nothing here
imports Airflow, and the API and compilers never import pyspark.
"""
__version__ = "0.1.0"
