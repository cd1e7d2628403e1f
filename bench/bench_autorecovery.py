#!/usr/bin/env python3
"""Autorecovery benchmark: how fast a lost bookie's replicas come back.

Prints figures, asserts nothing. Usage::

    .venv/bin/python bench/bench_autorecovery.py [--entries 1000000] [--ledgers 200] [--modes inside,1,4,recover]
        [--rate-limit BYTES_PER_S] [--probe-rate ADDS_PER_S] [--probe-mode closed|open] [--java-peer DIR --rounds 3]

Each mode gets a fresh throw-away sandbox (a real ZooKeeper and 5 bookieds):
``--ledgers`` E3/Qw2/Qa2 ledgers with ``--entries`` entries of ``--size`` bytes
in all are written and closed, the bookie holding most of them is SIGKILLed,
and the time until no ledger names it and nothing is marked under-replicated
is measured.  Mode ``inside`` has each bookied run its daemon
(``autoRecoveryDaemonEnabled=true``: one per bookie, as Java runs it; bookied runs it in a child
process, whose CPU counts as its bookie's below); mode ``N`` runs N ``bkctl autorecovery run`` daemons
(lostBookieRecoveryDelay 0); mode ``recover`` runs ``bkctl recover --parallel 4``
from one process once the bookie's registration is gone.  Times include the
bookie's ZooKeeper session timeout (the sandbox's 10 s) for the daemons, which is what an
operator waits for too; the figure after the registration vanished is printed
beside it.  Everything shares the machine: the load is printed with each figure,
and so is the CPU the repairing processes (the daemons, or ``bkctl recover``)
spent per entry copied (one read and one recovery add each), from /proc, and the
CPU the surviving bookies spent per entry copied (serving those reads and adds).

``--probe-rate`` (default 200) adds 100 B entries at that steady rate to a
ledger of its own on the four survivors while the repair runs, and prints the
add latency p50/p99 during the repair next to the same figures idle (taken
for ``--idle-seconds`` before the SIGKILL, once ``--settle-seconds`` have let
the bookies flush what the bulk write left them): the cost of the repair to the
cluster's live writers.  The probe adds one entry at a time (``--probe-mode
closed``), so an add that stalls holds back those due after it, which then
count only their own wait; ``--probe-mode open`` sends each add at its slot of
the schedule, answered or not (as a writer with several adds in flight
sends them), so that a stall counts for every add sent during it.  Beside
them, from the survivors' own ``/metrics``: their journals' fsync latency and entries per fsync, and the latency of the
adds they served, the live writer's apart from the repair's recovery adds, idle
and during the repair -- whether a slower live add waited in the bookies (from
reading its request to its answer) or elsewhere.
``--rate-limit`` sets the daemons' ``replicationRateByBytes``.

``--java-peer DIR`` (a Java BookKeeper 4.17.2 built by ../shared/java-peer) measures mode
``inside`` against 5 Java bookies with their autorecovery inside (on ports and in folders
of the run's own, the metadata formatted by Java), the same ledgers written by the same
client, ``--rounds`` times each, alternated: the times to re-protect (and per ledger: from
the registration gone until the ledger's metadata no longer names the lost bookie,
averaged), the surviving bookies' CPU per entry copied (their daemons inside them on both
sides) and the live adds' p99 ratio, each run's load beside it, then the medians and ratios.
Java's worker copies every entry of a fragment's range to the new bookie, ours only those
the lost bookie held; "per entry copied" counts the latter on both sides.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import bookie_metrics, cpu_seconds, histogram_quantile, load_note, pct, section  # noqa: E402


class LatencyProbe:
    """Adds entries at a steady rate from a process of its own (as a live
    writer is an application of its own: in this process, the GIL shared with
    the completion polling below delayed the adds' answers by up to its switch
    interval) and keeps each add's latency; :meth:`window` returns those since
    the last call."""

    def __init__(self, uri: str, rate: float, avoid: str, open_loop: bool = False):
        import multiprocessing

        context = multiprocessing.get_context("spawn")  # this process has threads: no fork
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_open_loop_probe_main if open_loop else _probe_main, args=(uri, rate, avoid, child), daemon=True
        )
        self._process.start()
        ready = self._conn.recv()
        if isinstance(ready, str):
            raise RuntimeError(ready)
        self.failures = 0

    def window(self) -> list[float]:
        self._conn.send("window")
        samples, self.failures = self._conn.recv()
        return samples

    def close(self) -> None:
        self._conn.send("stop")
        self._process.join(30)
        if self._process.is_alive():
            self._process.kill()


def _probe_ledger(uri: str, avoid: str, conn):
    """The probe's client and ledger, on survivors only (so that its writer
    measures the repair's load rather than its own ensemble change); None
    (said to the parent) when no such ledger could be made."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bkctl.wire.client.blocking import BlockingBookKeeper

    bk = BlockingBookKeeper(uri, timeout=60)
    for _ in range(50):
        handle = bk.create(3, 2, 2)
        if avoid not in handle.handle.metadata.bookies:
            conn.send(True)
            return bk, handle
        handle.close()
    conn.send(f"could not place the probe's ledger away from {avoid}")
    bk.close()
    return None, None


def _probe_main(uri: str, rate: float, avoid: str, conn) -> None:
    """The probe's process: adds at ``rate``, one at a time, until told to
    stop, answering "window" with the latencies."""
    bk, handle = _probe_ledger(uri, avoid, conn)
    if bk is None:
        return
    payload = b"p" * 100
    interval = 1.0 / rate
    samples: list[float] = []
    failures = 0
    due = time.perf_counter()
    try:
        while True:
            while conn.poll():
                command = conn.recv()
                if command == "stop":
                    return
                conn.send((samples, failures))
                samples = []
            due += interval
            t = time.perf_counter()
            try:
                handle.add(payload)
                samples.append(time.perf_counter() - t)
            except Exception:  # noqa: BLE001 - counted and reported
                failures += 1
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
    finally:
        bk.close()


def _open_loop_probe_main(uri: str, rate: float, avoid: str, conn) -> None:
    """``--probe-mode open``: adds sent at their slots of the ``rate``
    schedule whether or not the ones before them were answered (as a writer
    with several adds in flight sends them), so that a stall counts for every
    add sent during it.  Each is timed from its send, not from its slot: the
    probe's timer fires up to a millisecond late (epoll's resolution), which is
    the probe's, not the cluster's."""
    bk, handle = _probe_ledger(uri, avoid, conn)
    if bk is None:
        return
    from twisted.internet import task

    from bkctl.wire.client.blocking import run_in_reactor

    payload = b"p" * 100
    state = {"samples": [], "failures": 0, "issued": 0}
    start = time.perf_counter()

    def answered(_entry_id, sent):
        state["samples"].append(time.perf_counter() - sent)

    def failed(_failure):
        state["failures"] += 1

    def send_due():
        due = int((time.perf_counter() - start) * rate) + 1
        while state["issued"] < due:
            state["issued"] += 1
            handle.handle.add_entry(payload).addCallbacks(answered, failed, callbackArgs=(time.perf_counter(),))

    def take():
        samples, state["samples"] = state["samples"], []
        return samples, state["failures"]

    loop = task.LoopingCall(send_due)
    run_in_reactor(lambda: loop.start(1.0 / rate) and None)
    try:
        while conn.recv() != "stop":
            conn.send(run_in_reactor(take))
    finally:
        run_in_reactor(loop.stop)
        bk.close()


def wait_until_repaired(store, ledger_ids: list[int], victim: str) -> dict[int, float]:
    """Wait until no ledger of ``ledger_ids`` names ``victim`` and nothing is marked
    under-replicated; returns when each ledger stopped naming it (perf_counter).

    A data watch per ledger tells when its metadata changes: reading every
    ledger five times a second was some 650 ZooKeeper reads a second for the
    whole repair, a tenth of a core in this process and more in ZooKeeper's,
    taken from the repair and the live writer the benchmark measures."""
    import threading

    from bkctl.wire.metadata.ledger import parse_ledger_metadata

    lock = threading.Condition()
    done: dict[int, float] = {}
    stops = []

    def watcher(lid):
        def changed(data, stat):
            if data is None or lid in done:
                return
            if victim not in parse_ledger_metadata(data).bookies:
                with lock:
                    done[lid] = time.perf_counter()
                    lock.notify_all()

        return changed

    for lid in ledger_ids:
        stops.append(store.watch_data(store.ledgers.path(lid), watcher(lid)))
    try:
        with lock:
            while len(done) < len(ledger_ids):
                lock.wait(1.0)
        while store.underreplication.count():
            time.sleep(0.2)
    finally:
        for stop in stops:
            stop()
    return done


def latency_note(samples: list[float]) -> str:
    if not samples:
        return "no adds"
    return f"p50 {pct(samples, 0.5) * 1e3:.2f} ms, p99 {pct(samples, 0.99) * 1e3:.2f} ms ({len(samples):,} adds)"


#: a histogram the bench derives from two of the bookies': their adds' minus their recovery adds'
WRITERS_ADDS = "writers_add_latency_seconds"


def with_writers_adds(scrape: dict[str, float]) -> dict[str, float]:
    """``scrape`` plus the live writers' adds as a histogram of their own: the
    bookies count every add as ``op="add"`` and the recovery adds (the repair's
    copies, which the journal may hold for company) also apart, so the adds
    served p99 of both together was the copies' and said nothing of the live
    writer's wait in the bookies."""
    out = dict(scrape)
    add, recovery = (
        'bookie_request_latency_seconds_bucket{op="add",le="',
        'bookie_recovery_add_latency_seconds_bucket{le="',
    )
    for series, value in scrape.items():
        if series.startswith(add):
            le = series[len(add) :]
            out[f'{WRITERS_ADDS}_bucket{{le="{le}'] = value - scrape.get(recovery + le, 0.0)
    return out


def bookie_note(before: dict[str, float], after: dict[str, float]) -> str:
    """The bookies' journal and add figures between two scrapes (bucket upper bounds)."""
    before, after = with_writers_adds(before), with_writers_adds(after)

    def ms(name: str, q: float, labels: str = "") -> str:
        return f"{histogram_quantile(before, after, name, q, labels) * 1e3:g}"

    fsync, copies = "bookie_journal_fsync_latency_seconds", "bookie_recovery_add_latency_seconds"
    note = (
        f"journal fsync p50/p99 <= {ms(fsync, 0.5)}/{ms(fsync, 0.99)} ms, "
        f"entries per fsync p50 <= {histogram_quantile(before, after, 'bookie_journal_entries_per_fsync', 0.5):g}, "
        f"live adds served p50/p99 <= {ms(WRITERS_ADDS, 0.5)}/{ms(WRITERS_ADDS, 0.99)} ms"
    )
    if histogram_quantile(before, after, copies, 0.5) > 0:  # NaN (none served) is not
        note += f", recovery adds p50/p99 <= {ms(copies, 0.5)}/{ms(copies, 0.99)} ms"
    return note


def children_cpu() -> float:
    """CPU of the children waited for so far (a finished ``bkctl recover``)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def write_ledgers(uri: str, ledgers: int, entries: int, size: int) -> list[int]:
    from bkctl.wire.client.blocking import BlockingBookKeeper

    per = max(1, entries // ledgers)
    payload = b"r" * size
    ids = []
    with BlockingBookKeeper(uri, timeout=600) as bk:
        for _ in range(ledgers):
            lh = bk.create(3, 2, 2)
            lh.add_many(payload for _ in range(per))
            lh.close()
            ids.append(lh.ledger_id)
    return ids


def repair_settings(args, ours: bool = True) -> dict[str, str]:
    """The bk_server.conf keys the bench sets in the bookies running the daemons; only those given
    (``--set`` only in ours)."""
    settings = {}
    if args.batch is not None:
        settings["rereplicationEntryBatchSize"] = str(args.batch)
    if args.rate_limit:
        settings["replicationRateByBytes"] = str(args.rate_limit)
    for setting in args.set if ours else ():
        key, _, value = setting.partition("=")
        settings[key.strip()] = value.strip()
    return settings


@dataclass
class Cluster:
    """A cluster under test: its metadata URI, its bookies (``id``, ``pid``, ``http_port``: our
    sandbox's records) and the repairing processes outside the bookies (``bkctl autorecovery run``)."""

    label: str
    uri: str
    bookies: list[dict]
    daemons: list[subprocess.Popen] = field(default_factory=list)
    #: whether the bookies serve our /metrics (Java's peer has NullStatsProvider: an empty page)
    metrics: bool = True


@contextmanager
def our_cluster(tmp: str, mode: str, args):
    """5 bookieds in a throw-away sandbox; mode ``inside``: each runs the autorecovery daemon
    (autoRecoveryDaemonEnabled=true, one per bookie as Java runs it), ``N``: N ``bkctl
    autorecovery run`` daemons beside them, ``recover``: none (``bkctl recover`` later)."""
    from bkctl.sandbox.cluster import sandbox_down, sandbox_up

    settings = repair_settings(args)
    inside = mode == "inside"
    state = sandbox_up(tmp, bookies=5, autorecovery=inside, settings=settings if inside else None)
    records = [{"id": b["bookie_id"], "pid": b["pid"], "http_port": b.get("http_port")} for b in state["bookies"]]
    label = (
        "5 bookieds, autorecovery inside each"
        if inside
        else "bkctl recover --parallel 4"
        if mode == "recover"
        else f"{mode} autorecovery daemon(s)"
    )
    cluster = Cluster(label, state["uri"], records)
    try:
        yield cluster
    finally:
        for proc in cluster.daemons:
            proc.send_signal(signal.SIGTERM)
        for proc in cluster.daemons:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        sandbox_down(tmp, purge=False)


@contextmanager
def java_cluster(tmp: str, peer, args):
    """5 Java 4.17.2 bookies of the peer with autoRecoveryDaemonEnabled=true (ports and folders
    of this run's own), on a ZooKeeper of our sandbox, the metadata formatted by Java."""
    from bkctl.sandbox.cluster import sandbox_down, sandbox_up
    from bkctl.sandbox.zookeeper import free_port

    state = sandbox_up(tmp, bookies=0)
    zk = f"127.0.0.1:{state['zookeeper']['port']}"
    ports = []
    while len(ports) < 5:
        pair = (free_port(), free_port())
        if not set(pair) & {p for pp in ports for p in pp} and pair[0] != pair[1]:
            ports.append(pair)
    bookies = []
    try:
        peer.format_metadata(zk, "/ledgers", [f"127.0.0.1:{p}" for p, _ in ports])
        extra = "".join(f"{k}={v}\n" for k, v in repair_settings(args, ours=False).items())
        bookies = peer.start_bookies_in(
            os.path.join(tmp, "java"), ports, zk, "/ledgers", autorecovery=True, extra_conf=extra
        )
        records = [{"id": b.bookie_id, "pid": b.pid, "http_port": b.http_port} for b in bookies]
        yield Cluster(
            "5 Java 4.17.2 bookies, autorecovery inside each", f"zk+hierarchical://{zk}/ledgers", records, metrics=False
        )
    finally:
        peer.stop_bookies_in(bookies)
        sandbox_down(tmp, purge=False)


def run_mode(mode: str, args, peer=None) -> dict:
    """One measured repair on a fresh cluster (mode ``java``: the Java peer's); its figures."""
    from bkctl.wire.metadata.zk import ZKMetadataStore

    with (
        tempfile.TemporaryDirectory(prefix="bench-ar-") as tmp,
        java_cluster(tmp, peer, args) if mode == "java" else our_cluster(tmp, mode, args) as cluster,
    ):
        return measure(cluster, mode, args, tmp, ZKMetadataStore)


def measure(cluster: Cluster, mode: str, args, tmp: str, store_class) -> dict:
    from bkctl.sandbox.zookeeper import child_pids
    from bkctl.wire import fastpath

    uri = cluster.uri
    t = time.perf_counter()
    ids = write_ledgers(uri, args.ledgers, args.entries, args.size)
    print(
        f"  {cluster.label}: wrote {len(ids)} ledgers, {args.entries:,} x {args.size} B in "
        f"{time.perf_counter() - t:.1f}s",
        flush=True,
    )
    store = store_class(uri, timeout=20, twins=fastpath.selected()).start()
    try:
        store.underreplication.set_lost_bookie_recovery_delay(0)
        held: dict[str, int] = {}
        for lid in ids:
            md = store.ledgers.read(lid)[0]
            for entry_id in range(md.last_entry_id + 1) if args.exact else ():
                for b in md.write_set(entry_id):
                    held[b] = held.get(b, 0) + 1
            if not args.exact:
                for b in md.bookies:
                    held[b] = held.get(b, 0) + (md.last_entry_id + 1) * 2 // 3
        victim = max(held, key=held.get)
        probe = LatencyProbe(uri, args.probe_rate, victim, args.probe_mode == "open") if args.probe_rate > 0 else None
        if mode not in ("recover", "inside", "java"):
            for i in range(int(mode)):
                cluster.daemons.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "bkctl",
                            "-m",
                            uri,
                            "autorecovery",
                            "run",
                            "--bookie-id",
                            f"bench-{i}:3181",
                            "--set",
                            "auditorPeriodicBookieCheckInterval=0",
                            "--set",
                            "auditorPeriodicCheckInterval=0",
                            "--set",
                            f"rereplicationEntryBatchSize={args.batch or 64}",
                            "--set",
                            f"replicationRateByBytes={args.rate_limit}",
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=open(os.path.join(tmp, f"ar-{i}.log"), "wb"),
                    )
                )
        if mode != "recover":
            while store.auditor.current() is None:
                time.sleep(0.1)
        record = next(b for b in cluster.bookies if b["id"] == victim)
        survivor_records = [b for b in cluster.bookies if b["id"] != victim]
        on_victim = [lid for lid in ids if victim in store.ledgers.read(lid)[0].bookies]
        http_ports = [b["http_port"] for b in survivor_records if b.get("http_port")] if cluster.metrics else []
        if probe is not None:
            time.sleep(args.settle_seconds)  # the bulk write's flushes are not the idle cluster
            probe.window()
            idle_from = bookie_metrics(*http_ports)
            time.sleep(args.idle_seconds)
            idle = probe.window()
            idle_to = bookie_metrics(*http_ports)
        cpu_before = sum(cpu_seconds(p.pid) for p in cluster.daemons) + children_cpu()
        survivors = [int(b["pid"]) for b in survivor_records]
        children = [child for pid in survivors for child in child_pids(pid)]  # their autorecovery processes
        survivors += children
        cpu_at_kill = {pid: cpu_seconds(pid) for pid in survivors}
        killed = time.perf_counter()
        os.kill(int(record["pid"]), signal.SIGKILL)
        while victim in store.registration.writable_bookies():
            time.sleep(0.05)
        unregistered = time.perf_counter()
        if probe is not None:
            probe.window()
            repair_from = bookie_metrics(*http_ports)
        spies = (
            [
                subprocess.Popen(
                    [
                        args.py_spy,
                        "record",
                        "--subprocesses",
                        "-p",
                        str(b["pid"]),
                        "-r",
                        "200",
                        "-f",
                        "raw",
                        "-o",
                        os.path.join(args.profile_dir, f"{mode}-{b['id'].replace(':', '_')}.txt"),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for b in survivor_records
            ]
            if args.profile_dir
            else []
        )
        if mode == "recover":
            subprocess.run(
                [sys.executable, "-m", "bkctl", "-m", uri, "-q", "recover", victim, "--force", "--parallel", "4"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        ledger_done = wait_until_repaired(store, on_victim, victim)
        done = time.perf_counter()
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT
        for spy in spies:
            spy.wait(60)
        cpu = sum(cpu_seconds(p.pid) for p in cluster.daemons) + children_cpu() - cpu_before
        spent = {pid: cpu_seconds(pid) - before for pid, before in cpu_at_kill.items()}
        bookies_cpu = sum(spent.values())
        children_cpu_s = sum(spent[pid] for pid in children)
        copied = held[victim]
        repair = done - unregistered
        per_ledger = sum(t - unregistered for t in ledger_done.values()) / max(len(ledger_done), 1)
        figures = {
            "repair_s": repair,
            "per_ledger_s": per_ledger,
            "ledgers": len(on_victim),
            "cpu_us": (bookies_cpu + cpu) / max(copied, 1) * 1e6,
            "p99_ratio": float("nan"),
        }
        daemons = "" if mode in ("inside", "java") else f"repair CPU {cpu / max(copied, 1) * 1e6:.1f} us per entry, "
        print(
            f"  {cluster.label}: {len(on_victim)} ledgers, ~{copied:,} entries: {done - killed:.1f}s from SIGKILL, "
            f"{repair:.1f}s after the registration went ({per_ledger:.1f}s per ledger on average until it "
            f"no longer named {victim}): {copied / repair:,.0f} entries/s, "
            f"{copied * args.size / repair / 1e6:.2f} MB/s payload, {daemons}the surviving bookies' CPU "
            f"{bookies_cpu / max(copied, 1) * 1e6:.1f} us per entry copied"
            f"{f' (their daemon processes {children_cpu_s / max(copied, 1) * 1e6:.1f} us)' if children else ''}"
            f"  ({load_note()})",
            flush=True,
        )
        if probe is not None:
            during = probe.window()
            if idle and during:
                figures["p99_ratio"] = pct(during, 0.99) / pct(idle, 0.99)
                open_loop = " (open loop)" if args.probe_mode == "open" else ""
                print(
                    f"    live adds at {args.probe_rate:g}/s{open_loop}: idle {latency_note(idle)}; "
                    f"during the repair {latency_note(during)}; p99 ratio {figures['p99_ratio']:.2f}x"
                    f"{f', {probe.failures} adds failed' if probe.failures else ''}",
                    flush=True,
                )
            else:
                print(f"    live adds: idle {latency_note(idle)}, during {latency_note(during)}", flush=True)
            probe.close()
            if http_ports:
                repair_to = bookie_metrics(*http_ports)
                print(
                    f"    the survivors: idle {bookie_note(idle_from, idle_to)}; during the repair "
                    f"{bookie_note(repair_from, repair_to)}",
                    flush=True,
                )
        return figures
    finally:
        store.close()


def side_by_side(args) -> None:
    """Ours (autorecovery inside each bookied) and Java's (inside each Java bookie), alternated."""
    from java_peer import JavaPeer, alternate, median

    peer = JavaPeer(args.java_peer)
    got: dict[str, list[dict]] = {"inside": [], "java": []}
    for r, side in alternate(["inside", "java"], args.rounds):
        print(f" round {r + 1}, {'ours' if side == 'inside' else 'Java'}  ({load_note()})", flush=True)
        got[side].append(run_mode(side, args, peer))
    med = {side: {k: median([run[k] for run in runs]) for k in runs[0]} for side, runs in got.items()}
    ours, java = med["inside"], med["java"]
    print(
        f"  median time to re-protect after the registration went: ours {ours['repair_s']:.1f}s, Java "
        f"{java['repair_s']:.1f}s: ours {java['repair_s'] / ours['repair_s']:.2f}x as fast; per ledger "
        f"ours {ours['per_ledger_s']:.1f}s, Java {java['per_ledger_s']:.1f}s "
        f"({java['per_ledger_s'] / ours['per_ledger_s']:.2f}x)"
    )
    print(
        f"  median CPU of the surviving bookies (their daemons inside) per entry copied: ours "
        f"{ours['cpu_us']:.1f} us, Java {java['cpu_us']:.1f} us; live-add p99 during/idle: ours "
        f"{ours['p99_ratio']:.2f}x, Java {java['p99_ratio']:.2f}x  ({load_note()})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--ledgers", type=int, default=200)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument(
        "--batch",
        type=int,
        default=None,
        help="rereplicationEntryBatchSize for the daemons (default: each side's own, 40 in ours, 10 "
        "in Java's; 64 for the bkctl autorecovery run modes)",
    )
    parser.add_argument(
        "--idle-seconds",
        type=float,
        default=30,
        help="how long the probe's idle figures are taken (a p99 of 5 s, 1,000 adds, varied "
        "from 1 to 11 ms between runs; of 15 s, from 3.2 to 8.3 ms: 30 s by default, about "
        "as long as the repair's own window)",
    )
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=15,
        help="how long after the ledgers are written the idle window starts: the bookies "
        "first flush what the bulk write left in their write caches (flushInterval "
        "10 s), which is not an idle cluster; the same for Java's bookies",
    )
    parser.add_argument("--modes", default="1,4,recover")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a bk_server.conf key for our bookies when they run the daemons (mode inside, and "
        "ours beside the Java peer; repeatable)",
    )
    parser.add_argument("--exact", action="store_true", help="count the victim's entries exactly (slow)")
    parser.add_argument(
        "--rate-limit", type=int, default=0, help="the daemons' replicationRateByBytes (bytes/s, 0 = unlimited)"
    )
    parser.add_argument(
        "--probe-rate",
        type=float,
        default=200,
        help="steady adds/s whose latency is measured idle and during the repair (0 = off)",
    )
    parser.add_argument(
        "--probe-mode",
        choices=("closed", "open"),
        default="closed",
        help="closed: the probe adds one entry at a time; open: each add is sent at its "
        "slot of the schedule, answered or not (a stall counts for every add sent during "
        "it); each is timed from its send either way",
    )
    parser.add_argument(
        "--java-peer",
        metavar="DIR",
        help="a Java BookKeeper 4.17.2 peer built by ../shared/java-peer ($PEER): our bookieds "
        "with the daemon inside against its bookies with theirs, alternated",
    )
    parser.add_argument(
        "--profile-dir",
        metavar="DIR",
        help="record each surviving bookie and its daemon child with py-spy during the repair "
        "(folded stacks, one file per bookie in DIR)",
    )
    parser.add_argument("--py-spy", default="py-spy", help="the py-spy program for --profile-dir")
    parser.add_argument("--rounds", type=int, default=3, help="with --java-peer: runs of each side (default 3)")
    args = parser.parse_args()
    section(f"autorecovery: {args.entries:,} entries in {args.ledgers} ledgers, 5 bookies, one SIGKILLed")
    if args.java_peer:
        side_by_side(args)
        return
    for mode in args.modes.split(","):
        run_mode(mode.strip(), args)


if __name__ == "__main__":
    main()
