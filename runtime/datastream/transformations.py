"""Transformations: the logical operations a job is built of (Flink's ``Transformation``).

The DataStream API creates them and may still change their settings (``name``,
``set_parallelism``, ``uid``, ...) until the job is compiled; compilation reads them
and produces immutable graphs. ``parallelism = None`` means "the environment's default",
resolved at compilation, so a restore at another parallelism changes every operator
that did not set its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from runtime.datastream.operators import ChainingStrategy, OperatorSpec

MAX_MAX_PARALLELISM = 32768


@dataclass(eq=False)
class Transformation:
    id: int
    name: str
    output_type: Any = None
    parallelism: Optional[int] = None
    max_parallelism: Optional[int] = None
    uid: Optional[str] = None
    slot_sharing_group: Any = None        # a SlotSharingGroup (its name, and resources if declared)
    chaining_strategy: Optional[ChainingStrategy] = None
    # Sources that cannot run in parallel (socket, collection) and window_all.
    non_parallel: bool = False
    description: Optional[str] = None      # set_description: a longer text than the name

    @property
    def inputs(self) -> tuple["Transformation", ...]:
        return ()

    def set_parallelism(self, parallelism: int) -> None:
        if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
            raise ValueError(
                f"The parallelism of an operator must be at least 1, got {parallelism!r} for "
                f"'{self.name}'. Use set_parallelism(n) with n >= 1.")
        if self.non_parallel and parallelism != 1:
            raise ValueError(
                f"The parallelism of non parallel operator must be 1: '{self.name}' cannot run "
                f"with parallelism {parallelism}. Set the parallelism of the operators after it "
                f"instead.")
        if self.max_parallelism is not None and parallelism > self.max_parallelism:
            raise ValueError(
                f"The parallelism ({parallelism}) of '{self.name}' is larger than its maximum "
                f"parallelism ({self.max_parallelism}). Increase the maximum parallelism with "
                f"set_max_parallelism or lower the parallelism.")
        self.parallelism = parallelism

    def set_max_parallelism(self, max_parallelism: int) -> None:
        check_max_parallelism(max_parallelism, f"'{self.name}'")
        if self.parallelism is not None and self.parallelism > max_parallelism:
            raise ValueError(
                f"The maximum parallelism ({max_parallelism}) of '{self.name}' is smaller than its "
                f"parallelism ({self.parallelism}). Increase the maximum parallelism or decrease "
                f"the parallelism of this operator.")
        self.max_parallelism = max_parallelism


def check_max_parallelism(max_parallelism: int, owner: str) -> None:
    if (not isinstance(max_parallelism, int) or isinstance(max_parallelism, bool)
            or not 0 < max_parallelism <= MAX_MAX_PARALLELISM):
        raise ValueError(
            f"The maximum parallelism of {owner} must be between 1 and {MAX_MAX_PARALLELISM}, "
            f"got {max_parallelism!r}.")


@dataclass(eq=False)
class SourceTransformation(Transformation):
    operator: OperatorSpec = None


@dataclass(eq=False)
class OneInputTransformation(Transformation):
    input: Transformation = None
    operator: OperatorSpec = None
    state_key_selector: Any = None
    state_key_type: Any = None

    @property
    def inputs(self):
        return (self.input,)


@dataclass(eq=False)
class TwoInputTransformation(Transformation):
    input1: Transformation = None
    input2: Transformation = None
    operator: OperatorSpec = None
    state_key_selector1: Any = None
    state_key_selector2: Any = None

    @property
    def inputs(self):
        return (self.input1, self.input2)


@dataclass(eq=False)
class SinkTransformation(Transformation):
    input: Transformation = None
    operator: OperatorSpec = None

    @property
    def inputs(self):
        return (self.input,)


@dataclass(eq=False)
class PartitionTransformation(Transformation):
    """Virtual: changes how records reach the next operator; becomes no node."""

    input: Transformation = None
    partitioner: Any = None

    @property
    def inputs(self):
        return (self.input,)


@dataclass(eq=False)
class UnionTransformation(Transformation):
    """Virtual: the next operator reads all inputs as one stream."""

    union_inputs: tuple = field(default_factory=tuple)

    @property
    def inputs(self):
        return self.union_inputs


@dataclass(eq=False)
class SideOutputTransformation(Transformation):
    """Virtual: selects the records the input emitted to ``output_tag``."""

    input: Transformation = None
    output_tag: Any = None

    @property
    def inputs(self):
        return (self.input,)


@dataclass(eq=False)
class KeyedStreamValuesTransformation(Transformation):
    """Virtual: a KeyedStream's records taken as a plain stream again (its union, sinks, project).

    PyFlink carries a keyed stream's records as ``Row(key, value)`` and takes the values back with
    a map named ``_keyed_stream_values_operator``; Sluice's keyed records are the values already,
    so this becomes no operator (the records go by key straight to the next one), only the node
    PyFlink's plan has in the plan JSON."""

    input: Transformation = None

    @property
    def inputs(self):
        return (self.input,)


VIRTUAL = (PartitionTransformation, UnionTransformation, SideOutputTransformation,
           KeyedStreamValuesTransformation)
