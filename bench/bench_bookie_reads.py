"""Bookie CPU per entry read: a running cluster's bookieds, read over protocol v3 by the Python client.

The machine is shared, so the figure that counts is the bookies' CPU (utime +
stime from /proc, summed over the bookie processes) per entry read, not
entries/s. Write the ledgers once, restart the bookies (their entries are then
in the entry logs, not the write cache), then read:

    bkctl sandbox up --dir /tmp/sb --json          # note the uri and the bookie pids
    python bench/bench_bookie_reads.py --uri URI write --entries 60000
    bkctl sandbox down --dir /tmp/sb && bkctl sandbox up --dir /tmp/sb --json
    python bench/bench_bookie_reads.py --uri URI read --pids P1,P2,P3 LEDGER...
"""

from __future__ import annotations

import argparse
import os
import time

from common import cpu_seconds  # bench/ is on sys.path when run as a script

from bkctl.wire.client.blocking import BlockingBookKeeper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uri", required=True)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write an E3/Qw2/Qa2 and an E1/Qw1/Qa1 ledger of 100-byte entries")
    w.add_argument("--entries", type=int, default=60000)
    r = sub.add_parser("read", help="read the ledgers and print the bookies' CPU per entry")
    r.add_argument("--pids", required=True, help="bookied pids, comma-separated")
    r.add_argument("--rounds", type=int, default=2)
    r.add_argument("ledgers", type=int, nargs="+")
    args = ap.parse_args()
    with BlockingBookKeeper(args.uri) as bk:
        if args.cmd == "write":
            for ens, qw, qa in ((3, 2, 2), (1, 1, 1)):
                lh = bk.create(ens, qw, qa)
                lh.add_many(b"x" * 100 for _ in range(args.entries))
                lh.close()
                print(f"E{ens}/Qw{qw}/Qa{qa}: ledger {lh.ledger_id}")
            return
        pids = [int(p) for p in args.pids.split(",")]
        for lid in args.ledgers:
            for _ in range(args.rounds):
                rh = bk.open(lid)
                before = sum(cpu_seconds(p) for p in pids)
                t0 = time.perf_counter()
                n = sum(len(es) for es in rh.read_range(0, rh.last_entry_id, batch=1000))
                wall = time.perf_counter() - t0
                used = sum(cpu_seconds(p) for p in pids) - before
                print(
                    f"ledger {lid}: {n} entries in {wall:.2f}s "
                    f"({n / wall:,.0f}/s); bookies' CPU {used * 1e6 / n:.1f} us/entry; "
                    f"load {os.getloadavg()[0]:.2f}"
                )


if __name__ == "__main__":
    main()
