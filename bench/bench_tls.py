#!/usr/bin/env python3
"""TLS against plain text, same run: adds/s and reads/s through wire.client (target: TLS costs <= 25%).

Two throw-away sandboxes (a real ZooKeeper and 3 bookieds each), one plain, one
TLS-only (``sandbox up --tls``), are started in temporary directories, measured
one after the other with the same workload (pipelined 100 B adds, E=3 Qw=2 Qa=2,
then reading them back), and stopped.  Prints figures with the load, asserts
nothing.

    .venv/bin/python bench/bench_tls.py [--entries N] [--size B] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import load_note  # noqa: E402

from bkctl.wire.client.blocking import BlockingBookKeeper  # noqa: E402


def measure(bk: BlockingBookKeeper, n: int, size: int) -> tuple[float, float]:
    lh = bk.create(3, 2, 2, max_inflight=1000)
    started = time.perf_counter()
    lh.add_many(b"x" * size for _ in range(n))
    adds = n / (time.perf_counter() - started)
    lh.close()
    rh = bk.open(lh.ledger_id)
    started = time.perf_counter()
    count = sum(len(entries) for entries in rh.read_range(0, rh.last_entry_id, batch=1000))
    reads = count / (time.perf_counter() - started)
    return adds, reads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2, help="alternating plain/TLS rounds")
    args = parser.parse_args()
    from bkctl.sandbox.cluster import sandbox_down, sandbox_up
    from bkctl.wire.tls import TLSFiles

    dirs = {name: tempfile.mkdtemp(prefix=f"bkctl-bench-{name}-") for name in ("plain", "tls")}
    try:
        states = {name: sandbox_up(d, bookies=3, tls=(name == "tls")) for name, d in dirs.items()}
        clients = {
            "plain": BlockingBookKeeper(states["plain"]["uri"], timeout=120),
            "tls": BlockingBookKeeper(states["tls"]["uri"], timeout=120, tls=TLSFiles(ca=states["tls"]["tls"]["ca"])),
        }
        results: dict[str, list[tuple[float, float]]] = {"plain": [], "tls": []}
        try:
            for bk in clients.values():
                measure(bk, 2000, args.size)  # connect and warm up
            for r in range(args.rounds):
                for name in ("plain", "tls") if r % 2 == 0 else ("tls", "plain"):
                    adds, reads = measure(clients[name], args.entries, args.size)
                    results[name].append((adds, reads))
                    print(
                        f"  round {r + 1} {name:5s}: {adds:9,.0f} adds/s  {reads:9,.0f} reads/s   ({load_note()})",
                        flush=True,
                    )
        finally:
            for bk in clients.values():
                bk.close()
        best = {name: (max(a for a, _ in rs), max(b for _, b in rs)) for name, rs in results.items()}
        print(f"\n{args.entries} x {args.size} B, E/Qw/Qa 3/2/2, best of {args.rounds}:")
        for i, what in enumerate(("adds/s", "reads/s")):
            plain, tls = best["plain"][i], best["tls"][i]
            print(
                f"  {what:8s} plain {plain:9,.0f}   TLS {tls:9,.0f}   TLS costs {100 * (1 - tls / plain):5.1f}% "
                f"(target <= 25%)"
            )
    finally:
        for d in dirs.values():
            sandbox_down(d, purge=True)


if __name__ == "__main__":
    main()
