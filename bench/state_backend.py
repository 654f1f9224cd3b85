"""Keyed state backends, heap (hashmap) against RocksDB, on one ValueState[LONG].

For N keys (LONG keys 0..N-1, one key group range of 128): put (set the key, update a new
value), get (set the key, read), update (set the key, read, write back + 1: a keyed count),
a full snapshot (the rows a checkpoint writes), and the changes after updating 1% of the keys
(the rows an incremental checkpoint would write). Prints seconds, operations per second and
RocksDB / heap for each; one invocation, same process, same keys.

    .venv/bin/python bench/state_backend.py [--keys 1000000]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runtime.common import Types  # noqa: E402
from runtime.datastream.state import ValueStateDescriptor  # noqa: E402
from runtime.state.heap import HeapKeyedStateBackend  # noqa: E402
from runtime.state.key_groups import KeyGroupRange  # noqa: E402
from runtime.state.rocksdb import RocksDBKeyedStateBackend  # noqa: E402


def measure(backend, n: int) -> dict:
    state = backend.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    keys = range(n)
    out = {}
    set_key, update, value = backend.set_current_key, state.update, state.value

    t = time.perf_counter()
    for k in keys:
        set_key(k)
        update(k)
    out["put"] = time.perf_counter() - t

    t = time.perf_counter()
    for k in keys:
        set_key(k)
        value()
    out["get"] = time.perf_counter() - t

    t = time.perf_counter()
    for k in keys:
        set_key(k)
        update(value() + 1)
    out["update"] = time.perf_counter() - t

    t = time.perf_counter()
    rows = sum(1 for _ in backend.snapshot())
    out["snapshot"] = time.perf_counter() - t
    assert rows == n, rows

    backend.mark_checkpointed()
    for k in range(0, n, 100):
        set_key(k)
        update(value() + 1)
    t = time.perf_counter()
    changed = sum(1 for _ in backend.changes())
    out["changes (1%)"] = time.perf_counter() - t
    assert changed == len(range(0, n, 100)), changed
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=1_000_000)
    args = p.parse_args(argv)
    n = args.keys
    kgr = KeyGroupRange(0, 127)
    heap = measure(HeapKeyedStateBackend("bench", kgr, 128), n)
    directory = tempfile.mkdtemp(prefix="sluice-bench-rocksdb-")
    try:
        backend = RocksDBKeyedStateBackend("bench", kgr, 128, directory)
        rocks = measure(backend, n)
        backend.close()
        size = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"ValueState[LONG], {n:,} LONG keys, Python {sys.version.split()[0]}")
    print(f"{'':14} {'heap s':>8} {'heap op/s':>12} {'rocksdb s':>10} {'rocksdb op/s':>13} {'rocksdb/heap':>13}")
    for name in heap:
        ops = n if not name.startswith("changes") else len(range(0, n, 100))
        h, r = heap[name], rocks[name]
        print(f"{name:14} {h:8.2f} {ops / h:12,.0f} {r:10.2f} {ops / r:13,.0f} {r / h:12.1f}x")
    print(f"RocksDB store on disk after close: {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
