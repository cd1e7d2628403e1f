"""One real bookied driven over loopback: add and read throughput, group commit, latency, memory.

Starts a real ZooKeeper and one bookied in a temporary directory, then:

* adds/s with pipelined v2 ADDs of 100 B and 1 KiB entries over 1 and 8 connections;
* entries per journal fsync (from the bookie's /metrics);
* add latency p50/p99/p999 at a steady 1,000 adds/s, next to the disk's own fsync latency;
* entries/s read back with v2 BATCH_READ;
* the bookie's peak RSS.

Prints figures; asserts nothing.  ``python bench/bench_bookie.py [--seconds 5]``
"""
from __future__ import annotations

import argparse
import os
import re
import select
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bkctl.sandbox.zookeeper import ZooKeeperServer, free_port
from wire import v2
from wire.digest import DigestManager, DigestType, master_key
from wire.framing import FrameDecoder, frame
from wire.zkstore import ZKMetadataStore

KEY = master_key(b"bench")
_RC = struct.Struct(">i")


def start_bookie(base: Path, uri: str) -> tuple[subprocess.Popen, int, int]:
    port, http = free_port(), free_port()
    (base / "journal").mkdir(parents=True)
    (base / "ledgers").mkdir(parents=True)
    conf = base / "bk_server.conf"
    conf.write_text(f"bookiePort={port}\nadvertisedAddress=127.0.0.1\nlisteningInterface=lo\nallowLoopback=true\n"
                    f"journalDirectories={base / 'journal'}\nledgerDirectories={base / 'ledgers'}\n"
                    f"metadataServiceUri={uri}\nhttpServerEnabled=true\nhttpServerPort={http}\n"
                    f"httpServerHost=127.0.0.1\ndbStorage_writeCacheMaxSizeMb=128\n")
    log = open(base / "bookied.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "bookied", "--conf", str(conf), "--log-level", "WARNING"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port, http
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("bookied did not start; see " + str(base / "bookied.log"))


def add_frames(ledger: int, count: int, size: int) -> list[bytes]:
    dm = DigestManager(ledger, DigestType.CRC32C, b"bench")
    payload = b"x" * size
    return [frame(v2.AddRequest(2, 0, KEY, dm.package(e, e - 1, size * (e + 1), payload), ledger, e).encode())
            for e in range(count)]


def drive_adds(port: int, connections: int, size: int, seconds: float, window: int = 2000) -> float:
    """Pipelined adds on several connections for ``seconds``; returns acknowledged adds/s."""
    per_conn = int(40000 * seconds / connections) + window
    socks, work = [], []
    for c in range(connections):
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        socks.append(s)
        frames = add_frames(1000 + c + size * 10, per_conn, size)
        work.append({"frames": frames, "sent": 0, "acked": 0, "dec": FrameDecoder(), "out": b""})
    start = time.perf_counter()
    deadline = start + seconds
    errors = 0
    while time.perf_counter() < deadline:
        for s, w in zip(socks, work):
            if not w["out"] and w["sent"] - w["acked"] < window and w["sent"] < len(w["frames"]):
                n = min(window - (w["sent"] - w["acked"]), 256, len(w["frames"]) - w["sent"])
                w["out"] = b"".join(w["frames"][w["sent"]:w["sent"] + n])
                w["sent"] += n
        readable, writable, _ = select.select(socks, [s for s, w in zip(socks, work) if w["out"]], [], 0.05)
        for s in writable:
            w = work[socks.index(s)]
            try:
                n = s.send(w["out"])
                w["out"] = w["out"][n:]
            except BlockingIOError:
                pass
        for s in readable:
            w = work[socks.index(s)]
            for payload in w["dec"].feed(s.recv(1 << 20)):
                w["acked"] += 1
                if _RC.unpack_from(payload, 4)[0] != 0:
                    errors += 1
    elapsed = time.perf_counter() - start
    for s in socks:
        s.close()
    if errors:
        print(f"   ({errors} adds were refused)")
    return sum(w["acked"] for w in work) / elapsed


def steady_latency(port: int, rate: int, seconds: float) -> list[float]:
    frames = add_frames(7, int(rate * seconds) + 10, 100)
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    dec = FrameDecoder()
    sent_at: dict[int, float] = {}
    lat: list[float] = []
    start = time.perf_counter()
    i = 0
    while i < len(frames) - 10 or len(lat) < len(sent_at):
        now = time.perf_counter()
        due = int((now - start) * rate)
        while i < min(due, len(frames) - 10):
            s.sendall(frames[i])
            sent_at[i] = time.perf_counter()
            i += 1
        r, _, _ = select.select([s], [], [], 0.0005)
        if r:
            for payload in dec.feed(s.recv(65536)):
                entry = struct.unpack_from(">q", payload, 16)[0]
                lat.append(time.perf_counter() - sent_at[entry])
        if now - start > seconds * 3:
            break
    s.close()
    return lat


def read_batches(port: int, ledger: int, entries: int, batch: int = 100) -> float:
    s = socket.create_connection(("127.0.0.1", port))
    dec = FrameDecoder()
    start = time.perf_counter()
    got = 0
    requests = [frame(v2.BatchReadRequest(2, 0, ledger, e, e, batch, 1 << 20).encode())
                for e in range(0, entries, batch)]
    for i in range(0, len(requests), 20):  # 20 batches in flight
        s.sendall(b"".join(requests[i:i + 20]))
        answered = 0
        while answered < len(requests[i:i + 20]):
            for payload in dec.feed(s.recv(1 << 20)):
                got += len(v2.decode_response(payload).entries)
                answered += 1
    s.close()
    return got / (time.perf_counter() - start)


def disk_fsync_latency(directory: Path, n: int = 300) -> list[float]:
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    out = []
    try:
        for _ in range(n):
            os.write(fd, b"x" * 100)
            t = time.perf_counter()
            os.fdatasync(fd)
            out.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        path.unlink()
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def metric(http: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=5).read().decode()
    m = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    seconds = parser.parse_args().seconds
    with tempfile.TemporaryDirectory(prefix="bench-bookie-") as tmp:
        base = Path(tmp)
        zk = ZooKeeperServer(base / "zk")
        zk.start()
        proc = None
        try:
            uri = f"zk+hierarchical://{zk.connect_string}/ledgers"
            with ZKMetadataStore(uri) as store:
                store.init_cluster()
            proc, port, http = start_bookie(base / "bookie", uri)
            time.sleep(1.0)
            print(f"bookied pid {proc.pid} on 127.0.0.1:{port}; {seconds:.0f} s per run")
            for size in (100, 1024):
                for conns in (1, 8):
                    rate = drive_adds(port, conns, size, seconds)
                    print(f"adds/s  {size:>5} B entries  {conns} connection(s): {rate:>10,.0f}")
            fsyncs = metric(http, "bookie_journal_entries_per_fsync_count")
            records = metric(http, "bookie_journal_entries_per_fsync_sum")
            print(f"entries per journal fsync (mean over the runs): {records / fsyncs:,.1f}")
            lat = steady_latency(port, 1000, seconds)
            disk = disk_fsync_latency(base / "bookie" / "journal")
            print(f"add latency at 1,000 adds/s: p50 {pct(lat, .5):.2f} ms  p99 {pct(lat, .99):.2f} ms  "
                  f"p999 {pct(lat, .999):.2f} ms  ({len(lat)} adds)")
            print(f"disk fdatasync after a 100 B append: p50 {pct(disk, .5):.2f} ms  p99 {pct(disk, .99):.2f} ms  "
                  f"mean {statistics.mean(disk) * 1000:.2f} ms")
            print(f"p99 add latency / disk p99 fsync: {pct(lat, .99) / pct(disk, .99):.1f}x")
            print(f"entries/s read with BATCH_READ (100 per batch): {read_batches(port, 1000 + 1000, 40000):>10,.0f}")
            print(f"bookied peak RSS: {peak_rss_mb(proc.pid):.0f} MB")
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(30)
            zk.stop()


if __name__ == "__main__":
    main()
