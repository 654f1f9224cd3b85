"""Submit benchmark: from a job's submit to its first epoch, with a warm standby driver (the
JobManager's pool: JVM, SparkSession and Python workers started before the job came) against a
cold driver (a new driver process: a new JVM and session), in the same run, alternated.

    .venv/bin/python bench/submit.py                  # 5 runs a side, the WordCount job
    .venv/bin/python bench/submit.py --job keyed      # a keyed job with local state stores
    .venv/bin/python bench/submit.py --idle 70        # each warm driver idle 70 s before its job
    .venv/bin/python bench/submit.py --direct         # the driver contract alone, without the REST API

Two JobManagers (``sluice jobmanager``) run side by side, each with a warehouse of its own: one
keeps a warm driver (``--standby-drivers 1``), the other none, so each of its jobs gets a new driver
process. Each run's job is compiled and stored as a plan beforehand (as the Airflow DAG's compile
step does) and submitted with ``RestClusterClient.submit_job(plan=...)``; the clock starts just
before the POST. Before each submit, warm or cold, the warm JobManager's standby is ready and idle,
so that no JVM starts while a run is measured. ``--direct`` does the JobMaster's part in this
process instead (``run_options``, ``StandbyDrivers.take()`` or ``launch_driver``, the assignment).

Figures: submit -> the first epoch's start and end as the epoch log's metrics record them
(``started_at``, ``duration_ms``); medians of each side and the ratio cold / warm. Then an idle
warm driver's memory (RSS and PSS of its process tree: the driver's Python, the JVM, the Python
workers) and start time (ready.json's ``warm_s``). Every run's sink is checked against the sample's
word counts (exit code 1 if one is wrong).

The jobs (bounded, one epoch, a Delta sink; each run a job of its own, so each starts fresh):
  wordcount  the sample text, words counted in 5 s processing-time windows (Spark's shared pool
             of Python workers)
  keyed      the same words counted in ValueState by a KeyedProcessFunction: local state stores,
             so its subtasks run in the slots' own Python worker pools
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

SIDES = ("warm", "cold")

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


def words_in_sample() -> Counter:
    words: Counter = Counter()
    folder = os.path.join(ROOT, "include", "data")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            words.update(f.read().split())
    return words


def counts_right(table: str, kind: str) -> bool:
    """The sink's counts are the sample's: window sums add up, a running count ends at the total."""
    from deltalake import DeltaTable
    counts: Counter = Counter()
    for row in DeltaTable(table).to_pyarrow_table().to_pylist():
        counts[row["word"]] = counts[row["word"]] + row["count"] if kind == "wordcount" else max(counts[row["word"]], row["count"])
    return counts == words_in_sample()


class Direct:
    """The driver contract, as the JobMaster drives it: one warehouse, a pool of one for the warm side."""

    def __init__(self, work: str, master: str) -> None:
        from runtime.jobmanager.standby import StandbyDrivers
        self.master = master
        self.warehouses = dict.fromkeys(SIDES, os.path.join(work, "warehouse"))
        self.pool = StandbyDrivers(self.warehouses["warm"], master, size=1)
        self.pool.start()

    def standby(self) -> Optional[str]:
        """The pool's standby once it is ready and no other starts (else None)."""
        ready = self.pool.ready()
        return ready[0] if ready and len(self.pool.standbys()) == 1 else None

    def submit(self, side: str, plan: str, name: str, request) -> str:
        """Run the plan to its end on a warm or a new driver; its first attempt's run id."""
        from runtime.jobmanager.driver import RESULT, drivers_dir, launch_driver, read_json, write_assignment
        from runtime.jobmaster.plans import load_plan
        from runtime.jobmaster.steps import run_options
        warehouse = self.warehouses[side]
        job = load_plan(plan)
        assignment = {"jobid": name, "job_name": job.job_graph.job_name, "plan": plan,
                      "options": run_options(job, request, warehouse, self.master, name)}
        if side == "warm":
            taken = self.pool.take()
            directory, proc = taken.directory, taken.process
        else:
            directory = os.path.join(drivers_dir(warehouse), name)
            proc = launch_driver(directory, warehouse, self.master)
        write_assignment(directory, assignment)
        code = proc.wait()
        result = read_json(directory, RESULT)
        if not result or result["state"] != "FINISHED":
            raise RuntimeError(f"{name}: {result} (exit {code}); see {directory}/driver.log")
        return result["run_id"]

    def close(self) -> None:
        self.pool.stop()


class Rest:
    """Two JobManagers (``sluice jobmanager``), one keeping a warm driver and one keeping none, each
    with a warehouse of its own; jobs submitted as stored plans through ``RestClusterClient``."""

    def __init__(self, work: str, master: str) -> None:
        self.warehouses = {side: os.path.join(work, f"{side}-warehouse") for side in SIDES}
        self.processes, self.clients = {}, {}
        for side in SIDES:
            self.processes[side], self.clients[side] = self._start(side, master, 1 if side == "warm" else 0)

    def _start(self, side: str, master: str, standby: int):
        import socket
        from runtime.jobmanager.rest_client import RestClusterClient, address_file
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        warehouse = self.warehouses[side]
        os.makedirs(warehouse, exist_ok=True)
        with open(os.path.join(warehouse, "jobmanager.log"), "ab") as out:
            proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "sluice"), "jobmanager",
                                     "--warehouse", warehouse, "--port", str(port), "--master", master,
                                     "--standby-drivers", str(standby)], cwd=ROOT, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with open(address_file(warehouse)) as f:
                    found = json.load(f)
                if found.get("pid") == proc.pid:
                    return proc, RestClusterClient(found["url"], timeout_s=60)
            except (OSError, ValueError):
                pass
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"the {side} JobManager did not start: see {warehouse}/jobmanager.log")

    def standby(self) -> Optional[str]:
        from runtime.jobmanager.driver import READY, drivers_dir, read_json
        from runtime.jobmanager.standby import STANDBY
        if self.clients["warm"].overview()["standby-drivers"] != 1:
            return None
        root = drivers_dir(self.warehouses["warm"])
        found = [os.path.join(root, d) for d in os.listdir(root)
                 if os.path.exists(os.path.join(root, d, STANDBY)) and read_json(os.path.join(root, d), READY)]
        return found[0] if len(found) == 1 else None

    def submit(self, side: str, plan: str, name: str, request) -> str:
        from runtime.execution.history import ExecutionHistory
        from runtime.jobmaster.plans import load_plan
        from runtime.storage.layout import job_dir
        client = self.clients[side]
        jobid = client.submit_job(plan=plan)["jobid"]
        details = client.wait_for_terminal(jobid, 600, interval_s=0.2)
        if details["state"] != "FINISHED":
            raise RuntimeError(f"{name}: {details['state']}: {details.get('failure-cause')}; see "
                               f"{self.warehouses[side]}/jobmanager.log and its drivers' driver.log")
        records = ExecutionHistory(job_dir(self.warehouses[side], load_plan(plan).job_graph.job_name)).executions()
        return min(records, key=lambda r: r.started_at).run_id

    def close(self) -> None:
        for proc in self.processes.values():
            proc.send_signal(signal.SIGTERM)
        for proc in self.processes.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def main() -> int:
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.jobmanager.driver import DRIVER, READY, read_json
    from runtime.jobmaster.deployment import JobDeployment, JobSpec
    from runtime.jobmaster.plans import load_plan
    from runtime.jobmaster.steps import RunRequest, compile_step
    from runtime.storage.layout import job_dir

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs a side (default 5)")
    parser.add_argument("--job", choices=("wordcount", "keyed"), default="wordcount")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--direct", action="store_true",
                        help="drive the driver contract directly instead of through JobManagers' REST API")
    parser.add_argument("--idle", type=float, default=0.0,
                        help="seconds a warm driver waits, ready, before its job (Spark stops idle Python workers after 60 s)")
    parser.add_argument("--workdir", help="keep the warehouses and the drivers' logs there")
    args = parser.parse_args()
    os.chdir(ROOT)
    work = args.workdir or tempfile.mkdtemp(prefix="sluice-submit-bench-")
    os.makedirs(work, exist_ok=True)
    script = os.path.join(work, "submit_bench.py")
    with open(script, "w") as f:
        f.write(JOB)
    request = RunRequest(parallelism=args.parallelism)
    way = (Direct if args.direct else Rest)(work, args.master)

    def wait_ready(timeout: float = 300) -> str:
        deadline = time.time() + timeout
        while time.time() < deadline:
            found = way.standby()
            if found:
                return found
            time.sleep(0.2)
        raise RuntimeError(f"no standby driver ready within {timeout} s: see the driver.log files under {work}")

    ends: dict = {side: [] for side in SIDES}
    starts: dict = {side: [] for side in SIDES}
    idle_memory, start_s, wrong = None, [], []
    try:
        for i in range(args.runs):
            for side in (SIDES if i % 2 == 0 else SIDES[::-1]):
                name = f"submit-{side}-{i}"
                warehouse = way.warehouses[side]
                spec = JobSpec(name, script, JobDeployment(args=(name, args.job, f"{{warehouse}}/{name}-out"),
                                                           parallelism=args.parallelism))
                plan = compile_step(spec, request, warehouse, name)["plan"]
                standby = wait_ready()      # also before a cold run: no JVM starting while one is measured
                start_s.append(read_json(standby, READY)["warm_s"])
                if idle_memory is None:
                    time.sleep(5)       # the warm-up's garbage collected
                    idle_memory = tree_memory(read_json(standby, DRIVER)["pid"])
                if side == "warm" and args.idle:
                    time.sleep(max(0.0, args.idle - (time.time() - read_json(standby, READY)["ready_at"])))
                submitted = time.time()
                run_id = way.submit(side, plan, name, request)
                job_name = load_plan(plan).job_graph.job_name
                first = CheckpointStorage(job_dir(warehouse, job_name)).epoch_log.epoch_metrics(run_id)[0]
                starts[side].append(first["started_at"] - submitted)
                ends[side].append(starts[side][-1] + first["duration_ms"] / 1000)
                if not counts_right(os.path.join(warehouse, f"{name}-out"), args.job):
                    wrong.append(name)
                print(f"run {i + 1} {side}: submit -> first epoch start {starts[side][-1]:.2f} s, "
                      f"end {ends[side][-1]:.2f} s", flush=True)
    finally:
        way.close()
    warm, cold = statistics.median(ends["warm"]), statistics.median(ends["cold"])
    print(f"\nsubmit -> first epoch end (median of {args.runs}, {args.job}, {args.master}, "
          f"{'driver contract' if args.direct else 'REST'}): "
          f"warm {warm:.2f} s (start {statistics.median(starts['warm']):.2f} s), "
          f"cold {cold:.2f} s (start {statistics.median(starts['cold']):.2f} s), ratio cold/warm {cold / warm:.1f}x")
    print(f"a standby driver's start to ready (median of {len(start_s)}): {statistics.median(start_s):.1f} s")
    print("an idle warm driver's memory (MiB):")
    for kind, m in sorted(idle_memory.items()):
        print(f"  {kind}: RSS {m['rss']:.0f}, PSS {m['pss']:.0f} ({m['processes']} process(es))")
    print(f"  total: RSS {sum(m['rss'] for m in idle_memory.values()):.0f}, "
          f"PSS {sum(m['pss'] for m in idle_memory.values()):.0f}")
    if wrong:
        print(f"WRONG counts in the sinks of {', '.join(wrong)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
