"""The sluice command line: Flink's CLI for jobs that run on Spark.

    sluice plan JOB.py [-p P] [--format stream|job|execution|slots] [-- JOB ARGS]
    sluice run JOB.py [--master URL] [--warehouse DIR] [--max-epochs N] [--restore-from latest|N|PATH] [-- JOB ARGS]
    sluice restore JOB.py [--checkpoint N | --savepoint PATH] [--parallelism P] [-- JOB ARGS]
    sluice checkpoints JOB.py [-- JOB ARGS]
    sluice savepoint JOB.py [--checkpoint N] [--target DIR] [-- JOB ARGS]
    sluice stop JOB.py [--savepoint-path DIR] [--timeout S] [-- JOB ARGS]
    sluice state JOB.py --operator UID [--checkpoint N | --savepoint PATH] [--format table|json] [-- JOB ARGS]
    sluice maintain JOB.py [--warehouse DIR] [-- JOB ARGS]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import time
import traceback
from typing import Optional, Sequence

from runtime.checkpoint.storage import CheckpointException
from runtime.client import JobScriptError, compile_job, run_job
from runtime.graph.stream_graph import StreamGraphError
from runtime.scheduler.slots import NoResourceAvailableException, TaskManager, compute_slot_plan
from runtime.storage.filesystems import StorageException


def _plan(args: argparse.Namespace) -> int:
    job = compile_job(args.job, args.job_args, args.parallelism)
    if args.format == "stream":
        print(job.stream_graph.get_streaming_plan_as_json())
    elif args.format == "job":
        print(job.job_graph.get_job_graph_as_json())
    elif args.format == "execution":
        for v in job.execution_graph.all_execution_vertices:
            kg = f"  key groups {v.key_group_range.start_key_group}-{v.key_group_range.end_key_group}" \
                if v.key_group_range else ""
            print(f"{v.current_execution}{kg}")
    else:
        tms = [TaskManager(f"executor-{i}", "localhost", args.slots_per_task_manager)
               for i in range(args.task_managers)]
        print(compute_slot_plan(job.execution_graph, tms).to_json())
    return 0


def _run(args: argparse.Namespace) -> int:
    from runtime.checkpoint.storage import CheckpointException, JobAlreadyRunningException
    from runtime.execution.executor import SparkPipelineExecutor
    from runtime.execution.job_execution_result import JobExecutionException
    from runtime.execution.options import ExecutionOptions
    from runtime.jobmaster.plans import load_plan
    restore_from = getattr(args, "restore_from", None)
    if args.command == "restore":
        restore_from = args.savepoint or (str(args.checkpoint) if args.checkpoint is not None else "latest")
    flags = dict(master=args.master, warehouse=args.warehouse, max_epochs=args.max_epochs,
                 epoch_interval_ms=args.epoch_interval, max_records_per_split=args.max_records_per_split,
                 restore_from=restore_from, allow_non_restored_state=args.allow_non_restored_state or None)
    properties, configuration = ExecutionOptions.split_properties(args.properties)
    overrides = {**properties, **{k: v for k, v in flags.items() if v is not None}}
    try:
        if args.plan:       # compiled once by the control plane: the script does not run again
            if args.parallelism or args.job_args:
                raise ValueError("--plan runs a compiled plan as it was compiled: drop --parallelism and the "
                                 "job's arguments, or run the job script without --plan")
            result = SparkPipelineExecutor(**overrides).execute(load_plan(args.plan).stream_graph)
        else:   # the job's restart strategy applies, as to a job Flink's CLI submits
            result = run_job(args.job, args.job_args, parallelism=args.parallelism,
                             configuration=configuration, **overrides)
    except (JobExecutionException, NoResourceAvailableException, CheckpointException,
            JobAlreadyRunningException, FileNotFoundError) as e:
        return _failed(args, e)
    except KeyboardInterrupt:
        print(f"sluice {args.command}: canceled; resume it with: {_command(args, 'run')}", file=sys.stderr)
        return 130
    print(f"Job '{result.job_name}' ({result.job_id}) finished: {result.epoch_count} epoch(s) in "
          f"{result.net_runtime_ms / 1000:.1f} s, run {result.run_id}", file=sys.stderr)
    return 0


def _command(args: argparse.Namespace, command: str, *options: str) -> str:
    """The ``sluice`` command line that acts on the same job as ``args``: its script, the warehouse
    it was given and the job's arguments (to copy and paste)."""
    warehouse = ("--warehouse", args.warehouse) if getattr(args, "warehouse", None) else ()
    job_args = ("--", *args.job_args) if args.job_args else ()
    return shlex.join(("sluice", command, args.job, *warehouse, *options, *job_args))


def _located(args: argparse.Namespace) -> tuple[str, str]:
    """The job script's warehouse and job name (compiled, not run)."""
    from runtime.execution.options import ExecutionOptions
    graph = compile_job(args.job, args.job_args).stream_graph
    options = ExecutionOptions.from_configuration(dict(graph.settings.configuration))
    return args.warehouse or options.warehouse, graph.job_name


def _storage(args: argparse.Namespace):
    """The checkpoint storage of the job script's job (compiled, not run)."""
    from runtime.checkpoint.storage import CheckpointStorage
    from runtime.storage.layout import job_dir
    return CheckpointStorage(job_dir(*_located(args)))


def _checkpoints(args: argparse.Namespace) -> int:
    storage = _storage(args)
    history = storage.history()
    if not history:
        print(f"No checkpoints under {storage.job_dir}.")
        return 0
    print(f"{'id':>5}  {'epoch':>6}  {'kind':<10}  {'status':<9}  {'completed':<19}  {'duration':>9}  "
          f"{'size':>10}  {'rows':>9}  details")
    for r in history:
        done = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.completed_at)) if r.completed_at else ""
        details = r.failure or r.external_path or ""
        print(f"{r.checkpoint_id:>5}  {r.epoch:>6}  {r.kind:<10}  {r.status:<9}  {done:<19}  {r.duration_ms:>7} ms  "
              f"{_size(r.state_bytes):>10}  {r.state_rows:>9}  {details}")
    return 0


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _savepoint(args: argparse.Namespace) -> int:
    from runtime.checkpoint.savepoint import take_savepoint
    path = take_savepoint(_storage(args), args.target, args.checkpoint)
    print(f"Savepoint completed. Path: {path}")
    print(f"Restore with: {_command(args, 'restore', '--savepoint', path)}")
    return 0


def _stop(args: argparse.Namespace) -> int:
    """Flink's ``stop --savepointPath``: the running job ends after its current epoch with a
    savepoint, FINISHED; waits for it and prints the savepoint's path."""
    from runtime.jobmaster.stop import request_stop, running_attempt, wait_for_end
    warehouse, job_name = _located(args)
    running = running_attempt(warehouse, job_name)
    request_stop(warehouse, job_name, None, args.savepoint_path, requested_by="sluice stop")
    print(f"Stopping job '{job_name}' with a savepoint after its current epoch...", file=sys.stderr)
    ended = wait_for_end(warehouse, job_name, running.run_id, args.timeout)
    if ended is None:
        print(f"sluice stop: the job has not stopped within {args.timeout:.0f} s; it stops at its next epoch "
              f"boundary (the request stays until then)", file=sys.stderr)
        return 1
    if ended.state != "FINISHED" or not ended.savepoint:
        print(f"sluice stop: the run ended {ended.state} without a savepoint"
              + (f": {ended.failure}" if ended.failure else ""), file=sys.stderr)
        return 1
    print(f"Savepoint completed. Path: {ended.savepoint}")
    print(f"Restore with: {_command(args, 'restore', '--savepoint', ended.savepoint)}")
    return 0


def _state(args: argparse.Namespace) -> int:
    from runtime.checkpoint.savepoint import read_state
    rows = read_state(_storage(args), args.operator, args.savepoint or args.checkpoint)
    columns = ["kind", "state", "key_group", "key", "namespace", "value", "subtask"]
    if args.format == "json":
        for r in rows:
            print(json.dumps(jsonable(r)))
        return 0
    shown = rows if args.limit is None else rows[:args.limit]
    cells = [[("" if r[c] is None else str(r[c])) for c in columns] for r in shown]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))
    if len(shown) < len(rows):
        print(f"... {len(rows) - len(shown)} more rows (--limit)")
    return 0


def jsonable(value):
    """A state row's values as JSON can hold them: a dataclass (a TimeWindow) as its fields, a dict
    whose keys are not strings or numbers (a session window's merging set, keyed by TimeWindow) as a
    list of ``{"key", "value"}``, tuples and sets as lists, anything else JSON lacks by its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        if all(k is None or isinstance(k, (bool, int, float, str)) for k in value):
            return {k: jsonable(v) for k, v in value.items()}
        return [{"key": jsonable(k), "value": jsonable(v)} for k, v in value.items()]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    return repr(value)


def _maintain(args: argparse.Namespace) -> int:
    """Compact and vacuum the job's sinks as their policies say and, when no run holds the job,
    its own tables; print what was removed."""
    from runtime.jobmaster.maintenance import maintain_job
    report = maintain_job(compile_job(args.job, args.job_args), args.warehouse)
    for line in report.lines():
        print(line)
    return 0


def _job_argument(p: argparse.ArgumentParser, warehouse: bool = True) -> None:
    p.add_argument("job", help="path of the job script, e.g. include/jobs/wordcount.py")
    p.add_argument("--verbose", "-v", action="store_true", help="print the traceback of a failure")
    if warehouse:
        p.add_argument("--warehouse", help="folder of the job's checkpoints and state (default: ./warehouse)")


def _run_options(p: argparse.ArgumentParser) -> None:
    _job_argument(p)
    p.add_argument("--master", help="Spark master URL (default: local[*], or SLUICE_SPARK_MASTER)")
    p.add_argument("--max-epochs", type=int, help="stop an unbounded job after N epochs")
    p.add_argument("--epoch-interval", type=int, help="milliseconds an unbounded epoch collects input")
    p.add_argument("--max-records-per-split", type=int, help="cut bounded input into epochs of N records per split")
    p.add_argument("--parallelism", "-p", type=int, help="default parallelism of operators the job leaves unset")
    p.add_argument("--allow-non-restored-state", action="store_true",
                   help="skip checkpointed state that no operator of the job claims (by uid)")
    p.add_argument("-D", dest="properties", action="append", default=[], metavar="KEY=VALUE",
                   help="a configuration key, as Flink's dynamic properties: an execution option "
                        "(e.g. -D sluice.task.batch-size=1024; the flags above win) or the job's "
                        "configuration under its own settings (e.g. -D state.backend.type=rocksdb)")
    p.add_argument("--plan", help="run the plan the control plane compiled and stored (a folder "
                                  "<warehouse>/<job>/plans/<run>) instead of running the job script")


def main(argv: Optional[Sequence[str]] = None) -> int:
    from runtime.common.logs import console_logging
    console_logging()       # progress and warnings on stderr, at their levels
    parser = argparse.ArgumentParser(prog="sluice", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)   # a line per command
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="compile a job script and print its plan")
    _job_argument(plan, warehouse=False)
    plan.add_argument("--parallelism", "-p", type=int, help="default parallelism of operators the job leaves unset")
    plan.add_argument("--format", choices=("stream", "job", "execution", "slots"), default="stream",
                      help="stream: Flink plan-visualizer JSON (default); job: JobGraph JSON; "
                           "execution: subtasks and attempts; slots: the slot plan")
    plan.add_argument("--task-managers", type=int, default=1, help="for --format slots")
    plan.add_argument("--slots-per-task-manager", type=int, default=os.cpu_count() or 1,
                      help="for --format slots (default: this machine's cores)")
    plan.set_defaults(func=_plan)
    run = sub.add_parser("run", help="run a job script on Spark, epoch by epoch")
    _run_options(run)
    run.add_argument("--restore-from", help="latest (the default: the newest checkpoint since the job last started "
                                            "over, or the logged epochs of a start that has none yet), none (start "
                                            "over: sinks receive everything again), a checkpoint id, or a savepoint path")
    run.set_defaults(func=_run)
    restore = sub.add_parser("restore", help="run a job from its latest checkpoint, a given one, or a savepoint")
    _run_options(restore)
    which = restore.add_mutually_exclusive_group()
    which.add_argument("--checkpoint", type=int, help="checkpoint id (default: the latest completed)")
    which.add_argument("--savepoint", help="savepoint folder")
    restore.set_defaults(func=_run)
    checkpoints = sub.add_parser("checkpoints", help="list a job's checkpoints and savepoints")
    _job_argument(checkpoints)
    checkpoints.set_defaults(func=_checkpoints)
    savepoint = sub.add_parser("savepoint", help="copy a completed checkpoint into a self-contained savepoint")
    _job_argument(savepoint)
    savepoint.add_argument("--checkpoint", type=int, help="checkpoint id (default: the latest completed)")
    savepoint.add_argument("--target", help="folder of the savepoint (default: <job>/savepoints/...)")
    savepoint.set_defaults(func=_savepoint)
    stop = sub.add_parser("stop", help="stop a running job after its current epoch with a savepoint (FINISHED)")
    _job_argument(stop)
    stop.add_argument("--savepoint-path", help="folder to create the savepoint in (default: <job>/savepoints)")
    stop.add_argument("--timeout", type=float, default=600, help="seconds to wait for the job to stop (default 600)")
    stop.set_defaults(func=_stop)
    state = sub.add_parser("state", help="print one operator's state in a checkpoint")
    _job_argument(state)
    state.add_argument("--operator", required=True, help="the operator's uid")
    which = state.add_mutually_exclusive_group()
    which.add_argument("--checkpoint", type=int, help="checkpoint id (default: the latest completed)")
    which.add_argument("--savepoint", help="savepoint folder")
    state.add_argument("--format", choices=("table", "json"), default="table")
    state.add_argument("--limit", type=int, default=50, help="rows to print as a table (default 50)")
    state.set_defaults(func=_state)
    maintain = sub.add_parser("maintain", help="compact and vacuum a job's Delta sinks (as DeltaSink.with_maintenance "
                                               "says) and, when it is stopped, its own tables")
    _job_argument(maintain)
    maintain.set_defaults(func=_maintain)
    # Everything after "--" belongs to the job script.
    argv = list(sys.argv[1:] if argv is None else argv)
    job_args = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.job_args = job_args
    try:
        return args.func(args)
    except (JobScriptError, StreamGraphError, NoResourceAvailableException, CheckpointException,
            StorageException, ValueError, TypeError) as e:      # ValueError: also a refused stop
        return _failed(args, e)


def _failed(args: argparse.Namespace, error: BaseException) -> int:
    """One line for a known failure; its traceback only under --verbose."""
    if getattr(args, "verbose", False):
        traceback.print_exception(error, file=sys.stderr)
    print(f"sluice {args.command}: {error}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
