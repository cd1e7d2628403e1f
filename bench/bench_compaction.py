"""A Pulsar-like churn against one real bookied: does compaction keep the disk near the live data?

N topics (``--topics``, 50) each add to their current ledger at a steady total rate
(``--rate`` adds/s), roll to a new ledger every M entries (``--roll``) and delete their
oldest ledger beyond K closed ones (``--retain``, Pulsar's retention; with ``--retain-long L``
every ``--long-every``-th topic keeps L instead, so entry logs hold long- and short-lived data side
by side, as on a real cluster), until ``--volume-mb``
have been written (the issue's full run is 2048; the default is a short run for a shared
machine). The bookie rolls its entry logs at ``--log-size-mb`` and runs GC every
``--gc-wait-ms``, minor compaction every ``--minor-s`` and major every ``--major-s`` with
Java's default thresholds and rate limit unless told otherwise (``--set KEY=VALUE``).

Printed, each with the load average beside it (nothing is asserted):

* disk usage over time against the live bytes (entry logs + index vs. what undeleted
  ledgers hold; target at steady state <= 1.5x live with the default thresholds; with
  ``--disk du`` the allocated bytes of the whole ledger directory, as ``du`` counts them), and where
  the dead bytes are, by why bookied keeps them (gc_details' keptBecause): in the log being
  written, waiting below a threshold for the next compaction, in logs above the thresholds;
  then the mean and peak disk/live and the mean of each part; and, after warm-up (from the
  moment every topic has deleted a ledger to the end of writing), the time-weighted mean and
  the peak of disk/live, and disk/live at the end of ``--settle`` without writes;
* compaction throughput: MiB moved per second of compaction;
* add latency p50/p99 while compaction is idle vs. running (target p99 running <= 1.5x idle
  with the default rate limit). ``--writers`` threads (16) share the topics, each sending its
  adds one at a time at its share of the rate, so adds overlap as a broker's do; each is timed.

``python bench/bench_compaction.py [--volume-mb 64] [--topics 50] [--rate 1000] ...``

``--java-peer DIR`` (a Java peer built by ../shared/java-peer, ``$PEER``) runs the same churn,
from the same Python client, against bookied and against one Java 4.17.2 bookie
(InterleavedLedgerStorage, or with ``--java-storage db`` DbLedgerStorage with bookied's
64 MiB write cache), each fresh and alone in its ledgers root of one ZooKeeper, with the
same compaction keys (logSizeLimit, gcWaitTime, the intervals, ``--set``; thresholds and rate
limits Java's defaults on both), alternated (ours, Java, ours, Java... ``--rounds``). Disk is the
entry logs and the index on both sides (bookied: ``*.bel`` + LMDB; Java: the ledger directory's
``current/``: ``*.log`` + ``*.idx``, or + RocksDB),
live what the undeleted ledgers hold, "while compacting" what each bookie's ``gc_details`` says
(``majorCompacting``/``minorCompacting``, polled every 0.1 s). For the Java bookie the
compactions are counted from its log (it has no metrics provider). Ends with a table of both
sides' runs and the load average of each.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench_bookie import start_bookie, start_cluster  # bench/ is on sys.path when run as a script
from common import load_note, pct_ms, section  # bench/ is on sys.path when run as a script

from bkctl.wire import fastpath


def get(http: int, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{http}{path}", timeout=10) as resp:
        return json.loads(resp.read())


def disk_bytes(ledgers: Path) -> int:
    current = ledgers / "current"
    logs = sum(p.stat().st_size for p in current.glob("*.bel"))
    return logs + index_bytes(ledgers)


def du_bytes(directory: Path) -> int:
    """The bytes allocated to the files under ``directory``, as ``du`` counts them (blocks, not
    sizes: a sparse or preallocated file counts what it holds on disk)."""
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:  # deleted meanwhile by GC
                pass
    return total


def index_bytes(ledgers: Path) -> int:
    return sum(p.stat().st_size for p in (ledgers / "current" / "index.lmdb").iterdir())


def java_disk_bytes(ledgers: Path, index_only: bool = False) -> int:
    """A Java bookie's ledger directory: its entry logs (``current/*.log``) and its index,
    whichever its storage keeps (InterleavedLedgerStorage: ``current/xx/yy/*.idx``;
    DbLedgerStorage: the RocksDB folders ``current/ledgers`` and ``current/locations``);
    ``index_only``: all but the entry logs."""
    total = 0
    for root, _dirs, files in os.walk(ledgers / "current"):
        for name in files:
            if index_only and name.endswith(".log"):
                continue
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:  # deleted meanwhile by GC
                pass
    return total


def bookied_compacting(http: int) -> tuple[str | None, dict]:
    status = get(http, "/api/v1/bookie/gc")
    return status.get("compacting"), status


def java_compacting(http: int) -> tuple[str | None, dict]:
    """Java's GarbageCollectionStatus (gc_details): its flags are set around compaction only."""
    status = get(http, "/api/v1/bookie/gc_details")[0]
    return ("major" if status.get("majorCompacting") else "minor" if status.get("minorCompacting") else None), status


class CompactionWatch(threading.Thread):
    """Polls the bookie's GC status: the intervals during which a compaction ran."""

    def __init__(self, http: int, poll: Callable[[int], tuple[str | None, dict]] = bookied_compacting):
        super().__init__(daemon=True)
        self.http = http
        self.poll = poll
        self.running_since: float | None = None
        self.intervals: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.last: dict = {}

    def run(self):
        while not self.stop.is_set():
            try:
                compacting, self.last = self.poll(self.http)
                self.last["compacting"] = compacting
            except (OSError, LookupError, ValueError):
                self.stop.wait(0.2)
                continue
            now = time.monotonic()
            if compacting and self.running_since is None:
                self.running_since = now
            elif not compacting and self.running_since is not None:
                self.intervals.append((self.running_since, now))
                self.running_since = None
            self.stop.wait(0.1)

    def compacting_at(self, t: float) -> bool:
        since = self.running_since
        return any(a <= t <= b for a, b in self.intervals) or (since is not None and t >= since)

    def seconds(self) -> float:
        return sum(b - a for a, b in self.intervals)


class LogWatch(threading.Thread):
    """Every 0.5 s the entry logs' sizes: how long each log stayed after it last grew
    (rolled, or a compaction's output written) until it was reclaimed."""

    def __init__(self, side: Side):
        super().__init__(daemon=True)
        self.side = side
        self.stop = threading.Event()
        self.seen: dict[int, tuple[float, int]] = {}  # log id -> (when it last grew, size)
        self.gone: dict[int, tuple[float, int]] = {}  # log id -> (seconds it stayed after it last grew, size)

    def run(self):
        while not self.stop.wait(0.5):
            now = time.monotonic()
            sizes = self.side.log_sizes()
            for lid, size in sizes.items():
                grew, last = self.seen.get(lid, (now, -1))
                self.seen[lid] = (now if size != last else grew, size)
            for lid, (grew, size) in list(self.seen.items()):
                if lid not in sizes:
                    self.gone[lid] = (now - grew, size)
                    del self.seen[lid]

    def summary(self) -> str:
        if not self.gone:
            return "entry logs reclaimed: none"
        waits = sorted(w for w, _ in self.gone.values())
        mib_s = sum(w * size for w, size in self.gone.values()) / 2**20
        return (
            f"entry logs reclaimed: {len(waits)}, each stayed {sum(waits) / len(waits):.1f} s on average "
            f"(median {waits[len(waits) // 2]:.1f} s, max {waits[-1]:.1f} s) after it last grew; "
            f"{mib_s:,.0f} MiB*s held by reclaimed logs after they last grew"
        )


class Churn:
    """The topics' shared tallies; each writer thread owns the topics ``i`` with ``i % writers == w``."""

    def __init__(self, args, bk):
        self.args, self.bk = args, bk
        self.lock = threading.Lock()
        self.written = self.live_bytes = self.sent = 0
        self.samples: list[tuple[float, float]] = []  # (time, latency)
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.deleted_by: set[int] = set()  # the topics that have deleted a ledger
        self.warm_at: float | None = None  # time.monotonic() when every topic had

    def retain(self, topic: int) -> int:
        """The closed ledgers ``topic`` keeps: ``--retain-long`` for every ``--long-every``-th topic."""
        args = self.args
        if args.retain_long is not None and args.long_every > 0 and topic % args.long_every == 0:
            return args.retain_long
        return args.retain

    def writer(self, w: int, writers: int, start: float) -> None:
        """Adds to its topics at rate/writers, rolling and deleting as Pulsar's retention does."""
        args, bk = self.args, self.bk
        payload = os.urandom(args.entry_size)
        mine = list(range(w, args.topics, writers))
        closed = {i: collections.deque() for i in mine}  # each topic's closed ledgers (id, entries), oldest first
        counts = dict.fromkeys(mine, 0)
        n = 0
        target = args.volume_mb * 1024 * 1024
        try:
            current = {i: bk.create(1, 1, 1, password=b"bench") for i in mine}
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
                    while len(closed[i]) > self.retain(i):
                        old, entries = closed[i].popleft()
                        bk.delete(old)
                        freed += entries * args.entry_size
                with self.lock:
                    self.samples.append((t0, lat))
                    self.sent += 1
                    self.live_bytes -= freed
                    if freed and i not in self.deleted_by:
                        self.deleted_by.add(i)
                        if len(self.deleted_by) == args.topics:
                            self.warm_at = time.monotonic()
        except BaseException as exc:  # reported by churn(), which stops the others
            self.errors.append(exc)
            self.stop.set()


@dataclass
class Side:
    """One bookie under the churn: where to reach it and how to read its disk and its GC."""

    name: str
    uri: str
    http: int
    ledgers: Path
    java: bool = False
    log_file: Path | None = None  # the Java bookie's log (its compactions are counted from it)...
    log_offset: int = 0  # ...from here on
    du: bool = False  # disk as du of the whole ledger directory

    def disk(self) -> int:
        if self.du:
            return du_bytes(self.ledgers)
        return java_disk_bytes(self.ledgers) if self.java else disk_bytes(self.ledgers)

    def index(self) -> int:
        """Of that, what is not entry logs (bookied's LMDB; Java's index files or RocksDB)."""
        try:
            return java_disk_bytes(self.ledgers, index_only=True) if self.java else index_bytes(self.ledgers)
        except FileNotFoundError:
            return 0

    def log_sizes(self) -> dict[int, int]:
        """The entry logs there now and their sizes (both name them by their id in hex)."""
        sizes = {}
        for p in (self.ledgers / "current").glob("*.log" if self.java else "*.bel"):
            try:
                size = p.stat().st_size
                if size > 0:  # Java creates the next log ahead, empty
                    sizes[int(p.stem, 16)] = size
            except (ValueError, FileNotFoundError):
                pass
        return sizes

    def poll(self, http: int):
        return java_compacting(http) if self.java else bookied_compacting(http)

    def dead(self) -> dict[str, int] | None:
        return None if self.java else dead_breakdown(self.http)


def churn(args, side: Side) -> dict:
    """The churn against one bookie; prints its samples and figures, returns the figures."""
    from bkctl.wire.client.blocking import BlockingBookKeeper

    bk = BlockingBookKeeper(side.uri, add_timeout=30.0, timeout=60)
    watch = CompactionWatch(side.http, side.poll)
    watch.start()
    logs = LogWatch(side)
    logs.start()
    state = Churn(args, bk)
    writing = float("nan")
    writers = max(1, min(args.writers, args.topics))
    start = time.monotonic()
    threads = [threading.Thread(target=state.writer, args=(w, writers, start), daemon=True) for w in range(writers)]
    print(
        f"{'t s':>6} {'written MiB':>11} {'live MiB':>9} {'disk MiB':>9} {'disk/live':>9} {'logs':>5} "
        f"{'moved MiB':>9} {'compacting':>10} " + " ".join(f"{'dead ' + k:>8}" for k in DEAD_KINDS) + "  load"
    )
    totals: dict = {}
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(args.every / len(threads))
            report(start, state.written, state.live_bytes, side, watch, totals)
        writing = time.monotonic() - start
        totals["writing_end"] = writing
        totals["warm_at"] = state.warm_at - start if state.warm_at is not None else None
        if state.errors:
            raise state.errors[0]
        settle = time.monotonic() + args.settle
        print(f"(writing done; watching {args.settle:g} s more for the last compactions)")
        while time.monotonic() < settle:
            time.sleep(min(args.every, max(0.0, settle - time.monotonic())))
            report(start, state.written, state.live_bytes, side, watch, totals)
    finally:
        state.stop.set()
        watch.stop.set()
        logs.stop.set()
        watch.join()
        logs.join()
        bk.close()
    sent, samples = state.sent, state.samples
    elapsed = time.monotonic() - start
    idle = [lat for t, lat in samples if not watch.compacting_at(t)]
    busy = [lat for t, lat in samples if watch.compacting_at(t)]
    secs = watch.seconds()
    print(
        f"adds: {sent:,} in {writing:.1f} s of writing ({sent / writing:,.0f}/s asked {args.rate:,}/s; "
        f"{elapsed:.0f} s with the watch after it); {load_note()}"
    )
    figures = (
        java_compactions(side.log_file, side.log_offset, secs) if side.java else bookied_compactions(watch.last, secs)
    )
    print(f"{figures}; {load_note()}")
    ratio = pct_ms(busy, 0.99) / pct_ms(idle, 0.99) if idle and busy else float("nan")
    figures = summary(totals)
    print(
        f"entry logs: the highest id seen is {totals.get('highest_log', 0)} (logs started, compaction's included; "
        f"each rolls at {args.log_size_mb} MiB); {logs.summary()}"
    )
    print(f"add latency idle:    p50 {pct_ms(idle, 0.5):.2f} ms  p99 {pct_ms(idle, 0.99):.2f} ms  ({len(idle):,} adds)")
    print(
        f"add latency running: p50 {pct_ms(busy, 0.5):.2f} ms  p99 {pct_ms(busy, 0.99):.2f} ms  ({len(busy):,} adds); "
        f"p99 running/idle {ratio:.2f} (target <= 1.5); {load_note()}",
        flush=True,
    )
    return {
        **figures,
        "adds_per_s": sent / writing,
        "p99_idle_ms": pct_ms(idle, 0.99),
        "p99_busy_ms": pct_ms(busy, 0.99),
        "busy_adds": len(busy),
        "compacting_s": secs,
        "load": os.getloadavg(),
    }


def bookied_compactions(status: dict, secs: float) -> str:
    moved = status.get("bytesMoved", 0) / 2**20
    return (
        f"compaction: {status.get('majorCompactionCounter', 0)} major, {status.get('minorCompactionCounter', 0)} "
        f"minor, {status.get('entriesMoved', 0):,} entries / {moved:.1f} MiB moved in {secs:.1f} s of compaction "
        f"({moved / secs if secs else float('nan'):.2f} MiB/s), "
        f"{status.get('reclaimedSpaceViaCompaction', 0) / 2**20:.1f} MiB reclaimed by compacting "
        f"{status.get('logsCompacted', '?')} log(s), "
        f"{status.get('reclaimedSpaceViaDeletes', 0) / 2**20:.1f} MiB by deleting {status.get('logsDeleted', '?')} "
        "log(s) whole (no live entry left)"
    )


_JAVA_BUCKETS = re.compile(r"Compaction: entry log usage buckets\[[^\]]*\] = \[([^\]]*)\], compacted \[([^\]]*)\]")


def java_compactions(log_file: Path | None, offset: int, secs: float) -> str:
    """The Java bookie's compactions from its gc_details counters and its log past ``offset`` (no metrics)."""
    text = ""
    if log_file is not None and log_file.exists():
        with open(log_file, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    major, minor = text.count("Enter major compaction"), text.count("Enter minor compaction")
    compacted = text.count("after compaction")  # "Removing entry log {} after compaction"
    deleted = text.count("as it has no active ledgers")  # "Deleting entryLogId {} as it has no active ledgers!"
    buckets = [0] * 10
    for m in _JAVA_BUCKETS.finditer(text):
        for i, n in enumerate(m.group(2).split(",")):
            buckets[i] += int(n)
    return (
        f"compaction (from its log: gc_details' counters stay 0 without a stats provider): {major} major, "
        f"{minor} minor in {secs:.1f} s of compaction; {compacted} log(s) removed after compaction "
        f"(by live ratio 0-10%..90-100%: {buckets}), {deleted} deleted whole (no live ledger left)"
    )


#: where the disk beyond the live bytes is, by why bookied keeps it (gc_details' keptBecause)
DEAD_KINDS = ("active", "waiting", "above", "other")


def dead_breakdown(http: int) -> dict[str, int]:
    """Dead bytes of the entry logs by why they stay: in the log being written (``active``),
    below a threshold and waiting for the next compaction, or with nothing live left and waiting
    for the next pass (``waiting``), in logs whose live ratio is not below the thresholds
    (``above``), anything else (``other``)."""
    out = dict.fromkeys(DEAD_KINDS, 0)
    try:
        logs = get(http, "/api/v1/bookie/gc_details")[0]["entryLogs"]
    except (OSError, LookupError, ValueError):
        return out
    for log in logs:
        dead = max(0, log["sizeBytes"] - log["liveBytes"])
        why = log.get("keptBecause") or ""
        kind = (
            "active"
            if log.get("active")
            else "waiting"
            if "takes it" in why or "deletes it" in why
            else "above"
            if why.startswith("live ratio")
            else "other"
        )
        out[kind] += dead
    return out


def report(start, written, live_bytes, side: Side, watch: CompactionWatch, totals: dict | None = None) -> None:
    disk = side.disk()
    index = side.index()
    ids = list(side.log_sizes())
    logs = len(ids)
    st = watch.last
    dead = side.dead()
    if totals is not None:
        totals.setdefault("samples", []).append((disk, live_bytes, dead))
        totals.setdefault("index", []).append(index)
        totals.setdefault("times", []).append(time.monotonic() - start)
        totals["highest_log"] = max([totals.get("highest_log", 0), *ids])
    parts = " ".join(f"{dead[k] / 2**20:8.1f}" if dead else f"{'-':>8}" for k in DEAD_KINDS)
    print(
        f"{time.monotonic() - start:6.0f} {written / 2**20:11.1f} {live_bytes / 2**20:9.1f} {disk / 2**20:9.1f} "
        f"{disk / max(live_bytes, 1):9.2f} {logs:5d} {st.get('bytesMoved', 0) / 2**20:9.1f} "
        f"{st.get('compacting') or '-':>10} {parts}  {load_note()}",
        flush=True,
    )


def summary(totals: dict) -> dict:
    """Mean disk/live, and where the extra disk was on average (MiB, and share of disk - live)."""
    samples = [s for s in totals.get("samples", []) if s[1] > 0]
    if not samples:
        return {
            "mean": float("nan"),
            "peak": float("nan"),
            "mean_after_30s": float("nan"),
            "p99_after_30s": float("nan"),
            "index_mib": float("nan"),
            **warm_figures(totals),
        }
    mean_ratio = sum(d / lv for d, lv, _ in samples) / len(samples)
    # without the start, when a bookie with a write cache has flushed nothing yet
    later = [d / lv for (d, lv, _), t in zip(totals["samples"], totals["times"]) if lv > 0 and t >= 30]
    peak = max(d / lv for d, lv, _ in samples)
    extra = sum(d - lv for d, lv, _ in samples) / len(samples)
    after = mean(later)
    later_ratios = sorted(later)
    p99 = later_ratios[min(len(later_ratios) - 1, int(len(later_ratios) * 0.99))] if later_ratios else float("nan")
    index = mean(ix for (_d, lv, _dd), ix in zip(totals["samples"], totals["index"]) if lv > 0)
    line = (
        f"disk/live: mean {mean_ratio:.2f} ({after:.2f} from 30 s on, p99 {p99:.2f}), peak {peak:.2f}; disk "
        f"beyond live on average {extra / 2**20:.1f} MiB, the index {index / 2**20:.1f} MiB"
    )
    if all(dd is not None for _, _, dd in samples):
        parts = {k: sum(dd[k] for _, _, dd in samples) / len(samples) for k in DEAD_KINDS}
        rest = extra - sum(parts.values()) - index
        line += (
            ": dead data "
            + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in parts.items())
            + f", not yet counted (ledgers deleted but not yet collected, less what the write cache holds) "
            f"{rest / 2**20:.1f} MiB"
        )
    print(f"{line}; {load_note()}")
    warm = warm_figures(totals)
    print(
        f"after warm-up (every topic had deleted a ledger at {warm['warm_at_s']:.0f} s, writing ended at "
        f"{totals.get('writing_end', float('nan')):.0f} s): disk/live time-weighted mean {warm['warm_mean']:.3f}, "
        f"peak {warm['warm_peak']:.3f}; at the end, without writes: {warm['end_ratio']:.3f}; {load_note()}"
    )
    return {
        "mean": mean_ratio,
        "peak": peak,
        "mean_after_30s": after,
        "p99_after_30s": p99,
        "index_mib": index / 2**20,
        **warm,
    }


def warm_figures(totals: dict) -> dict:
    """disk/live after warm-up, the judge's way: from the moment every topic has deleted a ledger
    to the end of writing, each sample weighted by the time until the next (time-weighted mean),
    the peak over the same window, and the last sample (after ``--settle`` without writes)."""
    nan = float("nan")
    warm_at, end = totals.get("warm_at"), totals.get("writing_end")
    points = [(t, d / lv) for (d, lv, _), t in zip(totals.get("samples", []), totals.get("times", [])) if lv > 0]
    out = {"warm_at_s": nan if warm_at is None else warm_at, "warm_mean": nan, "warm_peak": nan, "end_ratio": nan}
    if points:
        out["end_ratio"] = points[-1][1]
    if warm_at is None or end is None:
        return out
    window = [(t, r) for t, r in points if warm_at <= t <= end]
    if not window:
        return out
    weighted = total = 0.0
    for (t, r), (t_next, _r) in zip(window, window[1:] + [(end, 0.0)]):
        weighted += r * max(0.0, t_next - t)
        total += max(0.0, t_next - t)
    out["warm_mean"] = weighted / total if total > 0 else window[0][1]
    out["warm_peak"] = max(r for _t, r in window)
    return out


def settings_of(args) -> tuple[dict, dict]:
    """The bk_server.conf keys of both sides: bookied's, and the Java bookie's (the same
    compaction keys; bookied's write cache has no Java InterleavedLedgerStorage counterpart)."""
    common = {
        "logSizeLimit": args.log_size_mb * 2**20,
        "gcWaitTime": args.gc_wait_ms,
        "minorCompactionInterval": args.minor_s,
        "majorCompactionInterval": args.major_s,
    }
    common.update(kv.split("=", 1) for kv in args.set)
    java = dict(common)
    if args.java_storage == "db":  # Java's storage with a write cache like bookied's, of the same size
        java = {
            "ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
            "dbStorage_writeCacheMaxSizeMb": 64,
            **common,
        }
    return {"dbStorage_writeCacheMaxSizeMb": 64, **common}, java


def run_bookied(args, base: Path, zk, root: str, settings: dict) -> dict:
    """One fresh bookied in its own ledgers root under the churn; stopped afterwards."""
    from bkctl.wire.metadata.zk import ZKMetadataStore

    uri = f"zk+hierarchical://{zk.connect_string}{root}"
    with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
        store.cluster.init()
    proc, port, http = start_bookie(base, uri, settings)
    try:
        wait_registered(uri, f"127.0.0.1:{port}")
        print(f"bookied pid {proc.pid} on 127.0.0.1:{port} (root {root}); {load_note()}", flush=True)
        return churn(args, Side("bookied", uri, http, base / "ledgers", du=args.disk == "du"))
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def wait_registered(uri: str, bookie_id: str, timeout: float = 60.0) -> None:
    """Until the bookie is registered writable (its port answers before it registers)."""
    from bkctl.wire.metadata.zk import ZKMetadataStore

    deadline = time.monotonic() + timeout
    with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
        while bookie_id not in store.registration.writable_bookies():
            if time.monotonic() > deadline:
                raise SystemExit(f"{bookie_id} did not register in {timeout:g} s")
            time.sleep(0.1)


def run_java(args, peer, zk, settings: dict, base: Path, root: str) -> dict:
    """One fresh Java bookie under the churn, in ``base`` on free ports of its own (the peer's
    template and JVM flags, but neither its fixed ports nor its ``run/``: other users of the
    same peer keep their bookies); stopped afterwards."""
    from bkctl.sandbox.zookeeper import free_port

    port = free_port()
    http = free_port()
    while http == port:
        http = free_port()
    peer.format_metadata(zk.connect_string, root, [f"127.0.0.1:{port}"])
    extra = "\n".join(f"{k}={v}" for k, v in settings.items())
    [bookie] = peer.start_bookies_in(base, [(port, http)], zk.connect_string, root, extra_conf=extra)
    try:
        print(
            f"Java bookie pid {bookie.pid} on 127.0.0.1:{port} (root {root}), extra conf {settings}; {load_note()}",
            flush=True,
        )
        return churn(
            args,
            Side(
                "java",
                f"zk+hierarchical://{zk.connect_string}{root}",
                http,
                bookie.directory / "ledgers",
                java=True,
                log_file=bookie.directory / "bookie.log",
                du=args.disk == "du",
            ),
        )
    finally:
        peer.stop_bookies_in([bookie])


def side_by_side(args) -> None:
    from java_peer import JavaPeer

    peer = JavaPeer(args.java_peer)
    ours, java = settings_of(args)
    java_name = "java-db" if args.java_storage == "db" else "java"
    results: list[tuple[int, str, dict]] = []
    with tempfile.TemporaryDirectory(prefix="bench-compaction-java-") as tmp:
        base = Path(tmp)
        zk, _uri = start_cluster(base)
        try:
            print(
                f"{args.topics} topics, {args.rate:,} adds/s of {args.entry_size} B, roll every {args.roll}, "
                f"retain {args.retain} ({args.retain_long} every {args.long_every}th topic), disk as "
                f"{args.disk}, {args.volume_mb} MiB per run; {args.rounds} rounds, ours then Java; "
                f"{load_note()}",
                flush=True,
            )
            for r in range(args.rounds):
                for side in ("bookied", "java"):
                    section(f"round {r + 1}: {side}")
                    got = (
                        run_bookied(args, base / f"bookie-{r + 1}", zk, f"/ledgers-{r + 1}", ours)
                        if side == "bookied"
                        else run_java(args, peer, zk, java, base / f"java-{r + 1}", f"/java-ledgers-{r + 1}")
                    )
                    results.append((r + 1, side if side == "bookied" else java_name, got))
        finally:
            zk.stop()
    section("side by side")
    print(
        f"{'round':>5} {'bookie':>7} {'adds/s':>7} {'disk/live mean':>14} {'(from 30 s)':>11} {'p99':>5} "
        f"{'peak':>5} {'index MiB':>9} {'add p99 idle':>12} "
        f"{'p99 compacting':>14} {'(adds)':>8} {'compacting s':>12} {'warm mean':>9} {'warm peak':>9} "
        f"{'end':>5}  load average at the end"
    )
    for r, side, got in results:
        print(
            f"{r:5d} {side:>7} {got['adds_per_s']:7.0f} {got['mean']:14.2f} {got['mean_after_30s']:11.2f} "
            f"{got['p99_after_30s']:5.2f} {got['peak']:5.2f} {got['index_mib']:9.1f} "
            f"{got['p99_idle_ms']:9.2f} ms {got['p99_busy_ms']:11.2f} ms {got['busy_adds']:8,} "
            f"{got['compacting_s']:12.1f} {got['warm_mean']:9.3f} {got['warm_peak']:9.3f} {got['end_ratio']:5.2f}  "
            f"{' '.join(f'{x:.2f}' for x in got['load'])}"
        )
    for side in ("bookied", java_name):
        runs = [got for _r, s, got in results if s == side]
        print(
            f"{side:>7} mean of {len(runs)} runs: disk/live mean {mean(g['mean'] for g in runs):.2f} "
            f"({mean(g['mean_after_30s'] for g in runs):.2f} from 30 s on, p99 "
            f"{mean(g['p99_after_30s'] for g in runs):.2f}), "
            f"peak {mean(g['peak'] for g in runs):.2f}; after warm-up mean {mean(g['warm_mean'] for g in runs):.3f}, "
            f"peak {mean(g['warm_peak'] for g in runs):.3f}; add p99 while compacting "
            f"{mean(g['p99_busy_ms'] for g in runs):.2f} ms, idle {mean(g['p99_idle_ms'] for g in runs):.2f} ms"
        )


def mean(values) -> float:
    values = [v for v in values if v == v]
    return sum(values) / len(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--rate", type=int, default=1000, help="total adds/s")
    parser.add_argument("--writers", type=int, default=16, help="threads adding concurrently (each owns topics)")
    parser.add_argument("--entry-size", type=int, default=1024)
    parser.add_argument("--roll", type=int, default=100, help="entries per ledger before a topic rolls")
    parser.add_argument("--retain", type=int, default=1, help="closed ledgers a topic keeps")
    parser.add_argument(
        "--retain-long",
        type=int,
        default=None,
        help="closed ledgers every --long-every-th topic keeps instead (mixed retention; default: --retain)",
    )
    parser.add_argument("--long-every", type=int, default=5, help="with --retain-long: which topics keep longer")
    parser.add_argument(
        "--disk",
        choices=("files", "du"),
        default="files",
        help="disk: the entry logs' and index files' sizes (files), or the allocated bytes of the whole "
        "ledger directory (du)",
    )
    parser.add_argument("--volume-mb", type=int, default=64, help="MiB written (the issue's full run: 2048)")
    parser.add_argument("--log-size-mb", type=int, default=4, help="logSizeLimit")
    parser.add_argument("--gc-wait-ms", type=int, default=2000)
    parser.add_argument("--minor-s", type=int, default=10)
    parser.add_argument("--major-s", type=int, default=30)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds watched after the writing")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="more bk_server.conf keys (both bookies with --java-peer)",
    )
    parser.add_argument(
        "--java-peer",
        metavar="DIR",
        help="a Java BookKeeper 4.17.2 peer built by ../shared/java-peer ($PEER): the same churn "
        "against it, alternated with bookied",
    )
    parser.add_argument("--rounds", type=int, default=2, help="with --java-peer: runs of each side (default 2)")
    parser.add_argument(
        "--java-storage",
        choices=("interleaved", "db"),
        default="interleaved",
        help="with --java-peer: the Java bookie's ledger storage: the peer's InterleavedLedgerStorage "
        "(no write cache; the default) or DbLedgerStorage with a 64 MiB write cache, as bookied's",
    )
    args = parser.parse_args()
    if args.java_peer:
        side_by_side(args)
        return
    settings, _java = settings_of(args)
    with tempfile.TemporaryDirectory(prefix="bench-compaction-") as tmp:
        base = Path(tmp)
        zk, uri = start_cluster(base)
        proc = None
        try:
            proc, port, http = start_bookie(base / "bookie", uri, settings)
            wait_registered(uri, f"127.0.0.1:{port}")
            print(
                f"bookied pid {proc.pid} on 127.0.0.1:{port}: {args.topics} topics, {args.rate:,} adds/s of "
                f"{args.entry_size} B, roll every {args.roll}, retain {args.retain} ({args.retain_long} every "
                f"{args.long_every}th topic), {args.volume_mb} MiB, disk as {args.disk}; "
                f"settings {settings}; {load_note()}",
                flush=True,
            )
            churn(args, Side("bookied", uri, http, base / "bookie" / "ledgers", du=args.disk == "du"))
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
            zk.stop()


if __name__ == "__main__":
    main()
