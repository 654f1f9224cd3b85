"""JVM options for the short-lived Spark JVMs the tests start in processes of their own
(``sluice run``, the kill tests, spark-submit, Airflow's task processes, a standalone cluster's
daemons and executors).

A JVM that lives seconds spends much of them compiling with C2 and setting up the parallel
collector: with C1 only and the serial collector, a ``sluice run`` of the seed WordCount starts
and runs in about 60% of the time on a 2-core machine (15 s instead of 25 s, loaded). The test
run's own session, which lives for the whole run, keeps the JVM's defaults (conftest.py).
"""
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
