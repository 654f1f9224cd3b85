"""Storage: where the warehouse keeps a job's tables (``layout``) and the Delta I/O helpers the
checkpoint storage, the connectors and the executions history share (``delta_files``).
Below everything that persists; it imports nothing of runtime but ``common``."""
