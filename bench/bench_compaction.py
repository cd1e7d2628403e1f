"""A Pulsar-like churn against one real bookied: does compaction keep the disk near the live data?

N topics (``--topics``, 50) each add to their current ledger at a steady total rate
(``--rate`` adds/s), roll to a new ledger every M entries (``--roll``) and delete their
oldest ledger beyond K closed ones (``--retain``, Pulsar's retention), until ``--volume-mb``
have been written (the issue's full run is 2048; the default is a short run for a shared
machine). The bookie rolls its entry logs at ``--log-size-mb`` and runs GC every
``--gc-wait-ms``, minor compaction every ``--minor-s`` and major every ``--major-s`` with
Java's default thresholds and rate limit unless told otherwise (``--set KEY=VALUE``).

Printed, each with the load average beside it (nothing is asserted):

* disk usage over time against the live bytes (entry logs + index vs. what undeleted
  ledgers hold; target at steady state <= 1.5x live with the default thresholds), and where
  the dead bytes are, by why bookied keeps them (gc_details' keptBecause): in the log being
  written, waiting below a threshold for the next compaction, in logs above the thresholds;
  then the mean and peak disk/live and the mean of each part;
* compaction throughput: MiB moved per second of compaction;
* add latency p50/p99 while compaction is idle vs. running (target p99 running <= 1.5x idle
  with the default rate limit). ``--writers`` threads (16) share the topics, each sending its
  adds one at a time at its share of the rate, so adds overlap as a broker's do; each is timed.

``python bench/bench_compaction.py [--volume-mb 64] [--topics 50] [--rate 1000] ...``
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from bench_bookie import start_bookie, start_cluster  # bench/ is on sys.path when run as a script
from common import load_note, pct_ms  # bench/ is on sys.path when run as a script


def get(http: int, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{http}{path}", timeout=10) as resp:
        return json.loads(resp.read())


def disk_bytes(ledgers: Path) -> int:
    current = ledgers / "current"
    logs = sum(p.stat().st_size for p in current.glob("*.bel"))
    return logs + sum(p.stat().st_size for p in (current / "index.lmdb").iterdir())


class CompactionWatch(threading.Thread):
    """Polls GET /api/v1/bookie/gc: the intervals during which a compaction ran."""

    def __init__(self, http: int):
        super().__init__(daemon=True)
        self.http = http
        self.running_since: float | None = None
        self.intervals: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.last: dict = {}

    def run(self):
        while not self.stop.is_set():
            try:
                self.last = get(self.http, "/api/v1/bookie/gc")
            except OSError:
                self.stop.wait(0.2)
                continue
            now = time.monotonic()
            if self.last.get("compacting") and self.running_since is None:
                self.running_since = now
            elif not self.last.get("compacting") and self.running_since is not None:
                self.intervals.append((self.running_since, now))
                self.running_since = None
            self.stop.wait(0.1)

    def compacting_at(self, t: float) -> bool:
        since = self.running_since
        return any(a <= t <= b for a, b in self.intervals) or (since is not None and t >= since)

    def seconds(self) -> float:
        return sum(b - a for a, b in self.intervals)


class Churn:
    """The topics' shared tallies; each writer thread owns the topics ``i`` with ``i % writers == w``."""

    def __init__(self, args, bk):
        self.args, self.bk = args, bk
        self.lock = threading.Lock()
        self.written = self.live_bytes = self.sent = 0
        self.samples: list[tuple[float, float]] = []  # (time, latency)
        self.errors: list[BaseException] = []
        self.stop = threading.Event()

    def writer(self, w: int, writers: int, start: float) -> None:
        """Adds to its topics at rate/writers, rolling and deleting as Pulsar's retention does."""
        args, bk = self.args, self.bk
        payload = os.urandom(args.entry_size)
        mine = list(range(w, args.topics, writers))
        closed = {i: collections.deque() for i in mine}  # each topic's closed ledgers (id, entries), oldest first
        current = {i: bk.create(1, 1, 1, password=b"bench") for i in mine}
        counts = dict.fromkeys(mine, 0)
        n = 0
        target = args.volume_mb * 1024 * 1024
        try:
            while not self.stop.is_set():
                with self.lock:
                    if self.written >= target:
                        return
                    self.written += args.entry_size
                    self.live_bytes += args.entry_size
                i = mine[n % len(mine)]
                due = start + n * writers / args.rate
                n += 1
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                t0 = time.monotonic()
                current[i].add(payload)
                lat = time.monotonic() - t0
                counts[i] += 1
                freed = 0
                if counts[i] >= args.roll:
                    current[i].close()
                    closed[i].append((current[i].ledger_id, counts[i]))
                    current[i] = bk.create(1, 1, 1, password=b"bench")
                    counts[i] = 0
                    while len(closed[i]) > args.retain:
                        old, entries = closed[i].popleft()
                        bk.delete(old)
                        freed += entries * args.entry_size
                with self.lock:
                    self.samples.append((t0, lat))
                    self.sent += 1
                    self.live_bytes -= freed
        except BaseException as exc:  # reported by churn(), which stops the others
            self.errors.append(exc)
            self.stop.set()


def churn(args, uri: str, http: int, ledgers_dir: Path) -> None:
    from bkctl.wire.client.blocking import BlockingBookKeeper

    bk = BlockingBookKeeper(uri, add_timeout=30.0, timeout=60)
    watch = CompactionWatch(http)
    watch.start()
    state = Churn(args, bk)
    writing = float("nan")
    writers = max(1, min(args.writers, args.topics))
    start = time.monotonic()
    threads = [threading.Thread(target=state.writer, args=(w, writers, start), daemon=True) for w in range(writers)]
    print(f"{'t s':>6} {'written MiB':>11} {'live MiB':>9} {'disk MiB':>9} {'disk/live':>9} {'logs':>5} "
          f"{'moved MiB':>9} {'compacting':>10} " + " ".join(f"{'dead ' + k:>8}" for k in DEAD_KINDS) + "  load")
    totals: dict = {}
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(args.every / len(threads))
            report(start, state.written, state.live_bytes, ledgers_dir, http, watch, totals)
        writing = time.monotonic() - start
        if state.errors:
            raise state.errors[0]
        settle = time.monotonic() + args.settle
        print(f"(writing done; watching {args.settle:g} s more for the last compactions)")
        while time.monotonic() < settle:
            time.sleep(min(args.every, max(0.0, settle - time.monotonic())))
            report(start, state.written, state.live_bytes, ledgers_dir, http, watch, totals)
    finally:
        state.stop.set()
        watch.stop.set()
        watch.join()
        bk.close()
    sent, samples = state.sent, state.samples
    elapsed = time.monotonic() - start
    idle = [lat for t, lat in samples if not watch.compacting_at(t)]
    busy = [lat for t, lat in samples if watch.compacting_at(t)]
    status = watch.last
    moved = status.get("bytesMoved", 0) / 2**20
    secs = watch.seconds()
    print(f"adds: {sent:,} in {writing:.1f} s of writing ({sent / writing:,.0f}/s asked {args.rate:,}/s; "
          f"{elapsed:.0f} s with the watch after it); {load_note()}")
    print(f"compaction: {status.get('majorCompactionCounter', 0)} major, {status.get('minorCompactionCounter', 0)} "
          f"minor, {status.get('entriesMoved', 0):,} entries / {moved:.1f} MiB moved in {secs:.1f} s of compaction "
          f"({moved / secs if secs else float('nan'):.2f} MiB/s), "
          f"{status.get('reclaimedSpaceViaCompaction', 0) / 2**20:.1f} MiB reclaimed by compaction, "
          f"{status.get('reclaimedSpaceViaDeletes', 0) / 2**20:.1f} MiB by deleting whole logs; {load_note()}")
    ratio = pct_ms(busy, .99) / pct_ms(idle, .99) if idle and busy else float("nan")
    summary(totals)
    print(f"add latency idle:    p50 {pct_ms(idle, .5):.2f} ms  p99 {pct_ms(idle, .99):.2f} ms  ({len(idle):,} adds)")
    print(f"add latency running: p50 {pct_ms(busy, .5):.2f} ms  p99 {pct_ms(busy, .99):.2f} ms  ({len(busy):,} adds); "
          f"p99 running/idle {ratio:.2f} (target <= 1.5); {load_note()}")


#: where the disk beyond the live bytes is, by why bookied keeps it (gc_details' keptBecause)
DEAD_KINDS = ("active", "waiting", "above", "other")


def dead_breakdown(http: int) -> dict[str, int]:
    """Dead bytes of the entry logs by why they stay: in the log being written (``active``),
    below a threshold and waiting for the next compaction (``waiting``), in logs whose live
    ratio is not below the thresholds (``above``), anything else (``other``)."""
    out = dict.fromkeys(DEAD_KINDS, 0)
    try:
        logs = get(http, "/api/v1/bookie/gc_details")[0]["entryLogs"]
    except (OSError, LookupError, ValueError):
        return out
    for log in logs:
        dead = max(0, log["sizeBytes"] - log["liveBytes"])
        why = log.get("keptBecause") or ""
        kind = ("active" if log.get("active") else "waiting" if "takes it" in why
                else "above" if why.startswith("live ratio") else "other")
        out[kind] += dead
    return out


def report(start, written, live_bytes, ledgers_dir: Path, http: int, watch: CompactionWatch,
           totals: dict | None = None) -> None:
    disk = disk_bytes(ledgers_dir)
    logs = len(list((ledgers_dir / "current").glob("*.bel")))
    st = watch.last
    dead = dead_breakdown(http)
    if totals is not None:
        totals.setdefault("samples", []).append((disk, live_bytes, dead))
    print(f"{time.monotonic() - start:6.0f} {written / 2**20:11.1f} {live_bytes / 2**20:9.1f} {disk / 2**20:9.1f} "
          f"{disk / max(live_bytes, 1):9.2f} {logs:5d} {st.get('bytesMoved', 0) / 2**20:9.1f} "
          f"{st.get('compacting') or '-':>10} " + " ".join(f"{dead[k] / 2**20:8.1f}" for k in DEAD_KINDS)
          + f"  {load_note()}", flush=True)


def summary(totals: dict) -> None:
    """Mean disk/live, and where the extra disk was on average (MiB, and share of disk - live)."""
    samples = [s for s in totals.get("samples", []) if s[1] > 0]
    if not samples:
        return
    mean_ratio = sum(d / lv for d, lv, _ in samples) / len(samples)
    peak = max(d / lv for d, lv, _ in samples)
    extra = sum(d - lv for d, lv, _ in samples) / len(samples)
    parts = {k: sum(dd[k] for _, _, dd in samples) / len(samples) for k in DEAD_KINDS}
    rest = extra - sum(parts.values())
    print(f"disk/live: mean {mean_ratio:.2f}, peak {peak:.2f}; disk beyond live on average {extra / 2**20:.1f} MiB: "
          + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in parts.items())
          + f", index and not-yet-counted {rest / 2**20:.1f} MiB; {load_note()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--rate", type=int, default=1000, help="total adds/s")
    parser.add_argument("--writers", type=int, default=16, help="threads adding concurrently (each owns topics)")
    parser.add_argument("--entry-size", type=int, default=1024)
    parser.add_argument("--roll", type=int, default=100, help="entries per ledger before a topic rolls")
    parser.add_argument("--retain", type=int, default=1, help="closed ledgers a topic keeps")
    parser.add_argument("--volume-mb", type=int, default=64, help="MiB written (the issue's full run: 2048)")
    parser.add_argument("--log-size-mb", type=int, default=4, help="logSizeLimit")
    parser.add_argument("--gc-wait-ms", type=int, default=2000)
    parser.add_argument("--minor-s", type=int, default=10)
    parser.add_argument("--major-s", type=int, default=30)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds watched after the writing")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more bk_server.conf keys")
    args = parser.parse_args()
    settings = {"logSizeLimit": args.log_size_mb * 2**20, "gcWaitTime": args.gc_wait_ms,
                "minorCompactionInterval": args.minor_s, "majorCompactionInterval": args.major_s,
                "dbStorage_writeCacheMaxSizeMb": 64}
    settings.update(kv.split("=", 1) for kv in args.set)

    with tempfile.TemporaryDirectory(prefix="bench-compaction-") as tmp:
        base = Path(tmp)
        zk, uri = start_cluster(base)
        proc = None
        try:
            proc, port, http = start_bookie(base / "bookie", uri, settings)
            print(f"bookied pid {proc.pid} on 127.0.0.1:{port}: {args.topics} topics, {args.rate:,} adds/s of "
                  f"{args.entry_size} B, roll every {args.roll}, retain {args.retain}, {args.volume_mb} MiB; "
                  f"settings {settings}; {load_note()}", flush=True)
            churn(args, uri, http, base / "bookie" / "ledgers")
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
            zk.stop()


if __name__ == "__main__":
    main()
