"""bookied's garbage collection at production scale, while the bookie takes adds (issue 57).

On a sandbox filled by ``bench_scale.py`` (its ZooKeeper holds ``--ledgers`` ledgers, 10^6),
the first bookied is given one 64 B entry for each of ``--on-bookie`` of those ledgers (10^5,
spread over the whole id space so that every leaf of the hierarchy holds some) and for
``--garbage`` ledgers without metadata, pipelined v2 ADDs over the wire.  Then one thread
adds to a live ledger (one whose metadata exists) one entry at a time, every
``--interval`` ms, timing each add from its request to its response, first for
``--idle`` seconds, then while forced GC passes (compaction off: ``PUT
/api/v1/bookie/gc`` with ``forceMajor``/``forceMinor`` false, the deleted-ledger
collection alone) run one after another for at least ``--busy`` seconds.  A pass's
end is seen by polling the bookie's GC status, and its ZooKeeper requests by asking
ZooKeeper (``mntr``) before and after; the idle windows make the same calls at the same
pace without the PUT, so that the only difference between the two is the passes
(the calls alone moved the p99 by up to half of idle on a 2-CPU host), and before
each idle window a half as long one makes no call at all, printed for reference; with
``--windows N``, idle and GC windows of a N-th of those alternate N times (on a
machine others load, its load swings between two long windows more than the GC moves
the p99).  Printed: the
adds' p50/p99/max idle and during the passes, each pass's time (the bookie's
``lastGcDurationMs``), its ZooKeeper requests (``mntr``'s zk_packets_received, the
sandbox's session pings included), the ledgers it removed, and the load average.

    python bench/bench_scale.py --dir /tmp/scale/gc --keep --ledgers 1000000 --only none
    python bench/bench_gc_scale.py --dir /tmp/scale/gc [--on-bookie 100000] [--rounds 2] [--windows 4]
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bookie import add_frames  # noqa: E402
from bench_gc import add_one_entry_each, bookied_pass, http  # noqa: E402
from common import load_note, pct, section  # noqa: E402

from bkctl.wire.codecs.framing import FrameDecoder  # noqa: E402

#: a forced pass that only collects the deleted ledgers
NO_COMPACTION = {"forceMajor": "false", "forceMinor": "false"}


class LiveAdds(threading.Thread):
    """One add at a time to ``ledger`` on the bookie at ``port``, every ``interval`` s:
    each add's latency, labelled by the phase it was sent in."""

    def __init__(self, port: int, ledger: int, interval: float, count: int = 200_000):
        super().__init__(daemon=True)
        self.port, self.ledger, self.interval = port, ledger, interval
        self.frames = add_frames(ledger, count, 64)
        self.phase = "idle"
        self.latencies: dict[str, list[float]] = {}
        self.failed = 0
        self.stop = threading.Event()

    def run(self) -> None:
        dec = FrameDecoder()
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for frame in self.frames:
                if self.stop.is_set():
                    return
                phase = self.phase
                t0 = time.perf_counter()
                s.sendall(frame)
                got = []
                while not got:
                    got = list(dec.feed(s.recv(65536)))
                took = time.perf_counter() - t0
                self.failed += int.from_bytes(got[0][4:8], "big", signed=True) != 0
                self.latencies.setdefault(phase, []).append(took)
                time.sleep(self.interval)


def ms(xs: list[float], q: float) -> str:
    return f"{pct(xs, q) * 1000:7.2f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True, help="a sandbox filled by bench_scale.py --keep")
    p.add_argument("--ledgers", type=int, default=1_000_000, help="the ledgers the sandbox's metadata holds (1..N)")
    p.add_argument("--on-bookie", type=int, default=100_000, help="of them, given an entry on the first bookie")
    p.add_argument("--garbage", type=int, default=2000, help="ledgers without metadata given an entry too")
    p.add_argument("--idle", type=float, default=15.0, help="seconds of adds before the passes")
    p.add_argument("--busy", type=float, default=15.0, help="at least this many seconds of passes")
    p.add_argument("--interval", type=float, default=5.0, help="ms between two live adds")
    p.add_argument(
        "--windows",
        type=int,
        default=1,
        help="idle and GC windows alternated this many times a round (each --idle/N, --busy/N s), "
        "so that both see the same background load on a shared machine",
    )
    p.add_argument("--rounds", type=int, default=1)
    args = p.parse_args(argv)

    doc = json.loads((Path(args.dir) / "sandbox.json").read_text())
    bookie = doc["bookies"][0]
    port, http_port, zk_port = bookie["port"], bookie["http_port"], doc["zookeeper"]["port"]
    print(
        f"bench_gc_scale: {args.ledgers:,} ledgers in metadata, {args.on_bookie:,} on {bookie['id']}; {load_note()}",
        flush=True,
    )
    step = max(1, args.ledgers // args.on_bookie)
    marker = Path(args.dir) / "gc_filled.json"
    want = {"on_bookie": args.on_bookie, "step": step}
    if not (marker.exists() and json.loads(marker.read_text()) == want):
        section(f"one entry each for {args.on_bookie:,} ledgers on {bookie['id']}")
        t0 = time.monotonic()
        failed = add_one_entry_each(port, range(1, 1 + step * args.on_bookie, step))
        print(f"  written in {time.monotonic() - t0:.0f}s, {failed} failed; {load_note()}", flush=True)
        if failed:
            return 1
        marker.write_text(json.dumps(want))

    for rnd in range(args.rounds):
        live = args.ledgers - 2 * rnd  # has metadata and is not among those on the bookie (1 + k * step)
        section(f"round {rnd + 1} of {args.rounds}")
        garbage = range(
            args.ledgers + 1 + rnd * 10 * args.garbage, args.ledgers + 1 + (rnd + 1) * 10 * args.garbage, 10
        )
        if add_one_entry_each(port, garbage):
            print("  the garbage ledgers' adds failed", flush=True)
            return 1
        adds = LiveAdds(port, live, args.interval / 1000)
        adds.start()
        passes = []
        for _window in range(args.windows):  # idle, passes, idle, passes...: the same background load
            adds.phase = "quiet"  # no call at all: what the status calls cost, for reference
            time.sleep(args.idle / args.windows / 2)
            quiet_load = load_note()
            adds.phase = "idle"
            t_idle = time.monotonic()
            while time.monotonic() - t_idle < args.idle / args.windows:
                http(http_port, "GET", "/api/v1/bookie/gc")  # what a pass's loop below asks, without the PUT
                bookied_pass(http_port, "127.0.0.1", zk_port, None, poll=0.2, force=False)
            idle_load = load_note()
            adds.phase = "gc"
            t_busy, before = time.monotonic(), len(passes)
            while time.monotonic() - t_busy < args.busy / args.windows or len(passes) == before:
                removed = http(http_port, "GET", "/api/v1/bookie/gc")["ledgersRemoved"]
                status, wall, zk = bookied_pass(http_port, "127.0.0.1", zk_port, NO_COMPACTION, poll=0.2)
                passes.append((status["lastGcDurationMs"], wall, zk, status["ledgersRemoved"] - removed))
            busy_load = load_note()
        adds.phase = "after"
        time.sleep(2)
        adds.stop.set()
        adds.join()
        for i, (dur, wall, zk, removed) in enumerate(passes):
            print(
                f"  pass {i + 1}: {dur / 1000:6.2f} s (bookie), {wall:6.2f} s (wall), {zk:,} ZK requests, "
                f"{removed:,} ledgers removed",
                flush=True,
            )
        idle, busy = adds.latencies.get("idle", []), adds.latencies.get("gc", [])
        quiet = adds.latencies.get("quiet", [])
        print(
            f"  live adds, no calls  p50 {ms(quiet, 0.5)} ms  p99 {ms(quiet, 0.99)} ms  max {ms(quiet, 1)} ms  "
            f"({len(quiet)} adds)  [{quiet_load}]",
            flush=True,
        )
        print(
            f"  live adds idle       p50 {ms(idle, 0.5)} ms  p99 {ms(idle, 0.99)} ms  max {ms(idle, 1)} ms  "
            f"({len(idle)} adds)  [{idle_load}]",
            flush=True,
        )
        print(
            f"  live adds during GC  p50 {ms(busy, 0.5)} ms  p99 {ms(busy, 0.99)} ms  max {ms(busy, 1)} ms  "
            f"({len(busy)} adds)  [{busy_load}]",
            flush=True,
        )
        print(
            f"  p99 during GC / idle: {pct(busy, 0.99) / pct(idle, 0.99):.2f}x "
            f"(/ no calls: {pct(busy, 0.99) / pct(quiet, 0.99):.2f}x); {adds.failed} adds failed",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
