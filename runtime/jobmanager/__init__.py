"""The Sluice JobManager: Flink's Dispatcher and one JobMaster per job, each job in a driver process of its own."""
