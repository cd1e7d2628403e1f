#!/usr/bin/env python3
"""Day-2 operations benchmark: how fast ``bkctl bookie replace-id`` rewrites ledger metadata and
``bkctl bookie check`` / ``bookie inspect index`` walk a stopped bookie's entries.

Prints figures, asserts nothing.  Usage::

    .venv/bin/python bench/bench_day2.py [--ledgers 2000] [--entries 50000]

A throw-away sandbox (a real ZooKeeper and one bookied) is started: ``--ledgers``
metadata-only ledgers naming a made-up bookie are rewritten by replace-id with
``--parallel`` 1 and 8; then ``--entries`` 100-byte entries are written to the
bookie, which is stopped (SIGTERM: its store flushed), and check (digests verified
with the metadata) and inspect index walk them.  Everything shares the machine:
the load is printed with each figure.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import load_note  # noqa: E402

from bkctl.wire import fastpath

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bkctl(uri: str, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    env = dict(os.environ, BKCTL_METADATA_URI=uri, NO_COLOR="1", PYTHONPATH=REPO)
    t = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "bkctl", *args], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    elapsed = time.perf_counter() - t
    if res.returncode != 0:
        raise SystemExit(f"bkctl {' '.join(args)} failed: {res.stderr}")
    return elapsed, res


def bench_replace_id(uri: str, ledgers: int) -> None:
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from bkctl.wire.metadata.zk import ZKMetadataStore

    old, new, other = "10.1.1.1:3181", "bk-a.example.com:3181", "bk-b.example.com:3181"
    with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
        for _ in range(ledgers):
            store.ledgers.create(LedgerMetadata.new([old, "10.1.1.2:3181", "10.1.1.3:3181"], 2, 2))
    for parallel, (src, dst) in ((1, (old, new)), (8, (new, other))):
        elapsed, res = bkctl(uri, "--json", "bookie", "replace-id", src, dst, "--force", "--parallel", str(parallel))
        done = json.loads(res.stdout)["totals"]["updated"]
        print(
            f"  replace-id --parallel {parallel}: {done} ledgers in {elapsed:.2f}s = {done / elapsed:,.0f} ledgers/s"
            f" (process start and scan included; {load_note()})"
        )


def bench_check(uri: str, conf: str, entries: int) -> None:
    for label, args in (
        ("check (digests verified)", ("bookie", "check", "-c", conf)),
        ("check --offline", ("bookie", "check", "-c", conf, "--offline")),
        ("inspect index (per ledger)", ("bookie", "inspect", "index", "-c", conf)),
    ):
        elapsed, _ = bkctl(uri, "--json", *args)
        print(f"  {label}: {entries:,} entries in {elapsed:.2f}s = {entries / elapsed:,.0f} entries/s ({load_note()})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ledgers", type=int, default=2000)
    ap.add_argument("--entries", type=int, default=50_000)
    args = ap.parse_args()
    from bkctl.sandbox.cluster import sandbox_down, sandbox_up
    from bkctl.wire.client.blocking import BlockingBookKeeper

    with tempfile.TemporaryDirectory(prefix="bench-day2-") as tmp:
        state = sandbox_up(tmp, bookies=1)
        uri = state["uri"]
        try:
            print("replace-id")
            bench_replace_id(uri, args.ledgers)
            with BlockingBookKeeper(uri, timeout=600) as bk:
                lh = bk.create(1, 1, 1)
                lh.add_many(b"c" * 100 for _ in range(args.entries))
                lh.close()
            bookie = state["bookies"][0]
            os.kill(int(bookie["pid"]), signal.SIGTERM)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    os.kill(int(bookie["pid"]), 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            print("check / inspect")
            bench_check(uri, os.path.join(tmp, "bookie-0", "bk_server.conf"), args.entries)
        finally:
            sandbox_down(tmp)


if __name__ == "__main__":
    main()
