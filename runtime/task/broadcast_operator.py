"""The broadcast state pattern's operator (Flink's CoBroadcastWithNonKeyedOperator and
CoBroadcastWithKeyedOperator, one class here).

Input 1 is the stream (keyed or not), input 2 the broadcast one: every broadcast record reaches
every subtask, so each subtask keeps its own copy of the broadcast states, written by
``process_broadcast_element`` and read only by ``process_element`` and ``on_timer``. The copies
are operator state: snapshotted whole with the operator every epoch (rows without a key group,
distribution ``broadcast``), and restored as Flink restores them: a subtask takes its own copy,
and after a rescale subtask i takes the copy of old subtask i mod the old parallelism (all copies
are equal when the function keeps to the pattern's contract).
"""
from __future__ import annotations

from runtime.datastream import functions as fn
from runtime.datastream.state import BroadcastState, ReadOnlyBroadcastState
from runtime.task.process_operator import ProcessContext, ProcessOperatorBase
from runtime.task.task_context import TaskContext

BROADCAST_PREFIX = "_broadcast/"    # the state name of a broadcast state's rows
BROADCAST = "broadcast"             # their distribution (Flink's OperatorStateHandle.Mode.BROADCAST)


class ReadOnlyMapBroadcastState(ReadOnlyBroadcastState):
    """A view of a broadcast state's entries that refuses writes, naming where they belong."""

    def __init__(self, name: str, entries: dict):
        self._name = name
        self._entries = entries

    def get(self, key):
        return self._entries.get(key)

    def contains(self, key) -> bool:
        return key in self._entries

    def items(self):
        return list(self._entries.items())

    def keys(self):
        return list(self._entries)

    def values(self):
        return list(self._entries.values())

    def is_empty(self) -> bool:
        return not self._entries

    def _read_only(self, *args):
        raise TypeError(f"The broadcast state '{self._name}' is read only in process_element and on_timer: "
                        "update it in process_broadcast_element, which every subtask runs.")

    clear = put = put_all = remove = __setitem__ = __delitem__ = _read_only


class MapBroadcastState(ReadOnlyMapBroadcastState, BroadcastState):
    """The broadcast side's view: writable."""

    def put(self, key, value) -> None:
        self._entries[key] = value

    def put_all(self, dict_value) -> None:
        self._entries.update(dict_value)

    def remove(self, key) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def __setitem__(self, key, value) -> None:
        self.put(key, value)

    def __delitem__(self, key) -> None:
        self.remove(key)


class BroadcastProcessContext(ProcessContext, fn.KeyedBroadcastProcessFunction.OnTimerContext,
                             fn.KeyedBroadcastProcessFunction.Context):
    """The ``ctx`` of both sides and of timers; ``broadcast_side`` says which views it hands out."""

    def __init__(self, operator: "BroadcastProcessOperator"):
        super().__init__(operator)
        self.broadcast_side = False

    def current_processing_time(self) -> int:
        return self._op.ctx.processing_time

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def get_broadcast_state(self, state_descriptor):
        op = self._op
        entries = op.broadcast_states.get(getattr(state_descriptor, "name", None))
        if entries is None:
            declared = ", ".join(repr(n) for n in op.broadcast_states) or "none"
            raise ValueError(f"The requested broadcast state {state_descriptor!r} does not exist in "
                             f"'{op.name}' (declared: {declared}): pass its MapStateDescriptor to "
                             "broadcast(...).")
        view = MapBroadcastState if self.broadcast_side else ReadOnlyMapBroadcastState
        return view(state_descriptor.name, entries)


class BroadcastProcessOperator(ProcessOperatorBase):
    """Runs a (Keyed)BroadcastProcessFunction; timers and keyed state on the keyed side only."""

    # The broadcast states are not in the keyed backend: snapshotted whole, never kept in a
    # local store between epochs.
    state_in_backend = False

    def __init__(self, node, ctx: TaskContext):
        super().__init__(node, ctx)
        self.broadcast_states: dict = {d.name: {} for d in self.spec.descriptors}

    def open(self):
        super().open()
        self.pctx = BroadcastProcessContext(self)

    def process_batch(self, values, timestamps, input_index):
        f = self.spec.function
        self.pctx.broadcast_side = input_index == 2
        self._run(f.process_broadcast_element if input_index == 2 else f.process_element,
                  values, timestamps, input_index)

    def _on_timer(self, timestamp, key, domain):
        self.pctx.broadcast_side = False
        super()._on_timer(timestamp, key, domain)

    def snapshot(self, incremental: bool = False) -> dict:
        snapshot = super().snapshot()
        snapshot["operator_state"] = {BROADCAST_PREFIX + name: (BROADCAST, list(entries.items()))
                                      for name, entries in self.broadcast_states.items()}
        return snapshot

    def restore(self, snapshot: dict) -> None:
        if getattr(self.backend, "local", False):
            self.backend.clear()    # a kept store may be stale: its state comes from the files
        super().restore(snapshot)
        old_parallelism = snapshot.get("restored_parallelism") or self.ctx.parallelism
        copy_of = self.ctx.subtask_index % old_parallelism
        restored = snapshot.get("operator_state", {})
        for name, entries in self.broadcast_states.items():
            entries.clear()
            entries.update(kv for subtask, kv in restored.get(BROADCAST_PREFIX + name, ()) if subtask == copy_of)
