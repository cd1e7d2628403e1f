#!/usr/bin/env python3
"""Storage benchmarks for bookied: disk fsync latency, journal group commit, entry store, index choice,
the reactor's stalls beside a flush.

Prints figures, asserts nothing. Usage::

    .venv/bin/python bench/bench_storage.py [--dir DIR] [--quick] [--flush-stall]

``--dir`` picks the file system to measure (default: a temporary directory); ``--flush-stall``
runs only the last section.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import struct
import sys
import tempfile
import threading
import time

from bkctl.wire import fastpath

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import load_note, pct, section  # noqa: E402

from bkctl.bookied.errors import JournalFull  # noqa: E402
from bkctl.bookied.journal import EntryRecord, Journal  # noqa: E402
from bkctl.bookied.service import SWITCH_INTERVAL  # noqa: E402
from bkctl.bookied.storage import EntryStore  # noqa: E402
from bkctl.wire.process.runtime import settle_garbage_collector  # noqa: E402


# ------------------------------------------------------------------ disk
def bench_fsync(base: str, n: int) -> None:
    section(f"disk: write 130 B + fdatasync, {n} times")
    for mode in ("append", "preallocated"):
        path = os.path.join(base, f"fsync-{mode}.bin")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        if mode == "preallocated":
            os.posix_fallocate(fd, 0, 16 << 20)
            os.fsync(fd)
        rec = b"x" * 130
        lat = []
        for _ in range(n):
            os.write(fd, rec)
            t = time.perf_counter()
            os.fdatasync(fd)
            lat.append(time.perf_counter() - t)
        os.close(fd)
        os.unlink(path)
        print(
            f"  {mode:13s} p50 {pct(lat, 0.5) * 1e6:7.0f} us   p99 {pct(lat, 0.99) * 1e6:7.0f} us   "
            f"mean {sum(lat) / n * 1e6:6.0f} us"
        )


# ------------------------------------------------------------------ journal
def bench_journal_flat_out(base: str, n: int, wait_ms: float) -> None:
    d = tempfile.mkdtemp(dir=base)
    done = threading.Event()
    count = [0]

    def cb(err):
        count[0] += 1
        if count[0] == n:
            done.set()

    j = Journal(d, max_group_wait_ms=wait_ms, twins=fastpath.selected())
    j.start()
    data = os.urandom(100)
    t0 = time.perf_counter()
    c0 = time.process_time()
    full = 0
    for i in range(n):
        while True:
            try:
                j.append(EntryRecord(1, i, data), cb)
                break
            except JournalFull:
                full += 1
                time.sleep(0.0002)
    done.wait()
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    st = j.stats
    j.close()
    print(
        f"  wait {wait_ms:3.1f} ms: {n / dt:9,.0f} appends/s   {st.records / max(1, st.fsyncs):7.1f} "
        f"entries/fsync   {st.fsyncs} fsyncs   cpu {cpu / n * 1e6:4.1f} us/append   "
        f"JournalFull {full}"
    )
    shutil.rmtree(d)


def bench_journal_paced(base: str, rate: int, seconds: float, wait_ms: float) -> None:
    """Append at a fixed rate (like a loaded bookie) and report latency and CPU per append."""
    d = tempfile.mkdtemp(dir=base)
    lat: list[float] = []
    total = int(rate * seconds)
    done = threading.Event()

    def make_cb(t0):
        def cb(err):
            lat.append(time.perf_counter() - t0)
            if len(lat) == total:
                done.set()

        return cb

    j = Journal(d, max_group_wait_ms=wait_ms, twins=fastpath.selected())
    j.start()
    data = os.urandom(100)
    batch = 25  # appends per 1 ms tick at 25k/s
    per_tick = rate / 1000.0
    start = time.perf_counter()
    c0 = time.process_time()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * 1000 * per_tick) + batch)
        while sent < due:
            j.append(EntryRecord(1, sent, data), make_cb(time.perf_counter()))
            sent += 1
        time.sleep(0.001)
    done.wait(30)
    wall = time.perf_counter() - start
    cpu = time.process_time() - c0
    st = j.stats
    j.close()
    print(
        f"  {rate:,}/s paced, wait {wait_ms:3.1f} ms: latency p50 {pct(lat, 0.5) * 1e3:5.2f} ms "
        f"p99 {pct(lat, 0.99) * 1e3:5.2f} ms   {st.records / max(1, st.fsyncs):6.1f} entries/fsync   "
        f"{st.fsyncs / wall:6.0f} fsyncs/s   process cpu {cpu / wall * 100:4.0f}% of one core "
        f"({cpu / total * 1e6:.1f} us/append incl. the producer)"
    )
    shutil.rmtree(d)


# ------------------------------------------------------------------ entry store
def bench_entrystore(base: str, n: int) -> None:
    section(f"entry store: {n:,} entries of 100 B over 100 ledgers")
    d = tempfile.mkdtemp(dir=base)
    s = EntryStore(d, write_cache_max_bytes=1 << 30, twins=fastpath.selected())
    data = [os.urandom(100) for _ in range(256)]
    keys = [(1 + i % 100, i // 100) for i in range(n)]
    t = time.perf_counter()
    for i, (l, e) in enumerate(keys):
        s.put_entry(l, e, data[i & 255])
    dt = time.perf_counter() - t
    print(f"  put_entry (write cache)   {n / dt:12,.0f} /s")
    sample = random.Random(1).sample(keys, min(n, 100_000))
    t = time.perf_counter()
    for l, e in sample:
        s.get_entry(l, e)
    dt = time.perf_counter() - t
    print(f"  get_entry, cached         {len(sample) / dt:12,.0f} /s")
    cpu = time.thread_time()
    res = s.flush()
    cpu = time.thread_time() - cpu
    print(
        f"  flush                     {res.seconds * 1e3:9.0f} ms for {res.entries:,} entries "
        f"({res.entries / res.seconds:,.0f} entries/s, incl. log fdatasync + index commit)"
    )
    print(
        f"  flush CPU (its thread)    {cpu / res.entries * 1e6:9.2f} us/entry (user + sys; not wall: a shared machine)"
    )
    t = time.perf_counter()
    for l, e in sample:
        s.get_entry(l, e)
    dt = time.perf_counter() - t
    print(f"  get_entry, flushed random {len(sample) / dt:12,.0f} /s")
    t = time.perf_counter()
    got = 0
    for l in range(1, 101):
        got += len(s.entries_between(l, 0, max_count=1000))
    dt = time.perf_counter() - t
    print(f"  entries_between, flushed  {got / dt:12,.0f} entries/s")
    # steady state: the bookie flushes about once per second at 25k adds/s
    for i in range(25_000):
        s.put_entry(1000 + i % 10, i, data[i & 255])
    cpu = time.thread_time()
    res = s.flush()
    cpu = time.thread_time() - cpu
    print(
        f"  flush of 25,000 entries   {res.seconds * 1e3:9.1f} ms, {cpu * 1e3:.1f} ms CPU "
        "(one second of adds at the target rate)"
    )
    print(f"  disk usage {s.disk_usage()}")
    s.close()
    shutil.rmtree(d)


# ------------------------------------------------------------------ index choice
def bench_index(base: str, n: int, repeat: int = 3) -> None:
    section(f"index: (ledger, entry) -> (log, offset, length), {n:,} rows, batches of 10,000, best of {repeat}")
    best: dict[str, list[float]] = {}
    for r in range(repeat):
        for name, put, get in _index_round(os.path.join(base, f"index-{r}"), n):
            b = best.setdefault(name, [0.0, 0.0])
            b[0], b[1] = max(b[0], put), max(b[1], get)
    for name, (put, get) in best.items():
        print(f"  {name:58s} {put:10,.0f} puts/s {get:10,.0f} gets/s")


def _index_round(base: str, n: int) -> list:
    os.makedirs(base)
    out = []
    rows = [(1 + i // 1000, i % 1000, 1, 64 + i * 124, 124) for i in range(n)]
    keys = [(r[0], r[1]) for r in rows]
    random.Random(2).shuffle(keys)
    gets = keys[: min(n, 100_000)]

    path = os.path.join(base, "index.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(
        "CREATE TABLE idx(l INTEGER, e INTEGER, log INTEGER, off INTEGER, len INTEGER, PRIMARY KEY(l, e)) WITHOUT ROWID"
    )
    t = time.perf_counter()
    for k in range(0, n, 10_000):
        db.execute("BEGIN")
        db.executemany("INSERT OR REPLACE INTO idx VALUES (?, ?, ?, ?, ?)", rows[k : k + 10_000])
        db.execute("COMMIT")
    put = n / (time.perf_counter() - t)
    q = "SELECT log, off, len FROM idx WHERE l = ? AND e = ?"
    t = time.perf_counter()
    for k in gets:
        db.execute(q, k).fetchone()
    get = len(gets) / (time.perf_counter() - t)
    db.close()
    out.append((f"sqlite3 {sqlite3.sqlite_version} (WAL, synchronous=FULL, executemany)", put, get))
    try:
        import lmdb
    except ImportError:
        print("  lmdb: not installed")
        return out
    env = lmdb.open(os.path.join(base, "index.lmdb"), map_size=1 << 34, max_dbs=2, readahead=False)
    idx = env.open_db(b"idx")
    kp = struct.Struct(">qq")
    vp = struct.Struct(">QII")
    t = time.perf_counter()
    for k in range(0, n, 10_000):
        items = [(kp.pack(r[0], r[1]), vp.pack(r[2], r[3], r[4])) for r in rows[k : k + 10_000]]
        with env.begin(write=True, db=idx) as txn:
            txn.cursor().putmulti(items)
    put = n / (time.perf_counter() - t)
    t = time.perf_counter()
    for k in gets:
        txn = env.begin(db=idx)
        vp.unpack(txn.get(kp.pack(*k)))
        txn.abort()
    get = len(gets) / (time.perf_counter() - t)
    env.close()
    out.append((f"lmdb {'.'.join(map(str, lmdb.version()))} (putmulti, a read txn per get, packing incl.)", put, get))
    return out


# ------------------------------------------------------------------ the reactor beside a flush
def bench_flush_stall(base: str, mib: int, repeat: int) -> None:
    """How late the reactor runs while a full write cache is flushed beside it.  This thread
    stands in for the reactor: it sleeps 1 ms, does one add and one read, and notes how much
    later than the 1 ms it woke; the flush runs in a thread of its own, as a checkpoint does,
    with bookied's GIL switch interval and collector settings.  A stall is wall time, so the
    scheduler's delays on a shared machine are in it too (the load is printed); the flush's
    CPU is its thread's clock."""
    sys.setswitchinterval(SWITCH_INTERVAL)
    settle_garbage_collector()
    section(f"the reactor beside a flush of {mib} MiB of write cache, {repeat} flushes a case; {load_note()}")
    for size, ledgers in ((100, 10), (100, 10_000), (4096, 10)):
        late: list[float] = []
        cpu = entries = 0.0
        for _ in range(repeat):
            d = tempfile.mkdtemp(dir=base)
            s = EntryStore(d, write_cache_max_bytes=2 * mib << 20, twins=fastpath.selected())
            per = (mib << 20) // size // ledgers
            pad = os.urandom(size - 8)
            for lid in range(1, ledgers + 1):
                for first in range(0, per, 1000):
                    ids = range(first, min(per, first + 1000))
                    s.put_entries(lid, ids, [pad + struct.pack(">Q", lid << 32 | e) for e in ids])
            done = threading.Event()
            spent: list[float] = []

            def flush(s=s, done=done, spent=spent) -> None:
                t = time.thread_time()
                spent.append(float(s.flush().entries))
                spent.append(time.thread_time() - t)
                done.set()

            flusher = threading.Thread(target=flush)
            woke = time.perf_counter()
            flusher.start()
            tick = 0
            while not done.is_set():
                time.sleep(0.001)
                now = time.perf_counter()
                late.append(now - woke - 0.001)
                tick += 1
                s.put_entry(ledgers + 1, tick, pad)
                s.get_entry(1 + tick % ledgers, tick % per)
                woke = time.perf_counter()
            flusher.join()
            entries += spent[0]
            cpu += spent[1]
            s.close(flush=False)
            shutil.rmtree(d)
        print(
            f"  {size:5} B entries, {ledgers:6,} ledgers: reactor late by max {max(late) * 1e3:6.1f} ms, "
            f"p99 {pct(late, 0.99) * 1e3:5.1f} ms, p50 {pct(late, 0.5) * 1e3:4.1f} ms ({len(late):,} wake-ups); "
            f"flush {cpu / repeat:.3f} s CPU, {entries / cpu:,.0f} entries per CPU-second"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", help="directory on the disk to measure (default: a temp dir)")
    ap.add_argument("--quick", action="store_true", help="smaller runs")
    ap.add_argument("--flush-stall", action="store_true", help="only the reactor beside a flush")
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="bench-storage-", dir=args.dir)
    scale = 0.2 if args.quick else 1.0
    try:
        print(f"bench_storage: {os.cpu_count()} cpus, python {sys.version.split()[0]}, dir {base}")
        if args.flush_stall:
            bench_flush_stall(base, 64 if scale == 1.0 else 16, 3)
            return
        bench_fsync(base, int(3000 * scale))
        section("journal: 100 B entries, one producer thread, as fast as it can (includes encoding + CRC32C)")
        for wait in (0.0, 2.0):
            bench_journal_flat_out(base, int(300_000 * scale), wait)
        section("journal: paced producer (callbacks in the writer thread)")
        for wait in (0.0, 2.0):
            bench_journal_paced(base, 25_000, 2.0 * max(scale, 0.5), wait)
        bench_entrystore(base, int(500_000 * scale))
        bench_index(base, int(200_000 * scale))
        bench_flush_stall(base, 64 if scale == 1.0 else 16, 3)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
