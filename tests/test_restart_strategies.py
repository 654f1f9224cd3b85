"""Restart strategies and failover regions, pinned to Flink's semantics (expected values by hand).

Flink: FixedDelay/FailureRate/ExponentialDelay/NoRestartBackoffTimeStrategy (failure-rate as
fixed by FLINK-20752, exponential delay as in FLIP-364, Flink 1.19+), RestartStrategyOptions'
keys and defaults, RestartPipelinedRegionFailoverStrategy. No Spark, no Airflow.
"""
import random

import pytest

from runtime.common.restart_strategy import (
    ExponentialDelayRestartStrategyConfiguration as Exponential,
    FailureRateRestartStrategyConfiguration as FailureRate,
    FixedDelayRestartStrategyConfiguration as FixedDelay,
    NoRestartStrategyConfiguration as NoRestart,
    RestartStrategies,
)
from runtime.common.time import Duration, Time
from runtime.scheduler.failover import pipelined_regions, tasks_to_restart
from runtime.scheduler.restart import (
    ExponentialDelayRestartBackoffTimeStrategy,
    configuration_strategy,
    decide,
    effective_configuration,
)


def decisions(config, times):
    """(restart, backoff) after each failure, each decided by replaying the failures so far."""
    return [(d.restart, d.backoff_ms) for d in (decide(config, times[:i]) for i in range(1, len(times) + 1))]


# ---- fixed delay ----------------------------------------------------------------------------

@pytest.mark.parametrize("attempts, delay, expected", [
    (3, 200, [(True, 200)] * 3 + [(False, 0)]),     # restarts after failures 1..3, gives up at 4
    (1, 0, [(True, 0), (False, 0)]),
    (0, 500, [(False, 0)]),                         # no restart at all
])
def test_fixed_delay_restarts_attempts_times_then_gives_up(attempts, delay, expected):
    config = RestartStrategies.fixed_delay_restart(attempts, delay)
    assert decisions(config, [i * 10_000 for i in range(len(expected))]) == expected


def test_fixed_delay_counts_failures_however_far_apart():
    config = RestartStrategies.fixed_delay_restart(2, 100)
    assert decisions(config, [0, 10**9, 2 * 10**9]) == [(True, 100), (True, 100), (False, 0)]


# ---- failure rate ---------------------------------------------------------------------------

@pytest.mark.parametrize("max_failures, times, expected", [
    # max 2 per 1000 ms: the 3rd failure within 1000 ms of the 1st gives up
    (2, [0, 100, 200], [True, True, False]),
    (2, [0, 500, 1000], [True, True, False]),           # the interval is inclusive: 1000 - 0 is not > 1000
    (2, [0, 500, 1001], [True, True, True]),
    # spread out, every window of 3 failures spans more than 1000 ms: restarts forever
    (2, [0, 600, 1200, 1800, 2400], [True] * 5),
    # a burst after a quiet spell: only the last 3 failures count
    (2, [0, 100, 1500, 1600, 1700], [True, True, True, True, False]),
    (1, [0, 500], [True, False]),                       # max 1: one restart per interval
    (1, [0, 1001, 2002], [True, True, True]),
])
def test_failure_rate_allows_max_failures_within_the_interval(max_failures, times, expected):
    config = RestartStrategies.failure_rate_restart(max_failures, 1000, 50)
    assert decisions(config, times) == [(r, 50 if r else 0) for r in expected]


# ---- exponential delay ----------------------------------------------------------------------

def test_exponential_delay_doubles_caps_and_resets_after_the_threshold():
    config = RestartStrategies.exponential_delay_restart(1000, 10_000, 2.0, 60_000, 0.0)
    # restart k (since the last reset) waits 1000 * 2**k, at most 10 s; the backoff resets once
    # a failure comes reset_threshold after the previous restart (last failure + its backoff).
    times = [0, 5_000, 10_000, 20_000, 30_000, 45_000, 115_000, 120_000]
    assert decisions(config, times) == [
        (True, 1000), (True, 2000), (True, 4000), (True, 8000), (True, 10_000), (True, 10_000),
        (True, 1000),       # 115000 - (45000 + 10000) = 60000 >= 60000: reset
        (True, 2000)]
    # one millisecond sooner it does not reset
    assert decide(config, times[:6] + [114_999]).backoff_ms == 10_000


def test_exponential_delay_with_flinks_default_multiplier_truncates_each_power():
    # Flink's defaults (1 s, 1 min, 1.5), no jitter, failures 100 s apart (no reset within 1 h):
    # (long) (1000 * 1.5 ** k)
    config = RestartStrategies.exponential_delay_restart(1000, 60_000, 1.5, 3_600_000, 0.0)
    times = [i * 100_000 for i in range(13)]
    assert [b for _, b in decisions(config, times)] == [
        1000, 1500, 2250, 3375, 5062, 7593, 11390, 17085, 25628, 38443, 57665, 60_000, 60_000]


def test_exponential_delay_never_gives_up():
    config = RestartStrategies.exponential_delay_restart(1, 2, 2.0, 10**9, 0.0)
    assert all(r for r, _ in decisions(config, list(range(0, 300, 3))))


def test_exponential_delay_jitter_stays_within_its_bounds_and_initial_max():
    # base 1000, 2000, 4000, 8000, 16000, 32000 +/- half of it, then within [1000, 10000]
    bounds = [(1000, 1500), (1000, 3000), (2000, 6000), (4000, 10_000), (8000, 10_000), (10_000, 10_000)]
    for seed in range(40):
        strategy = ExponentialDelayRestartBackoffTimeStrategy(1000, 10_000, 2.0, 3_600_000, 0.5, random.Random(seed))
        backoffs = []
        for t in range(0, 6 * 100_000, 100_000):
            strategy.notify_failure(t)
            assert strategy.can_restart(t)
            backoffs.append(strategy.get_backoff_time())
        assert all(low <= b <= high for b, (low, high) in zip(backoffs, bounds)), (seed, backoffs)


def test_exponential_delay_jitter_varies_and_never_exceeds_the_maximum():
    seen = set()
    for seed in range(40):
        strategy = ExponentialDelayRestartBackoffTimeStrategy(1000, 100_000, 2.0, 3_600_000, 0.1,
                                                              random.Random(seed))
        for t in (0, 10_000):
            strategy.notify_failure(t)
        seen.add(strategy.get_backoff_time())       # 2000 +/- 200
    assert len(seen) > 5 and min(seen) >= 1800 and max(seen) <= 2200
    pinned = RestartStrategies.exponential_delay_restart(1000, 1000, 2.0, 60_000, 1.0)
    assert [b for _, b in decisions(pinned, [0, 1, 2, 3, 4])] == [1000] * 5


def test_decisions_are_reproducible_replays():
    config = RestartStrategies.exponential_delay_restart(1000, 60_000, 1.5, 3_600_000, 0.1)
    times = [5_000, 20_000, 40_000]
    assert decide(config, times) == decide(config, list(times))


def test_exponential_delay_gives_up_after_its_attempts_until_the_backoff_resets():
    """Flink's restart-strategy.exponential-delay.attempts-before-reset-backoff (FLIP-364): at most
    n restarts; a failure after the reset threshold starts counting again."""
    config = RestartStrategies.exponential_delay_restart(1000, 60_000, 1.5, 3_600_000, 0.0,
                                                         attempts_before_reset_backoff=3)
    assert decisions(config, [0, 2000, 5000, 9000]) == [(True, 1000), (True, 1500), (True, 2250), (False, 0)]
    hour_later = 5000 + 2250 + 3_600_000     # the reset threshold after the third restart
    assert decisions(config, [0, 2000, 5000, hour_later, hour_later + 1, hour_later + 2, hour_later + 3])[3:] == [
        (True, 1000), (True, 1500), (True, 2250), (False, 0)]
    assert "At most 3 restart attempts before the delay resets." in str(config)
    with pytest.raises(ValueError, match="attempts_before_reset_backoff must not be negative"):
        RestartStrategies.exponential_delay_restart(1, 2, 2.0, 1, 0.1, attempts_before_reset_backoff=-1)


def test_the_control_planes_default_is_bounded_and_the_jobs_own_strategy_wins():
    """Deployed by the control plane, the default strategy (exponential delay with checkpointing)
    reads the control plane's configuration: it gives up after 3 restarts. A strategy the job sets
    is its own; without checkpointing the default stays none."""
    from runtime.jobmaster.deployment import CONTROL_PLANE_CONFIGURATION as plane
    bounded = effective_configuration(None, dict(plane), True)
    assert bounded == Exponential(1000, 60_000, 1.5, 3_600_000, 0.1, 3)
    assert [r for r, _ in decisions(bounded, [0, 10, 20, 30])] == [True, True, True, False]
    assert effective_configuration(RestartStrategies.fixed_delay_restart(5, 0), dict(plane), True) == FixedDelay(5, 0)
    assert effective_configuration(None, dict(plane), False) == NoRestart()
    assert effective_configuration(None, {**plane, "restart-strategy.exponential-delay.attempts-before-reset-backoff":
                                          "10"}, True).attempts_before_reset_backoff == 10


def test_the_time_a_failing_run_takes_to_give_up():
    """What the DAG docs and the web view state: attempts, the strategy's delays and the attempts'
    measured duration (runtime.jobmaster.steps.give_up_time)."""
    from runtime.jobmaster.deployment import CONTROL_PLANE_CONFIGURATION as plane
    from runtime.jobmaster.steps import give_up_time
    fixed = give_up_time(FixedDelay(3, 2000), attempt_s=10)
    assert (fixed.attempts, fixed.delays_s, fixed.total_s) == (4, 6.0, 46.0)
    assert fixed.describe() == ("The restart strategy gives up after 4 attempt(s) with 6.0 s of delays and about "
                                "10.0 s per attempt as measured: a run that keeps failing fails for good after about 46 s.")
    bounded = give_up_time(effective_configuration(None, dict(plane), True))      # 1 s, 1.5 s, 2.25 s, +/- 10%
    assert bounded.attempts == 4 and 4.75 * 0.9 <= bounded.delays_s <= 4.75 * 1.1 and bounded.total_s is None
    assert "(not measured yet)" in bounded.describe()
    assert give_up_time(RestartStrategies.exponential_delay_restart(
        Duration.of_seconds(1), Duration.of_minutes(1), 2.0, Duration.of_hours(1), 0.0)).attempts is None
    assert (give_up_time(NoRestart(), 5).attempts, give_up_time(NoRestart(), 5).total_s) == (1, 5)
    # Failure rate: 2 failures within 60 s; attempts of 40 s each never put 2 in one window.
    assert give_up_time(FailureRate(2, 60_000, 0), attempt_s=10).attempts == 3
    assert give_up_time(FailureRate(2, 60_000, 0), attempt_s=40, limit=50).attempts is None


# ---- no restart and the decisions' text -------------------------------------------------------

def test_no_restart_never_restarts():
    assert decisions(RestartStrategies.no_restart(), [0, 10, 10**9]) == [(False, 0)] * 3


@pytest.mark.parametrize("config, times, text", [
    (RestartStrategies.fixed_delay_restart(3, 200), [0],
     "restarting in 200 ms after failure 1 (Restart with fixed delay (200 ms). #3 restart attempts.)"),
    (RestartStrategies.fixed_delay_restart(1, 200), [0, 1],
     "not restarting after failure 2: the restart strategy gave up "
     "(Restart with fixed delay (200 ms). #1 restart attempts.)"),
    (RestartStrategies.failure_rate_restart(2, 60_000, 0), [0, 1, 2],
     "not restarting after failure 3: the restart strategy gave up (Failure rate restart with "
     "maximum of 2 failures within interval 60000 ms and fixed delay 0 ms.)"),
    (RestartStrategies.exponential_delay_restart(1000, 60_000, 1.5, 3_600_000, 0.0), [0, 1],
     "restarting in 1500 ms after failure 2 (Restart with exponential delay: starting at 1000 ms, "
     "increasing by 1.5, with maximum 60000 ms. Delay resets after 3600000 ms with jitter 0.0.)"),
    (RestartStrategies.no_restart(), [0],
     "not restarting after failure 1: the restart strategy gave up (Restart deactivated.)"),
])
def test_decision_describe(config, times, text):
    assert decide(config, times).describe() == text


# ---- which strategy: the job's, its configuration's, Flink's default --------------------------

DEFAULT_EXPONENTIAL = Exponential(1000, 60_000, 1.5, 3_600_000, 0.1)


@pytest.mark.parametrize("configured, conf, checkpointing, expected", [
    (RestartStrategies.fixed_delay_restart(2, 5), {"restart-strategy.type": "none"}, True, FixedDelay(2, 5)),
    (None, {"restart-strategy.type": "fixed-delay"}, False, FixedDelay(1, 1000)),
    (RestartStrategies.fall_back_restart(), {"restart-strategy": "failurerate"}, True, FailureRate(1, 60_000, 1000)),
    (None, {"restart-strategy.type": "off"}, True, NoRestart()),
    (None, {}, True, DEFAULT_EXPONENTIAL),           # Flink 1.19+: exponential-delay with checkpointing
    (RestartStrategies.fall_back_restart(), {}, True, DEFAULT_EXPONENTIAL),
    (None, {}, False, NoRestart()),
])
def test_effective_configuration(configured, conf, checkpointing, expected):
    assert effective_configuration(configured, conf, checkpointing) == expected


@pytest.mark.parametrize("conf, expected", [
    ({}, None),
    ({"restart-strategy.type": "disable"}, NoRestart()),
    ({"restart-strategy.type": "fixeddelay", "restart-strategy.fixed-delay.attempts": "3",
      "restart-strategy.fixed-delay.delay": "10 s"}, FixedDelay(3, 10_000)),
    ({"restart-strategy.type": "failure-rate", "restart-strategy.failure-rate.max-failures-per-interval": 4,
      "restart-strategy.failure-rate.failure-rate-interval": "5 min", "restart-strategy.failure-rate.delay": "500 ms"},
     FailureRate(4, 300_000, 500)),
    ({"restart-strategy.type": "Exponential-Delay"}, DEFAULT_EXPONENTIAL),
    ({"restart-strategy.type": "exponentialdelay", "restart-strategy.exponential-delay.initial-backoff": "10 s",
      "restart-strategy.exponential-delay.max-backoff": "2 min",
      "restart-strategy.exponential-delay.backoff-multiplier": "1.4",
      "restart-strategy.exponential-delay.reset-backoff-threshold": "10 min",
      "restart-strategy.exponential-delay.jitter-factor": "0.2"},
     Exponential(10_000, 120_000, 1.4, 600_000, 0.2)),
])
def test_configuration_keys(conf, expected):
    assert configuration_strategy(conf) == expected


@pytest.mark.parametrize("text, ms", [
    ("10 s", 10_000), ("20s", 20_000), ("1 min", 60_000), ("1m", 60_000), ("2 minutes", 120_000),
    ("500 ms", 500), ("3 millis", 3), ("1 h", 3_600_000), ("2 hours", 7_200_000), ("1 d", 86_400_000),
    ("2 days", 172_800_000), ("3 seconds", 3000), ("4 sec", 4000), ("250", 250), (1500, 1500),
])
def test_durations_as_flink_parses_them(text, ms):
    conf = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": text}
    assert configuration_strategy(conf).delay_between_attempts_ms == ms


@pytest.mark.parametrize("conf, message", [
    ({"restart-strategy.type": "sometimes"},
     "Unknown restart-strategy.type 'sometimes': use none, fixed-delay, failure-rate or exponential-delay"),
    ({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "10 parsecs"},
     "restart-strategy.fixed-delay.delay: not a duration: '10 parsecs'"),
    ({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "1 month"},
     "restart-strategy.fixed-delay.delay: not a duration: '1 month'"),
    ({"restart-strategy.type": "failure-rate", "restart-strategy.failure-rate.failure-rate-interval": "ten s"},
     "restart-strategy.failure-rate.failure-rate-interval: not a duration: 'ten s'"),
    ({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "three"},
     "restart-strategy.fixed-delay.attempts: expected a whole number, got 'three'"),
    ({"restart-strategy.type": "exponential-delay", "restart-strategy.exponential-delay.backoff-multiplier": "x"},
     "restart-strategy.exponential-delay.backoff-multiplier: expected a number, got 'x'"),
    ({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "-1"},
     "restart_attempts must not be negative, got -1"),
])
def test_bad_configuration_is_refused_with_the_key_named(conf, message):
    with pytest.raises(ValueError) as err:
        configuration_strategy(conf)
    assert message in str(err.value)


# ---- RestartStrategies (PyFlink's factory) ----------------------------------------------------

def test_factory_accepts_time_duration_and_milliseconds():
    assert RestartStrategies.fixed_delay_restart(2, Time.seconds(3)) == FixedDelay(2, 3000)
    assert RestartStrategies.failure_rate_restart(3, Duration.of_minutes(5), Time.seconds(10)) == \
        FailureRate(3, 300_000, 10_000)
    assert RestartStrategies.exponential_delay_restart(
        Duration.of_millis(1), Time.seconds(1), 1.1, Duration.of_seconds(2), 0.1) == Exponential(1, 1000, 1.1, 2000, 0.1)
    assert str(RestartStrategies.fall_back_restart()) == "Cluster level default restart strategy"


@pytest.mark.parametrize("make, error, message", [
    (lambda: RestartStrategies.fixed_delay_restart(-1, 0), ValueError, "restart_attempts must not be negative, got -1"),
    (lambda: RestartStrategies.fixed_delay_restart(1, -5), ValueError, "delay_between_attempts must not be negative"),
    (lambda: RestartStrategies.fixed_delay_restart(1, True), TypeError, "delay_between_attempts must be a Time"),
    (lambda: RestartStrategies.fixed_delay_restart(1, "1 s"), TypeError, "delay_between_attempts must be a Time"),
    (lambda: RestartStrategies.failure_rate_restart(0, 1000, 0), ValueError, "failure_rate must be at least 1, got 0"),
    (lambda: RestartStrategies.failure_rate_restart(1, -1, 0), ValueError, "failure_interval must not be negative"),
    (lambda: RestartStrategies.exponential_delay_restart(1, 2, 0.5, 1, 0.1), ValueError,
     "backoff_multiplier must be at least 1.0, got 0.5"),
    (lambda: RestartStrategies.exponential_delay_restart(1, 2, 2.0, 1, 1.5), ValueError,
     "jitter_factor must be within [0, 1], got 1.5"),
    (lambda: RestartStrategies.exponential_delay_restart(-1, 2, 2.0, 1, 0.1), ValueError,
     "initial_backoff must not be negative"),
])
def test_factory_validation(make, error, message):
    with pytest.raises(error) as err:
        make()
    assert message in str(err.value)


# ---- failover: pipelined regions --------------------------------------------------------------

def execution_graph(build, parallelism=2):
    from runtime.datastream import StreamExecutionEnvironment
    from runtime.graph.execution_graph import build_execution_graph
    from runtime.graph.job_graph import create_job_graph
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    build(env)
    return build_execution_graph(create_job_graph(env.get_stream_graph()))


def numbers(env):
    from runtime.common import WatermarkStrategy
    from runtime.datastream.connectors.number_seq import NumberSequenceSource
    return env.from_source(NumberSequenceSource(1, 10), WatermarkStrategy.no_watermarks(), "nums")


def names(graph, region):
    by_id = {(ev.job_vertex_id, ev.subtask_index): ev.task_name_with_subtask_index
             for ev in graph.all_execution_vertices}
    return sorted(by_id[s] for s in region)


def region_names(graph):
    return [names(graph, r) for r in pipelined_regions(graph)]


def test_an_all_to_all_edge_makes_one_region():
    graph = execution_graph(lambda env: numbers(env).key_by(lambda x: x).reduce(lambda a, b: a).print())
    assert region_names(graph) == [[
        "Keyed Reduce -> Sink: Print to Std. Out (1/2)", "Keyed Reduce -> Sink: Print to Std. Out (2/2)",
        "Source: nums (1/2)", "Source: nums (2/2)"]]


def test_forward_pipelines_at_equal_parallelism_are_a_region_each():
    graph = execution_graph(lambda env: numbers(env).map(lambda x: x).disable_chaining().print(), parallelism=3)
    assert region_names(graph) == [
        ["Map (%d/3)" % i, "Sink: Print to Std. Out (%d/3)" % i, "Source: nums (%d/3)" % i] for i in (1, 2, 3)]


def test_rescale_two_to_four_makes_two_regions_of_three():
    graph = execution_graph(lambda env: numbers(env).rescale().map(lambda x: x).set_parallelism(4)
                            .print().set_parallelism(4))
    assert region_names(graph) == [
        ["Map -> Sink: Print to Std. Out (1/4)", "Map -> Sink: Print to Std. Out (2/4)", "Source: nums (1/2)"],
        ["Map -> Sink: Print to Std. Out (3/4)", "Map -> Sink: Print to Std. Out (4/4)", "Source: nums (2/2)"]]


def two_pipelines(env):
    numbers(env).key_by(lambda x: x).reduce(lambda a, b: a).print()
    env.from_collection([1, 2]).map(lambda x: x).set_parallelism(1).print().set_parallelism(1)


def test_disconnected_pipelines_are_separate_regions():
    graph = execution_graph(two_pipelines)
    assert [len(r) for r in pipelined_regions(graph)] == [4, 1]
    assert region_names(graph)[1] == ["Source: Collection Source -> Map -> Sink: Print to Std. Out (1/1)"]


def test_tasks_to_restart_full_region_and_unknown():
    graph = execution_graph(two_pipelines)
    keyed, collection = pipelined_regions(graph)
    everything = keyed | collection
    one_of_keyed = min(keyed)
    assert tasks_to_restart(graph, "full", [one_of_keyed]) == everything
    assert tasks_to_restart(graph, "region", [one_of_keyed]) == keyed
    assert tasks_to_restart(graph, "region", collection) == collection
    assert tasks_to_restart(graph, "region", [one_of_keyed, min(collection)]) == everything
    assert tasks_to_restart(graph, "region", []) == everything          # nothing known failed: all
    with pytest.raises(ValueError) as err:
        tasks_to_restart(graph, "individual", [one_of_keyed])
    assert str(err.value) == ("Unknown jobmanager.execution.failover-strategy 'individual': use 'full' "
                              "(restart all) or 'region' (pipelined region), Flink's values.")
