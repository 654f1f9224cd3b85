"""The suite on two workers (pytest-xdist; ``bin/dev test`` runs ``-n 2 --dist loadgroup``): which
tests share a worker, and which start first.

Most of the slow tiers' time is waiting (the real Airflow's scheduler, a broker, JVMs starting),
so two workers overlap it with the other worker's Spark and Python work. Each worker has its own
session fixtures (Spark session, Airflow home, broker, fork server). A file's tests run on one
worker, so a module's fixtures (a standalone cluster, an S3 server) start once; every file that
uses the real Airflow runs on the same worker, so one Airflow serves them all. The groups go out
slowest first: the real Airflow's (the longest, minutes of runs), then by how many slow-tier tests
a group holds, then how many tests: the long waits start at once and the quick files fill the end,
instead of a kill chain starting last.
"""
from __future__ import annotations

import os
from typing import Callable

AIRFLOW_GROUP = "real_airflow"


def group_by_file(items) -> None:
    """Mark each item with its xdist group: its file, or the real Airflow's group for every file
    with a test that uses the real Airflow."""
    import pytest
    airflow_files = {i.path for i in items if "real_airflow" in getattr(i, "fixturenames", ())}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(AIRFLOW_GROUP if item.path in airflow_files else item.path.name))


def slowest_groups_first(is_slow: Callable[[str, str], bool]):
    """The scheduler class for ``pytest_xdist_make_scheduler``: xdist's loadgroup with the groups
    ordered as above, ``is_slow(file_name, test_name)`` saying which tests are slow (xdist orders
    them by size alone)."""
    from xdist.scheduler import LoadGroupScheduling

    def weight(nodeid: str) -> int:
        test = nodeid[:nodeid.rfind("@")] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid
        path, _, name = test.partition("::")
        return 1000 if is_slow(os.path.basename(path), name) else 1

    class SlowestGroupsFirst(LoadGroupScheduling):
        ordered = False

        def _assign_work_unit(self, node):
            if not self.ordered:     # the work queue is complete before the first assignment
                self.ordered = True
                for scope in sorted(self.workqueue, key=lambda s: (s != AIRFLOW_GROUP, -sum(map(weight, self.workqueue[s])))):
                    self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

    return SlowestGroupsFirst
