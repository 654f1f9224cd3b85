"""The ``sluice`` command line.

    sluice plan JOB.py [--format stream|job|execution|slots] [-- JOB ARGS]
    sluice run JOB.py [--master URL] [--warehouse DIR] [--max-epochs N] [-- JOB ARGS]
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from runtime.client import JobScriptError, compile_job, run_job
from runtime.graph.stream_graph import StreamGraphError
from runtime.scheduler.slots import NoResourceAvailableException, TaskManager, compute_slot_plan


def _plan(args: argparse.Namespace) -> int:
    job = compile_job(args.job, args.job_args)
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
    from runtime.execution.executor import JobExecutionException
    try:
        result = run_job(args.job, args.job_args, master=args.master, warehouse=args.warehouse,
                         max_epochs=args.max_epochs, epoch_interval_ms=args.epoch_interval,
                         max_records_per_split=args.max_records_per_split)
    except (JobExecutionException, NoResourceAvailableException) as e:
        print(f"sluice run: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("sluice run: cancelled", file=sys.stderr)
        return 130
    print(f"Job '{result.job_name}' ({result.job_id}) finished: {len(result.epochs)} epoch(s) in "
          f"{result.net_runtime_ms / 1000:.1f} s, run {result.run_id}", file=sys.stderr)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="sluice", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="compile a job script and print its plan")
    plan.add_argument("job", help="path of the job script, e.g. include/jobs/wordcount.py")
    plan.add_argument("--format", choices=("stream", "job", "execution", "slots"), default="stream",
                      help="stream: Flink plan-visualizer JSON (default); job: JobGraph JSON; "
                           "execution: subtasks and attempts; slots: the slot plan")
    plan.add_argument("--task-managers", type=int, default=1, help="for --format slots")
    plan.add_argument("--slots-per-task-manager", type=int, default=os.cpu_count() or 1,
                      help="for --format slots (default: this machine's cores)")
    plan.set_defaults(func=_plan)
    run = sub.add_parser("run", help="run a job script on Spark, epoch by epoch")
    run.add_argument("job", help="path of the job script, e.g. include/jobs/wordcount.py")
    run.add_argument("--master", help="Spark master URL (default: local[*], or SLUICE_SPARK_MASTER)")
    run.add_argument("--warehouse", help="folder for state and run files (default: ./warehouse)")
    run.add_argument("--max-epochs", type=int, help="stop an unbounded job after N epochs")
    run.add_argument("--epoch-interval", type=int, help="milliseconds an unbounded epoch collects input")
    run.add_argument("--max-records-per-split", type=int, help="cut bounded input into epochs of N records per split")
    run.set_defaults(func=_run)
    # Everything after "--" belongs to the job script.
    argv = list(sys.argv[1:] if argv is None else argv)
    job_args = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.job_args = job_args
    try:
        return args.func(args)
    except (JobScriptError, StreamGraphError, NoResourceAvailableException, ValueError, TypeError) as e:
        print(f"sluice {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
