"""Scheduling: slot allocation over the TaskManagers (Spark executors)."""
