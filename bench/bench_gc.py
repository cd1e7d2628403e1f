"""Garbage collection's ZooKeeper cost with many ledgers on one bookie (issue 40).

``--ledgers`` ledgers (10^5) with metadata in ZooKeeper (hierarchical layout) and an entry
each on one real bookied; ``--deleted`` of them (10%) then lose their metadata. A forced GC
pass (compaction off) removes them. Printed: the pass's time (the bookie's
``lastGcDurationMs``), the ZooKeeper requests the server received meanwhile (``mntr``'s
zk_packets_received, the bookie's session pings included), and, for scale, what one
``exists()`` per ledger - the rule before the range listing - costs from this process. The
entries are written into the stopped bookie's entry store directly, and the metadata with
pipelined creates, so that setting up 10^5 ledgers takes seconds, not the bench's time.

``python bench/bench_gc.py [--ledgers 100000] [--deleted 0.1]``
"""
from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench_bookie import start_bookie, start_cluster  # bench/ is on sys.path when run as a script
from common import load_note, raw_zookeeper  # bench/ is on sys.path when run as a script


def http(port: int, method: str, path: str, body: dict | None = None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def wait_running(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if http(port, "GET", "/api/v1/bookie/state").get("running"):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("bookied's HTTP admin did not say it runs")
        time.sleep(0.1)


def zk_packets(host: str, port: int) -> int:
    """Requests the ZooKeeper server has received so far (its ``mntr`` four-letter word)."""
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"mntr")
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    for line in out.decode().splitlines():
        key, _, value = line.partition("\t")
        if key == "zk_packets_received":
            return int(value)
    raise SystemExit("ZooKeeper's mntr has no zk_packets_received")


def create_metadata(uri: str, ids: range) -> None:
    """One znode per ledger, pipelined (a window of async creates), parents first."""
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.metadata.ledger import LedgerMetadata, serialize_ledger_metadata

    data = serialize_ledger_metadata(LedgerMetadata.new(["127.0.0.1:1"]))
    with raw_zookeeper(uri) as (zk, root):
        paths = [P.ledger_path(i, root=root) for i in ids]
        for parent in sorted({p.rsplit("/", 1)[0] for p in paths}):
            zk.ensure_path(parent)
        window = []
        for path in paths:
            window.append(zk.create_async(path, data))
            if len(window) >= 2000:
                for w in window:
                    w.get()
                window.clear()
        for w in window:
            w.get()


def delete_metadata(uri: str, ids: list[int]) -> None:
    from bkctl.wire.metadata import paths as P

    with raw_zookeeper(uri) as (zk, root):
        for start in range(0, len(ids), 2000):
            for w in [zk.delete_async(P.ledger_path(i, root=root)) for i in ids[start:start + 2000]]:
                w.get()


def fill_store(ledger_dir: Path, ids: range) -> None:
    from bkctl.bookied.storage import EntryStore

    with EntryStore(str(ledger_dir), write_cache_max_bytes=256 * 1024 * 1024) as store:
        for i in ids:
            store.set_master_key(i, b"k")
            store.put_entry(i, 0, b"e" * 64)


def exists_each(uri: str, ids: range) -> float:
    """Seconds for one exists() per ledger from this process (the old rule's requests)."""
    from bkctl.wire.metadata.zk import ZKMetadataStore

    with ZKMetadataStore(uri) as store:
        t0 = time.perf_counter()
        for i in ids:
            store.ledgers.exists(i)
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledgers", type=int, default=100_000)
    parser.add_argument("--deleted", type=float, default=0.1, help="share of the ledgers whose metadata goes")
    parser.add_argument("--exists-sample", type=int, default=10_000,
                        help="exists() calls timed for the per-ledger comparison (scaled to --ledgers)")
    args = parser.parse_args()
    ids = range(1, args.ledgers + 1)
    deleted = list(ids)[::max(1, round(1 / args.deleted))] if args.deleted > 0 else []
    quiet = {"gcWaitTime": 3_600_000, "minorCompactionInterval": 0, "majorCompactionInterval": 0,
             "logSizeLimit": 64 * 1024 * 1024}
    with tempfile.TemporaryDirectory(prefix="bench-gc-") as tmp:
        base = Path(tmp)
        zk, uri = start_cluster(base)
        proc = None
        try:
            t0 = time.perf_counter()
            create_metadata(uri, ids)
            created = time.perf_counter() - t0
            proc, port, http_port = start_bookie(base / "bookie", uri, quiet)  # its cookie and directories
            wait_running(http_port)
            time.sleep(1.0)  # registered: a clean stop unregisters, so the restart need not wait for a session
            proc.send_signal(signal.SIGTERM)
            if proc.wait(timeout=60) != 0:
                raise SystemExit(f"bookied exited with {proc.returncode}")
            t0 = time.perf_counter()
            fill_store(base / "bookie" / "ledgers", ids)
            filled = time.perf_counter() - t0
            delete_metadata(uri, deleted)
            print(f"{len(ids)} ledgers: metadata created in {created:.1f} s, entries stored in {filled:.1f} s; "
                  f"{len(deleted)} ledgers' metadata deleted")
            with open(base / "bookie" / "bookied.log", "ab") as out:  # the same bookie again
                proc = subprocess.Popen([sys.executable, "-m", "bkctl.bookied", "--conf",
                                         str(base / "bookie" / "bk_server.conf"), "--log-level", "WARNING"],
                                        stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            wait_running(http_port)
            host, zport = zk.connect_string.split(":")
            before = http(http_port, "GET", "/api/v1/bookie/gc")
            packets = zk_packets(host, int(zport))
            t0 = time.perf_counter()
            http(http_port, "PUT", "/api/v1/bookie/gc")
            while True:
                status = http(http_port, "GET", "/api/v1/bookie/gc")
                if status["gcRuns"] > before["gcRuns"] and not status["gcRunning"]:
                    break
                time.sleep(0.05)
            wall = time.perf_counter() - t0
            requests = zk_packets(host, int(zport)) - packets
            print(f"GC pass over {len(ids)} ledgers ({status['ledgersRemoved']} removed): "
                  f"{status['lastGcDurationMs']} ms in the bookie ({wall:.2f} s from PUT to done); "
                  f"{requests} ZooKeeper requests received meanwhile (session pings included); {load_note()}")
            sample = range(1, min(args.exists_sample, len(ids)) + 1)
            took = exists_each(uri, sample)
            print(f"for scale, one exists() per ledger (the rule before the range listing): {len(sample)} took "
                  f"{took:.2f} s from this process, i.e. ~{took * len(ids) / len(sample):.1f} s and {len(ids)} "
                  f"requests for {len(ids)} ledgers; {load_note()}")
        finally:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except Exception:  # noqa: BLE001 - a bench cleans up whatever happened
                    proc.kill()
            zk.stop()


if __name__ == "__main__":
    main()
