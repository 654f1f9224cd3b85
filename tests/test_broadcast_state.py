"""Broadcast state (issue 18, part 7): ``broadcast(MapStateDescriptor)``, BroadcastProcessFunction and
KeyedBroadcastProcessFunction with PyFlink's signatures, every broadcast record at every subtask,
the broadcast side of an epoch before the other side, checkpointed and restored (at another
parallelism too) with the operator. Expected answers are computed here by plain loops."""
import collections
import os

import pytest

from runtime.common import Types
from runtime.datastream import (
    BroadcastProcessFunction, BroadcastStream, KeyedBroadcastProcessFunction)
from runtime.datastream.state import MapStateDescriptor, ValueStateDescriptor
from runtime_env import job_env

RULES = MapStateDescriptor("rules", Types.STRING(), Types.INT())


class MatchRules(KeyedBroadcastProcessFunction):
    """Rules are "set NAME THRESHOLD" / "drop NAME"; an event "USER AMOUNT" matches every rule whose
    threshold it reaches: (user, rule, amount, the user's event count so far)."""

    def open(self, runtime_context):
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", Types.INT()))

    def process_broadcast_element(self, value, ctx):
        op, name, *threshold = value.split()
        rules = ctx.get_broadcast_state(RULES)
        if op == "set":
            rules.put(name, int(threshold[0]))
        else:
            rules.remove(name)

    def process_element(self, value, ctx):
        user, amount = value.split()
        n = (self.seen.value() or 0) + 1
        self.seen.update(n)
        assert ctx.get_current_key() == user
        for name, threshold in sorted(ctx.get_broadcast_state(RULES).items()):
            if int(amount) >= threshold:
                yield user, name, int(amount), n


def expected_matches(rules: dict, events: list[str], seen: collections.Counter) -> list:
    out = []
    for e in events:
        user, amount = e.split()
        seen[user] += 1
        out += [(user, name, int(amount), seen[user]) for name, t in rules.items() if int(amount) >= t]
    return sorted(out)


def write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def rules_and_events_job(tmp_path, parallelism):
    env = job_env(tmp_path, parallelism)
    env.enable_checkpointing(10)
    rules = env.read_text_file(str(tmp_path / "rules")).uid("rules-source").broadcast(RULES)
    events = env.read_text_file(str(tmp_path / "events")).uid("events-source")
    return (events.key_by(lambda e: e.split()[0]).connect(rules).process(MatchRules()).uid("match-rules")
            .execute_and_collect("rules-and-events"))


def test_rules_broadcast_events_keyed_matches_then_restore_at_another_parallelism(spark, tmp_path):
    rules = ["set big 100", "set huge 1000", "set small 1", "drop small"]
    first = ["ann 50", "bob 150", "ann 2000", "cid 100", "bob 99"]
    write(tmp_path / "rules" / "r.txt", rules)
    write(tmp_path / "events" / "e1.txt", first)
    # The epoch's rules come before its events: "small" is set and dropped before any event.
    seen = collections.Counter()
    state = {"big": 100, "huge": 1000}
    assert sorted(rules_and_events_job(tmp_path, 2)) == expected_matches(state, first, seen) == [
        ("ann", "big", 2000, 2), ("ann", "huge", 2000, 2), ("bob", "big", 150, 1), ("cid", "big", 100, 1)]
    # Run 2 reads only the new events, at parallelism 3: every new subtask has the rules (restored
    # from the checkpoint's copies) and the users' counts (keyed state, by key group).
    second = ["dan 5000", "ann 100", "bob 999", "eve 1", "fay 300", "cid 20"]
    write(tmp_path / "events" / "e2.txt", second)
    assert sorted(rules_and_events_job(tmp_path, 3)) == expected_matches(state, second, seen) == [
        ("ann", "big", 100, 3), ("bob", "big", 999, 3), ("dan", "big", 5000, 1), ("dan", "huge", 5000, 1),
        ("fay", "big", 300, 1)]
    # And back to 1: one subtask, the same rules.
    third = ["gus 1000", "eve 100"]
    write(tmp_path / "events" / "e3.txt", third)
    assert sorted(rules_and_events_job(tmp_path, 1)) == expected_matches(state, third, seen) == [
        ("eve", "big", 100, 2), ("gus", "big", 1000, 1), ("gus", "huge", 1000, 1)]


class Tag(BroadcastProcessFunction):
    """Non-keyed: tags each event with the matching rule names; each subtask reports every rule it
    received, so a rule seen once per subtask shows the broadcast reached all of them."""

    def process_broadcast_element(self, value, ctx):
        name, word = value
        ctx.get_broadcast_state(RULES).put(word, name)
        yield "rule", name, self.subtask

    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()

    def process_element(self, value, ctx):
        state = ctx.get_broadcast_state(RULES)
        assert ctx.current_processing_time() > 0 and ctx.timestamp() is None
        yield "event", value, state.get(value) if state.contains(value) else "-"


def test_every_subtask_gets_every_broadcast_record_and_state_lasts_across_epochs(spark, tmp_path):
    env = job_env(tmp_path, 2, epoch__max_records_per_split=2)
    rules = env.from_collection([("r1", "a"), ("r2", "b")]).broadcast(RULES)
    words = ["a", "b", "c", "a", "b", "d"]       # three epochs: the rules come in the first only
    out = list(env.from_collection(words).rebalance().connect(rules).process(Tag())
               .execute_and_collect("broadcast-tags"))
    assert sorted(r for r in out if r[0] == "rule") == [("rule", n, s) for n in ("r1", "r2") for s in (0, 1)]
    names = {"a": "r1", "b": "r2"}
    assert sorted(r for r in out if r[0] == "event") == sorted(("event", w, names.get(w, "-")) for w in words)


class WritesOnTheWrongSide(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        pass

    def process_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value, 1)


def test_the_non_broadcast_side_reads_only(spark, tmp_path):
    env = job_env(tmp_path, 1)
    rules = env.from_collection(["x"]).broadcast(RULES)
    env.from_collection(["a"]).connect(rules).process(WritesOnTheWrongSide()).print()
    with pytest.raises(Exception, match="broadcast state 'rules' is read only in process_element"):
        env.execute("read-only")


def test_wrong_use_fails_when_the_job_is_built(env):
    rules = env.from_collection(["x"])
    with pytest.raises(TypeError, match="MapStateDescriptor"):
        rules.broadcast(ValueStateDescriptor("v", Types.INT()))
    stream = rules.broadcast(RULES)
    assert isinstance(stream, BroadcastStream) and stream.broadcast_state_descriptors == (RULES,)
    events = env.from_collection(["a"])
    with pytest.raises(TypeError, match="KeyedBroadcastProcessFunction can only be used on a keyed stream"):
        events.connect(stream).process(MatchRules())
    with pytest.raises(TypeError, match="BroadcastProcessFunction can only be used on a non-keyed stream"):
        events.key_by(lambda e: e).connect(stream).process(Tag())
    with pytest.raises(TypeError, match="expects a BroadcastProcessFunction"):
        events.connect(stream).process(lambda value, ctx: [value])
    with pytest.raises(TypeError, match="already partitioned by key"):
        events.key_by(lambda e: e).broadcast(RULES)
    # PyFlink's function classes are generic
    assert KeyedBroadcastProcessFunction[str, str, str, tuple] and BroadcastProcessFunction[str, str, str]
