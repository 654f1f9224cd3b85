"""Issue 18, part 6: PyFlink's defaults and small API. Expected values are worked out by hand
from the inputs."""
import os
import textwrap

import pytest

from runtime.checkpoint.epoch_log import EpochLog
from runtime.common import Types, WatermarkStrategy
from runtime.datastream import KeyedCoProcessFunction, StreamExecutionEnvironment
from runtime.datastream.connectors import DataGeneratorSource, RateLimiterStrategy
from runtime.datastream.job_client import JobStatus
from runtime.datastream.time_domain import TimeDomain
from runtime.datastream.timerservice import TimerService
from runtime.execution.dependencies import DependencyException
from runtime.storage.layout import job_dir
from runtime_env import job_env
from waiting import wait_until

ORDER = Types.TUPLE([Types.INT(), Types.STRING(), Types.DOUBLE()])


def test_the_default_parallelism_is_the_number_of_cores_unless_the_job_sets_one():
    env = StreamExecutionEnvironment.get_execution_environment()
    assert env.get_parallelism() == os.cpu_count()
    assert env.from_collection([1]).map(str).get_parallelism() == os.cpu_count()
    assert env.set_parallelism(3).get_parallelism() == 3


def test_small_settings_are_kept_and_checked(env):
    ds = env.from_collection([(1, "a", 2.0)], type_info=ORDER)
    assert ds.get_execution_config() is env.get_config()
    mapped = ds.map(lambda o: o).name("Parse").set_description("parses orders")
    assert mapped._t.description == "parses orders"
    assert ds.print().set_description("the orders")._t.description == "the orders"
    assert mapped.set_buffer_timeout(100) is mapped and mapped.set_buffer_timeout(-1) is mapped
    with pytest.raises(ValueError, match="set_buffer_timeout"):
        mapped.set_buffer_timeout(-5)
    assert TimerService.__name__ == "TimerService" and TimeDomain.EVENT_TIME == 0


def test_project_keeps_the_fields_in_the_given_order(spark, tmp_path):
    env = job_env(tmp_path, 2)
    orders = env.from_collection([(1, "a", 2.5), (2, "b", 4.0)], type_info=ORDER)
    projected = orders.project(2, 0)
    assert projected.get_type() == Types.TUPLE([Types.DOUBLE(), Types.INT()])
    assert sorted(projected.execute_and_collect("project")) == [(2.5, 1), (4.0, 2)]
    with pytest.raises(TypeError, match="only Tuple DataStreams"):
        env.from_collection(["x"], type_info=Types.STRING()).project(0)
    with pytest.raises(ValueError, match="field 3 is not a position 0..2"):
        orders.project(3)


class Joined(KeyedCoProcessFunction):
    """Counts each key's records of both inputs; a processing-time timer reports the count."""

    def process_element1(self, value, ctx):
        ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 1)
        yield from ()

    def process_element2(self, value, ctx):
        yield from self.process_element1(value, ctx)

    def on_timer(self, timestamp, ctx: "KeyedCoProcessFunction.OnTimerContext"):
        assert isinstance(ctx, KeyedCoProcessFunction.OnTimerContext)
        yield ctx.get_current_key(), ctx.time_domain() == TimeDomain.PROCESSING_TIME


def test_a_keyed_co_process_function_gets_an_on_timer_context(spark, tmp_path):
    env = job_env(tmp_path, 1)
    a = env.from_collection([("x", 1)], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
    b = env.from_collection([("y", 2)], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
    out = a.connect(b).key_by(lambda r: r[0], lambda r: r[0]).process(Joined())
    assert sorted(out.execute_and_collect("co timers")) == [("x", True), ("y", True)]


def test_execute_async_runs_the_job_and_gives_its_result(spark, tmp_path):
    env = job_env(tmp_path, 1)
    env.from_collection([1, 2, 3], type_info=Types.INT()).map(lambda x: x * 10, output_type=Types.INT()).print()
    client = env.execute_async("async")
    result = client.get_job_execution_result().result(timeout=300)
    assert sorted(result.printed) == ["10", "20", "30"]
    assert client.get_job_status().result() is JobStatus.FINISHED
    assert client.get_job_id()


def test_cancel_ends_an_unbounded_job_after_its_epoch(spark, tmp_path):
    env = job_env(tmp_path, 1, epoch__interval=200)
    source = DataGeneratorSource(lambda i: i, rate_limiter=RateLimiterStrategy.per_second(50), type_info=Types.LONG())
    env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").print()
    client = env.execute_async("endless")
    # Cancel once epochs 1 to 3 are planned (a plan is logged before its epoch runs): 0 to 2 ran.
    epoch_log = EpochLog(job_dir(str(tmp_path / "warehouse"), "endless"))
    try:
        wait_until(lambda: len(epoch_log.logged_epochs(0, None)) >= 3 or
                   client.get_job_status().result() is JobStatus.FAILED, 300, "three epochs planned", interval=0.1)
    finally:
        client.cancel()
    result = client.get_job_execution_result().result(timeout=300)
    assert client.get_job_status().result() is JobStatus.CANCELED
    assert len(result.epochs) >= 3      # it ran, then stopped at an epoch's end
    printed = [int(line) for line in result.printed]
    assert printed == list(range(len(printed)))      # every record once, in order, up to the stop


def test_a_python_file_is_shipped_to_the_executors(spark, tmp_path):
    helper = tmp_path / "sluice_helper_mod.py"
    helper.write_text(textwrap.dedent("""
        def triple(x):
            return 3 * x
    """))
    env = job_env(tmp_path, 2)
    env.add_python_file(str(helper))

    def use(x):
        import sluice_helper_mod       # not importable here: only from the shipped file
        return sluice_helper_mod.triple(x)
    got = env.from_collection([1, 2], type_info=Types.INT()).map(use, output_type=Types.INT()).execute_and_collect("py")
    assert sorted(got) == [3, 6]


def test_jars_for_a_running_session_and_missing_requirements_fail_clearly(spark, tmp_path):
    env = job_env(tmp_path, 1)
    env.add_jars(str(tmp_path / "extra.jar"))
    env.from_collection([1]).print()
    with pytest.raises(DependencyException, match="extra.jar cannot be added: this process's SparkSession is already running"):
        env.execute("jars")

    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pyarrow>=1\nno-such-package-sluice==1.0\n")
    env = job_env(tmp_path, 1)
    env.set_python_requirements(str(requirements))
    env.from_collection([1]).print()
    with pytest.raises(DependencyException, match=r"not installed in this Python: no-such-package-sluice==1.0\. "):
        env.execute("requirements")
