"""Complex event processing: Flink's Pattern API and CEP operator (``org.apache.flink.cep``).

No pyspark or airflow at module level: patterns and the NFA are plain Python.
"""
from .after_match_skip_strategy import AfterMatchSkipStrategy
from .cep import CEP, PatternStream
from .conditions import IterativeCondition, SimpleCondition
from .functions import (PatternFlatSelectFunction, PatternFlatTimeoutFunction, PatternProcessFunction,
                        PatternSelectFunction, PatternTimeoutFunction, TimedOutPartialMatchHandler)
from .pattern import MalformedPatternException, Pattern

__all__ = ["AfterMatchSkipStrategy", "CEP", "IterativeCondition", "MalformedPatternException", "Pattern",
           "PatternFlatSelectFunction", "PatternFlatTimeoutFunction", "PatternProcessFunction",
           "PatternSelectFunction", "PatternStream", "PatternTimeoutFunction", "SimpleCondition",
           "TimedOutPartialMatchHandler"]
