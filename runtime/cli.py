"""The sluice command line: Flink's CLI for jobs that run on Spark.

    sluice plan JOB.py [-p P] [--format stream|job|execution|slots] [-- JOB ARGS]
    sluice run JOB.py [--master URL] [--warehouse DIR] [--max-epochs N] [--restore-from latest|N|PATH] [-- JOB ARGS]
    sluice restore JOB.py [--checkpoint N | --savepoint PATH] [--parallelism P] [-- JOB ARGS]
    sluice checkpoints JOB.py [-- JOB ARGS]
    sluice savepoint JOB.py [--checkpoint N] [--target DIR] [-- JOB ARGS]
    sluice stop JOB.py [--savepoint-path DIR] [--timeout S] [-- JOB ARGS]
    sluice state JOB.py --operator UID [--checkpoint N | --savepoint PATH] [--format table|json] [-- JOB ARGS]
    sluice maintain JOB.py [--warehouse DIR] [-- JOB ARGS]

  With a JobManager (Flink's session cluster; --jobmanager URL, default: the warehouse's, else
  http://127.0.0.1:8081; --token T for one that wants it):
    sluice jobmanager [--host 127.0.0.1] [--port 8081] [--token T] [--warehouse DIR] [--master URL]
    sluice run -d JOB.py [run options] [-- JOB ARGS]     submit, print the JobID, return
    sluice list [-a]                                     running and scheduled jobs (-a: all)
    sluice cancel JOBID
    sluice stop [--savepoint-path DIR] JOBID             waits for the savepoint, prints its path
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import sys
import time
import traceback
from typing import Optional, Sequence

from runtime.checkpoint.checkpoint_record import CheckpointException
from runtime.client import JobScriptError, compile_job, run_job
from runtime.graph.stream_graph import StreamGraphError
from runtime.jobmanager.rest_client import JobManagerError
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
    if getattr(args, "detached", False):
        return _submit(args)
    from runtime.checkpoint.checkpoint_record import CheckpointException
    from runtime.checkpoint.job_lease import JobAlreadyRunningException
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
    history = storage.checkpoints.history()
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
    savepoint, FINISHED; waits for it and prints the savepoint's path. A JobID: the JobManager's job."""
    from runtime.jobmaster.stop import request_stop, running_attempt, wait_for_end
    if _is_job_id(args.job):
        return _stop_on_jobmanager(args)
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
    if args.sql:
        return _state_sql(args)
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


def _state_sql(args: argparse.Namespace) -> int:
    """``--sql``: the query over the operator's states, each a temp view named after it
    (``timers`` for its timers), in a local Spark session (runtime.state_processor)."""
    from runtime.state_processor.reader import SavepointReader
    from runtime.state_processor.session import state_processor_session
    reader = SavepointReader.of(_storage(args), args.savepoint or args.checkpoint)
    spark = state_processor_session("local[2]", "sluice-state")
    views = reader.register_views(spark, args.operator)
    try:
        result = spark.sql(args.sql)
    except Exception as e:
        raise SystemExit(f"sluice state --sql: {e}\nviews of {args.operator}: {', '.join(views)}") from None
    rows = [r.asDict(recursive=True) for r in (result.collect() if args.limit is None else result.take(args.limit))]
    if args.format == "json":
        for r in rows:
            print(json.dumps(jsonable(r)))
        return 0
    cells = [[("" if r[c] is None else str(r[c])) for c in result.columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(result.columns)]
    print("  ".join(c.ljust(w) for c, w in zip(result.columns, widths)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))
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


# ---- with a JobManager (runtime.jobmanager) ------------------------------------------------

def _is_job_id(text: str) -> bool:
    """A JobID (32 hex digits, Flink's form) rather than a job script's path."""
    return bool(re.fullmatch(r"[0-9a-f]{32}", text)) and not os.path.exists(text)


def _client(args: argparse.Namespace):
    from runtime.execution.options import ExecutionOptions
    from runtime.jobmanager.rest_client import RestClusterClient, jobmanager_url
    url = args.jobmanager or jobmanager_url(getattr(args, "warehouse", None)
                                            or ExecutionOptions.from_configuration({}).warehouse)
    return RestClusterClient(url, args.token)


def _submit(args: argparse.Namespace) -> int:
    """``sluice run -d``: the job script goes to the JobManager, which compiles and runs it in a
    driver of its own; prints the JobID and returns (Flink's ``run -d``)."""
    if args.master or args.plan:
        raise ValueError("run -d submits to the JobManager, which runs its drivers on its own Spark master and "
                         "compiles the script itself: drop --master and --plan (or run without -d)")
    configuration = dict(p.partition("=")[::2] for p in args.properties)
    for key, value in (("sluice.epoch.interval", args.epoch_interval),
                       ("sluice.epoch.max-records-per-split", args.max_records_per_split)):
        if value is not None:
            configuration[key] = str(value)
    restore = args.restore_from
    if restore and not restore.isdigit() and restore not in ("latest", "none") and os.path.exists(restore):
        restore = os.path.abspath(restore)      # a savepoint's folder here: the JobManager's cwd is another
    submitted = _client(args).submit_job(
        script=args.job, args=list(args.job_args), parallelism=args.parallelism, max_epochs=args.max_epochs,
        restore_from=restore,
        allow_non_restored_state=args.allow_non_restored_state or None, configuration=configuration or None)
    print(f"Job has been submitted with JobID {submitted['jobid']}")
    return 0


def _list(args: argparse.Namespace) -> int:
    """Flink's ``list``: running and scheduled jobs (``-a``: the ended ones too), newest first."""
    jobs = sorted(_client(args).list_jobs(), key=lambda j: j["start-time"], reverse=True)
    groups = [("Running/Restarting Jobs", "running", ("RUNNING", "RESTARTING", "CANCELLING", "FAILING")),
              ("Scheduled Jobs", "scheduled", ("INITIALIZING", "CREATED"))]
    if args.all:
        groups.append(("Terminated Jobs", "terminated", ("FINISHED", "CANCELED", "FAILED")))
    for title, none, states in groups:
        found = [j for j in jobs if j["state"] in states]
        if not found:
            print(f"No {none} jobs.")
            continue
        print(f"{'-' * 18} {title} {'-' * 18}")
        for j in found:
            started = time.strftime("%d.%m.%Y %H:%M:%S", time.localtime(j["start-time"] / 1000))
            print(f"{started} : {j['jid']} : {j['name']} ({j['state']})")
        print("-" * (38 + len(title)))
    return 0


def _cancel(args: argparse.Namespace) -> int:
    client = _client(args)
    print(f"Cancelling job {args.jobid}.")
    client.cancel_job(args.jobid)
    ended = client.wait_for_terminal(args.jobid, args.timeout)
    print(f"Cancelled job {args.jobid}." if ended["state"] == "CANCELED" else
          f"Job {args.jobid} ended {ended['state']}" + (f": {ended['failure-cause']}" if ended.get("failure-cause") else "."))
    return 0 if ended["state"] == "CANCELED" else 1


def _stop_on_jobmanager(args: argparse.Namespace) -> int:
    client = _client(args)
    print(f"Suspending job \"{args.job}\" with a savepoint.", file=sys.stderr)
    request = client.stop_with_savepoint(args.job, args.savepoint_path)
    path = client.wait_for_savepoint(args.job, request, args.timeout)
    print(f"Savepoint completed. Path: {path}")
    print(f"Restore with: sluice run -d JOB.py --restore-from {shlex.quote(path)}")
    return 0


def _jobmanager(args: argparse.Namespace) -> int:
    from runtime.execution.options import ExecutionOptions
    from runtime.jobmanager.rest_client import TOKEN_VARIABLE
    from runtime.jobmanager.rest_server import serve
    defaults = ExecutionOptions.from_configuration({})
    return serve(args.warehouse or defaults.warehouse, args.master or defaults.master, args.host, args.port,
                 args.token or os.environ.get(TOKEN_VARIABLE) or None, args.standby_drivers)


def _jobmanager_options(p: argparse.ArgumentParser, warehouse: bool = True) -> None:
    p.add_argument("--jobmanager", help="the JobManager's URL (default: the one the warehouse's "
                                        "jobmanager/address.json names, else http://127.0.0.1:8081)")
    p.add_argument("--token", help="the JobManager's token, if it wants one (default: SLUICE_JOBMANAGER_TOKEN)")
    if warehouse:
        p.add_argument("--warehouse", help="the warehouse whose JobManager to ask (default: ./warehouse)")


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
    run.add_argument("--detached", "-d", action="store_true",
                     help="submit the job to the JobManager, print its JobID and return (Flink's run -d)")
    _jobmanager_options(run, warehouse=False)
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
    _jobmanager_options(stop, warehouse=False)
    stop.set_defaults(func=_stop)
    jobmanager = sub.add_parser("jobmanager", help="run the JobManager: jobs submitted over REST, each in a driver "
                                                   "process of its own (docs/operations/jobmanager.md)")
    jobmanager.add_argument("--host", default="127.0.0.1",
                            help="the address to listen on (default 127.0.0.1; another needs a token)")
    jobmanager.add_argument("--port", type=int, default=8081, help="the REST port (default 8081, Flink's)")
    jobmanager.add_argument("--token", help="a token every request must send as 'Authorization: Bearer <token>' "
                                            "(default: SLUICE_JOBMANAGER_TOKEN)")
    jobmanager.add_argument("--warehouse", help="the warehouse (default: ./warehouse); the JobManager's state "
                                                "is in its jobmanager/ folder")
    jobmanager.add_argument("--master", help="Spark master URL of the drivers (default: local[*], or SLUICE_SPARK_MASTER)")
    jobmanager.add_argument("--standby-drivers", type=int,
                            help="drivers kept started and ready for the next submit, each a JVM (default: 1 on "
                                 "a local master, 0 on a cluster's)")
    jobmanager.set_defaults(func=_jobmanager, verbose=False)
    listing = sub.add_parser("list", help="list the JobManager's running and scheduled jobs (Flink's list)")
    listing.add_argument("--all", "-a", action="store_true", help="the ended jobs too")
    _jobmanager_options(listing)
    listing.set_defaults(func=_list)
    cancel = sub.add_parser("cancel", help="cancel a job of the JobManager (Flink's cancel)")
    cancel.add_argument("jobid", help="the JobID (sluice list)")
    cancel.add_argument("--timeout", type=float, default=120, help="seconds to wait for the job to end (default 120)")
    _jobmanager_options(cancel)
    cancel.set_defaults(func=_cancel)
    state = sub.add_parser("state", help="print one operator's state in a checkpoint")
    _job_argument(state)
    state.add_argument("--operator", required=True, help="the operator's uid")
    which = state.add_mutually_exclusive_group()
    which.add_argument("--checkpoint", type=int, help="checkpoint id (default: the latest completed)")
    which.add_argument("--savepoint", help="savepoint folder")
    state.add_argument("--format", choices=("table", "json"), default="table")
    state.add_argument("--limit", type=int, default=50, help="rows to print as a table (default 50)")
    state.add_argument("--sql", help="a Spark SQL query over the operator's states, each a view named after it "
                                     "(timers: `timers`), e.g. \"SELECT key, value FROM count WHERE value > 10\"")
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
            StorageException, ValueError, TypeError, JobManagerError) as e:      # ValueError: also a refused stop
        return _failed(args, e)


def _failed(args: argparse.Namespace, error: BaseException) -> int:
    """One line for a known failure; its traceback only under --verbose."""
    if getattr(args, "verbose", False):
        traceback.print_exception(error, file=sys.stderr)
    print(f"sluice {args.command}: {error}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
