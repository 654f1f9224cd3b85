"""The suite on two workers (pytest-xdist; ``bin/dev test`` runs ``-n 2 --dist loadgroup``): which
tests share a worker, and which start first.

Most of the slow tiers' time is waiting (the real Airflow's scheduler, a broker, JVMs starting),
so two workers overlap it with the other worker's Spark and Python work. Each worker has its own
session fixtures (Spark session, Airflow home, broker, fork server). A file's tests run on one
worker, so a module's fixtures (a standalone cluster, an S3 server) start once; every file that
uses the real Airflow runs on the same worker, so one Airflow serves them all. The groups go out
slowest first: the real Airflow's (the longest, minutes of runs), then by what their tests cost
(LONG_TESTS, a kill chain a minute or more; another slow-tier test seconds; a fast one next to nothing): the
long waits start at once and the quick files fill the end, instead of a kill chain starting last
while the other worker has nothing left.
"""
from __future__ import annotations

import os
from typing import Callable

AIRFLOW_GROUP = "real_airflow"

# The suite's slowest tests outside the real Airflow's group, in seconds as `bin/dev test` reports
# them (--durations=25) on a quiet 2-core machine, by a regular expression on "file::test": the
# groups holding them go out first. Refresh it when one of them changes much.
LONG_TESTS = {
    r"test_checkpoint_faults\.py::test_killed_runs_restore_to_the_same_sinks_and_state": 110,
    r"test_object_store\.py::test_kills_at_the_points_that_write_to_s3_restore_exactly_once": 100,
    r"test_delta_upsert\.py::test_kills_after_the_merge_and_during_the_record_then_restore_.*": 90,
    r"test_kafka_faults\.py::test_kills_at_every_fault_point_.*": 90,
    r"test_object_store\.py::test_wordcount_with_its_input_sink_and_warehouse_in_s3": 60,
    r"test_delta_spark_tables\.py::test_deletion_vectors_after_delete_update_and_merge_.*": 50,
    r"test_cluster\.py::test_seed_job_on_a_standalone_cluster_matches_local_mode": 50,
    r"test_maintenance\.py::test_a_kill_inside_table_maintenance_loses_nothing": 45,
    r"test_object_store\.py::test_wordcount_on_a_standalone_cluster_that_shares_nothing_but_s3": 40,
    r"test_kafka_faults\.py::test_a_broker_killed_and_started_mid_run_.*": 40,
    r"test_delta_spark_tables\.py::test_a_change_feed_job_killed_and_stopped_.*": 35,
    r"test_quickstart\.py::test_bin_dev_wordcount_prints_the_answer_.*": 35,
    r"test_delta_spark_tables\.py::test_v2_checkpoints_with_deletion_vectors_.*": 32,
    r"test_airflow_spark_submit\.py::test_job_dag_runs_through_spark_submit_.*": 30,
    r"test_cluster\.py::test_keyed_subtasks_run_where_their_local_stores_are": 30,
    r"test_cli\.py::test_sluice_(stop_ends_a_running_job|run_restarts_an_attempt)_.*": 27,
    r"test_object_store\.py::test_a_row_format_file_sink_into_s3_.*": 23,
    r"test_docs\.py::test_site_builds_in_strict_mode": 20,     # and the docs' snippets, run meanwhile
    r"test_jobmanager_recovery\.py::test_a_killed_(jobmanager|driver)_.*": 65,
    r"test_jobmanager\.py::test_the_cli_runs_detached_.*": 45,
    r"test_cluster\.py::test_the_jobmanagers_drivers_run_their_epochs_on_the_cluster": 60,
}


def group_by_file(items) -> None:
    """Mark each item with its xdist group: its file, or the real Airflow's group for every file
    with a test that uses the real Airflow."""
    import pytest
    airflow_files = {i.path for i in items if "real_airflow" in getattr(i, "fixturenames", ())}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(AIRFLOW_GROUP if item.path in airflow_files else item.path.name))


def slowest_groups_first(cost: Callable[[str, str], float]):
    """The scheduler class for ``pytest_xdist_make_scheduler``: xdist's loadgroup with the groups
    ordered as above, ``cost(file_name, test_name)`` saying how long a test takes, roughly (xdist
    orders the groups by their number of tests alone)."""
    from xdist.scheduler import LoadGroupScheduling

    def weight(nodeid: str) -> float:
        test = nodeid[:nodeid.rfind("@")] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid
        path, _, name = test.partition("::")
        return cost(os.path.basename(path), name)

    class SlowestGroupsFirst(LoadGroupScheduling):
        ordered = False

        def _assign_work_unit(self, node):
            if not self.ordered:     # the work queue is complete before the first assignment
                self.ordered = True
                for scope in sorted(self.workqueue, key=lambda s: (s != AIRFLOW_GROUP, -sum(map(weight, self.workqueue[s])))):
                    self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

    return SlowestGroupsFirst
