#!/usr/bin/env python3
"""Autorecovery benchmark: how fast a lost bookie's replicas come back.

Prints figures, asserts nothing. Usage::

    .venv/bin/python bench/bench_autorecovery.py [--entries 1000000] [--ledgers 200] [--modes 1,4,recover]
        [--rate-limit BYTES_PER_S] [--probe-rate ADDS_PER_S]

Each mode gets a fresh throw-away sandbox (a real ZooKeeper and 5 bookieds):
``--ledgers`` E3/Qw2/Qa2 ledgers with ``--entries`` entries of ``--size`` bytes
in all are written and closed, the bookie holding most of them is SIGKILLed,
and the time until no ledger names it and nothing is marked under-replicated
is measured.  Mode ``N`` runs N ``bkctl autorecovery run`` daemons
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
for ``--idle-seconds`` before the SIGKILL): the cost of the repair to the
cluster's live writers.  Beside them, from the survivors' own ``/metrics``:
their journals' fsync latency and entries per fsync, and the latency of the
adds they served (the repair's and the probe's), idle and during the repair --
whether a slower live add waited in the bookies or elsewhere.
``--rate-limit`` sets the daemons' ``replicationRateByBytes``.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import bookie_metrics, cpu_seconds, histogram_quantile, load_note, pct, section  # noqa: E402


class LatencyProbe:
    """Adds entries at a steady rate from a process of its own (as a live
    writer is an application of its own: in this process, the GIL shared with
    the completion polling below delayed the adds' answers by up to its switch
    interval) and keeps each add's latency; :meth:`window` returns those since
    the last call."""

    def __init__(self, uri: str, rate: float, avoid: str):
        import multiprocessing

        context = multiprocessing.get_context("spawn")  # this process has threads: no fork
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_probe_main, args=(uri, rate, avoid, child), daemon=True)
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


def _probe_main(uri: str, rate: float, avoid: str, conn) -> None:
    """The probe's process: a ledger on survivors only (so that its writer
    measures the repair's load rather than its own ensemble change), then adds
    at ``rate`` until told to stop, answering "window" with the latencies."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bkctl.wire.client.blocking import BlockingBookKeeper

    bk = BlockingBookKeeper(uri, timeout=60)
    for _ in range(50):
        handle = bk.create(3, 2, 2)
        if avoid not in handle.handle.metadata.bookies:
            break
        handle.close()
    else:
        conn.send(f"could not place the probe's ledger away from {avoid}")
        return
    conn.send(True)
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


def latency_note(samples: list[float]) -> str:
    if not samples:
        return "no adds"
    return f"p50 {pct(samples, 0.5) * 1e3:.2f} ms, p99 {pct(samples, 0.99) * 1e3:.2f} ms ({len(samples):,} adds)"


def bookie_note(before: dict[str, float], after: dict[str, float]) -> str:
    """The bookies' journal and add figures between two scrapes (bucket upper bounds)."""
    def ms(name: str, q: float, labels: str = "") -> str:
        return f"{histogram_quantile(before, after, name, q, labels) * 1e3:g}"

    fsync = "bookie_journal_fsync_latency_seconds"
    adds, add = "bookie_request_latency_seconds", 'op="add",'
    return (f"journal fsync p50/p99 <= {ms(fsync, .5)}/{ms(fsync, .99)} ms, "
            f"entries per fsync p50 <= {histogram_quantile(before, after, 'bookie_journal_entries_per_fsync', .5):g}, "
            f"adds served p50/p99 <= {ms(adds, .5, add)}/{ms(adds, .99, add)} ms")


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


def run_mode(mode: str, args) -> None:
    from bkctl.sandbox.cluster import load_state, sandbox_down, sandbox_up
    from bkctl.wire.metadata.zk import ZKMetadataStore

    with tempfile.TemporaryDirectory(prefix="bench-ar-") as tmp:
        state = sandbox_up(tmp, bookies=5)
        uri = state["uri"]
        daemons: list[subprocess.Popen] = []
        try:
            t = time.perf_counter()
            ids = write_ledgers(uri, args.ledgers, args.entries, args.size)
            print(f"  wrote {len(ids)} ledgers, {args.entries:,} x {args.size} B in {time.perf_counter() - t:.1f}s",
                  flush=True)
            store = ZKMetadataStore(uri, timeout=20).start()
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
            probe = None
            if args.probe_rate > 0:
                probe = LatencyProbe(uri, args.probe_rate, victim)
            if mode != "recover":
                for i in range(int(mode)):
                    daemons.append(subprocess.Popen(
                        [sys.executable, "-m", "bkctl", "-m", uri, "autorecovery", "run",
                         "--bookie-id", f"bench-{i}:3181",
                         "--set", "auditorPeriodicBookieCheckInterval=0", "--set", "auditorPeriodicCheckInterval=0",
                         "--set", f"rereplicationEntryBatchSize={args.batch}",
                         "--set", f"replicationRateByBytes={args.rate_limit}"],
                        stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, f"ar-{i}.log"), "wb")))
                while store.auditor.current() is None:
                    time.sleep(0.1)
            bookie_records = (load_state(tmp) or {}).get("bookies", [])
            record = next(b for b in bookie_records if b.get("id") == victim)
            survivor_records = [b for b in bookie_records if b.get("id") != victim]
            on_victim = [lid for lid in ids if victim in store.ledgers.read(lid)[0].bookies]
            http_ports = [b["http_port"] for b in survivor_records if b.get("http_port")]
            if probe is not None:
                probe.window()
                idle_from = bookie_metrics(*http_ports)
                time.sleep(args.idle_seconds)
                idle = probe.window()
                idle_to = bookie_metrics(*http_ports)
            cpu_before = sum(cpu_seconds(p.pid) for p in daemons) + children_cpu()
            survivors = [int(b["pid"]) for b in survivor_records]
            bookies_before = sum(cpu_seconds(pid) for pid in survivors)
            killed = time.perf_counter()
            os.kill(int(record["pid"]), signal.SIGKILL)
            while victim in store.registration.writable_bookies():
                time.sleep(0.05)
            unregistered = time.perf_counter()
            if probe is not None:
                probe.window()
                repair_from = bookie_metrics(*http_ports)
            if mode == "recover":
                subprocess.run([sys.executable, "-m", "bkctl", "-m", uri, "-q", "recover", victim, "--force",
                                "--parallel", "4"], check=True, stdout=subprocess.DEVNULL)
            while True:
                if store.underreplication.count() == 0 and all(
                        victim not in store.ledgers.read(lid)[0].bookies for lid in on_victim):
                    break
                time.sleep(0.2)
            done = time.perf_counter()
            cpu = sum(cpu_seconds(p.pid) for p in daemons) + children_cpu() - cpu_before
            bookies_cpu = sum(cpu_seconds(pid) for pid in survivors) - bookies_before
            copied = held[victim]
            repair = done - unregistered
            label = "bkctl recover --parallel 4" if mode == "recover" else f"{mode} autorecovery daemon(s)"
            print(f"  {label}: {len(on_victim)} ledgers, ~{copied:,} entries: {done - killed:.1f}s from SIGKILL, "
                  f"{repair:.1f}s after the registration went: {copied / repair:,.0f} entries/s, "
                  f"{copied * args.size / repair / 1e6:.2f} MB/s payload, repair CPU {cpu / max(copied, 1) * 1e6:.1f} us"
                  f" per entry copied, the surviving bookies' {bookies_cpu / max(copied, 1) * 1e6:.1f} us"
                  f"  ({load_note()})", flush=True)
            if probe is not None:
                during = probe.window()
                print(f"    live adds at {args.probe_rate:g}/s: idle {latency_note(idle)}; during the repair "
                      f"{latency_note(during)}; p99 ratio {pct(during, 0.99) / pct(idle, 0.99):.2f}x"
                      f"{f', {probe.failures} adds failed' if probe.failures else ''}"
                      if idle and during else f"    live adds: idle {latency_note(idle)}, during {latency_note(during)}",
                      flush=True)
                probe.close()
                repair_to = bookie_metrics(*http_ports)
                print(f"    the survivors: idle {bookie_note(idle_from, idle_to)}; during the repair "
                      f"{bookie_note(repair_from, repair_to)}", flush=True)
            store.close()
        finally:
            for proc in daemons:
                proc.send_signal(signal.SIGTERM)
            for proc in daemons:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
            sandbox_down(tmp, purge=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--ledgers", type=int, default=200)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--batch", type=int, default=64, help="rereplicationEntryBatchSize for the daemons")
    parser.add_argument("--idle-seconds", type=float, default=15,
                        help="how long the probe's idle figures are taken (a p99 of 5 s, 1,000 adds, varied "
                             "from 1 to 11 ms between runs)")
    parser.add_argument("--modes", default="1,4,recover")
    parser.add_argument("--exact", action="store_true", help="count the victim's entries exactly (slow)")
    parser.add_argument("--rate-limit", type=int, default=0,
                        help="the daemons' replicationRateByBytes (bytes/s, 0 = unlimited)")
    parser.add_argument("--probe-rate", type=float, default=200,
                        help="steady adds/s whose latency is measured idle and during the repair (0 = off)")
    args = parser.parse_args()
    section(f"autorecovery: {args.entries:,} entries in {args.ledgers} ledgers, 5 bookieds, one SIGKILLed")
    for mode in args.modes.split(","):
        run_mode(mode.strip(), args)


if __name__ == "__main__":
    main()
