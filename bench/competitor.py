"""A benchmark's competitors, each in its own subprocess (bench/wordcount.py, bench/keyed_state.py):
the script calls itself with ``--role NAME --spec FILE``, the role writes its metrics as JSON, and
the parent polls the process tree (the Python driver, its JVM, Spark's Python workers) so that each
competitor's peak RSS and CPU time are its own.

Standard library only at module level: the roles import it under PyFlink's interpreter too."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import traceback

POLL_S = 0.1
PSS_EVERY = 10           # samples: a PSS reading a second, besides those at RSS peaks
STARTUP = "startup"         # the phase until the role names one


# =========================================================================================
# The role's side (in the subprocess)
# =========================================================================================

def run_role(roles, name, spec_path):
    """Run roles[name](spec) and write what it returns (or its error) to spec["metrics"]."""
    with open(spec_path) as f:
        spec = json.load(f)
    try:
        metrics = roles[name](spec)
        metrics.setdefault("ok", True)
    except BaseException as e:  # reported by the parent, which goes on with the others
        metrics = {"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        print(metrics["traceback"], file=sys.stderr, flush=True)
    with open(spec["metrics"], "w") as f:
        json.dump(metrics, f, default=str)
    return 0 if metrics["ok"] else 1


def set_phase(path, name):
    """Tell the parent's watcher which phase the role is in (peaks are kept per phase)."""
    with open(path + ".tmp", "w") as f:
        f.write(name)
    os.replace(path + ".tmp", path)


# =========================================================================================
# The parent's side
# =========================================================================================

def run(python, script, role, spec, spec_path, log_path, timeout, *, env=None, cwd=None, phase_path=None,
        measured_phases=(), announce=None):
    """Write ``spec`` (its "metrics": where the role writes them) to spec_path, run ``python script
    --role role --spec spec_path`` with its output in log_path and watch its tree; returns the role's
    metrics with the watcher's figures (peak_rss, peak_rss_jvm, peak_procs, peak_pss, cpu_s, peak_by_phase),
    wall_s, load_before, returncode and log. announce(load) prints the start with the load average
    that goes into load_before."""
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    if phase_path and os.path.exists(phase_path):
        os.remove(phase_path)               # a previous run's last phase
    load = os.getloadavg()[0]
    if announce:
        announce(load)
    started = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([python, script, "--role", role, "--spec", spec_path], stdout=log,
                                stderr=subprocess.STDOUT, cwd=cwd,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        usage, timed_out = watch(proc, timeout, phase_path, measured_phases)
    wall = time.perf_counter() - started
    metrics = {}
    if os.path.exists(spec["metrics"]):
        with open(spec["metrics"]) as f:
            metrics = json.load(f)
    if timed_out:
        metrics = {"ok": False, "error": f"timed out after {timeout} s (killed)"}
    elif not metrics:
        metrics = {"ok": False, "error": f"exited with code {proc.returncode} and wrote no metrics"}
    metrics.update(usage, wall_s=wall, load_before=load, returncode=proc.returncode, log=log_path)
    return metrics


def watch(proc, timeout, phase_path=None, measured_phases=None):
    """Poll the RSS and CPU time of proc and all its descendants until it exits, or kill them all
    at the timeout; returns (figures, timed out). Without a phase file every sample counts; with
    one, peak_rss and peak_rss_jvm cover measured_phases only (peak_by_phase has every phase).
    RSS and CPU every POLL_S; a tree's PSS (the kernel walks each process's page tables for it)
    and its processes' roles only at an RSS peak 2 % above the last one read so and every
    PSS_EVERY-th sample: read every time, they took a fifth of a core from the competitors on a
    2-core machine (a tenth now)."""
    try:
        import psutil
    except ImportError:
        psutil = None
    peak = peak_jvm = peak_procs = peak_pss = 0
    peak_processes: list = []                 # (process, RSS, PSS) of the sample at the peak
    by_phase: dict = {}
    cpu = {}                                  # (pid, create time) -> last seen user + system seconds
    deadline = time.time() + timeout
    root = psutil.Process(proc.pid) if psutil else None
    timed_out = False
    samples = sampled_peak = 0
    while proc.poll() is None:
        if time.time() > deadline:
            _kill_tree(proc, root)
            proc.wait()
            timed_out = True
            break
        if root is not None:
            total = jvm = 0
            alive = []                        # (process, RSS)
            try:
                procs = [root] + root.children(recursive=True)
            except psutil.Error:
                procs = []
            for p in procs:
                try:
                    with p.oneshot():
                        rss = p.memory_info().rss
                        times = p.cpu_times()
                        is_jvm = p.name().startswith("java")
                    cpu[(p.pid, p.create_time())] = times.user + times.system
                    alive.append((p, rss))
                    total += rss
                    if is_jvm:
                        jvm += rss
                except psutil.Error:
                    pass
            phase = _phase(phase_path)
            by_phase[phase] = max(by_phase.get(phase, 0), total)
            if phase_path is None or phase in measured_phases:
                # A peak 2 % above the last one read in full: RSS creeps up by pages most samples.
                new_peak = total > sampled_peak * 1.02
                if new_peak or samples % PSS_EVERY == 0:
                    sample = _sample(alive, root, psutil)
                    peak_pss = max(peak_pss, sum(own for _, _, own in sample))
                    if new_peak:
                        peak_processes, sampled_peak = sample, total
                peak, peak_jvm, peak_procs = max(peak, total), max(peak_jvm, jvm), max(peak_procs, len(procs))
            samples += 1
        time.sleep(POLL_S)
    if root is None:  # fallback: the largest single child ever waited for (not the sum)
        import resource
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    figures = {"peak_rss": peak, "peak_rss_jvm": peak_jvm, "peak_procs": peak_procs, "peak_pss": peak_pss or None,
               "peak_processes": peak_processes,
               "cpu_s": sum(cpu.values()) if cpu else None}
    if phase_path is not None:
        figures["peak_by_phase"] = by_phase
    return figures, timed_out


def _sample(alive, root, psutil) -> list:
    """(role, RSS, PSS) of each process of a sample still running."""
    out = []
    for p, rss in alive:
        try:
            out.append((_role(p, root), rss, _pss(p, rss)))
        except psutil.Error:
            pass
    return out


def breakdown(processes) -> str:
    """A peak's processes (role, RSS, PSS) summed by role: "jvm 735 / 700, python worker x4 ..."."""
    by_role: dict = {}
    for role, rss, pss in processes:
        n, r, q = by_role.get(role, (0, 0, 0))
        by_role[role] = (n + 1, r + rss, q + pss)
    return ", ".join(f"{role}{f' x{n}' if n > 1 else ''} {r / 2**20:,.0f} / {q / 2**20:,.0f}"
                     for role, (n, r, q) in sorted(by_role.items(), key=lambda kv: -kv[1][1]))


def _role(p, root) -> str:
    """What a process of the tree is: the competitor's own process, a JVM, a Python daemon (a
    ``python -m`` process) or one of the workers it forked, else its name."""
    if p.pid == root.pid:
        return "driver"
    if p.name().startswith("java"):
        return "jvm"
    if "-m" in p.cmdline():
        parent = p.parent()
        return "python worker" if parent is not None and "-m" in parent.cmdline() else "python daemon"
    return p.name()


def _pss(p, rss: int) -> int:
    """The process's proportional set size: its pages shared with other processes (a forked
    Python worker's imports, shared with its daemon and siblings) counted by their share, so a
    tree's sum counts each page once (its RSS sum counts a shared page once per process). RSS
    where the kernel does not say (no /proc/PID/smaps_rollup)."""
    try:
        return p.memory_full_info().pss
    except Exception:
        return rss


def _phase(path):
    if path is None:
        return STARTUP
    try:
        with open(path) as f:
            return f.read().strip() or STARTUP
    except OSError:
        return STARTUP


def _kill_tree(proc, root):
    # The children are listed before proc dies: then they are orphans, no longer its descendants.
    victims = []
    if root is not None:
        try:
            victims = root.children(recursive=True)
        except Exception:
            victims = []
    proc.kill()
    for p in victims:
        try:
            p.kill()
        except Exception:
            pass


def tail(path, n):
    """The last ``n`` lines of a log, indented for a report."""
    try:
        with open(path, errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return ""
    return "   | " + "   | ".join(lines[-n:])


def finish_workdir(workdir, keep: bool) -> None:
    """A benchmark's work folder (its tables, checkpoints and broker: gigabytes a run at 50,000
    records/s) goes when the run is done, unless it is kept: one the user named, or one whose
    run failed or mismatched, for its logs and tables."""
    if keep:
        print(f"work folder kept: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)


ROCKSDB_STATE_STORE = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def structured_streaming_session(name: str, parallelism: int, jars=(), settings=None):
    """The Structured Streaming competitor's session: local[parallelism], as many shuffle
    partitions, the RocksDB state store, no UI; ``jars`` on its class path (a connector);
    ``settings``: more of the session's settings (Delta's SQL extension)."""
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master(f"local[{parallelism}]").appName(name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(parallelism))
               .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_STATE_STORE))
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in (settings or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
