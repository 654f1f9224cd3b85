"""Restart strategies with Flink's parameters (``pyflink.common.restart_strategy``).

These are descriptions; the control plane applies them when an epoch fails.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from runtime.common.time import to_millis


class RestartStrategyConfiguration:
    """Base of the restart strategy descriptions."""

    def describe(self) -> str:
        return str(self)


@dataclass(frozen=True)
class NoRestartStrategyConfiguration(RestartStrategyConfiguration):
    def __str__(self) -> str:
        return "Restart deactivated."


@dataclass(frozen=True)
class FallbackRestartStrategyConfiguration(RestartStrategyConfiguration):
    def __str__(self) -> str:
        return "Cluster level default restart strategy"


@dataclass(frozen=True)
class FixedDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
    restart_attempts: int
    delay_between_attempts_ms: int

    def __str__(self) -> str:
        return (f"Restart with fixed delay ({self.delay_between_attempts_ms} ms). "
                f"#{self.restart_attempts} restart attempts.")


@dataclass(frozen=True)
class FailureRateRestartStrategyConfiguration(RestartStrategyConfiguration):
    max_failure_rate: int
    failure_interval_ms: int
    delay_between_attempts_ms: int

    def __str__(self) -> str:
        return (f"Failure rate restart with maximum of {self.max_failure_rate} failures within "
                f"interval {self.failure_interval_ms} ms and fixed delay "
                f"{self.delay_between_attempts_ms} ms.")


@dataclass(frozen=True)
class ExponentialDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
    initial_backoff_ms: int
    max_backoff_ms: int
    backoff_multiplier: float
    reset_backoff_threshold_ms: int
    jitter_factor: float
    # Flink's restart-strategy.exponential-delay.attempts-before-reset-backoff (FLIP-364): the
    # restarts allowed until the backoff resets; None is Flink's default, no limit.
    attempts_before_reset_backoff: Optional[int] = None

    def __str__(self) -> str:
        limit = (f" At most {self.attempts_before_reset_backoff} restart attempts before the delay resets."
                 if self.attempts_before_reset_backoff is not None else "")
        return (f"Restart with exponential delay: starting at {self.initial_backoff_ms} ms, "
                f"increasing by {self.backoff_multiplier}, with maximum {self.max_backoff_ms} ms. "
                f"Delay resets after {self.reset_backoff_threshold_ms} ms with jitter "
                f"{self.jitter_factor}.{limit}")


def _non_negative(value: int, name: str) -> int:
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")
    return value


class RestartStrategies:
    """Factory of restart strategy descriptions, as Flink's ``RestartStrategies``."""

    @staticmethod
    def no_restart() -> RestartStrategyConfiguration:
        return NoRestartStrategyConfiguration()

    @staticmethod
    def fall_back_restart() -> RestartStrategyConfiguration:
        return FallbackRestartStrategyConfiguration()

    @staticmethod
    def fixed_delay_restart(restart_attempts: int, delay_between_attempts) -> RestartStrategyConfiguration:
        return FixedDelayRestartStrategyConfiguration(
            _non_negative(int(restart_attempts), "restart_attempts"),
            _non_negative(to_millis(delay_between_attempts, "delay_between_attempts"),
                          "delay_between_attempts"))

    @staticmethod
    def failure_rate_restart(failure_rate: int, failure_interval, delay_interval) -> RestartStrategyConfiguration:
        if failure_rate < 1:
            raise ValueError(f"failure_rate must be at least 1, got {failure_rate}")
        return FailureRateRestartStrategyConfiguration(
            int(failure_rate),
            _non_negative(to_millis(failure_interval, "failure_interval"), "failure_interval"),
            _non_negative(to_millis(delay_interval, "delay_interval"), "delay_interval"))

    @staticmethod
    def exponential_delay_restart(initial_backoff, max_backoff, backoff_multiplier: float,
                                  reset_backoff_threshold, jitter_factor: float,
                                  attempts_before_reset_backoff: Optional[int] = None) -> RestartStrategyConfiguration:
        """PyFlink's exponential delay; ``attempts_before_reset_backoff`` (Flink's configuration key
        of that name) bounds the restarts until the delay resets (None: no bound, Flink's default)."""
        if attempts_before_reset_backoff is not None and attempts_before_reset_backoff < 0:
            raise ValueError(f"attempts_before_reset_backoff must not be negative, got {attempts_before_reset_backoff}")
        if backoff_multiplier < 1:
            raise ValueError(f"backoff_multiplier must be at least 1.0, got {backoff_multiplier}")
        if not 0 <= jitter_factor <= 1:
            raise ValueError(f"jitter_factor must be within [0, 1], got {jitter_factor}")
        return ExponentialDelayRestartStrategyConfiguration(
            _non_negative(to_millis(initial_backoff, "initial_backoff"), "initial_backoff"),
            _non_negative(to_millis(max_backoff, "max_backoff"), "max_backoff"),
            float(backoff_multiplier),
            _non_negative(to_millis(reset_backoff_threshold, "reset_backoff_threshold"),
                          "reset_backoff_threshold"),
            float(jitter_factor), None if attempts_before_reset_backoff is None else int(attempts_before_reset_backoff))
