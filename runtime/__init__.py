"""Sluice: Flink-style stateful stream processing as epochs of Spark jobs.

Layers, as Flink's runtime: ``common``/``datastream`` (the API), ``graph`` (StreamGraph →
JobGraph → ExecutionGraph), ``scheduler`` (slots), ``state`` (key groups). Nothing here
imports Airflow, and the API and compilers never import pyspark.
"""
__version__ = "0.1.0"

from runtime.common.lazy_pandas import defer_pandas_import  # noqa: E402

defer_pandas_import()       # before anything here converts a list with pyarrow
