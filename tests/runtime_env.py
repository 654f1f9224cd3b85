"""Environments for tests that run jobs on the shared local Spark session."""
from runtime.common import Configuration
from runtime.datastream import StreamExecutionEnvironment

CLOCK_START = 1_700_000_000_000     # pinned processing time of epoch 0
# sluice.epoch.interval: how long an unbounded source's epoch collects input (1000 ms by default).
# Processing time here is pinned per epoch: an unbounded generator's next epoch starts at once
# too. A test of a socket or a continuous table sets its own interval.
NO_PAUSE = 1


def job_env(tmp_path, parallelism: int = 1, **settings) -> StreamExecutionEnvironment:
    """An environment writing to ``tmp_path`` with a pinned clock, its epochs one after the other.

    ``settings`` are ``sluice.*`` configuration keys without the prefix, with ``__`` for
    ``.`` and ``_`` for ``-``: ``task__batch_size=1`` sets ``sluice.task.batch-size``.
    """
    conf = Configuration()
    conf.set_string("sluice.warehouse", str(tmp_path / "warehouse"))
    conf.set_string("sluice.spark.master", "local[2]")
    conf.set_integer("sluice.clock.start", CLOCK_START)
    conf.set_integer("sluice.epoch.interval", NO_PAUSE)
    for key, value in settings.items():
        conf.set_string("sluice." + key.replace("__", ".").replace("_", "-"), str(value))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    return env


def delta_env(tmp_path, parallelism: int = 1, **extra) -> StreamExecutionEnvironment:
    """An environment writing to ``tmp_path`` on the wall clock, an unbounded epoch 100 ms
    (Delta sources that follow a table); ``extra``: configuration keys as they are."""
    conf = Configuration()
    conf.set_string("sluice.warehouse", str(tmp_path / "warehouse"))
    conf.set_string("sluice.spark.master", "local[2]")
    conf.set_string("sluice.epoch.interval", "100")
    for key, value in extra.items():
        conf.set_string(key, str(value))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    return env
