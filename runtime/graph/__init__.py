"""Compilation: transformations → StreamGraph → JobGraph → ExecutionGraph (pure, no Spark)."""
