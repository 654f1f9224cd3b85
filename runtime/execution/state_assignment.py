"""What each subtask's state starts the next epoch from (Flink's StateAssignmentOperation).

After a restore, the checkpoint's state files assigned to the subtasks by key group (and its
watermarks); after each epoch, the files of the chains the checkpoints build (whole snapshots
and increments), together with the version the subtasks left their local stores at: a subtask
whose store is at that version uses it as it is, any other rebuilds it from the files.
"""
from __future__ import annotations

from typing import Optional

from runtime.checkpoint.incremental import StateChains
from runtime.checkpoint.restore import assign_state
from runtime.graph.job_graph import JobGraph
from runtime.storage.filesystems import remove
from runtime.task.watermarks import assign_watermarks


class TaskStates:
    def __init__(self, job_graph: JobGraph, chains: StateChains, run_id: str):
        self.job_graph = job_graph
        self.chains = chains
        self.run_id = run_id
        self.restored: dict = {}            # (vertex id, subtask) -> RestoredState for the next epoch
        self.watermarks: dict = {}          # (vertex id, subtask) -> TaskWatermarks for the next epoch
        self.version: Optional[str] = None  # where the last epoch left the local stores
        self.restores = 0                   # restores in this run: part of each version

    def restore(self, files: list[dict], parallelism: dict, watermarks: dict) -> None:
        """From a checkpoint's ``files``, written at ``parallelism`` (operator id -> parallelism)."""
        self.restored = assign_state(files, parallelism, self.job_graph)
        self.chains.restored(files)
        self.version = None         # local stores are rebuilt from the restored files
        self.restores += 1
        self.watermarks = assign_watermarks(watermarks, self.job_graph.vertices)

    def reset(self) -> None:
        """Nothing restored (a fall-back to another checkpoint follows)."""
        self.restored, self.watermarks = {}, {}

    def next_version(self, epoch: int) -> str:
        """The version an epoch's tasks leave their local stores at: unique per run and restore."""
        return f"{self.run_id}:{self.restores}:{epoch}"

    def after_epoch(self, acks: list, incremental: frozenset, version: Optional[str]) -> list:
        """The epoch's acknowledgements moved the chains on (and left the local stores at
        ``version``): the next epoch's assignment. Returns the epoch's state files."""
        self.watermarks = {(a.job_vertex_id, a.subtask_index): a.task_watermarks for a in acks}
        state_files = [f for a in acks for f in a.state_files]
        superseded = self.chains.after_epoch(state_files, incremental)
        parallelism = {n.operator_id: v.parallelism for v in self.job_graph.vertices for n in v.operators}
        self.restored = assign_state(self.chains.files(), parallelism, self.job_graph)
        self.version = version
        for path in superseded:     # uncommitted snapshot files no chain reads any more
            remove(path)
        return state_files
