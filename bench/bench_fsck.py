#!/usr/bin/env python3
"""``bkctl ledger fsck`` at scale: its rate in ledgers/s, the requests it made to ZooKeeper and
to the bookies, and its peak memory, beside the load average.

Prints figures, asserts nothing. Usage::

    .venv/bin/python bench/bench_fsck.py [--sizes 10000,100000] [--entries 2] [--size 64] [--dir DIR]
        [--java-peer ~/bk-java-peer [--rounds 3] [--skip-mixed] [--java-replicas-check-mixed]]
    .venv/bin/python bench/bench_fsck.py --callgrind 3000

A throw-away sandbox (a real ZooKeeper and 3 bookieds) is filled, for each of ``--sizes`` in
turn, up to that many closed E3/Qw2/Qa2 ledgers of ``--entries`` entries of ``--size`` bytes
(the metadata first, with scale_fill's ZooKeeper multis, several sessions with several in
flight each, then the entries, written to their bookies with pipelined adds, 6,000 unanswered
at most; the line says how long each half took), and ``bkctl --json ledger fsck`` runs over all of them as an operator
runs it (a process of its own; default sample: each segment's first and last entry and 8
more read from every replica).  Printed per size: the time and ledgers/s, the bookie
requests it made (its summary line: entry lists, reads and batch reads, one each), ZooKeeper's
``zk_packets_received`` over the run (``mntr``: the sandbox's bookies' session pings
included), fsck's peak resident memory (its ``VmHWM``, read as it runs: it should not grow with the
ledgers), and the load average.  ``--callgrind N`` instead fills N ledgers and counts the
instructions of one fsck over them under valgrind's callgrind (start-up included): the
load-independent figure of its CPU cost a ledger.

With ``--java-peer DIR`` (a Java BookKeeper 4.17.2 peer built by ../shared/java-peer), Java's
auditor replicas check (``AuditorReplicasCheckTask``, the check ``auditorReplicasCheckInterval``
schedules, which asks every bookie of each closed ledger for its GET_LIST_OF_ENTRIES_OF_LEDGER
availability bitmap) then runs once over the same cluster -- the same ZooKeeper, the same
three bookieds, the same ledgers -- in an ``AutoRecoveryMain`` of the peer, and its time (the
auditor's own "Completed ReplicasCheck in N milliSeconds") is printed beside fsck's, with the
ZooKeeper packets and the bookie requests each made (both sides counted the same way: ``mntr``
and the bookieds' ``bookie_requests_total``); ``--rounds N`` runs both N times at the largest
size, alternated (fsck, Java, Java, fsck, ...), and prints their medians.  Then the mixed cluster (3 bookieds and 2 Java
bookies on DbLedgerStorage, planted faults, ``--mixed-ledgers``) is checked by fsck, its fixes
and autorecovery; ``--java-replicas-check-mixed`` also runs Java's replicas check there (Java
DbLedgerStorage bookies never answer GET_LIST_OF_ENTRIES_OF_LEDGER: each request waits for the
client's read timeout -- 5 s -- and the ledger is logged as "bookie has not responded", its copies
there unchecked: measured, 10^4 ledgers took Java 540 s, about 19 a second, with 11,996 requests
unanswered; it gives up a range of ledgers only when one waits over 120 s).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import zk_requests as zk_packets  # noqa: E402  (mntr's zk_packets_received)
from common import bookie_metrics, in_sandbox, load_note, section  # noqa: E402
from java_peer import alternate, median  # noqa: E402
from scale_fill import create_all  # noqa: E402

from bkctl.wire import fastpath

FIRST = 1_000_000  # above the ids the sandbox hands out
#: copies the fill has added and not seen answered, at most (a connection queues what it cannot send yet)
ADDS_IN_FLIGHT = 6000


def payload(ledger_id: int, entry_id: int, size: int) -> bytes:
    """What each entry holds: its ids, padded to ``size`` bytes (what a Java reader prints back)."""
    return f"f{ledger_id}-{entry_id}-".encode().ljust(size, b"f")


def fill(
    uri: str,
    zk: str,
    ensembles: dict[int, list[str]],
    entries: int,
    size: int,
    *,
    data_ensembles: dict[int, list[str]] | None = None,
    skip: frozenset = frozenset(),
    flip: frozenset = frozenset(),
) -> None:
    """Closed E3/Qw2/Qa2 ledgers with these ensembles in their metadata; their entries on the
    bookies of ``data_ensembles`` (default: the same), but not the ``(ledger, entry, bookie)``
    copies in ``skip``, and those in ``flip`` with a payload byte flipped after the digest."""
    from kazoo.client import KazooClient
    from twisted.internet import defer

    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.metadata.layout import MetadataServiceURI
    from bkctl.wire.metadata.ledger import LedgerMetadata, serialize_ledger_metadata, write_set_indices

    data_ensembles = data_ensembles or {}
    key = master_key(b"")

    async def write_entries(client) -> None:
        """Every copy added, at most ``ADDS_IN_FLIGHT`` unanswered at a time: a rolling window
        (a barrier every 900 adds left the bookies idle while the slowest answered)."""
        waiting = [0]
        room: list = []  # the Deferred the loop waits on, and for how few unanswered, when it waits
        failures: list = []

        def answered(_result) -> None:
            waiting[0] -= 1
            if room and waiting[0] <= room[0][1]:
                room.pop()[0].callback(None)

        def failed(failure) -> None:
            failures.append(failure)
            answered(None)

        async def wait_until(low: int) -> None:
            if waiting[0] > low:
                d = defer.Deferred()
                room.append((d, low))
                await d
            if failures:
                failures[0].raiseException()

        for ledger_id, ens in ensembles.items():
            ens = data_ensembles.get(ledger_id, ens)
            dm = DigestManager(ledger_id, DigestType.CRC32C, b"")
            for e in range(entries):
                body = dm.package(e, e - 1, size * (e + 1), payload(ledger_id, e, size))
                for i in write_set_indices(e, 3, 2):
                    if (ledger_id, e, ens[i]) in skip:
                        continue
                    copy = body[:-1] + bytes([body[-1] ^ 1]) if (ledger_id, e, ens[i]) in flip else body
                    waiting[0] += 1
                    d = client.pool.get(ens[i]).add(ledger_id, e, key, copy)
                    d.addCallbacks(answered, failed)
            if waiting[0] >= ADDS_IN_FLIGHT:
                await wait_until(ADDS_IN_FLIGHT // 2)
        await wait_until(0)

    def znodes(root: str, ids: list[int]):
        for ledger_id in ids:
            md = LedgerMetadata.new(ensembles[ledger_id], 2, 2, password=b"")
            yield P.ledger_path(ledger_id, root=root), serialize_ledger_metadata(md.closed(entries - 1, size * entries))

    # The metadata first, as a writer creates a ledger before it adds: a bookie's garbage
    # collector (bookied's and Java's alike) deletes the entries of a ledger it finds on disk
    # and not in ZooKeeper, and the 10^6 fill, entries first, lost 707,287 ledgers' entries
    # to a collection that ran in its eight minutes of adds.
    t0 = time.monotonic()
    zkc = KazooClient(hosts=zk, timeout=60)
    zkc.start()
    root = MetadataServiceURI.parse(uri).root
    ids = sorted(ensembles)
    try:
        for parent in sorted({p for lid in ids[::5000] + ids[-1:] for p in P.ledger_parent_paths(lid, root=root)}):
            zkc.ensure_path(parent)
    finally:
        zkc.stop()
        zkc.close()
    # several sessions, each with several multis in flight (scale_fill's; one synchronous multi
    # at a time was a round trip per 1,000 ledgers)
    create_all(zk, znodes(root, ids))
    t_metadata = time.monotonic() - t0
    # long add timeouts: on a loaded machine a bookie may take over 5 s with thousands queued
    with BlockingBookKeeper(uri, timeout=3600, add_timeout=300, max_queued=ADDS_IN_FLIGHT) as bk:
        bk.run(lambda client: defer.ensureDeferred(write_entries(client)))
    print(
        f"  filled {len(ensembles):,} ledgers from {ids[0]:,} in {time.monotonic() - t0:.0f}s (metadata "
        f"{t_metadata:.0f}s, entries {time.monotonic() - t0 - t_metadata:.0f}s); {load_note()}",
        flush=True,
    )


def shuffled(bookies: list[str], lo: int, hi: int) -> dict[int, list[str]]:
    rnd = random.Random(lo)
    return {lid: rnd.sample(bookies, 3) for lid in range(lo, hi)}


def fsck(uri: str, zk: str, extra: list[str], http_ports: list[int] | None = None, wrap: tuple[str, ...] = ()) -> dict:
    env = dict(os.environ, BKCTL_METADATA_URI=uri, NO_COLOR="1")
    answered = bookie_requests(http_ports) if http_ports else 0
    packets = zk_packets(zk)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [*wrap, sys.executable, "-m", "bkctl", "--json", "ledger", "fsck", *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # fsck's own peak: its VmHWM, read as it runs (the high-water mark of its memory since its
    # exec).  Not ru_maxrss: Linux carries a process's maxrss across fork and exec, so a child's
    # starts at this bench's own RSS when it forked -- the fill's, which grows with the ledgers.
    hwm = 0
    while True:
        hwm = max(hwm, vm_hwm_kib(proc.pid))
        try:
            stdout, stderr = proc.communicate(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            continue
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    took = time.monotonic() - t0
    packets = zk_packets(zk) - packets
    answered = bookie_requests(http_ports) - answered if http_ports else -1
    rss = hwm
    before_rss = 0
    m = re.search(r"checked (\d+) ledgers .*?\((\d+) bookie requests\)", done.stderr, re.S)
    return {
        "code": done.returncode,
        "findings": len(done.stdout.splitlines()),
        "ledgers": int(m.group(1)) if m else -1,
        "bookie_requests": int(m.group(2)) if m else -1,
        "seconds": took,
        "zk_packets": packets,
        "bookies_answered": answered,
        "maxrss_kib": rss if rss > before_rss else None,
        "stderr": done.stderr.strip().splitlines()[-2:],
        "out": done.stdout,
    }


def vm_hwm_kib(pid: int) -> int:
    """The peak resident memory of ``pid`` since its exec (its VmHWM, KiB); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def callgrind(uri: str, zk: str, work: Path) -> None:
    """fsck's instructions, counted by valgrind's callgrind over the whole process (start-up
    included; all threads): a figure the machine's load does not move."""
    out = work / "callgrind.out"
    r = fsck(uri, zk, [], wrap=("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"))
    totals = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M) if out.exists() else None
    if totals is None:
        print(f"  callgrind: no figure (exit {r['code']}: {r['stderr']})", flush=True)
        return
    count = int(totals.group(1))
    print(
        f"  callgrind: fsck of {r['ledgers']:,} ledgers ({r['findings']} findings) took {count / 1e9:.2f} G "
        f"instructions, start-up included: {count / max(1, r['ledgers']) / 1e6:.2f} M a ledger; {load_note()}",
        flush=True,
    )


DBSTORAGE = (
    "ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage\n"
    "dbStorage_writeCacheMaxSizeMb=64\ndbStorage_readAheadCacheMaxSizeMb=64\n"
)


def bookie_requests(http_ports: list[int]) -> int:
    """Requests the bookies answered so far (``bookie_requests_total`` over every op and status)."""
    return sum(requests_by_op(http_ports).values())


def requests_by_op(http_ports: list[int]) -> dict[str, int]:
    """Requests the bookies answered so far, by operation (``bookie_requests_total``'s ``op``)."""
    ops: dict[str, int] = {}
    for series, value in bookie_metrics(*http_ports).items():
        if m := re.fullmatch(r'bookie_requests_total\{op="([^"]+)",.*\}', series):
            ops[m.group(1)] = ops.get(m.group(1), 0) + int(value)
    return ops


def java_replicas_check(peer, work: Path, zk: str, root: str, http_ports: list[int], ledgers: int) -> float | None:
    """Java's auditor replicas check once over the cluster, printed beside fsck's figures; its
    seconds by its own figure (None: it did not complete)."""
    counted: dict[str, int] = {}
    ops_before: dict[str, int] = {}

    def on_start() -> None:
        counted["zk"] = zk_packets(zk)
        ops_before.update(requests_by_op(http_ports))
        counted["bookie"] = sum(ops_before.values())

    r = peer.replicas_check(work, zk, root, on_start=on_start)
    zk_after, ops_after = zk_packets(zk), requests_by_op(http_ports)
    bookie_after = sum(ops_after.values())
    by_op = ", ".join(
        f"{op} {ops_after[op] - ops_before.get(op, 0):,}"
        for op in sorted(ops_after)
        if ops_after[op] > ops_before.get(op, 0)
    )
    if not counted:
        print(f"  Java replicas check did not start: {r.failure} (log: {r.log})", flush=True)
        return None
    what = (
        f"{ledgers:,} ledgers in {r.check_ms / 1000:.1f}s: {ledgers * 1000 / max(r.check_ms, 1):,.0f} ledgers/s "
        f"(its own figure; {r.seconds:.1f}s from its start line to its end line)"
        if r.completed
        else f"did NOT complete after {r.seconds:.1f}s: {r.failure}"
    )
    print(
        f"  Java 4.17.2 auditor replicas check: {what}; {bookie_after - counted['bookie']:,} bookie requests "
        f"({by_op or 'none'}), "
        f"{zk_after - counted['zk']:,} ZooKeeper packets; ledgers counted with an entry of no replica "
        f"{r.no_replica}, < Qa {r.below_ack}, < Qw {r.below_write}; bookies not answering "
        f"{r.not_answered:,} times ({r.ledgers_unanswered:,} ledgers), {r.ledgers_missing_entries:,} ledgers "
        f"logged with missing entries; {load_note()}",
        flush=True,
    )
    return r.check_ms / 1000 if r.check_ms is not None else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kinds(out: str) -> dict[int, str]:
    import json

    return {doc["ledger_id"]: doc["kind"] for doc in map(json.loads, out.splitlines())}


def mixed(uri: str, zk: str, work: Path, args, http_ports: list[int]) -> None:
    """The faults of issue 66 planted among ``--mixed-ledgers`` ledgers on the sandbox's bookieds
    and two Java bookies on DbLedgerStorage; fsck, its fixes, autorecovery, fsck again, and
    the Java client reading back every repairable ledger."""

    from java_peer import JavaPeer

    from bkctl.wire.metadata.layout import MetadataServiceURI
    from bkctl.wire.metadata.zk import ZKMetadataStore

    root = MetadataServiceURI.parse(uri).root
    peer = JavaPeer(args.java_peer)
    section("a mixed cluster: 3 bookieds and 2 Java 4.17.2 bookies on DbLedgerStorage, planted faults")
    java = peer.start_bookies_in(
        work / "java", [(free_port(), free_port()) for _ in range(2)], zk, root, extra_conf=DBSTORAGE
    )
    ar = None
    try:
        jids = [b.bookie_id for b in java]
        with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
            bookies = sorted(store.registration.writable_bookies())
        lo = FIRST + 5_000_000
        ens = shuffled(bookies, lo, lo + args.mixed_ledgers)
        ids = sorted(ens)
        on_java = [lid for lid in ids if set(ens[lid][:2]) & set(jids)]
        flipped, short, moved, lost = on_java[0], ids[1], ids[2], ids[3]
        skip = {(short, 1, ens[short][2]), (lost, 1, ens[lost][1]), (lost, 1, ens[lost][2])}
        bad = next(b for b in ens[flipped][:2] if b in jids)
        outside = [b for b in bookies if b not in ens[moved]]
        data = {moved: [outside[0], outside[1], ens[moved][2]]}
        fill(uri, zk, ens, 2, args.size, data_ensembles=data, skip=frozenset(skip), flip=frozenset({(flipped, 0, bad)}))
        with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
            store.underreplication.mark(lo - 1, [jids[0]])  # a deleted ledger still marked
        planted = {
            flipped: "corrupt",
            short: "missing",
            moved: "misplaced",
            lost: "data_lost",
            lo - 1: "marked_deleted",
        }
        span = f"{lo - 1}-{lo + args.mixed_ledgers - 1}"
        r = fsck(uri, zk, [span])
        got = kinds(r["out"])
        print(
            f"  fsck: {r['ledgers']:,} ledgers in {r['seconds']:.1f}s ({r['ledgers'] / r['seconds']:,.0f}/s), exit "
            f"{r['code']}; planted faults named with their cause and nothing else: {got == planted}"
            + ("" if got == planted else f" (found {got}, planted {planted})")
            + f"; {r['bookie_requests']:,} bookie requests, {r['zk_packets']:,} ZooKeeper packets; {load_note()}",
            flush=True,
        )
        print("  fsck said:", *r["stderr"], sep="\n    ")
        r = fsck(uri, zk, [span, "--fix", "mark", "--fix", "ensemble", "--fix", "unmark", "--force"])
        applied = r["out"].count('"status":"applied"')
        print(f"  fsck --fix: exit {r['code']}, {applied} fixes applied", flush=True)
        env = dict(os.environ, BKCTL_METADATA_URI=uri)
        ar = subprocess.Popen(
            [sys.executable, "-m", "bkctl", "autorecovery", "run", "--bookie-id", "bench-fsck-ar:3181"]
            + ["--set", "auditorPeriodicBookieCheckInterval=0", "--set", "auditorPeriodicCheckInterval=0"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(work / "autorecovery.log", "wb"),
        )
        t0 = time.monotonic()
        with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
            while store.underreplication.count() and time.monotonic() - t0 < 600:
                time.sleep(0.5)
            left = store.underreplication.count()
        print(f"  autorecovery: marks handled in {time.monotonic() - t0:.1f}s ({left} left)", flush=True)
        r = fsck(uri, zk, [span])
        got = kinds(r["out"])
        print(f"  fsck again: exit {r['code']}, findings {got} (only the lost entries: {got == {lost: 'data_lost'}})")
        for lid in (flipped, short, moved, ids[4], ids[-1]):
            out = subprocess.run(
                [str(peer.scripts / "bktool.sh"), "read", f"ledger={lid}", f"zk={zk}", f"root={root}", "pw="],
                env=dict(os.environ, PEER=str(peer.root)),
                capture_output=True,
                text=True,
                timeout=300,
            )
            read = [line.split(" data=", 1)[1] for line in out.stdout.splitlines() if line.startswith("entry ")]
            want = [payload(lid, e, args.size).decode() for e in range(2)]
            print(f"  Java client reads ledger {lid}: {'byte-equal' if read == want else f'DIFFERENT: {read!r}'}")
        if args.java_replicas_check_mixed:
            # last: its ReplicationWorker acts on marks (it unmarked the deleted ledger before fsck --fix could);
            # and only once bkctl's autorecovery is gone, whose auditor it would wait behind for good
            stop(ar)
            ar = None
            print("  Java's replicas check over the repaired mixed cluster (bookie requests: the 3 bookieds' only)")
            java_replicas_check(peer, work / "java-auditor-mixed", zk, root, http_ports, args.mixed_ledgers + 1)
    finally:
        if ar is not None:
            stop(ar)
        peer.stop_bookies_in(java)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM, SIGKILL after 60 s."""
    import signal

    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000", help="ledger counts to fsck, ascending (filled up to each)")
    ap.add_argument("--entries", type=int, default=2)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--dir", default=None, help="keep the sandbox's files here (default: a temporary folder)")
    ap.add_argument(
        "--callgrind",
        type=int,
        metavar="N",
        help="only count fsck's instructions over N ledgers under valgrind's callgrind (bench_fsck's 3,000)",
    )
    ap.add_argument("--fsck-args", default="", help="more arguments for bkctl ledger fsck (e.g. '--all')")
    ap.add_argument("--java-peer", metavar="DIR", help="also a mixed cluster with Java bookies (../shared/java-peer)")
    ap.add_argument("--mixed-ledgers", type=int, default=10_000, help="ledgers of the mixed cluster (--java-peer)")
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="at the largest size: fsck and Java's replicas check this many times each, alternated; medians",
    )
    ap.add_argument(
        "--skip-mixed", action="store_true", help="with --java-peer: no mixed cluster, only the side by side"
    )
    ap.add_argument(
        "--java-replicas-check-mixed",
        action="store_true",
        help="with --java-peer: also run Java's replicas check over the mixed cluster (its DbLedgerStorage bookies)",
    )
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]

    def run(uri: str, _work) -> int:
        from bkctl.sandbox.cluster import sandbox_status
        from bkctl.wire.metadata.layout import MetadataServiceURI
        from bkctl.wire.metadata.zk import ZKMetadataStore

        parsed = MetadataServiceURI.parse(uri)
        zk = parsed.hosts.split(",")[0]
        with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
            bookies = store.registration.writable_bookies()
        http_ports = [b["http_port"] for b in sandbox_status(Path(_work) / "sandbox")["bookies"] if b.get("http_port")]
        peer = None
        if args.java_peer:
            from java_peer import JavaPeer

            peer = JavaPeer(args.java_peer)
        section(f"bkctl ledger fsck over E3/Qw2/Qa2 ledgers of {args.entries} x {args.size} B, 3 bookieds")
        if args.callgrind:
            fill(uri, zk, shuffled(bookies, FIRST, FIRST + args.callgrind), args.entries, args.size)
            callgrind(uri, zk, Path(_work))
            return 0
        filled = 0
        for n in sizes:
            fill(uri, zk, shuffled(bookies, FIRST + filled, FIRST + n), args.entries, args.size)
            filled = n
            times: dict[str, list[float]] = {"fsck": [], "java": []}
            sides = ["fsck", "java"] if peer is not None else ["fsck"]
            for round_, side in alternate(sides, args.rounds if n == sizes[-1] else 1):
                if side == "java":
                    took = java_replicas_check(
                        peer, Path(_work) / f"java-auditor-{n}-{round_}", zk, parsed.root, http_ports, n
                    )
                    if took is not None:
                        times["java"].append(took)
                    continue
                r = fsck(uri, zk, args.fsck_args.split(), http_ports)
                times["fsck"].append(r["seconds"])
                rate = r["ledgers"] / r["seconds"] if r["seconds"] else float("nan")
                rss = "unchanged" if r["maxrss_kib"] is None else f"{r['maxrss_kib'] / 1024:.0f} MiB"
                print(
                    f"  fsck: {r['ledgers']:,} ledgers in {r['seconds']:.1f}s: {rate:,.0f} ledgers/s; exit "
                    f"{r['code']}, {r['findings']} findings; {r['bookie_requests']:,} bookie requests "
                    f"({r['bookie_requests'] / max(1, r['ledgers']):.1f}/ledger; the bookies answered "
                    f"{r['bookies_answered']:,}), {r['zk_packets']:,} ZooKeeper packets "
                    f"({r['zk_packets'] / max(1, r['ledgers']):.3f}/ledger); peak RSS {rss}; {load_note()}",
                    flush=True,
                )
                if r["code"] != 0:
                    print("   ", *r["stderr"], sep="\n    ")
            if len(times["fsck"]) > 1 or times["java"]:
                fs, js = median(times["fsck"]), median(times["java"])
                print(
                    f"  median of {len(times['fsck'])} fsck and {len(times['java'])} Java runs (alternated) at "
                    f"{n:,} ledgers: fsck {fs:.1f}s ({n / fs:,.0f} ledgers/s), Java replicas check {js:.1f}s "
                    f"({n / js:,.0f} ledgers/s): fsck takes {fs / js:.2f}x Java's time; {load_note()}",
                    flush=True,
                )
        if args.java_peer and not args.skip_mixed:
            mixed(uri, zk, Path(_work), args, http_ports)
        return 0

    # ZooKeeper's heap as bench_scale sizes it (1 KiB a ledger and 512 MiB): at 10^6 ledgers the
    # sandbox's default 256 MiB collected garbage until its sessions' pings went unanswered
    most = max(sizes + [args.callgrind or 0] + ([args.mixed_ledgers] if args.java_peer else []))
    return in_sandbox(args.dir, "bench-fsck-", run, zk_heap_mb=512 + most // 1024)


if __name__ == "__main__":
    sys.exit(main())
