"""``bkctl rebalance`` and ``bkctl drain`` as an operator runs them, on real bookieds.

    python bench/bench_rebalance.py [--java-peer ~/bk-java-peer] [--only rebalance|drain]

**rebalance**: a sandbox of 3 bookieds is filled with ``--ledgers`` closed E2/Qw2/Qa2 ledgers
of ``--min-mib``..``--max-mib`` MiB in ``--entry-size`` entries (printable bytes, so that
Java's ``bktool read`` prints them as written); 2 empty bookieds join; ``bkctl rebalance
--force`` runs while readers read random ledgers throughout (Java's client, ``bktool read``,
with ``--java-peer``; else ours) and count every failure.  Printed: each bookie's live bytes
before and after and their spread about the mean, the bytes moved per second beside what the
same bookies accept from ``bkctl bench`` at the same entry size, the readers' reads and
failures, then every entry of every ledger read back and compared byte for byte (through
Java's client with ``--java-peer``), and ``autorecovery status``'s under-replicated count.

**drain**: a sandbox of 4 bookieds whose first holds ``--drain-ledgers`` ledgers of 4 x 100 B
(bench_scale's filling, E3/Qw2/Qa2); ``bkctl drain`` of that bookie, running, with the
under-replicated count read every 0.2 s throughout (an auditor runs in the bookieds); then on a
fresh filling the same bookie stopped and ``bkctl decommission --no-daemons`` timed, the
reference the issue sets (drain within twice its time).  With ``--java-peer`` a Java bookie
joins the drain's sandbox and is drained too (``--java-ledgers`` of its own).

Every figure is printed beside the load average: take them on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import fill_bookie, timed, wait_unregistered  # noqa: E402
from common import load_note, section  # noqa: E402

from bkctl.wire import fastpath

REPO = Path(__file__).resolve().parent.parent
BKCTL = str(Path(sys.executable).with_name("bkctl"))
MIB = 1 << 20


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["rebalance", "drain"], default=None)
    p.add_argument("--ledgers", type=int, default=60, help="rebalance: ledgers on the first 3 bookies")
    p.add_argument("--min-mib", type=float, default=1.0)
    p.add_argument("--max-mib", type=float, default=10.0)
    p.add_argument("--entry-size", type=int, default=65536)
    p.add_argument("--drain-ledgers", type=int, default=5000)
    p.add_argument("--concurrency", type=int, default=None, help="bkctl's --concurrency (default: its own)")
    p.add_argument("--java-peer", default=None, help="the Java peer's root (its client reads; a Java bookie drains)")
    p.add_argument("--java-ledgers", type=int, default=500, help="drain: ledgers on the Java bookie")
    args = p.parse_args(argv)
    print(f"bench_rebalance: {load_note()}", flush=True)
    rc = 0
    if args.only in (None, "rebalance"):
        rc |= rebalance_scenario(args)
    if args.only in (None, "drain"):
        rc |= drain_scenario(args)
    return rc


# -- the sandbox ----------------------------------------------------------------------------
class Sandbox:
    def __init__(self, bookies: int, *extra: str):
        self.dir = Path(tempfile.mkdtemp(prefix="bench-rebalance-"))
        self.up(bookies, *extra)

    def up(self, bookies: int, *extra: str) -> dict:
        cmd = [BKCTL, "sandbox", "up", "--bookies", str(bookies), "--dir", str(self.dir), "--json", *extra]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"sandbox up: {done.stderr}")
        self.doc = json.loads(done.stdout)
        self.uri = self.doc["uri"]
        self.zk = f"127.0.0.1:{self.doc['zookeeper']['port']}"
        self.env = dict(os.environ, BKCTL_METADATA_URI=self.uri)
        return self.doc

    @property
    def bookies(self) -> list[str]:
        return [b["bookie_id"] for b in self.doc["bookies"]]

    def bkctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([BKCTL, *args], env=self.env, capture_output=True, text=True)
        if check and done.returncode != 0:
            raise SystemExit(f"bkctl {' '.join(args)}: exit {done.returncode}: {done.stderr}")
        return done

    def down(self) -> None:
        subprocess.run([BKCTL, "sandbox", "down", "--dir", str(self.dir)], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def live_bytes(sb: Sandbox) -> dict[str, int]:
    plan = [json.loads(line) for line in sb.bkctl("--json", "rebalance", "--dry-run").stdout.splitlines()]
    return {b["bookie"]: b["before"] for b in plan[0]["bookies"]}


def spread(use: dict[str, int]) -> str:
    mean = sum(use.values()) / len(use)
    worst = max(abs(n - mean) / mean for n in use.values()) if mean else 0.0
    return f"mean {mean / MIB:.1f} MiB, furthest {worst:.1%} from it"


# -- rebalance ------------------------------------------------------------------------------
def fill_ledgers(uri: str, count: int, lo_mib: float, hi_mib: float, entry_size: int) -> dict[int, int]:
    """Closed E2/Qw2/Qa2 ledgers; ledger id -> entries (entry i of ledger L: :func:`payload`)."""
    from bkctl.wire.client.blocking import BlockingBookKeeper

    rnd = random.Random(63)
    out = {}
    with BlockingBookKeeper(uri, timeout=600) as bk:
        for _ in range(count):
            entries = max(1, int(rnd.uniform(lo_mib, hi_mib) * MIB) // entry_size)
            lh = bk.create(2, 2, 2)
            lh.add_many(payload(lh.ledger_id, i, entry_size) for i in range(entries))
            lh.close()
            out[lh.ledger_id] = entries
    return out


def payload(ledger_id: int, entry_id: int, size: int) -> bytes:
    head = f"{ledger_id}:{entry_id}:".encode()
    return head + bytes(65 + (ledger_id * 31 + entry_id * 7 + i) % 58 for i in range(size - len(head)))


def java_command(peer: Path) -> list[str]:
    """``bench/java/RandomReader.java`` compiled against the peer's jars; the JVM command that runs it."""
    out = Path(tempfile.mkdtemp(prefix="bench-java-reader-"))
    cp = f"{peer}/jars/*:{peer}/lib/*"
    javac = subprocess.run(
        ["javac", "-d", str(out), "-cp", cp, str(REPO / "bench" / "java" / "RandomReader.java")],
        capture_output=True,
        text=True,
    )
    if javac.returncode != 0:
        raise SystemExit(f"javac RandomReader: {javac.stderr}")
    logs = peer / "run" / "logs"
    return [
        "java",
        "-Xms256m",
        "-Xmx1g",
        "-Dio.netty.leakDetectionLevel=disabled",
        "-Dio.netty.tryReflectionSetAccessible=true",
        "--add-opens",
        "java.base/java.nio=ALL-UNNAMED",
        "--add-opens",
        "java.base/jdk.internal.misc=ALL-UNNAMED",
        "-Djava.net.preferIPv4Stack=true",
        f"-Dlog4j.configurationFile={peer}/conf/log4j2.cli.xml",
        "-Dbookkeeper.cli.log.root.appender=ROLLINGFILE",
        f"-Dbookkeeper.cli.log.dir={logs}",
        "-Dbookkeeper.cli.log.file=bench-reader.log",
        "-cp",
        f"{out}:{cp}",
        "RandomReader",
    ]


class Readers:
    """Random entries of random ledgers read throughout (Java's client with the peer, else
    ours), every failure counted and its first lines kept."""

    def __init__(self, sb: Sandbox, ledgers: dict[int, int], entry_size: int, java: list[str] | None):
        self.sb, self.ledgers, self.size, self.java = sb, ledgers, entry_size, java
        self.reads = self.failures = 0
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.until = Path(tempfile.mkdtemp(prefix="bench-readers-")) / "stop"
        self.proc: subprocess.Popen | None = None
        self.thread = threading.Thread(target=self.run_ours, daemon=True)

    def __enter__(self) -> Readers:
        if self.java is not None:
            spec = ",".join(f"{lid}:{n}" for lid, n in self.ledgers.items())
            self.proc = subprocess.Popen(
                [
                    *self.java,
                    f"zk={self.sb.zk}",
                    f"ledgers={spec}",
                    f"size={self.size}",
                    "mode=random",
                    f"until={self.until}",
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            time.sleep(3)  # the JVM up and reading before the moves start
        else:
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.until.touch()
        if self.proc is not None:
            out, _ = self.proc.communicate(timeout=120)
            for line in out.splitlines():
                if line.startswith("reads="):
                    fields = dict(kv.split("=") for kv in line.split())
                    self.reads, self.failures = int(fields["reads"]), int(fields["failures"])
                elif line.startswith("failed"):
                    self.errors.append(line)
        else:
            self.thread.join()

    def run_ours(self) -> None:
        from bkctl.wire.client.blocking import BlockingBookKeeper

        rnd = random.Random(11)
        ids = sorted(self.ledgers)
        with BlockingBookKeeper(self.sb.uri, timeout=60) as bk:
            while not self.stop.is_set():
                lid = rnd.choice(ids)
                entry = rnd.randrange(self.ledgers[lid])
                try:
                    with bk.open(lid) as lh:
                        good = lh.read_entry(entry) == payload(lid, entry, self.size)
                    why = "the bytes differ"
                except Exception as exc:  # noqa: BLE001 - counted and said
                    good, why = False, str(exc)
                self.reads += 1
                if not good:
                    self.failures += 1
                    self.errors.append(f"ledger {lid} entry {entry}: {why.splitlines()[0] if why else '?'}")


def verify_all(sb: Sandbox, ledgers: dict[int, int], size: int, java: list[str] | None) -> list[str]:
    """Every entry of every ledger read back and compared: the mismatches (Java's client
    with the peer, else ours)."""
    if java is not None:
        spec = ",".join(f"{lid}:{n}" for lid, n in ledgers.items())
        done = subprocess.run(
            [*java, f"zk={sb.zk}", f"ledgers={spec}", f"size={size}", "mode=verify"], capture_output=True, text=True
        )
        lines = done.stdout.splitlines()
        if done.returncode != 0 or not any(line.startswith("verified") for line in lines):
            return [f"the Java reader failed: {done.stderr[-300:]}"]
        return [line for line in lines if line.startswith("mismatch")]
    bad = []
    for lid, n in sorted(ledgers.items()):
        got = subprocess.run([BKCTL, "ledger", "read", str(lid), "--format", "raw"], env=sb.env, capture_output=True)
        if got.returncode != 0 or got.stdout != b"".join(payload(lid, i, size) for i in range(n)):
            bad.append(f"ledger {lid}")
    return bad


def bench_rate(sb: Sandbox, entry_size: int) -> float:
    """Bytes/s the bookies accept from ``bkctl bench`` (E2/Qw2/Qa2) at ``entry_size``."""
    n = max(2000, (256 * MIB) // entry_size)
    done = sb.bkctl("--json", "bench", "--size", str(entry_size), "--entries", str(n), "-e", "2", "-w", "2", "-a", "2")
    doc = json.loads(done.stdout)
    return float(doc["add"]["entries_per_second"]) * entry_size


def rebalance_scenario(args) -> int:
    section("rebalance")
    peer = Path(args.java_peer).expanduser() if args.java_peer else None
    java = java_command(peer) if peer is not None else None
    sb = Sandbox(3)
    try:
        t0 = time.monotonic()
        ledgers = fill_ledgers(sb.uri, args.ledgers, args.min_mib, args.max_mib, args.entry_size)
        total = sum(ledgers.values()) * args.entry_size
        print(
            f"  filled {len(ledgers)} ledgers, {total / MIB:,.0f} MiB (x2 copies) on 3 bookies in "
            f"{time.monotonic() - t0:.0f}s; {load_note()}",
            flush=True,
        )
        sb.up(5)
        before = live_bytes(sb)
        print(f"  before: {spread(before)}: " + ", ".join(f"{b} {n / MIB:.0f}" for b, n in sorted(before.items())))
        cmd = [BKCTL, "--json", "rebalance", "--force"]
        if args.concurrency:
            cmd += ["--concurrency", str(args.concurrency)]
        with Readers(sb, ledgers, args.entry_size, java) as readers:
            t = time.monotonic()
            run = subprocess.run(cmd, env=sb.env, capture_output=True, text=True)
            seconds = time.monotonic() - t
            load = load_note()
        events = [json.loads(line) for line in run.stdout.splitlines()]
        summary = events[-1]
        for e in events:
            if e["event"] == "move" and e["outcome"] != "moved":
                print(f"  ledger {e['ledger_id']} {e['outcome']}: {e['reason']}")
        rate = summary["bytes"] / seconds
        print(
            f"  rebalance: exit {run.returncode}, {summary['moved']} ledgers moved, {summary['bytes'] / MIB:,.0f} MiB "
            f"in {seconds:.1f}s = {rate / MIB:,.1f} MiB/s; skipped {summary['skipped']}, failed {summary['failed']} "
            f"[{load}]",
            flush=True,
        )
        after = live_bytes(sb)
        print(f"  after: {spread(after)}: " + ", ".join(f"{b} {n / MIB:.0f}" for b, n in sorted(after.items())))
        who = "Java's client" if peer else "bkctl"
        print(
            f"  a reader ({who}) during the rebalance: {readers.reads} random entries read, {readers.failures} failures"
        )
        for line in readers.errors[:5]:
            print(f"    {line}")
        accepted = bench_rate(sb, args.entry_size)
        print(
            f"  bkctl bench at {args.entry_size} B (E2/Qw2/Qa2): {accepted / MIB:,.1f} MiB/s accepted; "
            f"rebalance moved {rate / accepted:.2f}x that [{load_note()}]",
            flush=True,
        )
        bad = verify_all(sb, ledgers, args.entry_size, java)
        print(f"  every entry of every ledger read back through {who}: {len(bad)} ledgers or entries differ")
        for line in bad[:5]:
            print(f"    {line}")
        status = json.loads(sb.bkctl("--json", "autorecovery", "status").stdout)
        print(f"  autorecovery status: {status['underreplicated']} under-replicated")
        return 0 if run.returncode == 0 and not bad and not readers.failures else 1
    finally:
        sb.down()


# -- drain ----------------------------------------------------------------------------------
def watch_underreplicated(uri: str, stop: threading.Event, seen: list[int]) -> None:
    from bkctl.wire.metadata.zk import ZKMetadataStore

    store = ZKMetadataStore(uri, twins=fastpath.selected())
    store.start()
    try:
        while not stop.is_set():
            seen.append(store.underreplication.count())
            time.sleep(0.2)
    finally:
        store.close()


def drain_scenario(args) -> int:
    section("drain")
    rc = 0
    sb = Sandbox(4, "--autorecovery")
    try:
        victim, survivors = sb.bookies[0], sb.bookies[1:]
        fill_bookie(sb.uri, sb.zk, survivors, victim, args.drain_ledgers, 4, 100)
        seen: list[int] = []
        stop = threading.Event()
        watcher = threading.Thread(target=watch_underreplicated, args=(sb.uri, stop, seen), daemon=True)
        watcher.start()
        cmd = [BKCTL, "--json", "drain", victim, "--force"]
        if args.concurrency:
            cmd += ["--concurrency", str(args.concurrency)]
        fig = timed("drain", cmd, sb.env, sb.zk)
        stop.set()
        watcher.join()
        left = sb.bkctl("--json", "ledger", "list", "--bookie", victim).stdout.count("\n")
        print(
            f"  drain (running bookie)        {fig.seconds:7.1f} s {args.drain_ledgers / fig.seconds:8,.0f} ledgers/s "
            f"{fig.zk_requests:>8,} ZK requests  peak RSS {fig.peak_rss_mib:4.0f} MiB  exit {fig.rc}  {left} left; "
            f"under-replicated at most {max(seen, default=0)} over {len(seen)} looks  [{fig.load}]",
            flush=True,
        )
        rc |= fig.rc
        drain_seconds = fig.seconds
    finally:
        sb.down()
    sb = Sandbox(4)
    try:
        victim, survivors = sb.bookies[0], sb.bookies[1:]
        fill_bookie(sb.uri, sb.zk, survivors, victim, args.drain_ledgers, 4, 100)
        os.kill(sb.doc["bookies"][0]["pid"], signal.SIGTERM)
        wait_unregistered(BKCTL, sb.env, victim)
        cmd = [BKCTL, "--json", "decommission", victim, "--force", "--no-daemons"]
        fig = timed("decommission", cmd, sb.env, sb.zk)
        print(
            f"  decommission --no-daemons     {fig.seconds:7.1f} s {args.drain_ledgers / fig.seconds:8,.0f} ledgers/s "
            f"{fig.zk_requests:>8,} ZK requests  peak RSS {fig.peak_rss_mib:4.0f} MiB  exit {fig.rc}  [{fig.load}]",
            flush=True,
        )
        print(f"  drain / decommission --no-daemons: {drain_seconds / fig.seconds:.2f}x (the issue asks <= 2x)")
    finally:
        sb.down()
    if args.java_peer:
        rc |= drain_java_bookie(args)
    return rc


def drain_java_bookie(args) -> int:
    """A Java bookie (the peer's, on ports and in a folder of this run's own, beside 3 bookieds on
    the sandbox's ZooKeeper) holding ``--java-ledgers`` ledgers, drained while it runs: the
    bookieds read from it and take its replicas."""
    from java_peer import JavaPeer

    from bkctl.sandbox.zookeeper import free_port

    peer = JavaPeer(args.java_peer)
    sb = Sandbox(3)
    bookies = []
    try:
        ports = [(free_port(), free_port())]
        bookies = peer.start_bookies_in(
            sb.dir / "java", ports, sb.zk, "/ledgers", extra_conf="httpServerEnabled=true\n"
        )
        java_id = bookies[0].bookie_id
        fill_bookie(sb.uri, sb.zk, sb.bookies, java_id, args.java_ledgers, 4, 100)
        fig = timed("drain java", [BKCTL, "--json", "drain", java_id, "--force"], sb.env, sb.zk)
        left = sb.bkctl("--json", "ledger", "list", "--bookie", java_id).stdout.count("\n")
        print(
            f"  drain of a Java bookie        {fig.seconds:7.1f} s {args.java_ledgers / fig.seconds:8,.0f} ledgers/s "
            f"{fig.zk_requests:>8,} ZK requests  exit {fig.rc}, {left} left  [{fig.load}]",
            flush=True,
        )
        # and the same Java bookie, writable again and empty, as a rebalance's target
        sb.bkctl("bookie", "readonly", java_id, "off")
        t = time.monotonic()
        run = sb.bkctl("--json", "rebalance", "--force", check=False)
        seconds = time.monotonic() - t
        events = [json.loads(line) for line in run.stdout.splitlines()]
        onto = [e for e in events if e["event"] == "move" and any(m["target"] == java_id for m in e["moves"])]
        bad = 0
        for e in onto[:50]:
            got = sb.bkctl("ledger", "read", str(e["ledger_id"]), "--format", "raw", check=False)
            bad += got.returncode != 0 or got.stdout != "d" * 400
        print(
            f"  rebalance onto it             {seconds:7.1f} s exit {run.returncode}: {len(onto)} ledgers moved "
            f"to the Java bookie; {min(50, len(onto)) - bad} of {min(50, len(onto))} read back equal  [{load_note()}]",
            flush=True,
        )
        return fig.rc | run.returncode | bool(bad)
    finally:
        peer.stop_bookies_in(bookies)
        sb.down()


if __name__ == "__main__":
    sys.exit(main())
