"""The seeds' geo-alert job (include/jobs/geo_alerts.py) end to end through its Airflow DAG,
its alerts checked against alerts computed here, in plain Python, from the same generated
events (same formula, same seed)."""
import os
import random

from deltalake import DeltaTable

from test_airflow_control_plane import ROOT, control_plane, dag_test, xcom  # noqa: F401 (fixture)

JOB_TEMPLATE = '''
"""geo_alerts_small: the seeds' geo-alert job on a small batch of events."""
import sys
sys.path.insert(0, {jobs!r})
from geo_alerts import main
from runtime.jobmaster import JobDeployment

DEPLOYMENT = JobDeployment(args=("--events", "{events}", "--zones", "{zones}", "--seed", "{seed}",
                                 "--output", "{{warehouse}}/geo-alerts"))

if __name__ == "__main__":
    main()
'''
EVENTS, ZONES, SEED = 600, 12, 5


def expected_alerts(geohashes):
    """Per zone: totals every 1000 ms, Gaussian(180, 100) clipped at 0; delta = previous minus
    current (0 for the first); an alert for every two consecutive events both above 70%."""
    totals = {z: [] for z in range(ZONES)}
    for i in range(EVENTS):
        totals[i % ZONES].append(max(0, round(random.Random(SEED * 1_000_003 + i).gauss(180, 100))))
    alerts = set()
    for z, ts in totals.items():
        deltas = [0] + [ts[r - 1] - ts[r] for r in range(1, len(ts))]
        over = [d != 0 and t != 0 and abs(d) * 100 // t > 70 for d, t in zip(deltas, ts)]
        alerts |= {(geohashes[z], r * 1000, ts[r], deltas[r], (r + 1) * 1000, ts[r + 1], deltas[r + 1])
                   for r in range(len(ts) - 1) if over[r] and over[r + 1]}
    return alerts


def test_geohash_is_the_standard_encoding():
    import sys
    sys.path.insert(0, os.path.join(ROOT, "include", "jobs"))
    from geo_alerts import geohash
    assert geohash(57.64911, 10.40744, 11) == "u4pruydqqvj"   # Wikipedia's example


def test_geo_alerts_dag_runs_end_to_end(control_plane):  # noqa: F811
    import sys
    from airflow.utils.state import DagRunState
    sys.path.insert(0, os.path.join(ROOT, "include", "jobs"))
    from geo_alerts import GeoHashEventsGenerator
    (control_plane / "jobs" / "geo_alerts_small.py").write_text(JOB_TEMPLATE.format(
        jobs=os.path.join(ROOT, "include", "jobs"), events=EVENTS, zones=ZONES, seed=SEED))
    run, tis = dag_test("geo_alerts_small")
    assert run.state == DagRunState.SUCCESS, {t: ti.state for t, ti in tis.items()}
    finish = xcom(run, "finish")
    assert finish["state"] == "FINISHED" and finish["records_in"] == EVENTS
    table = str(control_plane / "warehouse" / "geo-alerts")
    assert table in finish["sinks"]
    rows = DeltaTable(table).to_pyarrow_table().to_pylist()
    got = [tuple(r[c] for c in ("geohash", "first_ts", "first_total", "first_delta", "second_ts", "second_total",
                                "second_delta")) for r in rows]
    expected = expected_alerts(GeoHashEventsGenerator(zones=ZONES).geohashes)
    assert len(expected) > 10  # the threshold is met often enough for the check to mean something
    assert sorted(got) == sorted(expected)
