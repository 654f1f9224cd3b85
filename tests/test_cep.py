"""The CEP operator on real Spark: keyed event-time matching of out-of-order input, timeouts
and late data to side outputs, processing time, and matches that span a checkpoint and a
restore (at the same and at another parallelism) found exactly once. Expected matches are
written out by hand."""
import ast
import os

import pytest
from deltalake import DeltaTable

from runtime.cep import CEP, Pattern, PatternProcessFunction, TimedOutPartialMatchHandler
from runtime.checkpoint.savepoint import read_state
from runtime.checkpoint.storage import CheckpointStorage
from runtime.client import run_job
from runtime.common import Duration, Time, Types, WatermarkStrategy
from runtime.datastream import OutputTag
from runtime_env import CLOCK_START, job_env

EVENT = Types.TUPLE([Types.STRING(), Types.STRING(), Types.LONG()])
JOB = os.path.join(os.path.dirname(__file__), "jobs", "cep_matches.py")
TIMED_OUT = OutputTag("timed-out")
LATE = OutputTag("late")


def printed_by(printed, sink):
    """The values a print sink named ``sink`` printed ("sink> v" or "sink:2> v"), sorted."""
    return sorted((ast.literal_eval(line.split("> ", 1)[1]) for line in printed
                   if line.split(">")[0].split(":")[0] == sink), key=str)


def a_then_b():
    return Pattern.begin("a").where(lambda e: e[1] == "a").followed_by("b").where(lambda e: e[1] == "b")


class Pairs(PatternProcessFunction, TimedOutPartialMatchHandler):
    def process_match(self, match, ctx):
        yield match["a"][0][0], [e[2] for e in match["a"] + match["b"]], ctx.timestamp()

    def process_timed_out_match(self, match, ctx):
        ctx.output(TIMED_OUT, (match["a"][0][0], [e[2] for e in match["a"]], ctx.timestamp()))


def test_keyed_event_time_matches_out_of_order_input_with_timeouts_and_late_data(spark, tmp_path):
    arrivals = [("k1", "b", 20), ("k1", "a", 10),     # b arrives first, but happened after a
                ("k2", "a", 5), ("k2", "b", 300),     # too far apart: a times out at 5 + 100
                ("k1", "a", 400),                     # still open at the end: times out at 500
                ("k1", "b", 1)]                       # behind the watermark (349): late
    env = job_env(tmp_path, 1, task__batch_size=1)  # one source subtask: its watermark is the CEP's
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(50))
                .with_timestamp_assigner(lambda e, _: e[2]))
    events = env.from_collection(arrivals, EVENT).assign_timestamps_and_watermarks(strategy)
    matches = (CEP.pattern(events.key_by(lambda e: e[0], key_type=Types.STRING()),
                           a_then_b().within(Time.milliseconds(100)))
               .side_output_late_data(LATE).process(Pairs()).set_parallelism(2))
    matches.print("match")
    matches.get_side_output(TIMED_OUT).print("timed-out")
    matches.get_side_output(LATE).print("late")
    printed = env.execute("cep").printed
    assert printed_by(printed, "match") == [("k1", [10, 20], 20)]
    assert printed_by(printed, "timed-out") == [("k1", [400], 500), ("k2", [5], 105)]
    assert printed_by(printed, "late") == [("k1", "b", 1)]


def test_processing_time_on_a_plain_stream(spark, tmp_path):
    env = job_env(tmp_path, 2)
    events = env.from_collection([("-", k, i) for i, k in enumerate(["a", "b", "a", "c", "b", "a"])], EVENT)
    pattern = (Pattern.begin("a").where(lambda e: e[1] == "a").next("b").where(lambda e: e[1] == "b")
               .within(Time.seconds(1)))
    matches = CEP.pattern(events, pattern).in_processing_time().flat_select(
        lambda m: [(m["a"][0][2], m["b"][0][2])], TIMED_OUT, lambda m, ts: [(m["a"][0][2], ts - CLOCK_START)])
    matches.print("match")
    matches.get_side_output(TIMED_OUT).print("timed-out")
    printed = env.execute("cep").printed
    # one subtask (GlobalCepOperator); the last a times out when the bounded input's
    # processing-time timers fire, one second after the epoch's (pinned) clock
    assert printed_by(printed, "match") == [(0, 1)]
    assert printed_by(printed, "timed-out") == [(5, 1000)]


def write_input(folder):
    """Three epochs of 12 lines: an `a` per key, then noise, then a `b` per key."""
    os.makedirs(folder)
    keys = [f"k{i}" for i in range(12)]
    lines = ([f"{k} a {i}" for i, k in enumerate(keys)] + [f"{k} x {100 + i}" for i, k in enumerate(keys)]
             + [f"{k} b {200 + i}" for i, k in enumerate(keys)])
    with open(os.path.join(folder, "events.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


@pytest.mark.parametrize("before, after", [(2, 2), (2, 3)])
def test_a_match_across_a_checkpoint_restore_is_found_once(spark, tmp_path, before, after):
    write_input(tmp_path / "in")
    args = ["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out")]

    def run(parallelism, **options):
        return run_job(JOB, args + ["--parallelism", str(parallelism)], warehouse=str(tmp_path / "warehouse"),
                       master="local[2]", quiet=True, max_records_per_split=12, **options)

    first = run(before, max_epochs=2)          # the a's and the noise: partial matches in state
    assert [e.checkpoint_id for e in first.epochs] == [1, 2]
    assert not os.path.exists(tmp_path / "out") or DeltaTable(str(tmp_path / "out")).to_pyarrow_table().num_rows == 0
    # each key's partial match {a} is an NFA state in the checkpoint, as any keyed state
    state = read_state(CheckpointStorage(str(tmp_path / "warehouse" / "cep-matches")), "cep")
    nfa_states = {r["key"]: r["value"] for r in state if r["state"] == "nfaStateName"}
    assert sorted(nfa_states) == sorted(f"k{i}" for i in range(12))
    assert [cs.path[0][2] for cs in nfa_states["k3"].partial_matches if cs.path] == [("k3", "a", 3)]
    second = run(after, restore_from="latest")
    assert second.restored_from == 2
    rows = DeltaTable(str(tmp_path / "out")).to_pyarrow_table().to_pylist()
    assert sorted((r["key"], r["a"], r["b"]) for r in rows) == sorted(
        [("k0", 0, 200), ("k1", 1, 201), ("k2", 2, 202), ("k3", 3, 203), ("k4", 4, 204), ("k5", 5, 205),
         ("k6", 6, 206), ("k7", 7, 207), ("k8", 8, 208), ("k9", 9, 209), ("k10", 10, 210), ("k11", 11, 211)])
