"""The delta-spark sink commit's state reconstruction, off the checkpoint's path
(runtime/connectors/delta/spark_committer.py, ``_warm_next_snapshot``).

delta-spark 4.4 reads a row-tracking table's row-id high-water mark from the commit's read
snapshot, and each commit leaves a new snapshot whose state is not computed: without the warm-up,
every append to a row-tracking table ran 3 Spark jobs ("Compute snapshot for version: N") inside
the commit. With it, the next commit runs none, and writes the same row ids.
"""
from __future__ import annotations

import pytest

from runtime.connectors.delta.spark_committer import spark_commit_files, spark_merge_upserts, wait_warm
from test_delta_spark_sink import create, spark_rows, staged

pytestmark = [pytest.mark.slow, pytest.mark.delta_spark]


def jobs_of(spark, group: str, commit) -> tuple[object, list[str]]:
    """``commit()``'s result and the descriptions of the Spark jobs it ran (in the job group)."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        result = commit()
    finally:
        sc._jsc.clearJobGroup()
    store = sc._jsc.sc().statusStore()
    return result, [store.job(j).description().getOrElse(None) or "" for j in sc.statusTracker().getJobIdsForGroup(group)]


def test_an_append_to_a_row_tracking_table_runs_no_spark_job_after_the_warm_up(dspark, tmp_path):
    table = create(dspark, tmp_path / "t", "word STRING, count BIGINT",
                   "TBLPROPERTIES ('delta.enableRowTracking' = 'true')", "('seed', 0)")
    # The first commit reads the snapshot the INSERT left (nobody warmed it): state reconstruction.
    version, jobs = jobs_of(dspark, "first", lambda: spark_commit_files(table, staged(table, ["a", "b"]), "app", 1))
    assert version == 2 and any("Compute snapshot" in j for j in jobs), jobs
    wait_warm(table)
    for checkpoint, words in ((2, ["c"]), (3, ["d", "e", "f"])):
        version, jobs = jobs_of(dspark, f"cp{checkpoint}",
                                lambda: spark_commit_files(table, staged(table, words), "app", checkpoint))
        assert version == checkpoint + 1 and jobs == [], jobs
        wait_warm(table)
    # The row ids delta-spark assigned: unique, dense after the seed's, as without the warm-up.
    ids = spark_rows(dspark, table, "word", "_metadata.row_id", "_metadata.row_commit_version")
    assert [(w, i) for w, i, _ in ids] == [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5), ("f", 6), ("seed", 0)]
    assert [v for _, _, v in ids] == [2, 2, 3, 4, 4, 4, 1]


def test_a_merge_after_the_warm_up_does_not_reconstruct_the_snapshot(dspark, tmp_path):
    import pyarrow as pa
    table = create(dspark, tmp_path / "t", "word STRING, count BIGINT", "", "('seed', 0), ('a', 1)")
    change = pa.table({"word": ["a", "b"], "count": pa.array([5, 6], pa.int64()), "_sluice_delete": [False, False]})
    assert spark_merge_upserts(table, change, ["word"], "app", 1, "_sluice_delete") == 2
    wait_warm(table)
    change = pa.table({"word": ["b"], "count": pa.array([7], pa.int64()), "_sluice_delete": [True]})
    version, jobs = jobs_of(dspark, "merge2",
                            lambda: spark_merge_upserts(table, change, ["word"], "app", 2, "_sluice_delete"))
    assert version == 3 and not any("Compute snapshot" in j for j in jobs), jobs
    assert spark_rows(dspark, table, "word", "count") == [("a", 5), ("seed", 0)]
