"""Abuse of a live bookied: mutated frames by the million while a valid client writes and reads.

Starts a real ZooKeeper and one real bookied, ``--held`` connections held open meanwhile
(half of them with a frame announced at 5 MiB and never completed), a client that
sends adds and never reads their answers, one that floods long polls, a valid client
(tests/support/abuse.py's ValidClient: adds over v3 and v2, each read back and compared) and sends ``--frames``
frames mutated from the captured Java frames and the fuzz corpus over ``--connections``
connections (tests/support/abuse.py's hammer: a frame the bookie must take on a
connection that must stay open, now and then one it must close the connection on).
The bookie's resident memory is sampled every second.  Reports frames, connections,
closes as expected, failures (a connection closed early, or not closed after a fatal
frame), the valid client's operations and slowest round trip, RSS (start, peak, end),
the bookie's CPU seconds and how many 'closing connection' lines it logged; exit 1 on
any failure, a bookie that exited, or a client that was not served.

    nice python bench/bench_abuse.py [--frames 10000000] [--connections 8] [--seed 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from common import cpu_seconds, load_note  # noqa: E402

from bkctl.sandbox.zookeeper import ZooKeeperServer, free_port  # noqa: E402
from bkctl.wire import fastpath  # noqa: E402
from bkctl.wire.metadata.zk import ZKMetadataStore  # noqa: E402
from tests.support.abuse import QUIET_GC, Bystanders, ValidClient, hammer, rss_kb  # noqa: E402
from tests.support.bookieproc import BookieProcess  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=10_000_000)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--max-frames-per-connection", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--held",
        type=int,
        default=2000,
        help="connections held open meanwhile, half with a 5 MiB frame never completed (default 2000); "
        "with them a client sending adds it never reads the answers of, and a long-poll flood",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop what we started on the way out
    base = Path(tempfile.mkdtemp(prefix="bkctl-abuse-"))
    zk = ZooKeeperServer(base / "zk", port=free_port())
    bookie = None
    client = bystanders = None
    samples: list[int] = []
    stop = threading.Event()
    try:
        zk.start()
        uri = f"zk+hierarchical://{zk.connect_string}/ledgers"
        with ZKMetadataStore(uri, timeout=30, twins=fastpath.selected()) as store:
            store.cluster.init()
        bookie = BookieProcess(base / "bookie", uri, journalMaxSizeMB=64, **QUIET_GC).start()
        pid = bookie.proc.pid

        def sample() -> None:
            while not stop.wait(1.0):
                try:
                    samples.append(rss_kb(pid))
                except (OSError, ValueError):
                    return

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        client = ValidClient(bookie.port)
        client.start()
        time.sleep(1.0)
        bystanders = Bystanders(bookie.port, args.held, client.key, client.dm)
        start_rss = rss_kb(pid)
        cpu0 = cpu_seconds(pid)
        started = time.monotonic()

        def progress(n: int) -> None:
            if not args.json:
                print(
                    f"  {n:,} frames, RSS {rss_kb(pid) / 1024:.0f} MB, valid ops {client.ops}, "
                    f"{time.monotonic() - started:.0f} s",
                    flush=True,
                )

        result = hammer(
            bookie.port,
            args.frames,
            seed=args.seed,
            connections=args.connections,
            max_frames_per_connection=args.max_frames_per_connection,
            progress=progress,
        )
        elapsed = time.monotonic() - started
        ops_during = client.ops
        client.stop()
        bystanders.close()
        bystanders = None
        stop.set()
        alive = bookie.proc.poll() is None
        log = bookie.log_path.read_text(errors="replace")
        report = {
            "frames": result.frames,
            "seconds": round(elapsed, 1),
            "frames_per_second": round(result.frames / elapsed),
            "connections": result.connections,
            "closed_as_expected": result.closed_as_expected,
            "failures": result.failures[:20],
            "failure_count": len(result.failures),
            "answered_mb": round(result.answered_bytes / 2**20, 1),
            "valid_client_ops": ops_during,
            "valid_client_failures": client.failures,
            "valid_client_slowest_s": round(client.slowest, 3),
            "rss_mb": {
                "start": round(start_rss / 1024, 1),
                "peak": round(max(samples or [0]) / 1024, 1),
                "end": round((samples[-1] if samples else 0) / 1024, 1),
            },
            "bookie_cpu_s": round(cpu_seconds(pid) - cpu0, 1) if alive else None,
            "bookie_alive": alive,
            "held_connections": args.held,
            "closing_lines_logged": log.count("closing connection from"),
            "holding_back_lines_logged": log.count("not reading the connection from"),
            "load": load_note(),
        }
    finally:
        stop.set()
        if bystanders is not None:
            bystanders.close()
        if client is not None and client.is_alive():
            client.stop()
        if bookie is not None:
            bookie.kill()
        zk.stop()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for k, v in report.items():
            print(f"{k}: {v}")
    ok = (
        report["bookie_alive"]
        and not report["failure_count"]
        and not report["valid_client_failures"]
        and report["valid_client_ops"] > 0
    )
    if ok:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"kept {base}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
