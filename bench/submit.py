"""Submit benchmark: from a job's submit to its first epoch, with a warm standby driver (the
JobManager's pool: JVM, SparkSession and Python workers started before the job came) against a
cold driver (a new driver process: a new JVM and session), in the same run, alternated.

    .venv/bin/python bench/submit.py                  # 5 runs a side, the WordCount job
    .venv/bin/python bench/submit.py --job keyed      # a keyed job with local state stores
    .venv/bin/python bench/submit.py --idle 70        # each warm driver idle 70 s before its job

The submit drives the driver contract directly (runtime/jobmanager/driver.py), as the JobManager's
JobMaster does: the plan is compiled beforehand (a submit of a stored plan); the clock starts
before the run's options are computed (``run_options``: its attempt and restore point), then the
warm side takes a ready driver from a ``StandbyDrivers`` pool and the cold side launches one,
and each writes its assignment. The REST request and the JobManager's job record are not counted.
Before each submit the pool is ready and idle, so that no JVM starts during a measured run.

Figures: submit -> the first epoch's start and end as the epoch log's metrics record them
(``started_at``, ``duration_ms``); medians of each side and the ratio cold / warm. Then an idle
warm driver's memory (RSS and PSS of its process tree: the driver's Python, the JVM, the Python
workers) and start time (ready.json's ``warm_s``).

The jobs (bounded, one epoch, a Delta sink; each run a job of its own, so each starts fresh):
  wordcount  the sample text, words counted in 5 s processing-time windows (Spark's shared pool
             of Python workers)
  keyed      the same words counted in ValueState by a KeyedProcessFunction: local state stores,
             so its subtasks run in the slots' own Python worker pools
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

JOB = '''
import sys
from runtime.common import Row, Time, Types
from runtime.datastream import KeyedProcessFunction, StreamExecutionEnvironment, TumblingProcessingTimeWindows
from runtime.datastream.connectors.delta import DeltaSink
from runtime.datastream.state import ValueStateDescriptor

WORD_COUNT = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])


class Count(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        yield Row(word=value.word, count=count)


name, kind, output = sys.argv[1:4]
env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(5000)
words = (env.read_text_file("include/data")
         .flat_map(lambda line: line.split(), output_type=Types.STRING())
         .map(lambda word: Row(word=word, count=1), output_type=WORD_COUNT).key_by("word"))
counts = (words.window(TumblingProcessingTimeWindows.of(Time.seconds(5))).sum("count") if kind == "wordcount"
          else words.process(Count(), output_type=WORD_COUNT))
counts.uid("counts").sink_to(DeltaSink.for_row_data(output)).uid("sink")
env.execute(name)
'''


def process_tree(session: int) -> list[int]:
    """The pids of a driver's session (it starts one: its JVM and Python workers are in it)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == session:       # after the state: ppid, pgrp, session
                pids.append(int(entry))
    return pids


def memory(pid: int) -> dict:
    """RSS and PSS (MiB) of ``pid``; what it is (driver, JVM, Python worker)."""
    values = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Rss", "Pss"):
                values[key.lower()] = int(rest.split()[0]) / 1024
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().decode(errors="replace").split("\0")
    kind = ("JVM" if os.path.basename(argv[0]) == "java" else
            "driver (Python)" if "runtime.jobmanager.driver" in argv else "Python workers")
    return {"kind": kind, **values}


def tree_memory(pid: int) -> dict:
    """RSS and PSS (MiB) of a driver's process tree, by kind, and the number of processes."""
    totals: dict = {}
    for p in process_tree(pid):
        try:
            m = memory(p)
        except OSError:
            continue
        kind = totals.setdefault(m["kind"], {"rss": 0.0, "pss": 0.0, "processes": 0})
        kind["rss"] += m.get("rss", 0)
        kind["pss"] += m.get("pss", 0)
        kind["processes"] += 1
    return totals


def main() -> int:
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.jobmanager.driver import READY, RESULT, drivers_dir, launch_driver, read_json, write_assignment
    from runtime.jobmanager.standby import StandbyDrivers
    from runtime.jobmaster.deployment import JobDeployment, JobSpec
    from runtime.jobmaster.plans import load_plan
    from runtime.jobmaster.steps import RunRequest, compile_step, run_options
    from runtime.storage.layout import job_dir

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs a side (default 5)")
    parser.add_argument("--job", choices=("wordcount", "keyed"), default="wordcount")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--idle", type=float, default=0.0,
                        help="seconds a warm driver waits, ready, before its job (Spark stops idle Python workers after 60 s)")
    parser.add_argument("--workdir", help="keep the warehouse and the drivers' logs there")
    args = parser.parse_args()
    os.chdir(ROOT)
    work = args.workdir or tempfile.mkdtemp(prefix="sluice-submit-bench-")
    os.makedirs(work, exist_ok=True)
    warehouse = os.path.join(work, "warehouse")
    script = os.path.join(work, "submit_bench.py")
    with open(script, "w") as f:
        f.write(JOB)
    request = RunRequest(parallelism=args.parallelism)
    pool = StandbyDrivers(warehouse, args.master, size=1)
    pool.start()

    def wait_ready(timeout: float = 300) -> str:
        deadline = time.time() + timeout
        while time.time() < deadline:
            ready = pool.ready()
            if ready and len(pool.standbys()) == 1:
                return ready[0]
            time.sleep(0.1)
        raise RuntimeError(f"no standby driver ready within {timeout} s: see the driver.log files under "
                           f"{drivers_dir(warehouse)}")

    times: dict = {"warm": [], "cold": []}
    starts: dict = {"warm": [], "cold": []}
    idle_memory, start_s = None, []
    try:
        for i in range(args.runs):
            for side in (("warm", "cold") if i % 2 == 0 else ("cold", "warm")):
                name = f"submit-{side}-{i}"
                spec = JobSpec(name, script, JobDeployment(args=(name, args.job, f"{{warehouse}}/{name}-out"),
                                                           parallelism=args.parallelism))
                plan = compile_step(spec, request, warehouse, name)["plan"]
                standby = wait_ready()
                start_s.append(read_json(standby, READY)["warm_s"])
                if idle_memory is None:
                    time.sleep(5)       # the warm-up's garbage collected
                    idle_memory = tree_memory(read_json(standby, "driver.json")["pid"])
                if side == "warm" and args.idle:
                    time.sleep(max(0.0, args.idle - (time.time() - read_json(standby, READY)["ready_at"])))
                submitted = time.time()
                job = load_plan(plan)
                assignment = {"jobid": f"{i:032x}", "job_name": job.job_graph.job_name, "plan": plan,
                              "options": run_options(job, request, warehouse, args.master, name)}
                if side == "warm":
                    taken = pool.take()
                    directory, proc = taken.directory, taken.process
                else:
                    directory = os.path.join(drivers_dir(warehouse), name)
                    proc = launch_driver(directory, warehouse, args.master)
                write_assignment(directory, assignment)
                code = proc.wait() if proc is not None else None
                result = read_json(directory, RESULT)
                if not result or result["state"] != "FINISHED":
                    raise RuntimeError(f"{name}: {result} (exit {code}); see {directory}/driver.log")
                first = CheckpointStorage(job_dir(warehouse, job.job_graph.job_name)).epoch_metrics(result["run_id"])[0]
                start = first["started_at"] - submitted
                end = start + first["duration_ms"] / 1000
                times[side].append(end)
                starts[side].append(start)
                print(f"run {i + 1} {side}: submit -> first epoch start {start:.2f} s, end {end:.2f} s", flush=True)
    finally:
        pool.stop()
    warm, cold = statistics.median(times["warm"]), statistics.median(times["cold"])
    print(f"\nsubmit -> first epoch end (median of {args.runs}, {args.job}, {args.master}): "
          f"warm {warm:.2f} s (start {statistics.median(starts['warm']):.2f} s), "
          f"cold {cold:.2f} s (start {statistics.median(starts['cold']):.2f} s), ratio cold/warm {cold / warm:.1f}x")
    print(f"a driver's start to ready (median of {len(start_s)}): {statistics.median(start_s):.1f} s")
    print("an idle warm driver's memory (MiB):")
    for kind, m in sorted(idle_memory.items()):
        print(f"  {kind}: RSS {m['rss']:.0f}, PSS {m['pss']:.0f} ({m['processes']} process(es))")
    print(f"  total: RSS {sum(m['rss'] for m in idle_memory.values()):.0f}, "
          f"PSS {sum(m['pss'] for m in idle_memory.values()):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
