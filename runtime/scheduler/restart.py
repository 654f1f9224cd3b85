"""Restart strategies, as Flink's RestartBackoffTimeStrategy implementations.

A strategy is told of each failure (``notify_failure``), then asked whether the job may
restart (``can_restart``) and after how long (``get_backoff_time``), with Flink's semantics:

  fixed-delay       at most ``attempts`` restarts, ``delay`` apart
  failure-rate      at most ``max_failures`` restarts within ``interval``: gives up at the
                    next failure within it
  exponential-delay backoff ``initial`` * ``multiplier`` ** n (n restarts since the last reset),
                    +/- ``jitter``, within [``initial``, ``max``]; reset once the job ran
                    ``reset_threshold`` past its last restart without failing; gives up after
                    ``attempts_before_reset_backoff`` restarts since the last reset (Flink's
                    default: never)
  none              never restarts

(Flink 1.19+ / 2.x: FLINK-20752's failure-rate window, FLIP-364's exponential delay. Flink
also merges failures that arrive while a restart is pending into that restart; an Airflow
run's attempts are sequential, so none does here.)

Airflow runs a job's attempts in separate task tries (processes), so a strategy is rebuilt
for each decision by replaying the failures recorded in the execution history
(``decide``), the clock being the failures' own timestamps.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional, Sequence

from runtime.common.restart_strategy import (
    ExponentialDelayRestartStrategyConfiguration,
    FailureRateRestartStrategyConfiguration,
    FallbackRestartStrategyConfiguration,
    FixedDelayRestartStrategyConfiguration,
    NoRestartStrategyConfiguration,
    RestartStrategies,
    RestartStrategyConfiguration,
)


class RestartBackoffTimeStrategy:
    def notify_failure(self, timestamp_ms: int) -> None:
        raise NotImplementedError

    def can_restart(self, now_ms: int) -> bool:
        raise NotImplementedError

    def get_backoff_time(self) -> int:
        raise NotImplementedError


class NoRestartBackoffTimeStrategy(RestartBackoffTimeStrategy):
    def notify_failure(self, timestamp_ms: int) -> None:
        pass

    def can_restart(self, now_ms: int) -> bool:
        return False

    def get_backoff_time(self) -> int:
        return 0

    def __str__(self) -> str:
        return "NoRestartBackoffTimeStrategy"


class FixedDelayRestartBackoffTimeStrategy(RestartBackoffTimeStrategy):
    def __init__(self, max_attempts: int, backoff_ms: int):
        self.max_attempts, self.backoff_ms = max_attempts, backoff_ms
        self.current_attempt = 0

    def notify_failure(self, timestamp_ms: int) -> None:
        self.current_attempt += 1

    def can_restart(self, now_ms: int) -> bool:
        return self.current_attempt <= self.max_attempts

    def get_backoff_time(self) -> int:
        return self.backoff_ms

    def __str__(self) -> str:
        return (f"FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts={self.max_attempts}, "
                f"backoffTimeMS={self.backoff_ms})")


class FailureRateRestartBackoffTimeStrategy(RestartBackoffTimeStrategy):
    def __init__(self, max_failures_per_interval: int, failures_interval_ms: int, backoff_ms: int):
        self.max_failures, self.interval_ms, self.backoff_ms = max_failures_per_interval, failures_interval_ms, backoff_ms
        # The last max_failures + 1 failures, oldest first: the job may restart after a failure
        # unless max_failures earlier ones fall within the interval before it (FLINK-20752).
        self.failure_timestamps: list[int] = []

    def _full(self) -> bool:
        return len(self.failure_timestamps) > self.max_failures

    def notify_failure(self, timestamp_ms: int) -> None:
        if self._full():
            self.failure_timestamps.pop(0)
        self.failure_timestamps.append(timestamp_ms)

    def can_restart(self, now_ms: int) -> bool:
        if self._full():
            return now_ms - self.failure_timestamps[0] > self.interval_ms
        return True

    def get_backoff_time(self) -> int:
        return self.backoff_ms

    def __str__(self) -> str:
        return (f"FailureRateRestartBackoffTimeStrategy(failuresIntervalMS={self.interval_ms}, "
                f"backoffTimeMS={self.backoff_ms}, maxFailuresPerInterval={self.max_failures})")


class ExponentialDelayRestartBackoffTimeStrategy(RestartBackoffTimeStrategy):
    def __init__(self, initial_backoff_ms: int, max_backoff_ms: int, multiplier: float,
                 reset_threshold_ms: int, jitter_factor: float, rng: Optional[random.Random] = None,
                 attempts_before_reset: Optional[int] = None):
        self.initial, self.max, self.multiplier = initial_backoff_ms, max_backoff_ms, multiplier
        self.reset_threshold, self.jitter = reset_threshold_ms, jitter_factor
        self.current_attempt = 0                    # restarts since the backoff was last reset
        self.next_restart: Optional[int] = None     # when the last failure's restart happens
        self.current_backoff = initial_backoff_ms
        self.rng = rng or random.Random()
        self.attempts_before_reset = attempts_before_reset      # None: unbounded

    def notify_failure(self, timestamp_ms: int) -> None:
        if self.next_restart is None or timestamp_ms - self.next_restart >= self.reset_threshold:
            self.current_attempt = 0
        try:
            backoff = int(self.initial * self.multiplier ** self.current_attempt)
            offset = int(backoff * self.jitter)
            backoff += self.rng.randint(-offset, offset) if offset else 0
        except OverflowError:           # far beyond max (Flink's long cast saturates)
            backoff = self.max
        self.current_backoff = max(self.initial, min(backoff, self.max))
        self.next_restart = timestamp_ms + self.current_backoff
        self.current_attempt += 1

    def can_restart(self, now_ms: int) -> bool:
        return self.attempts_before_reset is None or self.current_attempt <= self.attempts_before_reset

    def get_backoff_time(self) -> int:
        return self.current_backoff

    def __str__(self) -> str:
        return (f"ExponentialDelayRestartBackoffTimeStrategy(initialBackoffMS={self.initial}, "
                f"maxBackoffMS={self.max}, backoffMultiplier={self.multiplier}, "
                f"resetBackoffThresholdMS={self.reset_threshold}, jitterFactor={self.jitter}, "
                f"attemptsBeforeResetBackoff={self.attempts_before_reset})")


# Flink's configuration keys (restart-strategy.*), for jobs that configure rather than call
# env.set_restart_strategy(...).
def configuration_strategy(conf: dict) -> Optional[RestartStrategyConfiguration]:
    kind = conf.get("restart-strategy.type") or conf.get("restart-strategy")
    if kind is None:
        return None
    kind = str(kind).lower().replace("_", "-")
    key = "restart-strategy.{}".format
    number = lambda name, default, type_=int: _number(conf, key(name), default, type_)  # noqa: E731
    duration = lambda name, default: _duration(conf.get(key(name), default), key(name))  # noqa: E731
    if kind in ("none", "off", "disable"):
        return RestartStrategies.no_restart()
    if kind in ("fixed-delay", "fixeddelay"):
        return RestartStrategies.fixed_delay_restart(number("fixed-delay.attempts", 1),
                                                     duration("fixed-delay.delay", "1 s"))
    if kind in ("failure-rate", "failurerate"):
        return RestartStrategies.failure_rate_restart(
            number("failure-rate.max-failures-per-interval", 1),
            duration("failure-rate.failure-rate-interval", "1 min"), duration("failure-rate.delay", "1 s"))
    if kind in ("exponential-delay", "exponentialdelay"):
        return RestartStrategies.exponential_delay_restart(
            duration("exponential-delay.initial-backoff", "1 s"),
            duration("exponential-delay.max-backoff", "1 min"),
            number("exponential-delay.backoff-multiplier", 1.5, float),
            duration("exponential-delay.reset-backoff-threshold", "1 h"),
            number("exponential-delay.jitter-factor", 0.1, float),
            _optional(conf, key("exponential-delay.attempts-before-reset-backoff")))
    raise ValueError(f"Unknown restart-strategy.type '{kind}': use none, fixed-delay, failure-rate or "
                     "exponential-delay (Flink's names).")


_UNITS = {label: factor for labels, factor in (
    (("d", "day", "days"), 86_400_000), (("h", "hour", "hours"), 3_600_000),
    (("min", "m", "minute", "minutes"), 60_000), (("s", "sec", "secs", "second", "seconds"), 1000),
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 1)) for label in labels}


def _duration(value, key: str = "duration") -> int:
    """Flink durations (TimeUtils.parseDuration): "10 s", "1 min", "500 ms", "1 h", "2 days",
    or a number of milliseconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    text = str(value).strip().lower()
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = text[len(number):].strip()
    try:
        amount = float(number)
    except ValueError:
        amount = None
    if amount is None or unit not in _UNITS and unit:
        raise ValueError(f"{key}: not a duration: {value!r} (use e.g. '10 s', '1 min', '500 ms'; units: "
                         "ms, s, min, h, d)")
    return int(amount * _UNITS.get(unit, 1))


def _optional(conf: dict, key: str) -> Optional[int]:
    return None if conf.get(key) in (None, "") else _number(conf, key, None, int)


def _number(conf: dict, key: str, default, type_):
    value = conf.get(key, default)
    try:
        return type_(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key}: expected {'a whole number' if type_ is int else 'a number'}, "
                         f"got {value!r}") from None


def effective_configuration(configured: Optional[RestartStrategyConfiguration], conf: dict,
                            checkpointing_enabled: bool) -> RestartStrategyConfiguration:
    """The strategy a job runs under: its own, else its configuration's, else Flink's default
    (exponential-delay when checkpointing is enabled, with the ``restart-strategy.exponential-delay.*``
    options the configuration sets, as Flink's RestartBackoffTimeStrategyFactoryLoader; none
    otherwise). A control plane's defaults are configuration under the job's own (see
    ``runtime.jobmaster.deployment.CONTROL_PLANE_CONFIGURATION``)."""
    if configured is not None and not isinstance(configured, FallbackRestartStrategyConfiguration):
        return configured
    from_conf = configuration_strategy(conf)
    if from_conf is not None:
        return from_conf
    if checkpointing_enabled:
        return configuration_strategy({**conf, "restart-strategy.type": "exponential-delay"})
    return RestartStrategies.no_restart()


def create_strategy(config: RestartStrategyConfiguration, seed: int = 0) -> RestartBackoffTimeStrategy:
    if isinstance(config, FixedDelayRestartStrategyConfiguration):
        return FixedDelayRestartBackoffTimeStrategy(config.restart_attempts, config.delay_between_attempts_ms)
    if isinstance(config, FailureRateRestartStrategyConfiguration):
        return FailureRateRestartBackoffTimeStrategy(config.max_failure_rate, config.failure_interval_ms,
                                                     config.delay_between_attempts_ms)
    if isinstance(config, ExponentialDelayRestartStrategyConfiguration):
        return ExponentialDelayRestartBackoffTimeStrategy(
            config.initial_backoff_ms, config.max_backoff_ms, config.backoff_multiplier,
            config.reset_backoff_threshold_ms, config.jitter_factor, random.Random(seed),
            config.attempts_before_reset_backoff)
    if isinstance(config, NoRestartStrategyConfiguration):
        return NoRestartBackoffTimeStrategy()
    raise TypeError(f"no restart strategy for {config!r}")


@dataclass(frozen=True)
class RestartDecision:
    restart: bool
    backoff_ms: int
    strategy: str
    failures: int
    unrecoverable: bool = False     # the failure would recur after a restart: the strategy was not asked

    def describe(self) -> str:
        if self.restart:
            return f"restarting in {self.backoff_ms} ms after failure {self.failures} ({self.strategy})"
        if self.unrecoverable:
            return (f"not restarting after failure {self.failures}: a restart would fail alike (a non-recoverable "
                    f"error); fix its cause, then start the job again")
        return f"not restarting after failure {self.failures}: the restart strategy gave up ({self.strategy})"


def decide(config: RestartStrategyConfiguration, failure_times_ms: Sequence[int]) -> RestartDecision:
    """Replay the failures (oldest first) into a fresh strategy and ask it about the last one.
    The jitter is seeded by the run's first failure, so every replay draws the same jitter for
    the same failure (the backoff each restart waited) and runs still differ from each other."""
    strategy = create_strategy(config, seed=int(failure_times_ms[0]) if failure_times_ms else 0)
    for t in failure_times_ms:
        strategy.notify_failure(int(t))
    now = int(failure_times_ms[-1]) if failure_times_ms else 0
    restart = strategy.can_restart(now)
    return RestartDecision(restart, strategy.get_backoff_time() if restart else 0, str(config),
                           len(failure_times_ms))
