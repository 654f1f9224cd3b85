"""A key's state is gone once its windows and timers are (issue 50, item 1).

Every stateful operator kind runs here epoch by epoch on both backends, each epoch ending in a
checkpoint (the first a full snapshot, the others increments) written to state files by the
task's own state manager. Each epoch's task either keeps its backend (a kept heap or RocksDB
store, as a reused PySpark worker does) or rebuilds it from the checkpoint's files (full
snapshot, then the increments with their deletions), as a new worker does. At the end the
operator's full snapshot holds nothing but what Flink keeps per key for good (a count window's
counter, a rolling aggregate), and neither does the state rebuilt from the checkpoint's chain:
a deletion is written as a tombstone, so a restore does not bring it back. A real Spark job per
backend checks the same through ``sluice state``'s reader.
"""
import dataclasses
import os

import pytest

from runtime.cep import CEP, Pattern, PatternProcessFunction, TimedOutPartialMatchHandler
from runtime.checkpoint.savepoint import read_state
from runtime.checkpoint.storage import CheckpointStorage
from runtime.common import Time, Types, WatermarkStrategy
from runtime.common.watermark_strategy import MAX_WATERMARK
from runtime.datastream import (
    KeyedProcessFunction, OutputTag, ProcessWindowFunction, StreamExecutionEnvironment)
from runtime.datastream.state import ValueStateDescriptor
from runtime.datastream.window import (
    ContinuousEventTimeTrigger, CountEvictor, CountTrigger, EventTimeSessionWindows, GlobalWindows,
    ProcessingTimeSessionWindows, PurgingTrigger, SlidingEventTimeWindows, SlidingProcessingTimeWindows,
    TumblingEventTimeWindows, TumblingProcessingTimeWindows)
from runtime.graph.job_graph import create_job_graph
from runtime.state import kept_stores
from runtime.state.snapshot import read_state_file
from runtime.task.deployment import Acknowledgement, RestoredState, TaskDeploymentDescriptor
from runtime.task.stream_task import StreamTask
from runtime_env import job_env

EVENT = Types.TUPLE([Types.STRING(), Types.LONG()])
T0 = 1_700_000_000_000      # processing time of the first epoch


class _Recorder:
    """The head operator's output: what it emits, and nothing downstream."""

    def __init__(self):
        self.records: list = []

    def collect(self, values, timestamps) -> None:
        self.records.extend(values)

    def collect_side(self, tag_id, values, timestamps) -> None:
        self.records.extend((tag_id, v) for v in values)

    def emit_watermark(self, watermark) -> None:
        pass

    def emit_idle(self) -> None:
        pass


@dataclasses.dataclass
class Epoch:
    """What one epoch brings: records (value, timestamp), then a watermark; at ``now``."""

    records: list = dataclasses.field(default_factory=list)
    watermark: int = None
    now: int = T0
    end: bool = False       # the bounded input ends: every processing-time timer fires


class KeyedEpochs:
    """The keyed operator of a job (``build(keyed stream) -> stream``) run epoch by epoch in this
    process, each epoch a task of its own ending in a checkpoint, as the driver deploys them."""

    def __init__(self, build, backend: str, folder, kept: bool):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.get_configuration().set_string("state.backend.type", backend)
        env.set_parallelism(1)
        build(env.from_collection([("a", 0)], type_info=EVENT).key_by(lambda e: e[0], key_type=Types.STRING())).print()
        self.job_graph = create_job_graph(env.get_stream_graph("cleanup"))
        self.vertex = next(v for v in self.job_graph.vertices if v.is_keyed)
        self.folder, self.kept = folder, kept
        self.epoch, self.watermark = 0, None
        self.chain: list = []           # the checkpoint's state files: a full snapshot, then increments
        self.checksums: dict = {}
        self.out: list = []
        self.live_state = None          # the last task's full snapshot of its operator

    def _task(self, epoch: int, now: int, incremental: bool, snapshot: bool = True) -> StreamTask:
        op_id = self.vertex.head.operator_id
        restored = RestoredState({op_id: tuple(self.chain)}, {op_id: 1}, dict(self.checksums)) if self.chain else None
        tdd = TaskDeploymentDescriptor(
            self.vertex.id, 0, 0, epoch=epoch, processing_time=now, end_of_input=False, restored_state=restored,
            snapshot_dir=str(self.folder / f"checkpoint-{epoch}" / "{table}") if snapshot else None,
            state_version=f"v{epoch}", next_state_version=f"v{epoch + 1}", state_dir=str(self.folder / "local"),
            incremental=frozenset({op_id}) if incremental else frozenset())
        task = StreamTask(self.job_graph, tdd, {})
        task.state.restore(task.chain.all_operators, Acknowledgement(self.vertex.id, 0))
        head = task.head
        head.output = _Recorder()
        if self.watermark is not None:
            head.current_watermark = self.watermark
            if head.timers is not None:
                head.timers.current_watermark = self.watermark
        head.open()
        return task

    def run(self, epoch: Epoch) -> list:
        """One epoch; what the operator emitted."""
        task = self._task(self.epoch, epoch.now, incremental=self.epoch > 0)
        head = task.head
        try:
            head.advance_processing_time(epoch.now)
            if epoch.records:
                head.process_batch([v for v, _ in epoch.records], [t for _, t in epoch.records], 1)
            if epoch.watermark is not None:
                head.process_watermark(epoch.watermark, 1)
                self.watermark = head.current_watermark
            if epoch.end:
                head.advance_processing_time(MAX_WATERMARK)
            head.close()
            ack = Acknowledgement(self.vertex.id, 0)
            task.state.snapshot([head], ack)
            self.live_state = self._rows(head.snapshot())
        finally:
            task.chain.dispose()
        for f in ack.state_files:
            if not f.increment:
                self.chain = []
            self.chain.append(f.path)
            self.checksums[f.path] = f.checksum
        self.epoch += 1
        self.out.extend(head.output.records)
        return head.output.records

    def restored_state(self) -> dict:
        """The operator's state as a task rebuilds it from the checkpoint's files."""
        task = self._task(self.epoch, T0, incremental=False, snapshot=False)
        try:
            return self._rows(task.head.snapshot())
        finally:
            task.chain.dispose()

    @staticmethod
    def _rows(snapshot: dict) -> dict:
        return {"keyed": sorted((name, str(ns), key, value) for _, name, ns, key, value in snapshot.get("keyed", ())),
                "timers": sorted((domain, t, key, str(ns)) for _, domain, t, key, ns in snapshot.get("timers", ()))}

    def deletions(self) -> int:
        """The tombstones the increments of the checkpoint's chain carry."""
        deleted = 0
        for path in self.chain:
            table = read_state_file(path)
            if "deleted" in table.column_names:
                deleted += sum(bool(d) for d in table.column("deleted").to_pylist())
        return deleted


@pytest.fixture(params=["hashmap", "rocksdb"])
def backend(request):
    return request.param


@pytest.fixture(params=["kept", "rebuilt"])
def kept(request, monkeypatch):
    """Whether each epoch's task finds the backend its last task kept (a reused PySpark worker)
    or rebuilds it from the checkpoint's files."""
    if request.param == "kept":
        monkeypatch.setattr(kept_stores, "keeps_stores", lambda: True)
    yield request.param == "kept"
    for path in list(kept_stores._kept):
        store = kept_stores.take(path)
        if store is not None:
            store.close()


def run_epochs(tmp_path, backend, kept, build, epochs) -> KeyedEpochs:
    run = KeyedEpochs(build, backend, tmp_path, kept)
    for epoch in epochs:
        run.run(epoch)
    return run


NOTHING = {"keyed": [], "timers": []}


def assert_no_state(run: KeyedEpochs, kept_for_good=()) -> None:
    """Nothing left in the live operator's snapshot nor in the state rebuilt from the
    checkpoint, but the states named in ``kept_for_good``."""
    def without(rows):
        return {"keyed": [r for r in rows["keyed"] if r[0] not in kept_for_good], "timers": rows["timers"]}
    assert without(run.live_state) == NOTHING
    assert without(run.restored_state()) == NOTHING


# ---- session windows (the reproduction) ---------------------------------------------

def _sum(a, b):
    return a[0], a[1] + b[1]


def test_a_session_windows_merging_set_goes_with_its_last_window(tmp_path, backend, kept):
    """a@0, a@1000, b@100000, a record an epoch: each session's merging-window-set entry is
    removed once its window fires, in the live state and in the checkpoint's chain."""
    run = KeyedEpochs(lambda s: s.window(EventTimeSessionWindows.with_gap(Time.seconds(30))).reduce(_sum),
                      backend, tmp_path, kept)
    run.run(Epoch([(("a", 1), 0)], watermark=0))
    run.run(Epoch([(("a", 2), 1000)], watermark=1000))
    live = run.live_state["keyed"]
    assert [r[:3] for r in live if r[0] == "merging-window-set"] == [("merging-window-set", "None", "a")]
    run.run(Epoch([(("b", 5), 100_000)], watermark=100_000))       # a's session (0, 31000) fires
    assert run.out == [("a", 3)]
    assert [r[2] for r in run.live_state["keyed"]] == ["b", "b"]   # b's merging set and contents
    run.run(Epoch([], watermark=MAX_WATERMARK))
    assert run.out == [("a", 3), ("b", 5)]
    assert_no_state(run)
    assert run.deletions() > 0
