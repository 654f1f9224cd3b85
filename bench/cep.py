"""Events per second of the seeds' geo-alert pattern on Sluice's CEP operator, against its NFA
alone and a plain-Python floor, on the same events in the same run.

    .venv/bin/python bench/cep.py                         # 1,000 and 100,000 keys
    .venv/bin/python bench/cep.py --keys 1000 --events 50000

The events are the geo-alert job's *delta* events (geohash, ts, total, delta): per key one
event every second, a Gaussian total (mean 180, std 100, seed 42) and its delta to the key's
previous total. The pattern is the job's: ``first`` over 70% ``next`` ``second`` over 70%,
``within(Time.minutes(15))``.

- **sluice**: ``from_collection`` -> ``assign_timestamps_and_watermarks`` (monotonous; the
  assigner's two subtasks read the collection, each the records the rebalance would deal it)
  -> ``key_by(geohash)`` -> ``CEP.pattern(...)`` in event time (events wait until the watermark
  passes them, then each key's are matched at once, the NFA state per key in keyed state)
  -> ``select`` -> ``execute_and_collect``; Spark ``local[2]``, parallelism 2, one epoch ending
  in a checkpoint. Timed from building the job to having its alerts; the SparkSession is started
  (and warmed up by a small run) before the clock.
- **nfa**: the compiled pattern's ``NFA.step`` per event with each key's state in a dict, in one
  process: the matching alone, without the operator, state backend, time order or checkpoint.
- **floor**: a dict of each key's last event in one Python loop: what matching the same
  two-step pattern costs at least, in one process, without state, time or checkpoints.

Both must find the same alerts; the exit code is 1 when they do not.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

DELTA_LIMIT = 70
WITHIN_MS = 15 * 60_000


def over_limit(e) -> bool:
    a = abs(e[3]) * 100
    return a != 0 and e[2] != 0 and a // e[2] > DELTA_LIMIT


def make_events(keys: int, events: int, seed: int = 42) -> list:
    rng = random.Random(seed)
    names = [f"g{k:06d}" for k in range(keys)]
    last = [None] * keys
    out = []
    for i in range(events):
        k, ts = i % keys, (i // keys) * 1000
        total = max(0, round(rng.gauss(180, 100)))
        out.append((names[k], ts, total, 0 if last[k] is None else last[k] - total))
        last[k] = total
    return out


def floor(events) -> list:
    last, alerts = {}, []
    for e in events:
        previous = last.get(e[0])
        if previous is not None and e[1] - previous[1] < WITHIN_MS and over_limit(previous) and over_limit(e):
            alerts.append((e[0], previous[1], e[1]))
        last[e[0]] = e
    return alerts


def nfa_alone(events) -> list:
    from runtime.cep.nfa import compile_pattern
    nfa = compile_pattern(pattern())
    states, alerts = {}, []
    initial = nfa.initial_state()
    for e in events:
        state, matches, _ = nfa.step(states.get(e[0], initial), e, e[1])
        states[e[0]] = state
        alerts += [(m["first"][0][0], m["first"][0][1], m["second"][0][1]) for m in matches]
    return alerts


def pattern():
    from runtime.cep import Pattern
    from runtime.common import Time
    return Pattern.begin("first").where(over_limit).next("second").where(over_limit).within(Time.minutes(15))


def sluice(events, warehouse: str, parallelism: int = 2) -> list:
    from runtime.cep import CEP
    from runtime.common import Configuration, Types, WatermarkStrategy
    from runtime.datastream import StreamExecutionEnvironment

    conf = Configuration()
    conf.set_string("sluice.spark.master", f"local[{parallelism}]")
    conf.set_string("sluice.warehouse", warehouse)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    event_type = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()])
    stream = (env.from_collection(events, event_type)
              .assign_timestamps_and_watermarks(
                  WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[1])))
    alerts = (CEP.pattern(stream.key_by(lambda e: e[0], key_type=Types.STRING()), pattern())
              .select(lambda m: (m["first"][0][0], m["first"][0][1], m["second"][0][1]),
                      output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])))
    return list(alerts.execute_and_collect("bench cep"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--events", type=int, default=300_000, help="events per key count")
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args(argv)
    from runtime.execution.spark import get_spark_session
    get_spark_session(f"local[{args.parallelism}]", "sluice: bench cep")
    ok = True
    with tempfile.TemporaryDirectory(prefix="sluice-bench-cep-") as work:
        sluice(make_events(10, 200), os.path.join(work, "warmup"), args.parallelism)
        print(f"{'keys':>8} {'events':>9} {'alerts':>7} {'sluice ev/s':>12} {'nfa ev/s':>12} {'floor ev/s':>12} "
              f"{'floor/sluice':>12}")
        for keys in args.keys:
            events = make_events(keys, args.events)
            t = time.perf_counter()
            expected = floor(events)
            floor_s = time.perf_counter() - t
            t = time.perf_counter()
            alone = nfa_alone(events)
            nfa_s = time.perf_counter() - t
            t = time.perf_counter()
            got = sluice(events, os.path.join(work, f"k{keys}"), args.parallelism)
            sluice_s = time.perf_counter() - t
            same = sorted(got) == sorted(expected) == sorted(alone)
            ok &= same
            print(f"{keys:>8,} {len(events):>9,} {len(expected):>7,} {len(events) / sluice_s:>12,.0f} "
                  f"{len(events) / nfa_s:>12,.0f} {len(events) / floor_s:>12,.0f} {sluice_s / floor_s:>11,.0f}x"
                  + ("" if same else f"  MISMATCH: sluice found {len(got)} alerts, the NFA alone {len(alone)}"),
                  flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
