"""How long Airflow's DAG processor takes to parse each file of dags/ (issue 50, item 7: at most 2 s).

As the processor does it: each file in a process forked from one that has Airflow imported, so the
project's modules (the plugin, the runtime, the job modules) are imported anew for every file, and
the time is the DagBag's own figure for the file (what dagbag_import_timeout limits). Best of
--repeat forks per file; the jobs are SLUICE_JOBS_FOLDER's (default include/jobs/), the warehouse
SLUICE_WAREHOUSE's.

    PYTHONPATH=plugins .venv/bin/python bench/dag_parse.py [--repeat 3] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_in_fork(path: str) -> dict:
    """The DagBag of one DAG file, parsed in a forked child: its time, DAGs and import errors."""
    from airflow.dag_processing.dagbag import DagBag
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        bag = DagBag(dag_folder=path)
        seconds = sum(s.duration.total_seconds() for s in bag.dagbag_stats)
        dags = {d.dag_id: {"timetable": type(d.timetable).__name__,
                           "expression": getattr(d.timetable, "expression", None),
                           "description": d.description, "doc": d.doc_md or "",
                           "pool_slots": d.get_task("run").pool_slots if "run" in d.task_dict else None}
                for d in bag.dags.values()}
        os.write(write, json.dumps({"seconds": seconds, "dags": dags,
                                    "errors": {k: str(v) for k, v in bag.import_errors.items()}}).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 16):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(data)


def measure(folder: str, repeat: int) -> dict:
    """Per DAG file: the best of ``repeat`` parses (seconds), with the last parse's DAGs and errors."""
    import airflow.sdk  # noqa: F401 (the processor has Airflow imported before it forks)
    from airflow.dag_processing import manager, processor  # noqa: F401
    found = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            runs = [parse_in_fork(os.path.join(folder, name)) for _ in range(repeat)]
            found[name] = {**runs[-1], "seconds": min(r["seconds"] for r in runs)}
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--folder", default=os.path.join(ROOT, "dags"))
    parser.add_argument("--json", action="store_true", help="everything, as one JSON line")
    args = parser.parse_args(argv)
    found = measure(args.folder, args.repeat)
    if args.json:
        print(json.dumps(found))
        return 0
    for name, parsed in found.items():
        print(f"{name:40} {parsed['seconds']:6.2f} s  {len(parsed['dags'])} DAG(s)"
              + (f"  ERRORS: {parsed['errors']}" if parsed["errors"] else ""))
    print(f"{'all files':40} {sum(p['seconds'] for p in found.values()):6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
