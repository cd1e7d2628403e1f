"""Every command that walks the cluster's metadata, at production scale, beside Java's shell.

    python bench/bench_scale.py --ledgers 1000000 --topics 10000 --java-peer ~/bk-java-peer --rounds 2

A sandbox of its own (``bkctl sandbox up --zk-heap``: a real ZooKeeper and real bookieds)
is filled with N ledgers in the hierarchical layout, the bytes a Java client writes
(:func:`~bkctl.wire.metadata.ledger.serialize_ledger_metadata`, checked against Java's in
tests/vectors), over several ZooKeeper connections with multi transactions pipelined
(bench/scale_fill.py: 10^5 ledgers in 38 s at load 10-15, was 228 s): T Pulsar topics with
their managed ledgers, ledgers and a cursor each, orphans (Pulsar ledgers no managed ledger
lists), plain ledgers, under-replicated marks, and each topic's first ledger offloaded.
Ensembles (E3/Qw2/Qa2) are drawn from the sandbox's bookies and seven bookies that are gone,
so that "the ledgers on one bookie" is a part of the cluster, as it is in a real one.

**What the population is, and why** (scale_fill's docstring has the details): every closed
ledger is empty except one in 200 (``--data-share 0.005``), which has 1000 entries no bookie
holds.  A run of ``ledger fsck`` over 10^6 ledgers in which every ledger is a finding is bound
by its output (9 KB of JSON a finding: 9 GB) and by asking the bookies about every ledger
(10^4 took 321.6 s: 9 hours at 10^6), which measures neither its walk nor its memory.  Here
fsck walks every ledger's metadata, judges the empty and the open ones by it alone (as for
any empty ledger), asks the bookies about 0.5% and reports each of them (data_lost where a
gone bookie is in its ensemble, metadata_only else): its rate is that of the walk plus a
fixed share of findings, and must stay linear from 10^5 to 10^6; its memory must not grow
with the ledgers (issue 74: at most 256 MiB at 10^6).  bench/bench_fsck.py measures healthy
ledgers on real bookies, beside Java's replicas check.  The same ledgers with entries are what
rebalance and drain have bytes to move for, and what backup cannot read (exit 10).
``pulsar offload verify`` (``--offload-root`` the sandbox's folder, where no MapFile was
written) finds every offloaded ledger's MapFile missing: a stat and a row a ledger.  ``backup
full`` copies the cluster into a new archive in the sandbox's folder and ``backup incremental``
runs it again with nothing changed (every copy found in the previous backup's manifest, read a
chunk at a time beside the walk; the ledgers no bookie can read are tried again, exit 10).  At
10^5 ledgers (load 9-13 on 2 CPUs) full took 182 s and 77 MiB peak RSS, incremental 63 s and
107 MiB; with the one-document manifest and two objects an empty ledger they took 1,821 s and
395 MiB, 221 s and 266 MiB.  At 3x10^5 (load 14-23): full 956 s and 79 MiB, incremental 142 s
and 112 MiB -- the memory flat as the ledgers triple.  A full backup now records a closed
ledger from the znode bytes the walk read (no second read a ledger): at 10^5, 59 s (CPU 28 s),
5,369 ZooKeeper requests and 76 MiB at load 17-19, where the same sandbox took 518 s (CPU
110 s), 104,366 requests and 78 MiB at load 8-10 the same day; incremental 476 s (CPU 47 s,
103 MiB) at load 17-19 against 323 s (CPU 40 s, 109 MiB) at load 18-23 -- its wall time there
is waiting on a starved machine (the 500 ledgers no bookie can read tried again), not CPU.
At 10^6 (10^4 topics, load 19 on 2 CPUs): full 1,451 s (CPU 340 s), 56,210 ZooKeeper requests,
136 MiB; Java's nearest, ``listledgers -meta`` beside it, 502 s (CPU 123 s, load 8-14),
1,001,249 requests, 953 MiB; ``listledgers -bookieid`` 845 s and 977 MiB against ``ledger list
--bookie``'s 852 s and 70 MiB (load 19-20). ``restore`` (the full backup into an empty second
sandbox, in the backup's own ids) at 10^5: it drew ids one a round trip to move the target's
generator past the backup's (878 s at load 11-15 and not one ledger made, 85 MiB); with them
drawn 10,000 a call and the ids in a scratch table, 37,000 ledgers made in 343 s (CPU 226 s),
92 MiB peak, the memory flat as they go.

Then each command is run as a user runs it (``bkctl ...`` as a process, its output to a
pipe that is counted), alternated with Java's ``bookkeeper shell`` on the same ZooKeeper
where Java has one, and printed with its wall time, ledgers/s, the ZooKeeper requests it
made (ZooKeeper's own ``mntr`` count, so the bench's own reads are not in it), peak RSS and
the load average.  ``--dir D --keep`` leaves the filled sandbox running; the same command
again reuses it (filled.json records what was planted) to run commands (``--only``) on it
anew.  ``--walk-probe`` also times another client's getData while our walk
runs (the latency a walk adds for the cluster's brokers and bookies).

``--only decommission`` is a scenario of its own: a fresh sandbox of 4 bookieds whose
first bookie holds ``--decom-ledgers`` ledgers (E3/Qw2/Qa2, each with ``--decom-entries``
real entries of ``--decom-size`` bytes on real bookieds: the metadata written in ZooKeeper
transactions, the entries added straight to their write sets' bookies with our client);
the bookie is stopped and then decommissioned to the end, and the time, ZooKeeper
requests, peak RSS and what is left are printed: ``bkctl decommission --no-daemons``
(this process copies), ``bkctl decommission --daemons`` and Java's ``decommissionbookie``
(with ``--java-peer``; both with the autorecovery daemons inside the 3 other bookieds doing
the copying, as Java's command needs them), each on its own freshly filled sandbox,
alternated over ``--rounds``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import commit_or_exit, load_note, section  # noqa: E402
from scale_fill import GONE, Population, fill  # noqa: E402

from bkctl.wire import fastpath

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Filled:
    uri: str
    zk: str
    bookies: list[str]
    ledgers: int
    topics: int


@dataclass
class Figure:
    label: str
    seconds: float
    lines: int
    zk_requests: int
    peak_rss_mib: float
    load: str
    rc: int
    #: user + system CPU seconds of the command (under load the wall time is mostly waiting)
    cpu: float = 0.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ledgers", type=int, default=100_000)
    p.add_argument("--topics", type=int, default=1000, help="Pulsar topics (managed ledgers) among them")
    p.add_argument("--ledgers-per-topic", type=int, default=10)
    p.add_argument("--namespaces", type=int, default=10, help="the topics are spread over acme/ns0..ns<N-1>")
    p.add_argument("--orphans", type=int, default=None, help="default: 2%% of the ledgers")
    p.add_argument("--marks", type=int, default=2000, help="under-replicated ledgers marked")
    p.add_argument(
        "--data-share",
        type=float,
        default=0.005,
        help="closed ledgers with entries (the rest are empty): fsck's findings",
    )
    p.add_argument("--offloaded-per-topic", type=int, default=1, help="data ledgers of each topic offloaded")
    p.add_argument("--zk-heap", type=int, default=None, help="MiB (default: 1 KiB a ledger plus 512)")
    p.add_argument("--java-peer", default=None, help="the Java peer's root, for Java's shell beside ours")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--dir", default=None, help="the sandbox's directory (default: a temporary one, removed)")
    p.add_argument("--keep", action="store_true", help="leave the sandbox running (with --dir: reuse it filled)")
    p.add_argument("--only", default=None, help="comma-separated labels of the commands to run")
    p.add_argument(
        "--walk-probe", action="store_true", help="time another client's getData (p99) while `ledger list --json` walks"
    )
    p.add_argument("--decom-ledgers", type=int, default=25_000, help="--only decommission: ledgers on the bookie")
    p.add_argument("--decom-entries", type=int, default=4, help="--only decommission: entries a ledger")
    p.add_argument("--decom-size", type=int, default=100, help="--only decommission: bytes an entry")
    p.add_argument(
        "--decom-sides", default="local,daemons,java", help="--only decommission: which of local, daemons, java"
    )
    args = p.parse_args(argv)
    if args.only == "decommission":
        return decommission_scenario(args)

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    heap = args.zk_heap or 512 + args.ledgers // 1024
    bkctl = str(Path(sys.executable).with_name("bkctl"))
    print(f"bench_scale: {args.ledgers:,} ledgers, {args.topics:,} topics; {load_note()}", flush=True)
    up = subprocess.run(
        [bkctl, "sandbox", "up", "--bookies", "3", "--zk-heap", str(heap), "--dir", str(work), "--json"],
        capture_output=True,
        text=True,
    )
    if up.returncode != 0:
        print(up.stderr, file=sys.stderr)
        return 1
    doc = json.loads(up.stdout)
    zk = f"127.0.0.1:{doc['zookeeper']['port']}"
    filled = Filled(doc["uri"], zk, [b["bookie_id"] for b in doc["bookies"]], args.ledgers, args.topics)
    try:
        marker = work / "filled.json"
        planted = {
            "ledgers": args.ledgers,
            "topics": args.topics,
            "data_share": args.data_share,
            "offloaded_per_topic": args.offloaded_per_topic,
        }
        if not (marker.exists() and json.loads(marker.read_text()) == planted):
            section("filling")
            population = Population(
                args.ledgers,
                args.topics,
                args.ledgers_per_topic,
                args.namespaces,
                args.orphans,
                args.marks,
                args.data_share,
                args.offloaded_per_topic,
                str(work / "offload"),
            )
            fill(filled.uri, filled.zk, filled.bookies, population)
            marker.write_text(json.dumps(planted))
        run_commands(filled, args, bkctl, work)
        if args.only and "auditor" in args.only.split(","):
            auditor_check(filled, bkctl)
        if args.walk_probe:
            probe(filled, bkctl)
    finally:
        if not args.keep:
            subprocess.run([bkctl, "sandbox", "down", "--dir", str(work)], capture_output=True)
            if not args.dir:
                shutil.rmtree(work, ignore_errors=True)
    return 0


# -- running ----------------------------------------------------------------------------
def zk_requests(zk: str) -> int:
    host, port = zk.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"mntr")
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    for line in out.decode().splitlines():
        if line.startswith("zk_packets_received"):
            return int(line.split()[1])
    return -1


def timed(label: str, cmd: list[str], env: dict[str, str], zk: str) -> Figure:
    """Run *cmd* with its stdout counted (a pipe, as `| wc -l`); wall time, peak RSS (wait4)."""
    before = zk_requests(zk)
    load = load_note()
    t = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()))
    reader.start()
    lines = sum(chunk.count(b"\n") for chunk in iter(lambda: proc.stdout.read(1 << 16), b""))
    _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - t
    reader.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    requests = zk_requests(zk) - before - 1
    if proc.returncode != 0:
        print(f"  {label}: exit {proc.returncode}: {err[0][-400:].decode(errors='replace')}", flush=True)
    cpu = usage.ru_utime + usage.ru_stime
    return Figure(label, seconds, lines, requests, usage.ru_maxrss / 1024, load, proc.returncode, cpu)


def run_commands(f: Filled, args, bkctl: str, work: Path) -> None:
    env = dict(os.environ, BKCTL_METADATA_URI=f.uri)
    one = f.bookies[0]
    archive = work / "archive"
    ours = {
        "every id": [bkctl, "ledger", "list"],
        "ledgers on one bookie": [bkctl, "ledger", "list", "--bookie", one],
        "every ledger's metadata": [bkctl, "--json", "ledger", "list"],
        "pulsar orphans": [bkctl, "pulsar", "orphans", "--older-than", "1d"],
        "disk": [bkctl, "--json", "disk"],
        "pulsar topic list": [bkctl, "pulsar", "topic", "list"],
        "pulsar topic list ns0": [bkctl, "pulsar", "topic", "list", "--namespace", "acme/ns0"],
        "underreplicated": [bkctl, "autorecovery", "underreplicated"],
        "recover --dry-run": [bkctl, "--json", "recover", GONE[0], "--dry-run"],
        "decommission --dry-run": [bkctl, "--json", "decommission", GONE[0], "--dry-run", "--no-daemons"],
        "rebalance --dry-run": [bkctl, "--json", "rebalance", "--dry-run"],
        "drain --dry-run": [bkctl, "--json", "drain", one, "--dry-run"],
        # no bookie holds the planted ledgers' entries: every ledger is a finding (data_lost where a
        # gone bookie is in its ensemble, else metadata_only), each streamed as one line of JSON
        "ledger fsck": [bkctl, "--json", "ledger", "fsck"],
        # every offloaded ledger's MapFile is missing: one finding each, a stat a ledger
        "pulsar offload verify": [
            bkctl,
            "--json",
            "pulsar",
            "offload",
            "verify",
            "--offload-root",
            str(work / "offload"),
        ],
        # into a new archive: the ledgers with entries are unreadable (exit 10), the empty ones copied
        "backup full": [bkctl, "--json", "backup", "--to", str(archive)],
        # the same again with nothing changed: every ledger found in the archive, none copied
        "backup incremental": [bkctl, "--json", "backup", "--to", str(archive)],
        # the full backup written into a cluster of its own, empty (a second sandbox: ZooKeeper and
        # 3 bookieds, started anew before each run): every empty ledger created and closed again
        "restore": [bkctl, "--json", "restore", "--from", str(archive), "--force"],
    }
    java = {
        "every id": ["listledgers"],
        "ledgers on one bookie": ["listledgers", "-bookieid", one],
        "every ledger's metadata": ["listledgers", "-meta"],
        "underreplicated": ["listunderreplicated"],
        "recover --dry-run": ["recover", "-dryrun", "-force", GONE[0]],
        # Java has no backup: its nearest is reading every ledger's metadata, as a backup's walk does
        "backup full": ["listledgers", "-meta"],
    }
    wanted = set(args.only.split(",")) if args.only else set(ours)
    results: dict[str, dict[str, list[Figure]]] = {}
    jenv = None
    if args.java_peer:
        peer = Path(args.java_peer).expanduser()
        jenv = dict(os.environ, PEER=str(peer), ZK=f.zk, ROOT="/ledgers")
        shell = str(peer / "scripts" / "bkshell.sh")
    for rnd in range(args.rounds):
        section(f"round {rnd + 1} of {args.rounds}")
        for label, cmd in ours.items():
            if label not in wanted:
                continue
            sides = [("bkctl", cmd, env)]
            if jenv is not None and label in java:
                sides.append(("java", [shell, *java[label]], jenv))
            if rnd % 2:
                sides.reverse()
            for side, c, e in sides:
                if label == "backup full" and side == "bkctl":
                    shutil.rmtree(archive, ignore_errors=True)
                zk = f.zk
                if label == "restore":
                    e, zk = restore_target(bkctl, work / "restore-target")
                fig = timed(label, c, e, zk)
                if label == "restore":
                    subprocess.run(
                        [bkctl, "sandbox", "down", "--dir", str(work / "restore-target")], capture_output=True
                    )
                results.setdefault(label, {}).setdefault(side, []).append(fig)
                rate = f.ledgers / fig.seconds
                print(
                    f"  {label:26} {side:5} {fig.seconds:8.2f} s (CPU {fig.cpu:7.1f} s) {rate:>10,.0f} ledgers/s "
                    f"{fig.zk_requests:>9,} ZK requests  peak RSS {fig.peak_rss_mib:6.0f} MiB  "
                    f"{fig.lines:>9,} lines  exit {fig.rc}  [{fig.load}]",
                    flush=True,
                )
    section("medians: bkctl against Java's bookkeeper shell")
    for label, sides in results.items():
        ours_s = sorted(x.seconds for x in sides["bkctl"])[len(sides["bkctl"]) // 2]
        line = f"  {label:26} bkctl {ours_s:8.2f} s ({f.ledgers / ours_s:>9,.0f}/s)"
        if "java" in sides:
            java_s = sorted(x.seconds for x in sides["java"])[len(sides["java"]) // 2]
            line += f"   java {java_s:8.2f} s ({f.ledgers / java_s:>9,.0f}/s)   {java_s / ours_s:5.2f}x"
        print(line, flush=True)


def restore_target(bkctl: str, where: Path) -> tuple[dict[str, str], str]:
    """A new, empty sandbox at ``where`` (3 bookieds) to restore into: its environment and ZooKeeper."""
    subprocess.run([bkctl, "sandbox", "down", "--dir", str(where)], capture_output=True)
    shutil.rmtree(where, ignore_errors=True)
    up = subprocess.run(
        [bkctl, "sandbox", "up", "--bookies", "3", "--dir", str(where), "--json"], capture_output=True, text=True
    )
    if up.returncode != 0:
        raise SystemExit(f"the restore's target sandbox did not start: {up.stderr[-400:]}")
    doc = json.loads(up.stdout)
    return dict(os.environ, BKCTL_METADATA_URI=doc["uri"]), f"127.0.0.1:{doc['zookeeper']['port']}"


# -- decommission at scale ----------------------------------------------------------------
def fill_bookie(uri: str, zk: str, survivors: list[str], victim: str, n: int, entries: int, size: int) -> int:
    """``n`` closed E3/Qw2/Qa2 ledgers whose ensembles all hold ``victim``, with ``entries``
    real entries of ``size`` bytes each on their bookies; returns the bytes the victim holds."""
    from kazoo.client import KazooClient
    from twisted.internet import defer

    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.metadata.ledger import LedgerMetadata, serialize_ledger_metadata, write_set_indices

    rnd = random.Random(57)
    first = int(os.environ.get("BENCH_FIRST_LEDGER", "1000000"))  # above the ids the sandbox hands out
    ensembles = {}
    for ledger_id in range(first, first + n):
        ens = [victim, *rnd.sample(survivors, 2)]
        rnd.shuffle(ens)
        ensembles[ledger_id] = ens
    payload = b"d" * size
    key = master_key(b"")

    async def write_entries(client) -> int:
        held = 0
        sent: list = []
        for ledger_id, ens in ensembles.items():
            dm = DigestManager(ledger_id, DigestType.CRC32C, b"")
            for e in range(entries):
                body = dm.package(e, e - 1, size * (e + 1), payload)
                for i in write_set_indices(e, 3, 2):
                    held += len(payload) if ens[i] == victim else 0
                    sent.append(client.pool.get(ens[i]).add(ledger_id, e, key, body))
            if len(sent) >= 900:  # a connection queues at most 1,000 adds
                await defer.gatherResults(sent, consumeErrors=True)
                sent = []
        await defer.gatherResults(sent, consumeErrors=True)
        return held

    t0 = time.monotonic()
    with BlockingBookKeeper(uri, timeout=3600) as bk:
        held = bk.run(lambda client: defer.ensureDeferred(write_entries(client)))
    zkc = KazooClient(hosts=zk, timeout=60)
    zkc.start()
    try:
        for parent in sorted({p for lid in range(first, first + n, 5000) for p in P.ledger_parent_paths(lid)}):
            zkc.ensure_path(parent)
        ids = list(ensembles)
        for lo in range(0, n, 1000):
            tx = zkc.transaction()
            for ledger_id in ids[lo : lo + 1000]:
                md = LedgerMetadata.new(ensembles[ledger_id], 2, 2, password=b"")
                tx.create(P.ledger_path(ledger_id), serialize_ledger_metadata(md.closed(entries - 1, size * entries)))
            commit_or_exit(tx, f"ledger {ids[lo]}")
    finally:
        zkc.stop()
        zkc.close()
    print(
        f"  filled {n:,} ledgers on {victim} ({entries} x {size} B entries, {held:,} B on it) in "
        f"{time.monotonic() - t0:.0f}s; {load_note()}",
        flush=True,
    )
    return held


def decommission_scenario(args) -> int:
    """``--only decommission``: see the module docstring."""
    import signal

    bkctl = str(Path(sys.executable).with_name("bkctl"))
    sides = [s for s in args.decom_sides.split(",") if s != "java" or args.java_peer]
    print(
        f"bench_scale decommission: {args.decom_ledgers:,} ledgers of {args.decom_entries} x {args.decom_size} B "
        f"on one of 4 bookieds; sides {', '.join(sides)}; {load_note()}",
        flush=True,
    )
    figures: dict[str, list[Figure]] = {}
    for rnd in range(args.rounds):
        section(f"round {rnd + 1} of {args.rounds}")
        for side in sides if rnd % 2 == 0 else list(reversed(sides)):
            work = Path(tempfile.mkdtemp(prefix="bench-decom-"))
            up_cmd = [bkctl, "sandbox", "up", "--bookies", "4", "--dir", str(work), "--json"]
            if side != "local":  # the daemons copy: inside the bookieds, at once
                up_cmd += ["--autorecovery", "--set", "lostBookieRecoveryDelay=0"]
            up = subprocess.run(up_cmd, capture_output=True, text=True)
            if up.returncode != 0:
                print(up.stderr, file=sys.stderr)
                return 1
            doc = json.loads(up.stdout)
            try:
                zk = f"127.0.0.1:{doc['zookeeper']['port']}"
                bookies = [b["bookie_id"] for b in doc["bookies"]]
                victim, survivors = bookies[0], bookies[1:]
                fill_bookie(doc["uri"], zk, survivors, victim, args.decom_ledgers, args.decom_entries, args.decom_size)
                os.kill(doc["bookies"][0]["pid"], signal.SIGTERM)
                env = dict(os.environ, BKCTL_METADATA_URI=doc["uri"])
                wait_unregistered(bkctl, env, victim)
                if side != "local":
                    wait_for_auditor(bkctl, env)
                if side == "java":
                    peer = Path(args.java_peer).expanduser()
                    jenv = dict(os.environ, PEER=str(peer), ZK=zk, ROOT="/ledgers")
                    cmd = [str(peer / "scripts" / "bkshell.sh"), "decommissionbookie", "-bookieid", victim]
                    fig = timed("decommission", cmd, jenv, zk)
                else:
                    mode = "--no-daemons" if side == "local" else "--daemons"
                    cmd = [bkctl, "--json", "decommission", victim, "--force", mode, "--wait", "3600"]
                    fig = timed("decommission", cmd, env, zk)
                left = subprocess.run(
                    [bkctl, "--json", "ledger", "list", "--bookie", victim], env=env, capture_output=True, text=True
                ).stdout.count("\n")
                cookie = subprocess.run([bkctl, "cookie", "get", victim], env=env, capture_output=True).returncode
                figures.setdefault(side, []).append(fig)
                print(
                    f"  decommission {side:8} {fig.seconds:8.1f} s {args.decom_ledgers / fig.seconds:>8,.0f} ledgers/s "
                    f"{fig.zk_requests:>9,} ZK requests  peak RSS {fig.peak_rss_mib:5.0f} MiB  exit {fig.rc}  "
                    f"{left:,} ledgers left, cookie {'kept' if cookie == 0 else 'gone'}  [{fig.load}]",
                    flush=True,
                )
            finally:
                subprocess.run([bkctl, "sandbox", "down", "--dir", str(work)], capture_output=True)
                shutil.rmtree(work, ignore_errors=True)
    section("medians")
    for side, figs in figures.items():
        med = sorted(f.seconds for f in figs)[len(figs) // 2]
        print(f"  decommission {side:8} {med:8.1f} s ({args.decom_ledgers / med:,.0f} ledgers/s)", flush=True)
    return 0


def wait_for_auditor(bkctl: str, env: dict[str, str], timeout: float = 60) -> None:
    """Until the bookieds' autorecovery daemons have elected an auditor and it has started
    (written lostBookieRecoveryDelay: an audit can be triggered)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        who = subprocess.run([bkctl, "--json", "autorecovery", "whoisauditor"], env=env, capture_output=True, text=True)
        delay = subprocess.run(
            [bkctl, "--json", "autorecovery", "lost-bookie-delay"], env=env, capture_output=True, text=True
        )
        if (
            who.returncode == 0
            and json.loads(who.stdout).get("auditor")
            and delay.returncode == 0
            and json.loads(delay.stdout).get("lost_bookie_recovery_delay") is not None
        ):
            return
        time.sleep(0.5)
    raise SystemExit(f"no auditor elected after {timeout:g}s")


def wait_unregistered(bkctl: str, env: dict[str, str], bookie: str, timeout: float = 60) -> None:
    """Until ``bookie`` (stopped) is no longer registered."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = subprocess.run([bkctl, "--json", "bookie", "list"], env=env, capture_output=True, text=True)
        rows = [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]
        if listed.returncode == 0 and not any(r["bookie_id"] == bookie and r["state"] != "down" for r in rows):
            return
        time.sleep(0.5)
    raise SystemExit(f"{bookie} is still registered after {timeout:g}s")


def auditor_check(f: Filled, bkctl: str) -> None:
    """``--only auditor``: a ``bkctl autorecovery run`` daemon's full check of every ledger
    (and its placement check) with autorecovery disabled, so that what it finds is held back
    rather than copied: the time until it logs the check done, the daemon's peak
    RSS, the ZooKeeper requests, and whether it kept its session (the auditor all along, its
    log saying nothing of an expired session)."""
    import signal

    from bkctl.wire.metadata.zk import ZKMetadataStore

    env = dict(os.environ, BKCTL_METADATA_URI=f.uri)
    subprocess.run([bkctl, "autorecovery", "disable"], env=env, capture_output=True)
    log = tempfile.NamedTemporaryFile(prefix="bench-auditor-", suffix=".log", delete=False)
    section(f"the auditor's full check of {f.ledgers:,} ledgers")
    before = zk_requests(f.zk)
    load = load_note()
    t0 = time.monotonic()
    daemon = subprocess.Popen(
        [
            bkctl,
            "autorecovery",
            "run",
            "--bookie-id",
            "127.0.0.1:1",
            "-o",
            "auditorPeriodicCheckInterval=604800",
            "-o",
            "auditorPeriodicPlacementPolicyCheckInterval=604800",
            "-o",
            "auditorPeriodicBookieCheckInterval=0",
        ],
        env=env,
        stdout=log,
        stderr=log,
    )
    peak = 0
    auditors = set()
    with ZKMetadataStore(f.uri, timeout=60, twins=fastpath.selected()) as store:
        while daemon.poll() is None and time.monotonic() - t0 < 3600:
            try:
                with open(f"/proc/{daemon.pid}/status") as st:
                    peak = max(peak, next(int(x.split()[1]) for x in st if x.startswith("VmHWM")))
            except (OSError, StopIteration):
                pass
            auditors.add(store.auditor.current())
            if "checked every ledger's replicas" in Path(log.name).read_text(errors="replace"):
                break
            time.sleep(1)
        seconds = time.monotonic() - t0
        held = json.loads(
            subprocess.run([bkctl, "--json", "autorecovery", "status"], env=env, capture_output=True, text=True).stdout
            or "{}"
        )
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(60)
    text = Path(log.name).read_text(errors="replace")
    expired = "xpired" in text or "SESSION_EXPIRED" in text
    print(
        f"  full check of {f.ledgers:,} ledgers: {seconds:.1f} s ({f.ledgers / seconds:,.0f} ledgers/s), "
        f"{zk_requests(f.zk) - before:,} ZK requests, daemon peak RSS {peak / 1024:.0f} MiB, "
        f"auditor(s) seen {sorted(a for a in auditors if a)}, session expired: {expired}, "
        f"waits for: {held.get('auditor_waits_for')!r}  [{load}]",
        flush=True,
    )
    subprocess.run([bkctl, "autorecovery", "enable"], env=env, capture_output=True)


def probe(f: Filled, bkctl: str) -> None:
    """Another client's getData latency while `ledger list --json` walks (ms, p50/p99/max)."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=f.zk)
    zk.start()
    env = dict(os.environ, BKCTL_METADATA_URI=f.uri)

    def sample(seconds: float, proc=None) -> list[float]:
        out = []
        end = time.monotonic() + seconds
        while time.monotonic() < end and (proc is None or proc.poll() is None):
            t = time.monotonic()
            zk.get("/ledgers/LAYOUT")
            out.append((time.monotonic() - t) * 1000)
            time.sleep(0.005)
        return sorted(out)

    idle = sample(5)
    proc = subprocess.Popen([bkctl, "--json", "ledger", "list"], env=env, stdout=subprocess.DEVNULL)
    busy = sample(600, proc)
    proc.wait()
    zk.stop()
    zk.close()
    section("another client's getData while ledger list --json walks")
    for name, xs in (("idle", idle), ("during the walk", busy)):
        print(
            f"  {name:16} p50 {xs[len(xs) // 2]:.2f} ms  p99 {xs[int(len(xs) * 0.99)]:.2f} ms  "
            f"max {xs[-1]:.2f} ms  ({len(xs)} gets)",
            flush=True,
        )


if __name__ == "__main__":
    raise SystemExit(main())
