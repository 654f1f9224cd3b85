"""Restart strategies, as Flink's RestartBackoffTimeStrategy implementations.

A strategy is told of each failure (``notify_failure``), then asked whether the job may
restart (``can_restart``) and after how long (``get_backoff_time``), with Flink's semantics:

  fixed-delay       at most ``attempts`` restarts, ``delay`` apart
  failure-rate      gives up once ``max_failures`` failures fall within ``interval``
  exponential-delay backoff from ``initial`` times ``multiplier`` up to ``max``, reset after
                    ``reset_threshold`` without failure, +/- ``jitter``; never gives up
  none              never restarts

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
        self.failure_timestamps: list[int] = []     # at most max_failures, oldest first

    def notify_failure(self, timestamp_ms: int) -> None:
        if len(self.failure_timestamps) >= self.max_failures:
            self.failure_timestamps.pop(0)
        self.failure_timestamps.append(timestamp_ms)

    def can_restart(self, now_ms: int) -> bool:
        if len(self.failure_timestamps) >= self.max_failures:
            return now_ms - self.failure_timestamps[0] > self.interval_ms
        return True

    def get_backoff_time(self) -> int:
        return self.backoff_ms

    def __str__(self) -> str:
        return (f"FailureRateRestartBackoffTimeStrategy(failuresIntervalMS={self.interval_ms}, "
                f"backoffTimeMS={self.backoff_ms}, maxFailuresPerInterval={self.max_failures})")


class ExponentialDelayRestartBackoffTimeStrategy(RestartBackoffTimeStrategy):
    def __init__(self, initial_backoff_ms: int, max_backoff_ms: int, multiplier: float,
                 reset_threshold_ms: int, jitter_factor: float, rng: Optional[random.Random] = None):
        self.initial, self.max, self.multiplier = initial_backoff_ms, max_backoff_ms, multiplier
        self.reset_threshold, self.jitter = reset_threshold_ms, jitter_factor
        self.current_backoff = initial_backoff_ms
        self.last_failure: Optional[int] = None
        self.rng = rng or random.Random()

    def notify_failure(self, timestamp_ms: int) -> None:
        if self.last_failure is None or timestamp_ms - self.last_failure >= self.reset_threshold + self.current_backoff:
            self.current_backoff = self.initial
        elif self.current_backoff < self.max:
            self.current_backoff = int(self.current_backoff * self.multiplier)
        self.current_backoff = max(self.initial, min(self.current_backoff, self.max))
        self.last_failure = timestamp_ms

    def can_restart(self, now_ms: int) -> bool:
        return True

    def get_backoff_time(self) -> int:
        offset = int(self.current_backoff * self.jitter)
        return self.current_backoff + (self.rng.randint(-offset, offset) if offset else 0)

    def __str__(self) -> str:
        return (f"ExponentialDelayRestartBackoffTimeStrategy(initialBackoffMS={self.initial}, "
                f"maxBackoffMS={self.max}, backoffMultiplier={self.multiplier}, "
                f"resetBackoffThresholdMS={self.reset_threshold}, jitterFactor={self.jitter})")


# Flink's configuration keys (restart-strategy.*), for jobs that configure rather than call
# env.set_restart_strategy(...).
def configuration_strategy(conf: dict) -> Optional[RestartStrategyConfiguration]:
    kind = conf.get("restart-strategy.type") or conf.get("restart-strategy")
    if kind is None:
        return None
    kind = str(kind).lower().replace("_", "-")
    get = lambda key, default: conf.get(f"restart-strategy.{key}", default)  # noqa: E731
    if kind in ("none", "off", "disable"):
        return RestartStrategies.no_restart()
    if kind in ("fixed-delay", "fixeddelay"):
        return RestartStrategies.fixed_delay_restart(int(get("fixed-delay.attempts", 1)),
                                                     _duration(get("fixed-delay.delay", "1 s")))
    if kind in ("failure-rate", "failurerate"):
        return RestartStrategies.failure_rate_restart(
            int(get("failure-rate.max-failures-per-interval", 1)),
            _duration(get("failure-rate.failure-rate-interval", "1 min")), _duration(get("failure-rate.delay", "1 s")))
    if kind in ("exponential-delay", "exponentialdelay"):
        return RestartStrategies.exponential_delay_restart(
            _duration(get("exponential-delay.initial-backoff", "1 s")),
            _duration(get("exponential-delay.max-backoff", "1 min")),
            float(get("exponential-delay.backoff-multiplier", 1.5)),
            _duration(get("exponential-delay.reset-backoff-threshold", "1 h")),
            float(get("exponential-delay.jitter-factor", 0.1)))
    raise ValueError(f"Unknown restart-strategy.type '{kind}': use none, fixed-delay, failure-rate or "
                     "exponential-delay (Flink's names).")


def _duration(value) -> int:
    """Flink durations: "10 s", "1 min", "500 ms", "1 h", or milliseconds."""
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip().lower()
    units = (("ms", 1), ("milli", 1), ("min", 60_000), ("m", 60_000), ("s", 1000), ("h", 3_600_000),
             ("d", 86_400_000))
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = text[len(number):].strip()
    for name, factor in units:
        if unit.startswith(name):
            return int(float(number) * factor)
    if not unit:
        return int(float(number))
    raise ValueError(f"not a duration: {value!r} (use e.g. '10 s', '1 min', '500 ms')")


def effective_configuration(configured: Optional[RestartStrategyConfiguration], conf: dict,
                            checkpointing_enabled: bool) -> RestartStrategyConfiguration:
    """The strategy a job runs under: its own, else its configuration's, else Flink's default
    (exponential-delay when checkpointing is enabled, none otherwise)."""
    if configured is not None and not isinstance(configured, FallbackRestartStrategyConfiguration):
        return configured
    from_conf = configuration_strategy(conf)
    if from_conf is not None:
        return from_conf
    if checkpointing_enabled:
        return RestartStrategies.exponential_delay_restart(1000, 60_000, 1.5, 3_600_000, 0.1)
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
            config.reset_backoff_threshold_ms, config.jitter_factor, random.Random(seed))
    if isinstance(config, NoRestartStrategyConfiguration):
        return NoRestartBackoffTimeStrategy()
    raise TypeError(f"no restart strategy for {config!r}")


@dataclass(frozen=True)
class RestartDecision:
    restart: bool
    backoff_ms: int
    strategy: str
    failures: int

    def describe(self) -> str:
        if self.restart:
            return f"restarting in {self.backoff_ms} ms after failure {self.failures} ({self.strategy})"
        return f"not restarting after failure {self.failures}: the restart strategy gave up ({self.strategy})"


def decide(config: RestartStrategyConfiguration, failure_times_ms: Sequence[int]) -> RestartDecision:
    """Replay the failures (oldest first) into a fresh strategy and ask it about the last one."""
    strategy = create_strategy(config, seed=len(failure_times_ms))
    for t in failure_times_ms:
        strategy.notify_failure(int(t))
    now = int(failure_times_ms[-1]) if failure_times_ms else 0
    restart = strategy.can_restart(now)
    return RestartDecision(restart, strategy.get_backoff_time() if restart else 0, str(config),
                           len(failure_times_ms))
