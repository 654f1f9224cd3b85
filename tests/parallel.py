"""The suite on two workers (pytest-xdist; ``bin/dev test`` runs ``-n 2 --dist loadgroup``): which
tests share a worker, and which start first.

Most of the slow tiers' time is waiting (the real Airflow's scheduler, a broker, JVMs starting),
so two workers overlap it with the other worker's Spark and Python work. Each worker has its own
session fixtures (Spark session, Airflow home, broker, fork server). A file's tests run on one
worker, so a module's fixtures (a standalone cluster, an S3 server) start once; every test that
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

# The suite's slowest tests, roughly in seconds as whole-suite runs of a fresh clone measured them
# (--durations and the workers' timelines; 2 cores, some load), by a regular expression on
# "file::test" (the first that matches): the groups holding them go out first, so no group of
# minutes starts last while the other worker has nothing left. The fast loop's own slowest (delta-spark's first tables, Spark
# jobs) are here too: it orders its groups by the same costs. Refresh it when one changes much.
LONG_TESTS = {
    # A second Airflow with a JobManager beside it (its start is in the first test's setup).
    r"test_airflow_deferred_runs\.py::test_eight_streams_.*": 160,
    r"test_airflow_deferred_runs\.py::test_in_process_each_running_stream_.*": 55,
    r"test_airflow_deferred_runs\.py::test_two_airflow_retries_.*": 30,
    r"test_checkpoint_faults\.py::test_killed_runs_restore_to_the_same_sinks_and_state": 120,
    r"test_kafka_faults\.py::test_kills_at_every_fault_point_.*": 110,
    r"test_overlapping_epoch_faults\.py::test_kills_while_the_next_epoch_runs_.*": 120,
    r"test_object_store\.py::test_kills_at_the_points_that_write_to_s3_restore_exactly_once": 100,
    r"test_delta_spark_sink\.py::test_a_job_killed_at_each_sink_fault_point_.*": 85,
    r"test_object_store\.py::test_wordcount_with_its_input_sink_and_warehouse_in_s3": 75,
    r"test_delta_spark_tables\.py::test_a_change_feed_job_killed_and_stopped_.*": 60,
    r"test_delta_upsert\.py::test_kills_after_the_merge_and_during_the_record_then_restore_.*": 60,
    r"test_cluster\.py::test_the_jobmanagers_drivers_run_their_epochs_on_the_cluster": 60,
    r"test_airflow_assets\.py::test_a_job_dag_emits_an_asset_event_per_run_that_committed": 60,
    r"test_kafka_faults\.py::test_a_broker_killed_and_started_mid_run_.*": 50,
    r"test_delta_spark_tables\.py::test_deletion_vectors_after_delete_update_and_merge_.*": 50,
    r"test_cluster\.py::test_seed_job_on_a_standalone_cluster_matches_local_mode": 50,
    r"test_quickstart\.py::test_bin_dev_wordcount_prints_the_answer_.*": 50,
    r"test_jobmanager\.py::test_(the_cli_runs_detached|a_bounded_job_submitted)_.*": 45,
    r"test_maintenance\.py::test_a_kill_inside_table_maintenance_loses_nothing": 45,
    r"test_state_processor\.py::test_a_savepoint_bootstrapped_from_a_million_rows_.*": 45,
    r"test_jobmanager_recovery\.py::test_a_killed_(jobmanager|driver)_.*": 45,
    # Warm standby drivers: each a JVM with its Python workers started and used.
    r"test_jobmanager_driver\.py::test_(a_jobmanager_runs_a_submitted_job_on_its_warm_standby|the_pool_replaces_a_taken"
    r"_standby|a_job_that_adds_jars_runs_on_a_standby)_.*": 60,
    r"test_airflow_jobmanager\.py::test_a_run_deploys_to_the_jobmanager_.*": 60,
    r"test_jobmanager_driver\.py::test_a_driver_gets_ready_.*": 30,
    r"test_cli\.py::test_sluice_run_in_a_terminal_.*": 40,
    r"test_object_store\.py::test_wordcount_on_a_standalone_cluster_that_shares_nothing_but_s3": 40,
    r"test_delta_spark_tables\.py::test_v2_checkpoints_with_deletion_vectors_.*": 40,
    r"test_kafka_faults\.py::test_a_job_that_outlives_a_broker_restart_.*": 30,
    r"test_delta_on_inputs\.py::test_a_sink_that_received_no_rows_leaves_a_table_that_reads_in_spark_sql": 30,
    r"test_airflow_spark_submit\.py::test_job_dag_runs_through_spark_submit_.*": 30,
    r"test_cluster\.py::test_keyed_subtasks_run_where_their_local_stores_are": 30,
    r"test_spark_session\.py::test_an_archive_is_made_.*": 45,
    r"test_pyflink_kafka_examples\.py::test_the_shipped_kafka_example_.*": 25,
    r"test_web_view\.py::test_anonymous_users_are_refused": 25,      # the first: the web view's set-up
    r"test_cli\.py::test_sluice_(stop_ends_a_running_job|run_restarts_an_attempt)_.*": 27,
    r"test_delta_spark_tables\.py::.*": 25,       # each a delta-spark job or two
    r"test_object_store\.py::test_a_row_format_file_sink_into_s3_.*": 23,
    r"test_delta_spark\.py::test_a_sluice_table_reads_in_spark_sql_.*": 20,
    r"test_kafka_windows_dag\.py::test_two_runs_of_the_kafka_windows_dag_.*": 20,
    r"test_docs\.py::test_site_builds_in_strict_mode": 20,     # and the docs' snippets, run meanwhile
    r"test_airflow_control_plane\.py::.*": 12,    # dag.test() of a job DAG on Spark
    # In the fast loop: the first delta-spark tables of a worker's session pay its warm-up.
    r"test_delta_log\.py::test_delta_spark_.*": 15,
    r"test_delta_column_mapping_sink\.py::.*": 9,
    r"test_keyed_functions\.py::test_keyed_function_state_is_checkpointed_.*": 10,
    r"test_print_format\.py::test_print_of_a_job_shows_each_stream_.*": 10,
    r"test_dag_parse\.py::test_parsing_the_dag_files_.*": 3,
}


# Files of the fast loop whose first delta-spark statement in a worker's Spark session costs 15-20 s
# (Delta's classes loaded and compiled): on one worker, that is paid once.
SHARED_WARM_UP = {"test_delta_log.py": "delta_spark_fast", "test_delta_column_mapping_sink.py": "delta_spark_fast"}


def group_items(items) -> None:
    """Mark each item with its xdist group: the real Airflow's for a test that uses it, else its
    file's (or SHARED_WARM_UP's). The other tests of a file with one (dag.test() runs, Spark SQL
    reads: minutes in all) go with their file, to either worker, instead of waiting behind the
    real Airflow's runs; those files share no module fixture between the two kinds."""
    import pytest
    for item in items:
        airflow = "real_airflow" in getattr(item, "fixturenames", ())
        group = AIRFLOW_GROUP if airflow else SHARED_WARM_UP.get(item.path.name, item.path.name)
        item.add_marker(pytest.mark.xdist_group(group))


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
