"""What the driver's parts of one run share (the collaborators Flink's JobMaster hands its
scheduler and checkpoint coordinator): the job, its options, the run, the job's checkpoint
storage, and the coordinators of its checkpoints, sources and task states.

Frozen: which collaborators a run has is fixed when it starts; each part takes the one context
instead of the same collaborators field by field, and reads the ones it uses.
"""
from __future__ import annotations

from dataclasses import dataclass

from runtime.checkpoint.coordinator import CheckpointCoordinator
from runtime.checkpoint.storage import CheckpointStorage
from runtime.execution.options import ExecutionOptions
from runtime.execution.source_coordinator import SourceCoordinator
from runtime.execution.state_assignment import TaskStates
from runtime.graph.job_graph import JobGraph


@dataclass(frozen=True)
class JobContext:
    job_graph: JobGraph
    options: ExecutionOptions
    run_id: str
    run_dir: str                    # the run's scratch: snapshots of epochs without a checkpoint
    batch: bool                     # BATCH mode: one epoch, no checkpoint, no restore
    storage: CheckpointStorage
    coordinator: CheckpointCoordinator
    sources: SourceCoordinator
    states: TaskStates
