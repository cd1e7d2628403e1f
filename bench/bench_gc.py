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

``--java-peer DIR`` (a Java peer built by ../shared/java-peer, ``$PEER``) puts the same ledgers
on one Java 4.17.2 bookie too (its own ledgers root of the same ZooKeeper; its entries are added
over the wire, one pipelined v2 ADD per ledger, since its index files can only be written by
it), deletes the same share of their metadata, and forces GC passes alternately on both
(ours, Java, ours, Java: the first pass of each removes the deleted ledgers, the second finds
nothing to remove). For each pass: its time (bookied: ``lastGcDurationMs``; Java: from the PUT
until its ``is_in_force_gc`` turns false, polled every 20 ms) and the requests ZooKeeper received
meanwhile (``mntr``'s zk_packets_received: the Java bookie has no metrics provider, so the server
counts for both; both bookies are connected throughout, so each window also holds the other's
session pings, one per zkTimeout/3 per session).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench_bookie import start_bookie, start_cluster  # bench/ is on sys.path when run as a script
from common import load_note, raw_zookeeper, section  # bench/ is on sys.path when run as a script

from bkctl.wire import fastpath


def http(port: int, method: str, path: str, body: dict | None = None):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method, data=json.dumps(body).encode() if body is not None else None
    )
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
            for w in [zk.delete_async(P.ledger_path(i, root=root)) for i in ids[start : start + 2000]]:
                w.get()


def fill_store(ledger_dir: Path, ids: range) -> None:
    from bkctl.bookied.storage import EntryStore

    with EntryStore(str(ledger_dir), write_cache_max_bytes=256 * 1024 * 1024, twins=fastpath.selected()) as store:
        for i in ids:
            store.set_master_key(i, b"k")
            store.put_entry(i, 0, b"e" * 64)


def exists_each(uri: str, ids: range) -> float:
    """Seconds for one exists() per ledger from this process (the old rule's requests)."""
    from bkctl.wire.metadata.zk import ZKMetadataStore

    with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
        t0 = time.perf_counter()
        for i in ids:
            store.ledgers.exists(i)
        return time.perf_counter() - t0


def add_one_entry_each(port: int, ids: range, window: int = 2000) -> int:
    """One 64 B v2 ADD (entry 0) per ledger to the bookie at ``port``, pipelined; how many failed."""
    import select

    from bench_bookie import add_frames

    failed = sent = acked = 0
    with socket.create_connection(("127.0.0.1", port)) as s:
        from bkctl.wire.codecs.framing import FrameDecoder

        dec, todo = FrameDecoder(), iter(ids)
        while acked < len(ids):
            if sent - acked < window and sent < len(ids):
                batch = [add_frames(next(todo), 1, 64)[0] for _ in range(min(window - (sent - acked), len(ids) - sent))]
                s.sendall(b"".join(batch))
                sent += len(batch)
            if select.select([s], [], [], 1.0)[0]:
                for payload in dec.feed(s.recv(1 << 20)):
                    acked += 1
                    failed += int.from_bytes(payload[4:8], "big", signed=True) != 0
    return failed


def java_in_force_gc(port: int) -> bool:
    return http(port, "GET", "/api/v1/bookie/gc")["is_in_force_gc"] == "true"


def java_pass(http_port: int, zk_host: str, zk_port: int) -> tuple[float, int]:
    """A forced GC pass of the Java bookie: (seconds from the PUT until is_in_force_gc is false, ZK requests)."""
    packets = zk_packets(zk_host, zk_port)
    t0 = time.perf_counter()
    http(http_port, "PUT", "/api/v1/bookie/gc")
    while java_in_force_gc(http_port):
        time.sleep(0.02)
    return time.perf_counter() - t0, zk_packets(zk_host, zk_port) - packets


def bookied_pass(
    http_port: int, zk_host: str, zk_port: int, body: dict | None = None, poll: float = 0.02, force: bool = True
) -> tuple[dict, float, int]:
    """A forced GC pass of bookied (``body``: the PUT's), its status polled every ``poll`` s:
    (its status after, seconds from the PUT to done, ZK requests).  ``force=False``: the
    same calls without the PUT, one poll (what the pass's polling costs the bookie alone)."""
    before = http(http_port, "GET", "/api/v1/bookie/gc")
    packets = zk_packets(zk_host, zk_port)
    t0 = time.perf_counter()
    if not force:
        time.sleep(poll)
        status = http(http_port, "GET", "/api/v1/bookie/gc")
        return status, time.perf_counter() - t0, zk_packets(zk_host, zk_port) - packets
    http(http_port, "PUT", "/api/v1/bookie/gc", body)
    while True:
        status = http(http_port, "GET", "/api/v1/bookie/gc")
        if status["gcRuns"] > before["gcRuns"] and not status["gcRunning"]:
            break
        time.sleep(poll)
    wall = time.perf_counter() - t0
    return status, wall, zk_packets(zk_host, zk_port) - packets


def java_index_files(ledgers: Path) -> str:
    """InterleavedLedgerStorage's index files (one per ledger; DbLedgerStorage keeps RocksDB instead)."""
    if (ledgers / "current" / "locations").exists():
        return "(RocksDB index)"
    return str(sum(1 for p in (ledgers / "current").rglob("*.idx")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledgers", type=int, default=100_000)
    parser.add_argument("--deleted", type=float, default=0.1, help="share of the ledgers whose metadata goes")
    parser.add_argument(
        "--exists-sample",
        type=int,
        default=10_000,
        help="exists() calls timed for the per-ledger comparison (scaled to --ledgers)",
    )
    parser.add_argument(
        "--java-peer",
        metavar="DIR",
        help="a Java BookKeeper 4.17.2 peer built by ../shared/java-peer ($PEER): the same ledgers "
        "on a Java bookie, passes alternated",
    )
    parser.add_argument(
        "--java-storage",
        choices=("interleaved", "db"),
        default="interleaved",
        help="with --java-peer: the Java bookie's ledger storage (the peer's InterleavedLedgerStorage, "
        "or DbLedgerStorage)",
    )
    args = parser.parse_args()
    ids = range(1, args.ledgers + 1)
    deleted = list(ids)[:: max(1, round(1 / args.deleted))] if args.deleted > 0 else []
    quiet = {
        "gcWaitTime": 3_600_000,
        "minorCompactionInterval": 0,
        "majorCompactionInterval": 0,
        "logSizeLimit": 64 * 1024 * 1024,
    }
    if args.java_peer:
        java = dict(quiet)
        if args.java_storage == "db":
            java["ledgerStorageClass"] = "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage"
        side_by_side(args.java_peer, ids, deleted, java)
        return
    with tempfile.TemporaryDirectory(prefix="bench-gc-") as tmp:
        base = Path(tmp)
        zk, uri = start_cluster(base)
        proc = None
        try:
            proc, http_port, created, filled = bookied_with_ledgers(base / "bookie", uri, ids, quiet)
            delete_metadata(uri, deleted)
            print(
                f"{len(ids)} ledgers: metadata created in {created:.1f} s, entries stored in {filled:.1f} s; "
                f"{len(deleted)} ledgers' metadata deleted"
            )
            host, zport = zk.connect_string.split(":")
            status, wall, requests = bookied_pass(http_port, host, int(zport))
            print(
                f"GC pass over {len(ids)} ledgers ({status['ledgersRemoved']} removed): "
                f"{status['lastGcDurationMs']} ms in the bookie ({wall:.2f} s from PUT to done); "
                f"{requests} ZooKeeper requests received meanwhile (session pings included); {load_note()}"
            )
            sample = range(1, min(args.exists_sample, len(ids)) + 1)
            took = exists_each(uri, sample)
            print(
                f"for scale, one exists() per ledger (the rule before the range listing): {len(sample)} took "
                f"{took:.2f} s from this process, i.e. ~{took * len(ids) / len(sample):.1f} s and {len(ids)} "
                f"requests for {len(ids)} ledgers; {load_note()}"
            )
        finally:
            stop_bookied(proc)
            zk.stop()


def bookied_with_ledgers(base: Path, uri: str, ids: range, settings: dict):
    """bookied holding ``ids`` (metadata in ZooKeeper, one entry each in its store), running:
    ``(process, HTTP port, seconds to create the metadata, seconds to fill the store)``."""
    t0 = time.perf_counter()
    create_metadata(uri, ids)
    created = time.perf_counter() - t0
    proc, _port, http_port = start_bookie(base, uri, settings)  # its cookie and directories
    wait_running(http_port)
    time.sleep(1.0)  # registered: a clean stop unregisters, so the restart need not wait for a session
    proc.send_signal(signal.SIGTERM)
    if proc.wait(timeout=60) != 0:
        raise SystemExit(f"bookied exited with {proc.returncode}")
    t0 = time.perf_counter()
    fill_store(base / "ledgers", ids)
    filled = time.perf_counter() - t0
    with open(base / "bookied.log", "ab") as out:  # the same bookie again
        proc = subprocess.Popen(
            [sys.executable, "-m", "bkctl.bookied", "--conf", str(base / "bk_server.conf"), "--log-level", "WARNING"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    wait_running(http_port)
    return proc, http_port, created, filled


def stop_bookied(proc) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 - a bench cleans up whatever happened
            proc.kill()


def side_by_side(peer_dir: str, ids: range, deleted: list[int], java_conf: dict) -> None:
    """The same ledgers on bookied and on a Java bookie; GC passes alternated (see the docstring)."""
    from java_peer import JavaPeer

    peer = JavaPeer(peer_dir)
    java_ledgers = peer.root / "run" / "bookie-1" / "ledgers"
    with tempfile.TemporaryDirectory(prefix="bench-gc-java-") as tmp:
        base = Path(tmp)
        zk, uri = start_cluster(base)
        host, zport = zk.connect_string.split(":")
        proc = None
        try:
            java_root = "/java-ledgers"
            java_uri = f"zk+hierarchical://{zk.connect_string}{java_root}"
            java_pid = peer.start_bookies(
                1, zk.connect_string, java_root, extra_conf="\n".join(f"{k}={v}" for k, v in java_conf.items())
            )[0]
            t0 = time.perf_counter()
            create_metadata(java_uri, ids)
            created = time.perf_counter() - t0
            t0 = time.perf_counter()
            failed = add_one_entry_each(3181, ids)
            print(
                f"Java bookie pid {java_pid} (root {java_root}): metadata of {len(ids)} ledgers created in "
                f"{created:.1f} s, one entry each added over the wire in {time.perf_counter() - t0:.1f} s "
                f"({failed} failed); {load_note()}",
                flush=True,
            )
            quiet = {k: v for k, v in java_conf.items() if k != "ledgerStorageClass"}
            proc, http_port, created, filled = bookied_with_ledgers(base / "bookie", uri, ids, quiet)
            print(
                f"bookied (root /ledgers): metadata of {len(ids)} ledgers created in {created:.1f} s, entries "
                f"stored in {filled:.1f} s; {load_note()}",
                flush=True,
            )
            delete_metadata(uri, deleted)
            delete_metadata(java_uri, deleted)
            print(
                f"{len(deleted)} ledgers' metadata deleted on both; Java index files before: "
                f"{java_index_files(java_ledgers)}",
                flush=True,
            )
            results = []
            for r in (1, 2):
                section(f"pass {r} ({'removes the deleted ledgers' if r == 1 else 'nothing left to remove'})")
                status, wall, requests = bookied_pass(http_port, host, int(zport))
                results.append((r, "bookied", status["lastGcDurationMs"] / 1000, requests, os.getloadavg()))
                print(
                    f"  bookied: {status['lastGcDurationMs']} ms in the bookie ({wall:.2f} s from PUT to done), "
                    f"{status['ledgersRemoved']} ledgers removed so far; {requests} ZooKeeper requests received "
                    f"meanwhile; {load_note()}",
                    flush=True,
                )
                took, requests = java_pass(8001, host, int(zport))
                results.append((r, "java", took, requests, os.getloadavg()))
                print(
                    f"  Java:    {took * 1000:.0f} ms from PUT until is_in_force_gc is false, "
                    f"{java_index_files(java_ledgers)} index files left; {requests} ZooKeeper requests received "
                    f"meanwhile; {load_note()}",
                    flush=True,
                )
            section(f"GC pass over {len(ids)} ledgers ({len(deleted)} deleted), side by side")
            for r, side, secs, requests, load in results:
                print(
                    f"  pass {r} {side:>7}: {secs:6.2f} s  {requests:5d} ZooKeeper requests  "
                    f"load average {' '.join(f'{x:.2f}' for x in load)}"
                )
        finally:
            stop_bookied(proc)
            peer.stop_bookies()
            zk.stop()


if __name__ == "__main__":
    main()
