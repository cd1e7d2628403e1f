#!/usr/bin/env python3
"""Ledger client benchmark: adds/s and reads/s through wire.client against local bookieds.

Prints figures, asserts nothing. Usage::

    .venv/bin/python bench/bench_client.py [--uri URI] [--entries N] [--size B] [--quick] [--default-gc]

Without ``--uri`` a throw-away sandbox (a real ZooKeeper and 3 bookieds) is
started in a temporary directory and stopped at the end.  Ledgers are
E=3 Qw=2 Qa=2 with CRC32C digests, plus one E=3 Qw=3 Qa=2 ledger read over
v2, where the client uses batch reads.  The client, the bookies and ZooKeeper
share the machine, so the figures depend on what else runs: the load and the
client's own CPU time per add are printed with them.

``--java-peer DIR`` (a Java peer built by ../shared/java-peer, ``$PEER``) runs
instead the Python client (v3) and the Java 4.17.2 client (``bktool.sh bench
... warmup=N``, a fresh JVM warmed by N unmeasured adds and reads) on the same
3 bookieds, E3/Qw2/Qa2 and E1/Qw1/Qa1, alternated: both rates and their ratio
beside the load average, each client's CPU per operation, the bookieds' CPU
per operation and their resident memory.  Both read back in batches of 100
entries with up to 1,000 entries outstanding; both add with up to 1,000, the
Python client through its per-entry API as ``bkctl bench`` does (``--bulk``: ``add_many``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import load_note, pct, section  # noqa: E402
from java_peer import SIDE_BY_SIDE_ENTRIES, add_java_peer_options  # noqa: E402

from bkctl.wire.client.blocking import BlockingBookKeeper  # noqa: E402

#: Pipelined 100 B adds, E=3 Qw=2 Qa=2, max_inflight 1000 (perf brief).
TARGET_ADDS = 10_000


def bench_pipelined_adds(
    bk: BlockingBookKeeper,
    n: int,
    size: int,
    max_inflight: int,
    target: bool = False,
    ensemble: tuple[int, int, int] = (3, 2, 2),
) -> int:
    lh = bk.create(*ensemble, max_inflight=max_inflight)
    payload = b"x" * size
    started = time.perf_counter()
    cpu = time.process_time()  # the client process: its reactor thread does the work
    last = lh.add_many(payload for _ in range(n))
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    lh.close()
    note = f"   (target >= {TARGET_ADDS:,})" if target else ""
    print(
        f"  {n} x {size} B, E/Qw/Qa {'/'.join(map(str, ensemble))}, max_inflight {max_inflight}: "
        f"{n / elapsed:,.0f} adds/s{note} "
        f"({elapsed:.2f}s, client CPU {cpu / n * 1e6:.0f} us/add, last entry {last})",
        flush=True,
    )
    return lh.ledger_id


def bench_sync_adds(bk: BlockingBookKeeper, n: int, size: int) -> None:
    lh = bk.create(3, 2, 2)
    payload = b"y" * size
    latencies = []
    for _ in range(n):
        t = time.perf_counter()
        lh.add(payload)
        latencies.append(time.perf_counter() - t)
    lh.close()
    print(
        f"  {n} synchronous adds: p50 {pct(latencies, 0.5) * 1e3:.2f} ms, p99 {pct(latencies, 0.99) * 1e3:.2f} ms",
        flush=True,
    )


def bench_reads(bk: BlockingBookKeeper, ledger_id: int, batch: int, profile: bool = False) -> None:
    rh = bk.open(ledger_id)
    md = rh.metadata
    profiler = None
    if profile:  # the reactor thread does the work: profile it there
        import cProfile

        profiler = cProfile.Profile()
        bk.run(lambda _client: profiler.enable())
    started = time.perf_counter()
    cpu = time.process_time()  # the client process: its reactor thread does the work
    count = 0
    for entries in rh.read_range(0, rh.last_entry_id, batch=batch):
        count += len(entries)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    if profiler is not None:
        bk.run(lambda _client: profiler.disable())
    print(
        f"  {count} entries of E/Qw/Qa {md.ensemble_size}/{md.write_quorum}/{md.ack_quorum} in batches of "
        f"{batch}: {count / elapsed:,.0f} entries/s ({elapsed:.2f}s, client CPU {cpu / max(count, 1) * 1e6:.1f}"
        f" us/entry; {load_note()})",
        flush=True,
    )
    if profiler is not None:
        import pstats

        print("  where the reactor thread's time goes (cProfile inflates it; tottime order):")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(18)


def bench_recovery(bk: BlockingBookKeeper, n: int, size: int) -> None:
    writer = BlockingBookKeeper(bk.client.store.uri)
    lh = writer.create(3, 2, 2)
    lh.add_many(b"z" * size for _ in range(n))
    writer.run(lambda client: client.close())  # vanish without closing the ledger
    started = time.perf_counter()
    rh = bk.recover(lh.ledger_id)
    print(
        f"  recovery of an open ledger with {n} entries: {(time.perf_counter() - started) * 1e3:.0f} ms "
        f"(last entry {rh.last_entry_id})",
        flush=True,
    )


def bench_tail(uri: str, rate: float, n: int, size: int, explicit_lac: float) -> None:
    """Delay from an add's acknowledgement to `bkctl ledger tail` printing the
    entry (a separate process, default --interval), with a writer adding
    ``rate`` entries/s; with ``explicit_lac`` (seconds) the writer sends a
    LAC no add carried to the bookies that long after it was confirmed
    (WRITE_LAC: the client's explicit_lac_interval, Java's
    explicitLacInterval), else readers learn an entry is confirmed only
    from the next one."""
    import subprocess
    import threading

    writer = BlockingBookKeeper(uri, explicit_lac_interval=explicit_lac)
    lh = writer.create(3, 2, 2)
    bkctl = os.path.join(os.path.dirname(sys.executable), "bkctl")
    tail = subprocess.Popen(
        [bkctl, "--json", "ledger", "tail", str(lh.ledger_id), "--from", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, BKCTL_METADATA_URI=uri),
    )
    printed: dict[int, float] = {}

    def follow() -> None:
        import json

        for line in tail.stdout:
            printed[json.loads(line)["entry_id"]] = time.monotonic()

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    acked: dict[int, float] = {}
    try:
        lh.add(b"w" * size)  # entry 0: the tail has started once it prints it
        deadline = time.monotonic() + 30
        while 0 not in printed and time.monotonic() < deadline:
            time.sleep(0.01)
        payload = b"t" * size
        started = time.monotonic()
        for i in range(1, n + 1):
            pause = started + i / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            entry_id = lh.add(payload)
            acked[entry_id] = time.monotonic()
        lh.close()  # the tail ends once it printed the last entry
        tail.wait(60)
        reader.join(10)
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
        writer.close()
    # The last entry has no next add to carry its LAC and closing does not
    # send one: the tail learns of it from the metadata, once a wait ends.
    last = max(acked)
    last_delay = printed[last] - acked[last] if last in printed else None
    delays = [printed[e] - t for e, t in acked.items() if e in printed and e != last]
    missing = len(acked) - len(delays) - (last_delay is not None)
    how = (
        f"writer's explicit LAC interval {explicit_lac * 1e3:g} ms"
        if explicit_lac
        else "LAC piggybacked on the next add"
    )
    print(
        f"  {len(acked)} adds at {rate:g}/s ({how}): add ack -> tail prints it: p50 {pct(delays, 0.5) * 1e3:.1f} ms, "
        f"p90 {pct(delays, 0.9) * 1e3:.1f} ms, max {max(delays) * 1e3:.1f} ms; the last one (the close "
        f"tells) {'never' if last_delay is None else f'{last_delay * 1e3:.0f} ms'}"
        f"{f', {missing} never printed' if missing else ''}  (target p50 <= 5 ms; {load_note()})",
        flush=True,
    )


def run(uri: str, entries: int, size: int, quick: bool, profile: bool = False) -> None:
    for protocol in ("v3", "v2"):
        bk = BlockingBookKeeper(uri, protocol=protocol)
        try:
            section(f"pipelined adds, protocol {protocol}, E=3 Qw=2 Qa=2; {load_note()}")
            bench_pipelined_adds(bk, max(1000, entries // 10), size, 1000)  # warm-up
            ledger_id = bench_pipelined_adds(bk, entries, size, 1000, target=size == 100)
            if not quick:
                bench_pipelined_adds(bk, entries, size, 100)
            single_id = bench_pipelined_adds(bk, entries, size, 1000, ensemble=(1, 1, 1))
            section(f"synchronous adds, protocol {protocol}")
            bench_sync_adds(bk, 200 if quick else 1000, size)
            section(f"reads, protocol {protocol} (targets over v3: >= 40,000/s E3/Qw2/Qa2, >= 35,000/s E1/Qw1/Qa1)")
            bench_reads(bk, ledger_id, 1000, profile)
            bench_reads(bk, single_id, 1000, profile and protocol == "v3")
            if protocol == "v2":
                section("reads of an unstriped ledger (E = Qw), protocol v2: BATCH_READ_ENTRY")
                bench_reads(bk, bench_pipelined_adds(bk, entries, size, 1000, ensemble=(3, 3, 2)), 1000)
            if protocol == "v3":
                section("recovery")
                bench_recovery(bk, 1000, size)
                section("ledger tail (bkctl ledger tail --json, v3)")
                for explicit_lac in (0.0, 0.001):
                    bench_tail(uri, 100, 200 if quick else 500, size, explicit_lac)
        finally:
            bk.close()


def python_pass(bk: BlockingBookKeeper, ensemble: tuple[int, int, int], n: int, size: int, bulk: bool = False) -> dict:
    """The Java client's bench pass, by the Python client: ``n`` pipelined adds
    (1,000 outstanding), close, then a read back in batches of 100.  The adds go
    through the per-entry API, one ``add_entry`` and its Deferred each, as ``bkctl
    bench`` makes them (:func:`bkctl.ops.bench.drive_adds`); with ``bulk``, through
    ``add_many``."""
    from bkctl.ops.bench import drive_adds, handle_window
    from bkctl.wire.client.blocking import run_in_reactor

    payload = b"p" * size
    lh = bk.create(*ensemble, max_inflight=1000 if bulk else handle_window(1000))
    t0, c0 = time.monotonic(), time.process_time()
    if bulk:
        lh.add_many(payload for _ in range(n))
    else:
        run_in_reactor(drive_adds, bk.client, lh.handle, n, payload, 1000, None, timeout=None)
    t1, c1 = time.monotonic(), time.process_time()
    lh.close()
    rh = bk.open(lh.ledger_id)
    t2, c2 = time.monotonic(), time.process_time()
    reads = sum(len(entries) for entries in rh.read_range(0, rh.last_entry_id, batch=100))
    t3, c3 = time.monotonic(), time.process_time()
    return {
        "adds": n / (t1 - t0),
        "reads": reads / (t3 - t2),
        "add_window": (t0, t1),
        "read_window": (t2, t3),
        "client_add_us": (c1 - c0) * 1e6 / n,
        "client_read_us": (c3 - c2) * 1e6 / max(reads, 1),
    }


def side_by_side(
    uri: str,
    bookie_pids: list[int],
    peer_dir: str,
    sizes: list[int],
    entries: int,
    warmup: int,
    rounds: int,
    bulk: bool = False,
) -> None:
    """The Python client and the Java client on the same bookies; see the module's docstring."""
    from java_peer import CpuSampler, JavaPeer, alternate, entries_for, print_medians

    from bkctl.wire.metadata.layout import MetadataServiceURI

    peer = JavaPeer(peer_dir)
    parsed = MetadataServiceURI.parse(uri)
    bk = BlockingBookKeeper(uri, protocol="v3", read_window=1000)  # Java's rinflight: 10 batches of 100
    names = [f"bookie-{i}" for i in range(len(bookie_pids))]
    try:
        with CpuSampler(dict(zip(names, bookie_pids))) as sampler:

            def bookies_us(window: tuple[float, float], ops: int) -> float:
                return sum(sampler.per_op_us(name, window, ops) for name in names)

            for size in sizes:
                n, warm = entries_for(size, entries), entries_for(size, warmup, 0)
                for ensemble in ((3, 2, 2), (1, 1, 1)):
                    label = f"E{ensemble[0]}/Qw{ensemble[1]}/Qa{ensemble[2]} {size} B"
                    section(
                        f"{label}: {n} entries per run (+{warm} warm-up), {rounds} rounds alternated; {load_note()}"
                    )
                    if warm:
                        python_pass(bk, ensemble, warm, size, bulk)  # this process stays warm from here on
                    got: dict[str, list] = {"python": [], "java": []}
                    for r, side in alternate(["python", "java"], rounds):
                        if side == "python":
                            res = python_pass(bk, ensemble, n, size, bulk)
                            adds, reads, aw, rw = res["adds"], res["reads"], res["add_window"], res["read_window"]
                            client = (res["client_add_us"], res["client_read_us"])
                        else:
                            jres = peer.bench(parsed.hosts, parsed.root, ensemble, n, size, warm, sampler)
                            adds, reads, aw, rw = jres.adds_per_s, jres.reads_per_s, jres.add_window, jres.read_window
                            client = (
                                sampler.per_op_us("java-client", aw, jres.adds),
                                sampler.per_op_us("java-client", rw, jres.reads),
                            )
                            jit = (
                                f"  Java JIT {sampler.jit_share('java-client', aw):.2f}/"
                                f"{sampler.jit_share('java-client', rw):.2f} cores"
                            )
                        server = (bookies_us(aw, n), bookies_us(rw, n))
                        got[side].append((adds, reads, *client, *server))
                        print(
                            f"  round {r + 1} {side:>6}: {adds:>9,.0f} adds/s (client {client[0]:5.1f} us/add, "
                            f"bookies {server[0]:5.1f} us/add)  {reads:>9,.0f} reads/s (client {client[1]:5.1f} "
                            f"us/read, bookies {server[1]:5.1f} us/read){jit if side == 'java' else ''}  "
                            f"{load_note()}",
                            flush=True,
                        )
                    py, java = print_medians(label, size, got["python"], got["java"])
                    print(
                        f"  client CPU per add: Python {py[2]:.1f} us  Java {java[2]:.1f} us; per read: Python "
                        f"{py[3]:.1f} us  Java {java[3]:.1f} us; bookies' CPU per add: under Python {py[4]:.1f} us"
                        f"  under Java {java[4]:.1f} us"
                    )
                    print(
                        "  bookieds' resident memory (peak so far): "
                        + "  ".join(f"{sampler.peak_rss.get(name, 0):,.0f}" for name in names)
                        + f" MiB  ({load_note()})",
                        flush=True,
                    )
    finally:
        bk.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--uri", help="metadata service URI of a running cluster (default: start a sandbox)")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile the client's reactor thread while it reads (cProfile, top functions)",
    )
    parser.add_argument(
        "--default-gc",
        action="store_true",
        help="leave CPython's garbage collector as it is (bkctl settles it before it talks to "
        "bookies: wire.process.runtime)",
    )
    add_java_peer_options(parser)
    parser.add_argument(
        "--bulk",
        action="store_true",
        help="side by side: the Python client adds through add_many (default: the per-entry add_entry, as bkctl bench)",
    )
    args = parser.parse_args()
    if args.entries is None:  # --entries: 50,000 here, java_peer.SIDE_BY_SIDE_ENTRIES side by side
        args.entries = SIDE_BY_SIDE_ENTRIES if args.java_peer else 50_000
    entries = min(args.entries, 10_000) if args.quick else args.entries
    if not args.default_gc:
        from bkctl.wire.process.runtime import settle_garbage_collector

        settle_garbage_collector()  # as bkctl's App.bk does
    if args.uri and not args.java_peer:
        run(args.uri, entries, args.size, args.quick, args.profile)
        return
    from bkctl.sandbox.cluster import sandbox_down, sandbox_up

    with tempfile.TemporaryDirectory(prefix="bench-client-") as tmp:
        print(f"starting a sandbox (ZooKeeper + 3 bookieds) in {tmp} ...", flush=True)
        state = sandbox_up(tmp, bookies=3)
        try:
            if args.java_peer:
                side_by_side(
                    state["uri"],
                    [b["pid"] for b in state["bookies"]],
                    args.java_peer,
                    args.sizes,
                    entries,
                    args.warmup,
                    args.rounds,
                    args.bulk,
                )
            else:
                run(state["uri"], entries, args.size, args.quick, args.profile)
        finally:
            sandbox_down(tmp, purge=False)


if __name__ == "__main__":
    main()
