"""A run's preflight: misuse fails before Spark starts or anything is written, naming what is
wrong and the fix; and the warning of a deliberate fresh start.

Its own module because these checks read the job, its sources, sinks and checkpoints, but run
nothing: they decide whether and from where a run may start.
"""
from __future__ import annotations

import logging
from typing import Optional

from runtime.checkpoint.restore import NoUsableCheckpointException, RestorePoint, check_compatibility, choose
from runtime.checkpoint.sink_committers import check_sink_locations, committed_sinks
from runtime.checkpoint.checkpoint_record import CheckpointException
from runtime.checkpoint.job_lease import JobAlreadyRunningException, already_running
from runtime.checkpoint.storage import CheckpointStorage
from runtime.datastream.stream_execution_environment import PROGRAM_KEY
from runtime.execution.job_context import JobContext
from runtime.graph.job_graph import JobGraph
from runtime.storage.filesystems import basename, join
from runtime.storage.job_folders import JobFolderException, check_claim, claim, own_folder

log = logging.getLogger("runtime.execution.executor")     # the run's messages: read by that name

START_OVER = "none"     # restore_from value of a deliberate fresh start


def preflight(context: JobContext) -> Optional[RestorePoint]:
    """Misuse fails here, before Spark starts or anything is written: a job folder shared (with
    another script, a source or a sink), the job's inputs, where its sinks write, another run
    holding the job, and the restore point (which must fit the job). Only a run that passes them all
    claims the job's folder for its script: a refused run leaves nothing behind."""
    point = _checks(context)
    claim_job_folder(context.job_graph, context.storage.job_dir)
    return point


def _checks(context: JobContext) -> Optional[RestorePoint]:
    job_graph, sources, storage, options = context.job_graph, context.sources, context.storage, context.options
    check_job_folder(job_graph, options.warehouse, storage.job_dir)
    sources.check()
    check_sink_locations(job_graph)
    holder = storage.lease.running_holder(options.lease_timeout_s)
    if holder is not None:
        raise JobAlreadyRunningException(already_running(storage.job_dir, holder))
    if context.batch:
        if options.restore_from not in (None, "latest", START_OVER):
            raise CheckpointException(
                f"Job '{job_graph.job_name}' runs in BATCH mode, which takes no checkpoints and "
                f"restores none (restore from {options.restore_from!r} asked): run it with "
                "execution.runtime-mode STREAMING to restore.")
        return None
    if options.restore_from == START_OVER:
        return None
    try:
        point = choose(storage, options.restore_from or "latest")
    except NoUsableCheckpointException as e:
        raise e.naming(job_graph.job_name, committed_sinks(job_graph)) from None
    if point is not None:
        check_compatibility(point, job_graph, options.allow_non_restored_state)
    return point


def check_job_folder(job_graph: JobGraph, warehouse: str, job_dir: str) -> None:
    """The job's folder is its script's alone (``job_folders.check_claim``), and no source reads or
    sink writes in a job folder of the warehouse: the job is refused, and nothing is written."""
    from runtime.connectors import committer_class
    for node in (n for v in job_graph.vertices for n in v.operators):
        if node.kind == "source":
            found, verb = node.operator.source.locations, "reads"
        elif node.kind == "sink":
            found, verb = (committer_class(node.operator.sink).output_location(node.operator.sink) or ())[:1], "writes"
        else:
            continue
        for location in found:
            own = own_folder(location, warehouse, job_dir)
            if own is not None:
                raise JobFolderException(
                    f"The {node.kind} '{node.operator_name}' of job '{job_graph.job_name}' {verb} {location}, which "
                    f"overlaps {own}, a job folder of the warehouse (checkpoints, state, epoch log; Sluice's own "
                    f"files): a VACUUM of a table there would delete them. Give it a path outside every job "
                    f"folder, e.g. {join(warehouse, 'tables', basename(location))}.")
    program = _program(job_graph)
    if program:
        check_claim(job_dir, job_graph.job_name, program)


def claim_job_folder(job_graph: JobGraph, job_dir: str) -> None:
    """The job's script claims its folder (``job_folders.claim``), once its checks passed."""
    program = _program(job_graph)
    if program:
        claim(job_dir, job_graph.job_name, program)


def _program(job_graph: JobGraph) -> Optional[str]:
    """The script that built the job (None for a job built in a Python session)."""
    return dict(job_graph.stream_graph.settings.configuration).get(PROGRAM_KEY)


def warn_start_over(job_graph: JobGraph, storage: CheckpointStorage) -> None:
    """``--restore-from none``: say which sinks already hold what this run writes again."""
    sinks = committed_sinks(job_graph)
    completed = storage.latest_lineage()
    what = f"checkpoint {completed[-1].checkpoint_id} is not restored" if completed else "nothing is restored"
    again = (f"; these sinks already hold this job's committed output and will receive everything "
             f"again: {', '.join(sinks)}" if sinks else "")
    log.warning("[%s] starting over (restore_from=none): %s%s", job_graph.job_name, what, again)
