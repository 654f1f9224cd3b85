"""The seeds' CEP job (AlertsGeoHashRepSubJob): alerts when the number of GPRS events in a
geohash zone jumps by more than 70% twice in a row, within 15 minutes.

A deterministic GeoHashEventsGenerator emits, every PAUSE ms, one event per zone with a
Gaussian number of GPRS events; per zone a sliding count window of 2 (Java's ``countWindow(2, 1)``)
computes the delta to the zone's previous event, and the pattern ``first.next(second)``, both
over the threshold, ``within(Time.minutes(15))``, emits the alert pairs, printed and written
exactly once to a Delta table.

The keyed operators run at the run's parallelism (Flink's -p; the DAG's default is 2); the
generator is one subtask.

    sluice run include/jobs/geo_alerts.py -p 2 -- --events 2000 --zones 20 --output warehouse/geo-alerts
"""
import argparse
import os
import random

from runtime.cep import CEP, Pattern
from runtime.common import Row, Time, Types, WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment, WindowFunction
from runtime.datastream.connectors import DataGeneratorSource
from runtime.datastream.connectors.delta import DeltaSink
from runtime.datastream.window import CountEvictor, CountTrigger, GlobalWindows
from runtime.jobmaster import JobDeployment

# Its Airflow DAG ("geo_alerts"): manual runs over a bounded batch of generated events, so a
# run ends; the alerts are printed and written to a Delta table next to the checkpoints.
DEPLOYMENT = JobDeployment(schedule=None, args=("--events", "4000", "--zones", "20",
                                                "--output", "{warehouse}/geo-alerts"),
                           parallelism=2,
                           description="The seeds' CEP job: GeoHash zones whose GPRS events jump by >70% twice")

PAUSE = 1000                  # the seeds' parameters
NUMBER_OF_EVENTS_STD = 100
NUMBER_OF_EVENTS_MEAN = 180
NUMBER_OF_ZONES = 1
DELTA_LIMIT = 70

GEO_EVENT = Types.ROW_NAMED(["geohash", "ts", "total_gprs_events", "delta_gprs_events"],
                            [Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()])
ALERT = Types.ROW_NAMED(
    ["geohash", "first_ts", "first_total", "first_delta", "second_ts", "second_total", "second_delta"],
    [Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG(), Types.LONG(), Types.LONG(), Types.LONG()])

_BASE32 = "0123456789bcdefghjkmnpqrstuvwxyz"


def geohash(lat: float, lon: float, precision: int = 7) -> str:
    """The standard geohash of a point: bits alternate longitude / latitude halvings."""
    lat_range, lon_range, bits, chars, even = [-90.0, 90.0], [-180.0, 180.0], 0, [], True
    for i in range(precision * 5):
        rng, value = (lon_range, lon) if even else (lat_range, lat)
        mid = (rng[0] + rng[1]) / 2
        bit = value >= mid
        rng[0 if bit else 1] = mid
        bits = bits * 2 + bit
        even = not even
        if i % 5 == 4:
            chars.append(_BASE32[bits])
            bits = 0
    return "".join(chars)


class GeoHashEventsGenerator:
    """Event ``index``: round ``index // zones`` (every ``pause`` ms), zone ``index % zones``,
    with a Gaussian number of GPRS events; a function of (seed, index) alone, so a replayed
    epoch regenerates the same events."""

    def __init__(self, pause: int = PAUSE, std: int = NUMBER_OF_EVENTS_STD, mean: int = NUMBER_OF_EVENTS_MEAN,
                 zones: int = NUMBER_OF_ZONES, seed: int = 0):
        self.pause, self.std, self.mean, self.zones, self.seed = pause, std, mean, zones, seed
        # zones on a grid over Madrid, about 1.5 km apart: distinct geohashes of 7 characters
        self.geohashes = [geohash(40.30 + 0.014 * (z // 32), -3.85 + 0.018 * (z % 32)) for z in range(zones)]

    def __call__(self, index: int) -> Row:
        total = max(0, round(random.Random(self.seed * 1_000_003 + index).gauss(self.mean, self.std)))
        return Row(geohash=self.geohashes[index % self.zones], ts=(index // self.zones) * self.pause,
                   total_gprs_events=total, delta_gprs_events=0)


class Deltas(WindowFunction):
    """Over the last two events of a zone: the second with the delta to the first (the seeds'
    previous minus current); a zone's first event has delta 0."""

    def apply(self, key, window, inputs):
        events = list(inputs)
        if len(events) == 2:
            previous, current = events
            yield Row(geohash=key, ts=current.ts, total_gprs_events=current.total_gprs_events,
                      delta_gprs_events=previous.total_gprs_events - current.total_gprs_events)
        else:
            first = events[0]
            yield Row(geohash=key, ts=first.ts, total_gprs_events=first.total_gprs_events, delta_gprs_events=0)


def over_limit(event) -> bool:
    """The seeds' condition: |delta| * 100 / total (integer division) above DELTA_LIMIT."""
    a = abs(event.delta_gprs_events) * 100
    if a == 0 or event.total_gprs_events == 0:
        return False
    return abs(a // event.total_gprs_events) > DELTA_LIMIT


WARNING_PATTERN = (Pattern.begin("first").where(over_limit)
                   .next("second").where(over_limit)
                   .within(Time.minutes(15)))


def alert(match) -> Row:
    first, second = match["first"][0], match["second"][0]
    return Row(geohash=first.geohash, first_ts=first.ts, first_total=first.total_gprs_events,
               first_delta=first.delta_gprs_events, second_ts=second.ts, second_total=second.total_gprs_events,
               second_delta=second.delta_gprs_events)


def build(env, generator: GeoHashEventsGenerator, events: int, parallelism: int = None, output: str = None):
    """``parallelism``: of the keyed operators (None: the run's default parallelism)."""
    def at(stream):
        return stream.set_parallelism(parallelism) if parallelism else stream

    # One source subtask: each zone's events reach its count window in generation order.
    source = env.from_source(DataGeneratorSource(generator, count=events, type_info=GEO_EVENT),
                             WatermarkStrategy.no_watermarks(), "GeoHashEventsGenerator"
                             ).set_parallelism(1).uid("geohash-events")
    # The seeds' Java countWindow(2, 1): fire on every event with the last two, so a zone's first
    # event comes out alone (delta 0). PyFlink's count_window(2, 1) fires full windows only.
    deltas = at(source.key_by(lambda e: e.geohash, key_type=Types.STRING())
                .window(GlobalWindows.create()).trigger(CountTrigger.of(1)).evictor(CountEvictor.of(2))
                .apply(Deltas(), output_type=GEO_EVENT)).uid("deltas")
    # In processing time, as the seeds' job (its event time is commented out): a zone's deltas
    # are matched in the order its count window emits them.
    alerts = at(CEP.pattern(deltas.key_by(lambda e: e.geohash, key_type=Types.STRING()), WARNING_PATTERN)
                .in_processing_time()
                .select(alert, output_type=ALERT)).uid("geo-alerts")
    alerts.print("ALARM")
    if output:
        alerts.sink_to(DeltaSink.for_row_data(output)).uid("geo-alerts-sink")
    return alerts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pause", type=int, default=PAUSE, help="ms between two rounds of events")
    parser.add_argument("--std", type=int, default=NUMBER_OF_EVENTS_STD)
    parser.add_argument("--mean", type=int, default=NUMBER_OF_EVENTS_MEAN)
    parser.add_argument("--zones", type=int, default=NUMBER_OF_ZONES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--events", type=int, default=1000, help="events per run (bounded, so the run ends)")
    parser.add_argument("--parallelism", type=int,
                        help="of the keyed operators (default: the run's, sluice run -p)")
    parser.add_argument("--output", default=os.path.join(os.environ.get("SLUICE_WAREHOUSE", "warehouse"), "geo-alerts"),
                        help="Delta table of the alerts (exactly once)")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(60_000)      # and always at the end of the bounded input
    generator = GeoHashEventsGenerator(args.pause, args.std, args.mean, args.zones, args.seed)
    build(env, generator, args.events, args.parallelism, args.output)
    env.execute("AlertsGeoHashRepSubJob")


if __name__ == "__main__":
    main()
