#!/usr/bin/env python3
"""CPU of a bookied start: from exec until registered, and until it has exited on SIGTERM.

The test suite starts some 480 bookieds on 2 cores; what each costs before it is
of any use (Python's imports, the configuration, the cookie, ZooKeeper) is
CPU the suite pays every time.  A real ZooKeeper is started in a temporary
directory, then ``--bookies`` bookieds one at a time, each with fresh
directories and the configuration the integration tests give them
(tests/support/bookieproc.py): each is waited for until registered writable,
its user + system CPU read from /proc at once, then it is stopped with SIGTERM
and its CPU in all read from its rusage.  Prints the medians (and the spread)
beside the load average; asserts nothing.

    .venv/bin/python bench/bench_bookie_start.py [--bookies 15] [--http] [--autorecovery]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from common import cpu_seconds, load_note, pct  # noqa: E402

from bkctl.sandbox.zookeeper import ZooKeeperServer, free_port  # noqa: E402
from bkctl.wire import fastpath  # noqa: E402
from bkctl.wire.metadata.zk import ZKMetadataStore  # noqa: E402
from tests.support.bookieproc import BookieProcess, wait_registered  # noqa: E402


def one_start(base: Path, uri: str, http: bool, autorecovery: bool) -> tuple[float, float, float]:
    """(CPU-s until registered, CPU-s until exited, wall seconds until registered) of one bookied."""
    bookie = BookieProcess(base, uri)
    if http:
        bookie.serve_http()
    if autorecovery:
        bookie.settings["autoRecoveryDaemonEnabled"] = "true"
    started = time.monotonic()
    bookie.launch()
    try:
        wait_registered(uri, [bookie.bookie_id], timeout=60, procs=[bookie])
        wall = time.monotonic() - started
        registered = cpu_seconds(bookie.proc.pid)
        os.kill(bookie.proc.pid, signal.SIGTERM)
        _, status, usage = os.wait4(bookie.proc.pid, 0)
        bookie.proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        bookie.kill()
    if bookie.proc.returncode != 0:
        raise RuntimeError(f"bookied exited with {bookie.proc.returncode}:\n{bookie.log_tail()}")
    return registered, usage.ru_utime + usage.ru_stime, wall


def spread(values: list[float], unit: float = 1000.0) -> str:
    return (
        f"median {statistics.median(values) * unit:.0f} ms  "
        f"(p10 {pct(values, 0.1) * unit:.0f}, p90 {pct(values, 0.9) * unit:.0f})"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bookies", type=int, default=15, help="bookieds started one after the other (default 15)")
    ap.add_argument("--http", action="store_true", help="with the HTTP admin server on (httpServerEnabled)")
    ap.add_argument("--autorecovery", action="store_true", help="with autorecovery inside (autoRecoveryDaemonEnabled)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop what we started on the way out
    base = Path(tempfile.mkdtemp(prefix="bkctl-bench-start-"))
    zk = ZooKeeperServer(base / "zk", port=free_port())
    zk.start()
    try:
        uri = f"zk+hierarchical://{zk.connect_string}/bench/ledgers"
        with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
            store.cluster.init()
        one_start(base / "warm-up", uri, args.http, args.autorecovery)  # the page cache, not bookied, warms up
        registered, exited, walls = [], [], []
        for i in range(args.bookies):
            cpu_registered, cpu_exited, wall = one_start(base / f"bookie-{i}", uri, args.http, args.autorecovery)
            registered.append(cpu_registered)
            exited.append(cpu_exited)
            walls.append(wall)
        features = ", ".join(f for f, on in (("HTTP admin", args.http), ("autorecovery", args.autorecovery)) if on)
        print(
            f"bookied start, {args.bookies} bookies one at a time ({features or 'the tests default config'}); "
            f"{load_note()}"
        )
        print(f"  CPU until registered    {spread(registered)}")
        print(f"  CPU until exited (TERM) {spread(exited)}")
        print(f"  wall until registered   {spread(walls)}")
    finally:
        zk.stop()
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"kept {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
