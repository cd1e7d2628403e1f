#!/usr/bin/env python3
"""``bkctl ledger fsck`` at scale: its rate in ledgers/s, the requests it made to ZooKeeper and
to the bookies, and its peak memory, beside the load average.

Prints figures, asserts nothing. Usage::

    .venv/bin/python bench/bench_fsck.py [--sizes 10000,100000] [--entries 2] [--size 64] [--dir DIR]

A throw-away sandbox (a real ZooKeeper and 3 bookieds) is filled, for each of ``--sizes`` in
turn, up to that many closed E3/Qw2/Qa2 ledgers of ``--entries`` entries of ``--size`` bytes
(the entries written to their bookies with pipelined adds, the metadata with ZooKeeper
transactions of 1,000), and ``bkctl --json ledger fsck`` runs over all of them as an operator
runs it (a process of its own; default sample: each segment's first and last entry and 8
more read from every replica).  Printed per size: the time and ledgers/s, the bookie
requests it made (its summary line: entry lists and reads), ZooKeeper's
``zk_packets_received`` over the run (``mntr``: the sandbox's bookies' session pings
included), fsck's peak resident memory (``ru_maxrss``: it should not grow with the
ledgers), and the load average.  Java's auditor replicas check is not measured here.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import commit_or_exit, in_sandbox, load_note, section  # noqa: E402

FIRST = 1_000_000  # above the ids the sandbox hands out


def zk_packets(hostport: str) -> int:
    host, port = hostport.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"mntr")
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    for line in out.decode().splitlines():
        if line.startswith("zk_packets_received"):
            return int(line.split()[1])
    return -1


def fill(uri: str, zk: str, bookies: list[str], lo: int, hi: int, entries: int, size: int) -> None:
    """Ledgers ``lo..hi-1`` (E3/Qw2/Qa2, closed), their entries on their bookies."""
    from kazoo.client import KazooClient
    from twisted.internet import defer

    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.metadata.ledger import LedgerMetadata, serialize_ledger_metadata, write_set_indices

    rnd = random.Random(lo)
    ensembles = {}
    for ledger_id in range(lo, hi):
        ens = list(bookies)
        rnd.shuffle(ens)
        ensembles[ledger_id] = ens
    payload = b"f" * size
    key = master_key(b"")

    async def write_entries(client) -> None:
        sent: list = []
        for ledger_id, ens in ensembles.items():
            dm = DigestManager(ledger_id, DigestType.CRC32C, b"")
            for e in range(entries):
                body = dm.package(e, e - 1, size * (e + 1), payload)
                for i in write_set_indices(e, 3, 2):
                    sent.append(client.pool.get(ens[i]).add(ledger_id, e, key, body))
            if len(sent) >= 900:  # a connection queues at most 1,000 adds
                await defer.gatherResults(sent, consumeErrors=True)
                sent = []
        await defer.gatherResults(sent, consumeErrors=True)

    t0 = time.monotonic()
    with BlockingBookKeeper(uri, timeout=3600) as bk:
        bk.run(lambda client: defer.ensureDeferred(write_entries(client)))
    zkc = KazooClient(hosts=zk, timeout=60)
    zkc.start()
    try:
        from bkctl.wire.metadata.layout import MetadataServiceURI

        root = MetadataServiceURI.parse(uri).root
        for parent in sorted({p for lid in range(lo, hi, 5000) for p in P.ledger_parent_paths(lid, root=root)}):
            zkc.ensure_path(parent)
        ids = list(ensembles)
        for start in range(0, len(ids), 1000):
            tx = zkc.transaction()
            for ledger_id in ids[start : start + 1000]:
                md = LedgerMetadata.new(ensembles[ledger_id], 2, 2, password=b"")
                tx.create(
                    P.ledger_path(ledger_id, root=root),
                    serialize_ledger_metadata(md.closed(entries - 1, size * entries)),
                )
            commit_or_exit(tx, f"ledger {ids[start]}")
    finally:
        zkc.stop()
        zkc.close()
    print(f"  filled ledgers {lo:,}..{hi - 1:,} in {time.monotonic() - t0:.0f}s; {load_note()}", flush=True)


def fsck(uri: str, zk: str, extra: list[str]) -> dict:
    env = dict(os.environ, BKCTL_METADATA_URI=uri, NO_COLOR="1")
    before_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    packets = zk_packets(zk)
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "bkctl", "--json", "ledger", "fsck", *extra], env=env, capture_output=True, text=True
    )
    took = time.monotonic() - t0
    packets = zk_packets(zk) - packets
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    m = re.search(r"checked (\d+) ledgers .*\((\d+) bookie requests\)", done.stderr)
    return {
        "code": done.returncode,
        "findings": len(done.stdout.splitlines()),
        "ledgers": int(m.group(1)) if m else -1,
        "bookie_requests": int(m.group(2)) if m else -1,
        "seconds": took,
        "zk_packets": packets,
        "maxrss_kib": rss if rss > before_rss else None,
        "stderr": done.stderr.strip().splitlines()[-2:],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000", help="ledger counts to fsck, ascending (filled up to each)")
    ap.add_argument("--entries", type=int, default=2)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--dir", default=None, help="keep the sandbox's files here (default: a temporary folder)")
    ap.add_argument("--fsck-args", default="", help="more arguments for bkctl ledger fsck (e.g. '--all')")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    def run(uri: str, _work) -> int:
        from bkctl.wire.metadata.layout import MetadataServiceURI
        from bkctl.wire.metadata.zk import ZKMetadataStore

        zk = MetadataServiceURI.parse(uri).hosts.split(",")[0]
        with ZKMetadataStore(uri) as store:
            bookies = store.registration.writable_bookies()
        section(f"bkctl ledger fsck over E3/Qw2/Qa2 ledgers of {args.entries} x {args.size} B, 3 bookieds")
        filled = 0
        for n in sizes:
            fill(uri, zk, bookies, FIRST + filled, FIRST + n, args.entries, args.size)
            filled = n
            r = fsck(uri, zk, args.fsck_args.split())
            rate = r["ledgers"] / r["seconds"] if r["seconds"] else float("nan")
            rss = "unchanged" if r["maxrss_kib"] is None else f"{r['maxrss_kib'] / 1024:.0f} MiB"
            print(
                f"  {r['ledgers']:,} ledgers in {r['seconds']:.1f}s: {rate:,.0f} ledgers/s; exit {r['code']}, "
                f"{r['findings']} findings; {r['bookie_requests']:,} bookie requests "
                f"({r['bookie_requests'] / max(1, r['ledgers']):.1f}/ledger), {r['zk_packets']:,} ZooKeeper packets "
                f"({r['zk_packets'] / max(1, r['ledgers']):.3f}/ledger); peak RSS {rss}; {load_note()}",
                flush=True,
            )
            if r["code"] != 0:
                print("   ", *r["stderr"], sep="\n    ")
        return 0

    return in_sandbox(args.dir, "bench-fsck-", run)


if __name__ == "__main__":
    sys.exit(main())
