"""Ensemble choice time: 1,000 bookies in 50 racks (target: < 1 ms per ledger).

Times ``new_ensemble`` (E=3 Qw=2, and E=5 Qw=3) and ``replace_bookies`` of
the random, rack-aware and region-aware (5 regions x 10 racks) policies,
the rack lookups included.  Prints figures; asserts nothing.

    python bench/bench_placement.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import os
import random
import time

from bkctl.wire.client.placement import RackAwarePlacement, RandomPlacement, RegionAwarePlacement

BOOKIES, RACKS = 1000, 50


def bench(name: str, fn, seconds: float) -> None:
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for _ in range(50):
            fn()
        n += 50
    elapsed = time.perf_counter() - start
    print(f"{name:52s} {elapsed / n * 1e3:8.3f} ms per call   ({n / elapsed:>8,.0f} /s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    seconds = parser.parse_args().seconds
    bookies = [f"10.{i // 250}.{i % 250}.1:3181" for i in range(BOOKIES)]
    racks = {b: f"/region{i % 5}/rack{i % RACKS}" for i, b in enumerate(bookies)}
    readonly = bookies[:20]
    rng = random.Random(1)
    policies = [
        ("random", RandomPlacement(rng)),
        ("rack", RackAwarePlacement(racks, rng=rng)),
        ("region", RegionAwarePlacement(racks, rng=rng)),
    ]
    print(f"{BOOKIES} bookies in {RACKS} racks; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for name, p in policies:
        bench(
            f"{name}: new ensemble E=3 Qw=2", lambda p=p: p.new_ensemble(3, bookies, readonly, write_quorum=2), seconds
        )
        bench(
            f"{name}: new ensemble E=5 Qw=3", lambda p=p: p.new_ensemble(5, bookies, readonly, write_quorum=3), seconds
        )
        ens = p.new_ensemble(3, bookies, readonly, write_quorum=2)
        bench(
            f"{name}: replace one bookie of E=3 Qw=2",
            lambda p=p, ens=ens: p.replace_bookies(ens, [ens[0]], bookies, readonly, write_quorum=2),
            seconds,
        )


if __name__ == "__main__":
    main()
