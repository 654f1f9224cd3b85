"""Incremental checkpoints: the chain of snapshot files an operator's state is read from, when a
full snapshot is taken again, and which partitions retention must keep."""
from types import SimpleNamespace

import pytest

from runtime.checkpoint.incremental import (
    FULL_EVERY, FULL_RATIO, INCREMENTAL, IncrementalPolicy, StateChain, partition_of, referenced_partitions)


def f(checkpoint, subtask, size=100, increment=False):
    return {"path": f"checkpoint_id={checkpoint}/part-{subtask:05d}-x.parquet", "subtask": subtask,
            "size": size, "increment": increment}


def test_a_chain_is_the_full_snapshot_then_the_increments_in_order():
    chain = StateChain().then([f(1, 0, 1000), f(1, 1, 1000)], full=True)
    chain = chain.then([f(2, 0, 10, True), f(2, 1, 10, True)], full=False).then([f(3, 1, 10, True)], full=False)
    assert [x["path"][:15] for x in chain.files()] == ["checkpoint_id=1"] * 2 + ["checkpoint_id=2"] * 2 + ["checkpoint_id=3"]
    assert StateChain.of_files(chain.files()) == chain
    assert chain.then([f(4, 0, 2000), f(4, 1, 2000)], full=True).files() == [f(4, 0, 2000), f(4, 1, 2000)]


def test_a_full_snapshot_comes_after_n_increments_or_when_they_outgrow_the_state():
    policy = IncrementalPolicy(True, full_every=3, full_ratio=0.5)
    assert StateChain().wants_full(policy)                   # nothing yet: the first is full
    chain = StateChain().then([f(1, 0, 1000)], full=True)
    assert not chain.wants_full(policy)
    chain = chain.then([f(2, 0, 100, True)], False).then([f(3, 0, 100, True)], False)
    assert not chain.wants_full(policy)
    assert chain.then([f(4, 0, 100, True)], False).wants_full(policy)      # 3 increments
    assert chain.then([f(4, 0, 400, True)], False).wants_full(policy)      # 600 bytes > 50 % of 1000
    assert chain.wants_full(IncrementalPolicy(enabled=False))


def test_by_default_the_ratio_decides_and_the_count_only_bounds_the_files():
    """A full snapshot reads the whole state in its task (18 s at 10,000,000 keys): by default it
    comes when the increments outgrow half the last full one, which bounds a restore's reads at
    1.5 times the state, or after 100 increments, which bounds its files."""
    policy = IncrementalPolicy.from_config({"state.backend.type": "rocksdb"})
    assert policy == IncrementalPolicy(True, full_every=100, full_ratio=0.5)
    chain = StateChain().then([f(1, 0, 1_000_000)], full=True)
    for checkpoint in range(2, 101):       # 99 increments of 5 KB: 49.5 % of the full snapshot
        chain = chain.then([f(checkpoint, 0, 5_000, True)], False)
    assert not chain.wants_full(policy)
    assert chain.then([f(101, 0, 5_000, True)], False).wants_full(policy)      # the 100th
    ratio = StateChain().then([f(1, 0, 1_000_000)], full=True)
    for checkpoint in range(2, 52):        # 50 increments of 10,001 bytes: just over half
        ratio = ratio.then([f(checkpoint, 0, 10_001, True)], False)
    assert ratio.wants_full(policy) and len(ratio.increments) == 50


def test_the_policy_reads_flinks_switch_and_refuses_nonsense():
    assert IncrementalPolicy.from_config({}).enabled            # both backends keep their state
    assert IncrementalPolicy.from_config({"state.backend.type": "rocksdb"}).enabled
    assert not IncrementalPolicy.from_config({INCREMENTAL: "false"}).enabled
    with pytest.raises(ValueError, match="state.backend.type"):
        IncrementalPolicy.from_config({"state.backend.type": "rocks"})
    assert not IncrementalPolicy.from_config({"state.backend.type": "rocksdb", INCREMENTAL: "false"}).enabled
    assert IncrementalPolicy.from_config({INCREMENTAL: "true", FULL_EVERY: "4", FULL_RATIO: "0.25"}) == \
        IncrementalPolicy(True, 4, 0.25)
    with pytest.raises(ValueError, match=INCREMENTAL.replace(".", r"\.")):
        IncrementalPolicy.from_config({INCREMENTAL: "sometimes"})
    with pytest.raises(ValueError, match=FULL_EVERY):
        IncrementalPolicy.from_config({FULL_EVERY: "0"})


def test_retention_keeps_every_partition_a_retained_chain_reads():
    retained = [SimpleNamespace(operators=[{"files": [f(4, 0), f(6, 0, increment=True)]},
                                           {"files": [f(7, 0)]}])]
    assert referenced_partitions(retained) == {4, 6, 7}
    assert partition_of("/w/job/state/op/checkpoint_id=12/part-1.parquet") == "12"
    assert partition_of("/w/job/runs/r/state/epoch-000003/op/part-1.parquet") is None


def test_an_increment_carries_deletions_that_apply_after_the_rows_before_it():
    from runtime.common import Types
    from runtime.state.backend import TOMBSTONE
    from runtime.state.snapshot_reader import table_to_snapshot
    from runtime.state.snapshot_writer import snapshot_to_table
    pair = Types.TUPLE([Types.STRING(), Types.LONG()])
    full = snapshot_to_table({
        "keyed": [(1, "s", None, "a", ("a", 1)), (2, "s", None, "b", ("b", 2)), (3, "n", None, "a", 7)],
        "timers": [(1, "event", 100, "a", None), (2, "event", 200, "b", None)],
        "types": {"s": pair, "n": Types.LONG()}}, 0, "op")
    increment = snapshot_to_table({
        "keyed": [(1, "s", None, "a", TOMBSTONE), (4, "s", None, "c", ("c", 3)), (3, "n", None, "a", TOMBSTONE)],
        "timers": [(4, "event", 300, "c", None, None), (1, "event", 100, "a", None, TOMBSTONE)],
        "types": {"s": pair, "n": Types.LONG()}}, 0, "op")
    restored = table_to_snapshot([full, increment])
    state: dict = {}
    for kg, name, ns, key, value in restored["keyed"]:
        if value is TOMBSTONE:
            state.pop((name, key), None)
        else:
            state[(name, key)] = value
    assert state == {("s", "b"): ("b", 2), ("s", "c"): ("c", 3)}
    assert sorted(restored["timers"]) == [(2, "event", 200, "b", None), (4, "event", 300, "c", None)]
    # A deletion only: no value columns, still a deletion.
    only = snapshot_to_table({"keyed": [(2, "s", None, "b", TOMBSTONE)], "types": {"s": pair}}, 0, "op")
    assert [v for *_, v in table_to_snapshot([full, only])["keyed"]][-1] is TOMBSTONE


def test_a_snapshot_is_written_in_chunks_and_reads_back_whole(monkeypatch):
    """Keyed rows and timers come as iterators and become Arrow columns a chunk at a time, and a
    restore decodes them a chunk at a time; an engine state whose values do not keep to its
    declared type in one chunk is pickled there, typed in the others, and reads back as it was."""
    from runtime.common import Types
    from runtime.state import snapshot_reader, snapshot_writer
    from runtime.state.snapshot_format import ENGINE_STATES, state_types
    monkeypatch.setattr(snapshot_writer, "SNAPSHOT_CHUNK", 4)
    monkeypatch.setattr(snapshot_reader, "RESTORE_CHUNK", 3)
    engine = sorted(ENGINE_STATES)[0]
    keyed = [(i % 3, "count", None, f"k{i}", i) for i in range(10)]
    keyed += [(i % 3, engine, None, f"k{i}", "not a long" if i == 13 else i) for i in range(10, 20)]
    timers = [(i % 3, "event", 100 + i, f"k{i}", None) for i in range(6)]
    table = snapshot_writer.snapshot_to_table({"keyed": iter(keyed), "timers": iter(timers),
                                               "types": {"count": Types.LONG(), engine: Types.LONG()}}, 0, "op")
    assert table.num_rows == 26
    assert state_types(table) == {"count": Types.LONG(), engine: Types.LONG()}
    restored = snapshot_reader.table_to_snapshot([table])
    # Decoded as loaded, three rows at a time: a state's rows span several chunks.
    assert len(restored["keyed"]) == 20
    assert max(len(keys) for _, _, _, keys, _ in restored["keyed"].column_chunks()) == 3
    assert sorted(restored["keyed"], key=repr) == sorted(keyed, key=repr)
    assert sorted(restored["timers"]) == sorted(timers)


def test_the_row_format_alone_decodes_what_the_writer_wrote(tmp_path):
    """Issue 55: the state tables' row format is a module of its own: a written state file decodes
    with the format's functions alone (what a reader of a savepoint's state needs), and the writer
    and the reader depend on the format, not on each other."""
    import ast

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from runtime.common import Types
    from runtime.datastream.window import TimeWindow
    from runtime.state import snapshot_format, snapshot_reader, snapshot_writer
    from runtime.state.snapshot_format import decode_keys, decode_namespace, decode_values, state_types

    keyed = [(3, "count", None, "a", 1), (5, "count", None, ("t", 2), 2), (7, "seen", TimeWindow(0, 10), "a", {"x"})]
    written = snapshot_writer.write_snapshot({"keyed": keyed, "types": {"count": Types.LONG()}}, str(tmp_path),
                                             "op", 0, "op")
    table = pq.read_table(written.path)
    assert "value_count" in table.column_names and state_types(table) == {"count": Types.LONG()}
    rows = []
    for name in ("count", "seen"):
        part = table.filter(pc.equal(table["state_name"], name))
        rows += zip(part["key_group"].to_pylist(), [name] * part.num_rows,
                    map(decode_namespace, part["namespace"].to_pylist()), decode_keys(part),
                    decode_values(part, name, state_types(table)))
    assert sorted(rows, key=repr) == sorted(keyed, key=repr)

    def imported(module) -> set:
        tree = ast.parse(open(module.__file__).read())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and "snapshot_" in (n.module or "")}
    assert imported(snapshot_format) == set()
    assert imported(snapshot_writer) == imported(snapshot_reader) == {"runtime.state.snapshot_format"}
