"""Kill -9 while epochs overlap: epoch n's checkpoint halted at each point of its completion (the
driver's background thread) while epoch n+1's task is halted mid-epoch, then a restore from the
latest checkpoint; every result is in the sinks exactly once.

The job (tests/jobs/kafka_running_counts.py): Kafka -> keyed running count -> a Delta table and a
Kafka topic (EXACTLY_ONCE), a checkpoint every epoch, its driver in a process of its own
(tests/checkpoint_harness.kill_at, which waits for both halts' markers before it kills). Two
chains, side by side, kill a run at each completion point in turn between them, each run
restoring the latest checkpoint and replaying the epochs logged after it, the state backend
alternating between the heap and RocksDB; a last run finishes the input. Then the Delta table and
a read_committed consumer of the topic hold each word's running counts 1..n once, as a run
without failures writes them, and the source's group holds the input's end offsets.
"""
import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import kafka_env
from checkpoint_harness import expected_running, kill_at, run_to_end, table_rows
from runtime.common.faults import POINTS, SINK_POINTS
from waiting import wait_until

JOB = os.path.join(os.path.dirname(__file__), "jobs", "kafka_running_counts.py")
PER_EPOCH, EPOCHS = 10, 6       # records per partition and epoch; epochs of input
# The later --max-records-per-split wins over kill_at's; epochs one after the other, not paced.
EXTRA = ("--max-records-per-split", str(PER_EPOCH), "-D", "sluice.epoch.interval=1")
# Two chains, run side by side, of (point, its number, the epoch halted mid-epoch meanwhile) in
# the order a completion reaches them; a checkpoint every epoch from a fresh start has id
# epoch + 1, the number of the Kafka transaction's point. The sinks commit the table first, then
# the transaction. during-retention needs a 4th completed checkpoint (3 are retained).
CHAINS = ([("after-state-files", 0, 1), ("between-sink-commits", 1, 2), ("after-sink-commit", 2, 3),
           ("during-retention", 3, 4)],
          [("after-state-commit", 1, 2), ("in-kafka-transaction", 3, 3), ("during-checkpoint-record", 3, 4),
           ("after-checkpoint-record", 4, 5)])


def backend(i: int) -> dict:
    """The heap and RocksDB in turn along a chain (the other chain starts with the other)."""
    return {"state.backend.type": "rocksdb"} if i % 2 else {}


def job_args(folder, bootstrap: str, seed: int) -> tuple[list, dict]:
    """The job's arguments, on topics of its own filled with EPOCHS epochs of words (by partition)."""
    source_topic = kafka_env.create_topic(bootstrap, "overlap-in", 2)
    sink_topic = kafka_env.create_topic(bootstrap, "overlap-out", 1)
    r = random.Random(seed)
    words = {p: [r.choice("abcde") for _ in range(PER_EPOCH * EPOCHS)] for p in range(2)}
    for p, values in words.items():
        kafka_env.produce(bootstrap, source_topic, values, partition=p)
    return ["--bootstrap-servers", bootstrap, "--input-topic", source_topic, "--output-topic", sink_topic,
            "--table", str(folder / "counts"), "--group-id", f"{source_topic}-group",
            "--transactional-id-prefix", source_topic], words


def chain(folder, args: list, steps: list, first: int) -> list[str]:
    """Each step's run killed with both halts held: the checkpoint's in the driver, the next
    epoch's in a Spark task's Python worker (each marker says where it was written)."""
    outcomes = []
    for i, (point, number, running) in enumerate(steps):
        conf = [arg for key, value in backend(first + i).items() for arg in ("-D", f"{key}={value}")]
        begun = time.monotonic()
        outcome = kill_at(folder, point, number, i > 0, *EXTRA, *conf, job=JOB, args=args,
                          also=[("mid-epoch", running)])
        outcomes.append(f"{point}@{number} with epoch {running} mid-epoch ({time.monotonic() - begun:.0f} s): {outcome}")
        assert outcome == "killed", outcomes
        completing = (folder / f"halted-{point}-{number}.{point}").read_text().split(":")
        task = (folder / f"halted-{point}-{number}.mid-epoch").read_text().split(":")
        assert completing[:2] == [point, str(number)] and task[:2] == ["mid-epoch", str(running)], outcomes
        assert completing[2] != task[2], outcomes       # two processes
    run_to_end(folder, True, *EXTRA, job=JOB, args=args)     # the rest of the input
    return outcomes


def test_each_of_several_halts_holds_the_process_that_reaches_it_and_writes_its_own_marker(tmp_path):
    """SLUICE_HALT_AT with two points: each process halts at its own, the old one-point form
    writes SLUICE_HALT_MARKER itself, and a point not named (or another epoch) passes."""
    reach = "import sys; from runtime.common.faults import fault_point; fault_point(sys.argv[1], int(sys.argv[2]))"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def start(halt_at, point, epoch):
        env = {**os.environ, "SLUICE_HALT_AT": halt_at, "SLUICE_HALT_MARKER": str(tmp_path / "halted"),
               "PYTHONPATH": root}
        return subprocess.Popen([sys.executable, "-c", reach, point, str(epoch)], env=env, cwd=root)
    both = "after-sink-commit:2,mid-epoch:3"
    assert start(both, "after-sink-commit", 3).wait(30) == 0 and start(both, "during-retention", 2).wait(30) == 0
    held = [start(both, "after-sink-commit", 2), start(both, "mid-epoch", 3), start("mid-epoch:*", "mid-epoch", 7)]
    try:
        markers = [tmp_path / "halted.after-sink-commit", tmp_path / "halted.mid-epoch", tmp_path / "halted"]
        wait_until(lambda: all(m.exists() for m in markers), 30, "the three markers", interval=0.05)
        assert [m.read_text() for m in markers] == [f"{p}:{e}:{proc.pid}\n" for p, e, proc in zip(
            ("after-sink-commit", "mid-epoch", "mid-epoch"), (2, 3, 7), held)]
        assert all(proc.poll() is None for proc in held)        # each waits to be killed
    finally:
        for proc in held:
            proc.send_signal(signal.SIGKILL)
            proc.wait()


@pytest.mark.slow
@pytest.mark.faults
@pytest.mark.kafka
def test_kills_while_the_next_epoch_runs_at_each_completion_point_write_each_result_once(
        kafka_broker, tmp_path):
    assert sorted(p for steps in CHAINS for p, _, _ in steps) == sorted(set(POINTS) - {"mid-epoch"} | set(SINK_POINTS))
    folders = [tmp_path / f"chain-{c}" for c in range(len(CHAINS))]
    for folder in folders:
        folder.mkdir()
    jobs = [job_args(folder, kafka_broker.bootstrap, seed=54 + c) for c, folder in enumerate(folders)]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(CHAINS)) as pool:
        outcomes = list(pool.map(chain, folders, [args for args, _ in jobs], CHAINS, range(len(CHAINS))))
    for folder, (args, words), outcome in zip(folders, jobs, outcomes):
        expected = expected_running([(w, 0) for values in words.values() for w in values])
        assert table_rows(folder / "counts") == expected, outcome
        bootstrap, source_topic, sink_topic = args[1], args[3], args[5]
        got = collections.Counter((v["word"], v["count"]) for v in map(json.loads, kafka_env.read_committed(
            bootstrap, sink_topic)))
        assert got == expected, outcome
        assert kafka_env.committed_offsets(bootstrap, f"{source_topic}-group", source_topic, 2) == {
            0: PER_EPOCH * EPOCHS, 1: PER_EPOCH * EPOCHS}
    print(f"{sum(map(len, CHAINS))} kills and the last runs in {len(CHAINS)} chains side by side: "
          f"{time.monotonic() - started:.0f} s; {outcomes}")
