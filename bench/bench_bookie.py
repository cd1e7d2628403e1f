"""One real bookied driven over loopback: add and read throughput, group commit, latency, memory.

Starts a real ZooKeeper and one bookied in a temporary directory, then:

* adds/s with pipelined v2 ADDs of 100 B and 1 KiB entries over 1 and 8 connections;
* entries per journal fsync (from the bookie's /metrics);
* add latency p50/p99/p999 at a steady 1,000 adds/s, next to the disk's own fsync latency;
* entries/s read back with v2 BATCH_READ;
* the bookie's peak RSS.

Each figure is printed next to its target; nothing is asserted.
``python bench/bench_bookie.py [--seconds 5]``

``--java-peer DIR`` (a Java peer built by ../shared/java-peer, ``$PEER``) runs
instead the same workload against bookied and against one Java 4.17.2 bookie
(stock -Xms1g -Xmx1g -XX:MaxDirectMemorySize=2g), both through the same warmed
Java client (``bktool.sh bench e=1 w=1 a=1 ... warmup=N``), alternated, and
prints both rates and their ratio beside the load average, each bookie's CPU
per add and per read, the Java client's CPU per add and per read against each
(the two share the machine's cores: a bookie whose answers cost its client
more is slower for it), how many answers each bookie sends per TCP segment
(``ss -ti``: fewer, larger writes wake the client less often) and each
bookie's resident memory.

Then, per side, what an infinitely cheap bookie would allow under this client on
this machine, from the CPU per op measured (the client's without its JIT, which
a long-running client no longer pays): a CPU-bound pair on N cores does at most
N / (client + bookie) ops/s (the cores the pair used show whether it was
CPU-bound at all); with a bookie that costs nothing the client has the
N cores, N / client, but goes no faster than its busiest thread on a core of its
own, 1 / thread (a ledger's adds complete in order on one of its threads).  This
assumes the client's cost per op stays as measured -- it does not quite: it
depends on how the bookie answers -- that nothing else runs, and that no wait
(disk, network) bounds.  Beside it: the share of that ceiling each side
reached, the most the ratio bookied/Java can be under this client (bookied's
ceiling over Java's rate), and the fair figure of the bookies themselves, Java's
bookie CPU per op over bookied's, with the C paths' state named.

``--compare-env KEY=VALUE``, ``--compare-conf KEY=VALUE`` (each repeatable) and ``--compare-python
PYTHON``, with ``--java-peer``: a second bookied (``bookied-b``) in the Java bookie's place, started
with that environment, those bk_server.conf settings or by another
checkout's interpreter, the first as without them -- the same Java client alternating
between the two in one run, so that a bookie-side change is judged against the same client and
the same load (Java's own noise between rounds is larger than most such changes), e.g.
``--compare-env BKCTL_FASTPATHS=0``, ``--compare-conf journalZeroAheadMB=0`` or ``--compare-python
../other/.venv/bin/python``.

The latency run starts once the bookie has flushed what the throughput runs
left in its write cache (it is about steady state, not the aftermath of a
burst), lasts at least 10 s, and its load generator is a separate, lean
process (no ZooKeeper client, garbage collector off) that sends on schedule
and timestamps each answer as soon as it arrives, so that its own delays
stay out of the figures.

The disk's fsync latency is measured the way the journal meets it at that
rate -- one fdatasync per add, the CPU idle in between -- before and after
the run, with nothing else on the disk; back-to-back fdatasyncs (faster:
no wake-ups) and the journal's own fsync timings from the bookie's /metrics
are printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from common import (
    bookie_metrics,
    builds_note,
    cpu_seconds,
    histogram_quantile,
    load_note,
    pct_ms,
    section,
)  # bench/ is on sys.path when run as a script
from java_peer import SIDE_BY_SIDE_ENTRIES, add_java_peer_options  # noqa: E402

from bkctl.wire import fastpath
from bkctl.wire.codecs import v2
from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
from bkctl.wire.codecs.framing import FrameDecoder, frame

KEY = master_key(b"bench")
_RC = struct.Struct(">i")


# Targets (README / perf brief), printed next to the figures.
TARGET_ADDS = 25_000
TARGET_READS = 40_000
TARGET_P99_OVER_DISK = 3.0
TARGET_RSS_MB = 300
LATENCY_RATE = 1000


def start_bookie(
    base: Path, uri: str, extra: dict | None = None, python: str = sys.executable, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, int, int]:
    """One bookied with its HTTP admin, started by ``python`` with ``env`` added to this
    environment; ``extra`` bk_server.conf settings win over these."""
    from bkctl.sandbox.zookeeper import free_port

    port, http = free_port(), free_port()
    (base / "journal").mkdir(parents=True)
    (base / "ledgers").mkdir(parents=True)
    conf = base / "bk_server.conf"
    settings = {
        "bookiePort": port,
        "advertisedAddress": "127.0.0.1",
        "listeningInterface": "lo",
        "allowLoopback": "true",
        "journalDirectories": base / "journal",
        "ledgerDirectories": base / "ledgers",
        "metadataServiceUri": uri,
        "httpServerEnabled": "true",
        "httpServerPort": http,
        "httpServerHost": "127.0.0.1",
        "dbStorage_writeCacheMaxSizeMb": 128,
        **(extra or {}),
    }
    conf.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    log = open(base / "bookied.log", "wb")
    proc = subprocess.Popen(
        [python, "-m", "bkctl.bookied", "--conf", str(conf), "--log-level", "WARNING"],
        env=dict(os.environ, **(env or {})),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
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
    return [
        frame(v2.AddRequest(2, 0, KEY, dm.package(e, e - 1, size * (e + 1), payload), ledger, e).encode())
        for e in range(count)
    ]


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
        for w in work:
            if not w["out"] and w["sent"] - w["acked"] < window and w["sent"] < len(w["frames"]):
                n = min(window - (w["sent"] - w["acked"]), 256, len(w["frames"]) - w["sent"])
                w["out"] = b"".join(w["frames"][w["sent"] : w["sent"] + n])
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


def steady_latency(port: int, rate: int, seconds: float, ledger: int = 7) -> list[float]:
    """Add latencies (seconds) of ``rate`` adds/s for ``seconds``, measured by
    a separate process (see :func:`latency_client`)."""
    out = subprocess.run(
        [
            sys.executable,
            os.path.abspath(__file__),
            "--latency-client",
            str(port),
            str(rate),
            str(seconds),
            str(ledger),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=seconds * 3 + 60,
    )
    return json.loads(out.stdout)


def latency_client(port: int, rate: int, seconds: float, ledger: int) -> list[float]:
    """One connection, one 100 B add every 1/rate s on schedule; each answer is
    timestamped when its bytes arrive (select wakes on them or at the next send)."""
    import gc

    n = int(rate * seconds)
    frames = add_frames(ledger, n, 100)
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    dec = FrameDecoder()
    sent_at = [0.0] * n
    lat: list[float] = []
    unpack = struct.Struct(">q").unpack_from
    perf = time.perf_counter
    gc.collect()
    gc.disable()
    start = perf() + 0.01
    give_up = start + seconds * 3
    i = 0
    while len(lat) < n:
        now = perf()
        while i < n and start + i / rate <= now:
            s.sendall(frames[i])
            sent_at[i] = perf()
            i += 1
        if now > give_up:
            break
        wait = max(0.0, start + i / rate - perf()) if i < n else 0.1
        if select.select([s], [], [], wait)[0]:
            data = s.recv(1 << 16)
            arrived = perf()
            if not data:
                break
            for payload in dec.feed(data):
                lat.append(arrived - sent_at[unpack(payload, 16)[0]])
    s.close()
    return lat


def wait_for_flushes(http: int, limit_bytes: int = 1 << 20, timeout: float = 30.0) -> float:
    """Wait until the bookie's write cache holds less than ``limit_bytes``
    (the throughput runs leave up to the whole cache to flush); returns the wait."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if metric(http, "bookie_write_cache_bytes") < limit_bytes:
            break
        time.sleep(0.2)
    return time.monotonic() - started


def read_batches(port: int, ledger: int, entries: int, batch: int = 100) -> float:
    s = socket.create_connection(("127.0.0.1", port))
    dec = FrameDecoder()
    start = time.perf_counter()
    got = 0
    requests = [
        frame(v2.BatchReadRequest(2, 0, ledger, e, e, batch, 1 << 20).encode()) for e in range(0, entries, batch)
    ]
    for i in range(0, len(requests), 20):  # 20 batches in flight
        s.sendall(b"".join(requests[i : i + 20]))
        answered = 0
        while answered < len(requests[i : i + 20]):
            for payload in dec.feed(s.recv(1 << 20)):
                got += len(v2.decode_response(payload).entries)
                answered += 1
    s.close()
    return got / (time.perf_counter() - start)


def disk_fsync_latency(directory: Path, n: int = 1000, interval: float = 0.0) -> list[float]:
    """``n`` fdatasync latencies after 100 B appends to a file in ``directory``,
    back to back or one every ``interval`` s."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    out = []
    next_at = time.perf_counter()
    try:
        while len(out) < n:
            if interval:
                next_at += interval
                time.sleep(max(0.0, next_at - time.perf_counter()))
            os.write(fd, b"x" * 100)
            t = time.perf_counter()
            os.fdatasync(fd)
            out.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        path.unlink()
    return out


def metric(http: int, name: str) -> float:
    return bookie_metrics(http).get(name, float("nan"))


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_cluster(base: Path):
    """A real ZooKeeper in ``base/zk`` with an initialised cluster: ``(server, metadata URI)``."""
    from bkctl.sandbox.zookeeper import ZooKeeperServer

    zk = ZooKeeperServer(base / "zk", start_timeout=300.0)  # a JVM's start takes minutes on a starved machine
    zk.start()
    uri = f"zk+hierarchical://{zk.connect_string}/ledgers"
    init_cluster(uri)
    return zk, uri


def init_cluster(uri: str) -> None:
    """A new cluster's metadata at ``uri`` (a ledgers root of its own in a running ZooKeeper)."""
    from bkctl.wire.metadata.zk import ZKMetadataStore

    with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
        store.cluster.init()


@contextmanager
def cluster_with_bookie(prefix: str):
    """A temporary directory with a real ZooKeeper and one bookied in it:
    ``(base, zk, proc, port, http)``; all stopped on the way out."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        base = Path(tmp)
        zk, uri = start_cluster(base)
        proc = None
        try:
            proc, port, http = start_bookie(base / "bookie", uri)
            yield base, zk, proc, port, http
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(30)
            zk.stop()


class Segments:
    """Every ``interval`` s on a thread, the TCP counters (``ss -ti``) of each connection to the
    bookie ports ``ports``, kept per connection: how many answers a bookie sends per data segment
    and how many requests arrive per segment, over a phase of a run (a bookie that writes its
    answers in smaller pieces wakes its client more often). Empty without ``ss``."""

    FIELDS = ("data_segs_out", "data_segs_in")

    def __init__(self, ports: list[int], interval: float = 0.1) -> None:
        self.ports = set(ports)
        self.interval = interval
        #: (bookie port, peer address) -> [(monotonic time, {field: value})]
        self.series: dict[tuple[int, str], list[tuple[float, dict[str, int]]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Segments:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                out = subprocess.run(["ss", "-tinH", "state", "established"], capture_output=True, text=True).stdout
            except OSError:
                return
            self._parse(time.monotonic(), out.splitlines())

    def _parse(self, now: float, lines: list[str]) -> None:
        # each connection is a line of addresses, then a line of its counters
        for head, info in zip(lines, lines[1:]):
            parts = head.split()
            if len(parts) < 4 or not parts[2].rpartition(":")[2].isdigit():
                continue
            port = int(parts[2].rpartition(":")[2])
            if port not in self.ports:
                continue
            counters = dict(item.split(":", 1) for item in info.split() if item.startswith(self.FIELDS))
            values = {f: int(counters.get(f, "0")) for f in self.FIELDS}
            self.series.setdefault((port, parts[3]), []).append((now, values))

    def count(self, port: int, name: str, window: tuple[float, float]) -> int:
        """Segments (``name``: one of FIELDS) of the connections to ``port`` during ``window``."""

        def at(series: list[tuple[float, dict[str, int]]], t: float) -> int:
            value = 0
            for when, values in series:
                if when > t:
                    break
                value = values[name]
            return value

        start, end = window
        return sum(at(series, end) - at(series, start) for (p, _peer), series in self.series.items() if p == port)

    def per_segment(self, port: int, name: str, window: tuple[float, float], ops: int) -> float:
        """``ops`` per segment of ``name`` during ``window`` (NaN when none were seen)."""
        segments = self.count(port, name, window)
        return ops / segments if segments > 0 else float("nan")


@dataclass(frozen=True)
class SecondBookied:
    """``--compare-python``/``--compare-env``: a second bookied in the Java bookie's place,
    started by ``python`` (another checkout's interpreter: two builds) with ``env`` added to
    this environment (a switch: ``BKCTL_FASTPATHS=0``), under its own ledgers root.  Java's
    noise between rounds is larger than most bookie-side changes; two bookieds under one
    Java client, alternated in one run, see the same client and the same load."""

    python: str
    env: dict[str, str]
    #: bk_server.conf settings of the second bookied only (``--compare-conf``)
    conf: dict[str, str]

    @property
    def label(self) -> str:
        what = [f"{k}={v}" for k, v in sorted(self.env.items())]
        what += [f"conf {k}={v}" for k, v in sorted(self.conf.items())]
        if self.python != sys.executable:
            what.insert(0, self.python)
        return " ".join(what) or "the same bookied"


def side_by_side(
    peer_dir: str, sizes: list[int], entries: int, warmup: int, rounds: int, other: SecondBookied | None = None
) -> None:
    """bookied and a Java bookie (or ``other``, a second bookied), each alone in its ledgers
    root of one ZooKeeper, under the same Java client, E1; see the module's docstring."""
    from java_peer import CpuSampler, JavaPeer, alternate, entries_for, print_medians

    peer = JavaPeer(peer_dir)
    second = "java" if other is None else "bookied-b"
    names = ("ours", "Java") if other is None else ("bookied", second)
    with cluster_with_bookie("bench-bookie-java-") as (base, zk, proc, port, _http):
        proc_b = None
        try:
            if other is None:
                second_root, second_port = "/java-ledgers", 3181
                second_pid = peer.start_bookies(1, zk.connect_string, second_root)[0]
                what = f"Java bookie pid {second_pid} on 127.0.0.1:3181 (root /java-ledgers)"
            else:
                second_root = "/ledgers-b"
                uri_b = f"zk+hierarchical://{zk.connect_string}{second_root}"
                init_cluster(uri_b)
                proc_b, second_port, _ = start_bookie(
                    base / "bookie-b", uri_b, other.conf, python=other.python, env=other.env
                )
                second_pid = proc_b.pid
                what = (
                    f"{second}: bookied pid {second_pid} on 127.0.0.1:{second_port} (root {second_root}; {other.label})"
                )
            roots = {"bookied": "/ledgers", second: second_root}
            ports = {"bookied": port, second: second_port}
            print(
                f"bookied pid {proc.pid} on 127.0.0.1:{port} (root /ledgers); {what};"
                f" one Java client JVM per run, warmup={warmup}; {load_note()}"
            )
            with (
                CpuSampler({"bookied": proc.pid, second: second_pid}) as sampler,
                Segments(list(ports.values())) as segs,
            ):
                for size in sizes:
                    n, warm = entries_for(size, entries), entries_for(size, warmup, 0)
                    section(f"E1 {size} B, {n} entries per run (+{warm} warm-up), {rounds} rounds alternated")
                    got: dict[str, list] = {"bookied": [], second: []}
                    for r, side in alternate(["bookied", second], rounds):
                        res = peer.bench(zk.connect_string, roots[side], (1, 1, 1), n, size, warm, sampler)
                        add_cpu = sampler.per_op_us(side, res.add_window, res.adds)
                        read_cpu = sampler.per_op_us(side, res.read_window, res.reads)
                        client_add = sampler.per_op_us("java-client", res.add_window, res.adds)
                        client_read = sampler.per_op_us("java-client", res.read_window, res.reads)
                        # the part of it that its JIT compilers took: a JVM's compiling is paid
                        # by time since its start, not per add, so a faster bookie (a shorter
                        # warm-up and window) shows more of it per add
                        jit_add = sampler.per_op_us("java-client JIT", res.add_window, res.adds)
                        jit_read = sampler.per_op_us("java-client JIT", res.read_window, res.reads)
                        jit = (
                            sampler.jit_share("java-client", res.add_window),
                            sampler.jit_share("java-client", res.read_window),
                        )
                        figures = (res.adds_per_s, res.reads_per_s, add_cpu, read_cpu, client_add, client_read)
                        busiest = (
                            sampler.busiest_thread("java-client", res.add_window, res.adds),
                            sampler.busiest_thread("java-client", res.read_window, res.reads),
                        )
                        got[side].append(
                            (*figures, client_add - jit_add, client_read - jit_read, busiest[0][1], busiest[1][1])
                        )
                        pieces = (
                            segs.per_segment(ports[side], "data_segs_out", res.add_window, res.adds),
                            segs.per_segment(ports[side], "data_segs_out", res.read_window, res.reads),
                            segs.per_segment(ports[side], "data_segs_in", res.add_window, res.adds),
                        )
                        print(
                            f"  round {r + 1} {side:>7}: {res.adds_per_s:>9,.0f} adds/s ({add_cpu:6.1f} us bookie CPU"
                            f"/add, client {client_add:.1f}, its JIT {jit_add:.1f})  {res.reads_per_s:>9,.0f} reads/s"
                            f" ({read_cpu:6.1f} us/read, client {client_read:.1f}, its JIT {jit_read:.1f})"
                            f"  client JIT {jit[0]:.2f}/{jit[1]:.2f} cores"
                            f"{f'  {res.failures} FAILED' if res.failures else ''}  {load_note()}",
                            flush=True,
                        )
                        print(
                            f"    answers per TCP segment: adds {pieces[0]:.1f}  reads {pieces[1]:.1f};"
                            f" adds per segment from the client {pieces[2]:.1f}; the client's busiest thread:"
                            f" adds {busiest[0][0]!r} {busiest[0][1]:.1f} us/add, reads {busiest[1][0]!r}"
                            f" {busiest[1][1]:.1f} us/read",
                            flush=True,
                        )
                    ours, java = print_medians(f"E1 {size} B", size, got["bookied"], got[second], names)
                    print(
                        f"  bookie CPU per add: {names[0]} {ours[2]:.1f} us  {names[1]} {java[2]:.1f} us;"
                        f" per read: {names[0]} {ours[3]:.1f} us  {names[1]} {java[3]:.1f} us"
                    )
                    print(
                        f"  the Java client's CPU per add against each: {ours[4]:.1f} us  {java[4]:.1f} us;"
                        f" per read: {ours[5]:.1f} us  {java[5]:.1f} us; without its JIT compilers: per add"
                        f" {ours[6]:.1f} us  {java[6]:.1f} us, per read {ours[7]:.1f} us  {java[7]:.1f} us"
                    )
                    print_ceilings(ours, java, names)
                    print(
                        f"  resident memory (peak so far): {names[0]} {sampler.peak_rss['bookied']:,.0f} MiB  "
                        f"{names[1]} {sampler.peak_rss[second]:,.0f} MiB  ({load_note()})",
                        flush=True,
                    )
        finally:
            if proc_b is not None:
                proc_b.terminate()
                proc_b.wait(30)
            if other is None:
                peer.stop_bookies()


def print_ceilings(ours: list[float], java: list[float], names: tuple[str, str] = ("ours", "Java")) -> None:
    """From the medians of :func:`side_by_side` (rates 0-1, bookie CPU per op 2-3, the client's
    without its JIT 6-7, its busiest thread's 8-9): for adds and reads, the rate each side's
    client could reach on this machine against a bookie that cost nothing (see the module),
    how much of it each side reached, the most the ratio can be under this client, and the
    bookie CPU per op of the second side's over the first's (``names``: what each is called)."""
    from java_peer import ceiling

    def over(a: float, b: float) -> float:
        return a / b if b else float("nan")

    first, second = names
    cores = len(os.sched_getaffinity(0))
    for op, rate, bookie, client, thread in (("add", 0, 2, 6, 8), ("read", 1, 3, 7, 9)):
        c = [ceiling(cores, figures[client], figures[bookie], figures[thread]) for figures in (ours, java)]
        print(
            f"  {op}s against a free bookie, {cores} cores, the client's CPU per {op} without its JIT:"
            f" {first}'s client <= {c[0].free_bookie:,.0f}/s (by {c[0].bound_by};"
            f" reached {over(ours[rate], c[0].free_bookie):.0%}), {second}'s <= {c[1].free_bookie:,.0f}/s"
            f" (by {c[1].bound_by}; reached {over(java[rate], c[1].free_bookie):.0%})"
        )
        print(
            f"    the pair (client + bookie) used {over(ours[rate], c[0].pair_bound) * cores:.2f} and"
            f" {over(java[rate], c[1].pair_bound) * cores:.2f} of the {cores} cores (CPU-bound it would do"
            f" <= {c[0].pair_bound:,.0f}/s and {c[1].pair_bound:,.0f}/s);"
            f" the most {first}/{second} this client allows: {over(c[0].free_bookie, java[rate]):.2f}x;"
            f" bookie CPU per {op}, {second}'s / {first}'s: {over(java[bookie], ours[bookie]):.2f}x  ({builds_note()})"
        )


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"want KEY=VALUE, not {text!r}")
    return key, value


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--latency-client":
        port, rate, seconds, ledger = sys.argv[2:6]
        print(json.dumps(latency_client(int(port), int(rate), float(seconds), int(ledger))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    add_java_peer_options(parser)
    compare = parser.add_argument_group(
        "two bookieds under the Java client (with --java-peer): a second bookied in the Java bookie's place"
    )
    compare.add_argument(
        "--compare-python",
        metavar="PYTHON",
        help="the second bookied's interpreter: another checkout's .venv/bin/python (two builds; the first bookied is this one)",
    )
    compare.add_argument(
        "--compare-env",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        type=_key_value,
        help="an environment setting of the second bookied only (repeatable; e.g. BKCTL_FASTPATHS=0)",
    )
    compare.add_argument(
        "--compare-conf",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        type=_key_value,
        help="a bk_server.conf setting of the second bookied only (repeatable; e.g. journalZeroAheadMB=0)",
    )
    args = parser.parse_args()
    other = None
    if args.compare_python or args.compare_env or args.compare_conf:
        if not args.java_peer:
            parser.error("--compare-* need --java-peer (its Java client drives both bookieds)")
        other = SecondBookied(args.compare_python or sys.executable, dict(args.compare_env), dict(args.compare_conf))
    if args.java_peer:
        side_by_side(args.java_peer, args.sizes, args.entries or SIDE_BY_SIDE_ENTRIES, args.warmup, args.rounds, other)
        return
    seconds = args.seconds
    latency_seconds = max(seconds, 10.0)  # >= 10,000 adds: a p999 from more than a handful of samples
    with cluster_with_bookie("bench-bookie-") as (base, zk, proc, port, http):
        time.sleep(1.0)
        print(f"bookied pid {proc.pid} on 127.0.0.1:{port}; {seconds:.0f} s per run; {load_note()}")
        for size in (100, 1024):
            for conns in (1, 8):
                rate = drive_adds(port, conns, size, seconds)
                target = f"   (target >= {TARGET_ADDS:,})" if size == 100 else ""
                print(f"adds/s  {size:>5} B entries  {conns} connection(s): {rate:>10,.0f}{target}")
        fsyncs = metric(http, "bookie_journal_entries_per_fsync_count")
        records = metric(http, "bookie_journal_entries_per_fsync_sum")
        print(f"entries per journal fsync (mean over the runs): {records / fsyncs:,.1f}")
        waited = wait_for_flushes(http)
        print(f"(write cache flushed after the throughput runs: waited {waited:.1f} s; {load_note()})")
        # The disk first, the way the journal meets it at this rate: one fsync per
        # add, the CPU idle in between (slower than back to back: wake-ups).
        disk_paced = disk_fsync_latency(base / "bookie" / "journal", 2000, 1.0 / LATENCY_RATE)
        disk_b2b = disk_fsync_latency(base / "bookie" / "journal", 2000)
        before = bookie_metrics(http)
        lat = steady_latency(port, LATENCY_RATE, latency_seconds)
        after = bookie_metrics(http)
        disk_paced += disk_fsync_latency(base / "bookie" / "journal", 2000, 1.0 / LATENCY_RATE)
        n = after["bookie_journal_fsync_latency_seconds_count"] - before["bookie_journal_fsync_latency_seconds_count"]
        journal_mean = (
            after["bookie_journal_fsync_latency_seconds_sum"] - before["bookie_journal_fsync_latency_seconds_sum"]
        ) / max(n, 1)
        journal_p99 = histogram_quantile(before, after, "bookie_journal_fsync_latency_seconds", 0.99)
        print(
            f"add latency at {LATENCY_RATE:,} adds/s: p50 {pct_ms(lat, 0.5):.2f} ms  p99 {pct_ms(lat, 0.99):.2f} ms  "
            f"p999 {pct_ms(lat, 0.999):.2f} ms  max {max(lat) * 1000:.2f} ms  ({len(lat)} adds)"
        )
        print(
            f"disk fdatasync after a 100 B append, one per {1000 / LATENCY_RATE:g} ms: p50 {pct_ms(disk_paced, 0.5):.2f} ms"
            f"  p99 {pct_ms(disk_paced, 0.99):.2f} ms  ({len(disk_paced)} samples, before and after the run)"
        )
        print(
            f"  ... back to back: p50 {pct_ms(disk_b2b, 0.5):.2f} ms  p99 {pct_ms(disk_b2b, 0.99):.2f} ms"
            f"  ({len(disk_b2b)} samples)"
        )
        print(
            f"  ... the journal's own fsyncs during the run (bookie's /metrics): mean {journal_mean * 1000:.2f} ms"
            f"  p99 <= {journal_p99 * 1000:g} ms  ({n:.0f} fsyncs)"
        )
        print(
            f"p99 add latency / disk p99 fsync: {pct_ms(lat, 0.99) / pct_ms(disk_paced, 0.99):.1f}x"
            f"   (target <= {TARGET_P99_OVER_DISK:g}x); against back-to-back fsyncs:"
            f" {pct_ms(lat, 0.99) / pct_ms(disk_b2b, 0.99):.1f}x"
        )
        cpu = cpu_seconds(proc.pid)
        rate = read_batches(port, 1000 + 1000, 40000)
        cpu = cpu_seconds(proc.pid) - cpu
        print(
            f"entries/s read with BATCH_READ (100 per batch): {rate:>10,.0f}"
            f"   (target >= {TARGET_READS:,}); bookied CPU {cpu * 1e6 / 40000:.1f} us/entry"
        )
        print(f"bookied peak RSS: {peak_rss_mb(proc.pid):.0f} MB   (target <= {TARGET_RSS_MB} MB)")
        print(f"({load_note()})")


if __name__ == "__main__":
    main()
