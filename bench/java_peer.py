"""Side by side with the Java peer (Apache BookKeeper 4.17.2 built by ../shared/java-peer):
its bookies and its client (``bktool.sh bench ... warmup=N``) driven from the benchmarks.

Only benchmarks use this (``--java-peer DIR``); tests and CI never need the peer.
What it measures of a run, beside the rates: the load average, CPU per operation
of each process that matters (sampled from /proc while the run goes, cut to the
add and the read phase by the times the client reports), and resident memory.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bkctl.wire import fastpath

__all__ = [
    "Ceiling",
    "CpuSampler",
    "add_java_peer_options",
    "print_medians",
    "JavaPeer",
    "JavaBookie",
    "PassResult",
    "ReplicasCheck",
    "alternate",
    "ceiling",
    "cpu_between",
    "entries_for",
    "parse_bench_output",
    "parse_sizes",
    "ratio_line",
]

_TICK = os.sysconf("SC_CLK_TCK")
#: the side-by-side defaults: a Java client warmed by 200,000 adds and reads still
#: compiles (its C2 threads took 0.76 s of CPU during a 1.5 s measured pass of
#: 200,000 adds, on two cores), so its figures were of a JVM still warming; after
#: 1,000,000 they took 0.28 s of a 4.8 s pass of 1,000,000
SIDE_BY_SIDE_WARMUP = 1_000_000
SIDE_BY_SIDE_ENTRIES = 1_000_000
#: names (``comm``) of HotSpot's JIT compiler threads
_JIT_THREAD = re.compile(r"C[12] CompilerThre")
_ADDED = re.compile(r"added (\d+) entries in (\d+) ms, failures=(\d+)")
_READ = re.compile(r"read back (\d+) entries in (\d+) ms")
#: the auditor's replicas check (AuditorReplicasCheckTask, 4.17.2): its start, its own timing, its failures
_RC_START = "Starting ReplicasCheck"
_RC_DONE = re.compile(
    r"Completed ReplicasCheck in (\d+) milliSeconds numLedgersFoundHavingNoReplicaOfAnEntry (\d+)"
    r" numLedgersFoundHavingLessThanAQReplicasOfAnEntry (\d+) numLedgersFoundHavingLessThanWQReplicasOfAnEntry (\d+)"
)
_RC_FAILED = ("BKAuditException running periodic replicas check", "Underreplication manager unavailable")
_RC_SKIPPED = (
    "skipping replicasCheck task",
    "skipping periodic replicas check task",
    "Periodic replicas check disabled",
)


def add_java_peer_options(parser) -> None:
    """The side-by-side options every benchmark with a ``--java-peer`` mode takes."""
    group = parser.add_argument_group("side by side with the Java peer")
    group.add_argument(
        "--java-peer",
        metavar="DIR",
        help="a Java BookKeeper 4.17.2 peer built by ../shared/java-peer ($PEER): measure the same "
        "workload against it, alternated",
    )
    group.add_argument(
        "--sizes", type=_sizes_arg, default=[100], help="entry sizes, comma-separated (default 100; e.g. 100,4k,64k)"
    )
    group.add_argument(
        "--entries",
        type=_positive,
        default=None,
        help="measured entries per run (side by side: at <= 1 KiB; larger entries as many bytes as "
        f"that many of 1 KiB; default {SIDE_BY_SIDE_ENTRIES} side by side)",
    )
    group.add_argument(
        "--warmup",
        type=_non_negative,
        default=SIDE_BY_SIDE_WARMUP,
        help="unmeasured entries added and read first in the same client (default "
        f"{SIDE_BY_SIDE_WARMUP}: after 200000, the client JVM's JIT compilers still took half a "
        "core of the two during a 200000-entry measured pass; the JIT column shows it)",
    )
    group.add_argument("--rounds", type=_positive, default=3, help="alternated rounds; medians are printed (default 3)")


def _sizes_arg(text: str) -> list[int]:
    import argparse

    try:
        return parse_sizes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive(text: str) -> int:
    import argparse

    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"want a positive whole number, not {text!r}")
    return int(text)


def _non_negative(text: str) -> int:
    import argparse

    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"want a whole number >= 0, not {text!r}")
    return int(text)


def parse_sizes(text: str) -> list[int]:
    """``"100,4k,64KiB"`` -> ``[100, 4096, 65536]``; a clear error for anything else."""
    sizes = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(k|kib|kb)?\s*", part.lower())
        if not m or int(m.group(1)) <= 0:
            raise ValueError(f"bad entry size {part.strip()!r} (want bytes, e.g. 100,4k,64k)")
        sizes.append(int(m.group(1)) * (1024 if m.group(2) else 1))
    return sizes


def entries_for(size: int, entries: int, floor: int = 2000) -> int:
    """Entries of one pass at ``size``: ``entries`` up to 1 KiB, beyond that as
    many bytes as ``entries`` of 1 KiB (64 KiB entries are about bytes, and the
    disk is shared), never fewer than ``floor`` nor more than ``entries``."""
    if size <= 1024:
        return entries
    return min(entries, max(floor, entries * 1024 // size))


def alternate(sides: list[str], rounds: int) -> list[tuple[int, str]]:
    """The order of the runs: every side once per round, the first side
    alternating from one round to the next so that neither always runs on the
    heels of the other (a machine warming up or a disk still flushing)."""
    order = []
    for r in range(rounds):
        turn = sides if r % 2 == 0 else list(reversed(sides))
        order.extend((r, side) for side in turn)
    return order


def ratio_line(label: str, ours: float, java: float, unit: str, names: tuple[str, str] = ("ours", "Java")) -> str:
    ratio = ours / java if java else float("nan")
    return f"{label}: {names[0]} {ours:>10,.0f} {unit}   {names[1]} {java:>10,.0f} {unit}   ratio {ratio:.2f}x"


def print_medians(
    label: str, size: int, ours: list[tuple], java: list[tuple], names: tuple[str, str] = ("ours", "Java")
) -> tuple[list[float], list[float]]:
    """Median of each figure of the runs of both sides (adds/s and reads/s first), printed as ratios
    (in MiB/s as well for entries of 4 KiB and more), each side called by ``names``; returns both
    sides' medians."""
    med_ours = [median([run[i] for run in ours]) for i in range(len(ours[0]))]
    med_java = [median([run[i] for run in java]) for i in range(len(java[0]))]
    for i, what in ((0, "adds/s "), (1, "reads/s")):
        print(ratio_line(f"  median {what} {label}", med_ours[i], med_java[i], what.strip(), names))
        if size >= 4096:
            print(
                f"    = {names[0]} {med_ours[i] * size / 2**20:,.1f} MiB/s"
                f"  {names[1]} {med_java[i] * size / 2**20:,.1f} MiB/s"
            )
    return med_ours, med_java


def median(values: list[float]) -> float:
    values = sorted(v for v in values if v == v)
    if not values:
        return float("nan")
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


@dataclass
class PassResult:
    """One measured pass of ``bktool bench``: rates, and its two phases' wall-clock windows."""

    adds: int
    add_ms: int
    failures: int
    reads: int
    read_ms: int
    add_window: tuple[float, float] = (0.0, 0.0)
    read_window: tuple[float, float] = (0.0, 0.0)

    @property
    def adds_per_s(self) -> float:
        return self.adds * 1000 / max(self.add_ms, 1)

    @property
    def reads_per_s(self) -> float:
        return self.reads * 1000 / max(self.read_ms, 1)


def parse_bench_output(lines: list[tuple[float, str]]) -> PassResult:
    """``bktool bench`` stdout, each line with the monotonic time it arrived;
    the add phase ends when "added ..." arrives, the read phase when "read back
    ..." does, each began its reported duration earlier."""
    added = read = None
    for at, line in lines:
        if m := _ADDED.search(line):
            added = (at, m)
        elif m := _READ.search(line):
            read = (at, m)
    if added is None or read is None:
        raise RuntimeError("bktool bench printed no result:\n" + "\n".join(line for _, line in lines[-20:]))
    (t_add, ma), (t_read, mr) = added, read
    add_ms, read_ms = int(ma.group(2)), int(mr.group(2))
    return PassResult(
        int(ma.group(1)),
        add_ms,
        int(ma.group(3)),
        int(mr.group(1)),
        read_ms,
        (t_add - add_ms / 1000, t_add),
        (t_read - read_ms / 1000, t_read),
    )


def cpu_between(samples: list[tuple[float, float]], start: float, end: float) -> float:
    """CPU seconds a process used between ``start`` and ``end``, from
    ``(time, cumulative CPU seconds)`` samples, linearly interpolated."""

    def at(t: float) -> float:
        if not samples:
            return float("nan")
        if t <= samples[0][0]:
            return samples[0][1]
        for (t0, c0), (t1, c1) in zip(samples, samples[1:]):
            if t <= t1:
                return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1
        return samples[-1][1]

    return at(end) - at(start)


def _stat(path: str) -> tuple[float, list[str]]:
    """A /proc ``stat`` file (a process's or a thread's): its CPU seconds (user +
    system) and its fields after the command name."""
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK, fields


def _cpu_and_rss(pid: int) -> tuple[float, float]:
    cpu, fields = _stat(f"/proc/{pid}/stat")
    return cpu, int(fields[21]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _thread_cpu(pid: int, tid: str) -> float | None:
    """CPU seconds of thread ``tid`` of ``pid`` (None once it is gone)."""
    try:
        return _stat(f"/proc/{pid}/task/{tid}/stat")[0]
    except (OSError, IndexError):
        return None


def _jit_threads(pid: int) -> list[str]:
    """The ids of the JVM ``pid``'s JIT compiler threads now."""
    tids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if _JIT_THREAD.match(f.read()):
                    tids.append(tid)
        except OSError:
            continue
    return tids


@dataclass
class JitWatch:
    """A JVM's compiler threads as last seen, and the CPU they used in all
    (HotSpot starts and stops compiler threads as it needs: a thread's CPU counts
    from its start, found by a scan, until it exits)."""

    scanned: float = float("-inf")
    last: dict[str, float] = field(default_factory=dict)
    total: float = 0.0

    def sample(self, pid: int, now: float, rescan: float) -> float:
        if now - self.scanned >= rescan:
            self.scanned = now
            for tid in _jit_threads(pid):
                self.last.setdefault(tid, 0.0)
        for tid, before in list(self.last.items()):
            cpu = _thread_cpu(pid, tid)
            if cpu is None:
                del self.last[tid]
                continue
            self.total += max(0.0, cpu - before)
            self.last[tid] = cpu
        return self.total


@dataclass
class ThreadWatch:
    """Every thread of a process, as last seen: its name (``comm``) and its CPU seconds
    over time, to find the thread that bounds the process (a thread runs on one core)."""

    names: dict[str, str] = field(default_factory=dict)
    cpu: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    #: when :meth:`sample` last ran (a thread first seen then started after it)
    last: float | None = None

    def sample(self, pid: int, now: float) -> None:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        for tid in tids:
            try:
                cpu, _ = _stat(f"/proc/{pid}/task/{tid}/stat")
                if tid not in self.names:
                    with open(f"/proc/{pid}/task/{tid}/comm") as f:
                        self.names[tid] = f.read().strip()
                    if self.last is not None:
                        self.cpu[tid] = [(self.last, 0.0)]
            except (OSError, IndexError):
                continue
            self.cpu.setdefault(tid, []).append((now, cpu))
        self.last = now

    def busiest(self, window: tuple[float, float]) -> tuple[str, float]:
        """The name and CPU seconds, during ``window``, of the thread that used the most
        then (JIT compilers aside: they are paid by time since the JVM's start, not per op)."""
        best = ("", 0.0)
        for tid, samples in self.cpu.items():
            if _JIT_THREAD.match(self.names.get(tid, "")):
                continue
            used = cpu_between(samples, *window)
            if used > best[1]:
                best = (self.names.get(tid, tid), used)
        return best


@dataclass
class CpuSampler:
    """Samples CPU seconds and resident memory (MiB) of some processes every
    ``interval`` s on a thread; for a JVM added with ``jit=True``, also its
    JIT compilers' CPU (as ``"<name> JIT"``): a JVM whose compilers still run
    during a measured pass is not warmed, and on two cores they take CPU
    from the pass."""

    pids: dict[str, int]
    interval: float = 0.05
    cpu: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    peak_rss: dict[str, float] = field(default_factory=dict)

    #: seconds between two looks for a JVM's compiler threads (HotSpot starts and stops them as it needs)
    JIT_RESCAN = 1.0
    #: seconds between two looks at every thread of a JVM added with ``jit=True`` (dozens of files)
    THREADS_EVERY = 0.25

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._jit: dict[str, JitWatch] = {}
        #: a JVM added with ``jit=True``: its threads (kept after :meth:`remove`, for :meth:`busiest_thread`)
        self._threads: dict[str, ThreadWatch] = {}
        self._threads_at = float("-inf")

    def add(self, name: str, pid: int, jit: bool = False) -> None:
        self.pids[name] = pid
        if jit:
            self._jit[name] = JitWatch()
            self._threads[name] = ThreadWatch()

    def remove(self, name: str) -> None:
        self.pids.pop(name, None)
        self._jit.pop(name, None)

    def _sample(self) -> None:
        now = time.monotonic()
        if now - self._threads_at >= self.THREADS_EVERY:
            self._threads_at = now
            for name in self._jit:
                if name in self.pids:
                    self._threads[name].sample(self.pids[name], now)
        for name, pid in list(self.pids.items()):
            try:
                cpu, rss = _cpu_and_rss(pid)
                watch = self._jit.get(name)
                if watch is not None:
                    self.cpu.setdefault(f"{name} JIT", []).append((now, watch.sample(pid, now, self.JIT_RESCAN)))
            except (OSError, IndexError):
                continue
            self.cpu.setdefault(name, []).append((now, cpu))
            self.peak_rss[name] = max(self.peak_rss.get(name, 0.0), rss)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> CpuSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def per_op_us(self, name: str, window: tuple[float, float], ops: int) -> float:
        return cpu_between(self.cpu.get(name, []), *window) * 1e6 / max(ops, 1)

    def busiest_thread(self, name: str, window: tuple[float, float], ops: int) -> tuple[str, float]:
        """The thread of the JVM ``name`` (added with ``jit=True``) that used the most CPU during
        ``window``, JIT compilers aside: its name and its CPU per op (us); ``("", nan)`` unknown."""
        watch = self._threads.get(name)
        thread, used = watch.busiest(window) if watch is not None else ("", 0.0)
        return (thread, used * 1e6 / max(ops, 1)) if thread else ("", float("nan"))

    def jit_share(self, name: str, window: tuple[float, float]) -> float:
        """The cores the JVM ``name``'s JIT compilers used on average during ``window``."""
        start, end = window
        return cpu_between(self.cpu.get(f"{name} JIT", []), start, end) / max(end - start, 1e-9)


@dataclass
class Ceiling:
    """The most ops/s a client could reach on ``cores`` cores against a bookie that cost nothing,
    from what the client was measured to use per op (see :func:`ceiling`)."""

    #: ``cores`` / the client's CPU per op: all the cores the client's
    cores_bound: float
    #: 1 / the client's busiest thread's CPU per op: that thread on a core of its own
    thread_bound: float
    #: the pair as measured: ``cores`` / (client + bookie CPU per op)
    pair_bound: float

    @property
    def free_bookie(self) -> float:
        """min(cores bound, thread bound): NaN terms (not measured) left out."""
        bounds = [b for b in (self.cores_bound, self.thread_bound) if b == b]
        return min(bounds) if bounds else float("nan")

    @property
    def bound_by(self) -> str:
        return "its busiest thread" if self.thread_bound < self.cores_bound else "the cores"


def ceiling(cores: int, client_us: float, bookie_us: float, thread_us: float) -> Ceiling:
    """Ops/s bounds of a CPU-bound client and bookie sharing ``cores`` cores, from CPU per op
    (us): the pair can do no more than ``cores / (client + bookie)``; a bookie that cost
    nothing leaves the client all of them, ``cores / client``, but no faster than its busiest
    thread alone can go, ``1 / thread``.  It assumes the client's CPU per op stays as measured
    (it does not: it depends on how the bookie answers), nothing else runs on the machine, and
    waits (the disk, the network) are not what bounds."""

    def per_s(n: float, us: float) -> float:
        return n * 1e6 / us if us > 0 else float("nan")

    return Ceiling(per_s(cores, client_us), per_s(1, thread_us), per_s(cores, client_us + bookie_us))


@dataclass
class ReplicasCheck:
    """One run of Java's auditor replicas check (:meth:`JavaPeer.replicas_check`), as its log says."""

    #: the auditor's own figure ("Completed ReplicasCheck in N milliSeconds"); None when it did not complete
    check_ms: int | None
    #: from the "Starting ReplicasCheck" line to its end line, as this process saw them
    seconds: float
    #: ledgers it counted with an entry of no replica, of fewer than Qa, of fewer than Qw replicas
    no_replica: int = 0
    below_ack: int = 0
    below_write: int = 0
    #: "Unable to GetListOfEntriesOfLedger" warnings (a bookie that failed or never answered the request)
    not_answered: int = 0
    #: ledgers it logged with "following bookie has not responded" / "following missing entries"
    ledgers_unanswered: int = 0
    ledgers_missing_entries: int = 0
    #: the line that ended it when it did not complete (a BKAuditException, a timeout, a skip)
    failure: str = ""
    log: Path | None = None

    @property
    def completed(self) -> bool:
        return self.check_ms is not None


@dataclass
class JavaBookie:
    """A Java bookie started by :meth:`JavaPeer.start_bookies_in`: its id, ports and process."""

    bookie_id: str
    port: int
    http_port: int
    process: subprocess.Popen
    directory: Path

    @property
    def pid(self) -> int:
        return self.process.pid


class JavaPeer:
    """The Java peer installed at ``root`` (``$PEER``: scripts/, jars/, run/)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()
        self.scripts = self.root / "scripts"
        if not (self.scripts / "bktool.sh").is_file():
            raise SystemExit(
                f"--java-peer {root}: no scripts/bktool.sh there (a peer is built on the "
                "machine from BookKeeper's own release: ../shared/java-peer/README.md says how)"
            )

    def _env(self, zk: str, root: str) -> dict[str, str]:
        return dict(os.environ, PEER=str(self.root), ZK=zk, ROOT=root)

    def start_bookies(self, n: int, zk: str, root: str, extra_conf: str = "") -> list[int]:
        """``n`` clean Java bookies (127.0.0.1:3181.., stock -Xms1g -Xmx1g
        -XX:MaxDirectMemorySize=2g from env.sh) registered under ``zk``/``root``; their pids.
        ``extra_conf``: bk_server.conf lines that replace or add to the peer's template."""
        env = dict(self._env(zk, root), BOOKIE_EXTRA_CONF=extra_conf)
        out = subprocess.run(
            [str(self.scripts / "start-bookies.sh"), str(n), "--clean"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if out.returncode != 0:
            raise SystemExit(f"the Java bookies did not start:\n{out.stdout}{out.stderr}")
        return self.bookie_pids(n)

    def bookie_pids(self, n: int) -> list[int]:
        return [int((self.root / "run" / f"bookie-{i}.pid").read_text()) for i in range(1, n + 1)]

    def stop_bookies(self) -> None:
        subprocess.run(
            [str(self.scripts / "stop-bookies.sh")],
            env=dict(os.environ, PEER=str(self.root)),
            capture_output=True,
            timeout=600,
        )

    def bench(
        self,
        zk: str,
        root: str,
        ensemble: tuple[int, int, int],
        entries: int,
        size: int,
        warmup: int,
        sampler: CpuSampler | None = None,
    ) -> PassResult:
        """One ``bktool bench`` (a fresh client JVM: ``warmup`` unmeasured adds and reads
        first, then ``entries`` measured); the client JVM is sampled as ``java-client``."""
        e, w, a = ensemble
        cmd = [
            str(self.scripts / "bktool.sh"),
            "bench",
            f"zk={zk}",
            f"root={root}",
            f"e={e}",
            f"w={w}",
            f"a={a}",
            f"n={entries}",
            f"size={size}",
            f"warmup={warmup}",
            "conf.throttle=0",
        ]
        proc = subprocess.Popen(cmd, env=self._env(zk, root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if sampler is not None:
            sampler.add("java-client", proc.pid, jit=True)
        lines = [(time.monotonic(), line.rstrip()) for line in proc.stdout]
        err = proc.stderr.read()
        proc.wait()
        if sampler is not None:
            sampler.remove("java-client")
        if proc.returncode != 0:
            raise RuntimeError(f"bktool bench failed ({proc.returncode}): {err[-2000:]}")
        return parse_bench_output(lines)

    def launch_settings(self) -> dict[str, str]:
        """The java binary, classpath and JVM flags the peer's scripts give a bookie (from env.sh)."""
        names = ("JAVA", "PEER_CP", "NETTY_OPTS", "BK_OPTS", "BOOKIE_MEM_OPTS", "BOOKIE_GC_OPTS")
        script = f'source "{self.scripts}/env.sh" >/dev/null; printf "%s\\0" ' + " ".join(f'"${n}"' for n in names)
        out = subprocess.run(
            ["bash", "-c", script],
            env=dict(os.environ, PEER=str(self.root)),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return dict(zip(names, out.split("\0")))

    def java_command(
        self,
        role: str,
        main_class: str,
        args: list[str],
        *,
        log_dir: str | Path | None = None,
        log_file: str | None = None,
        launch: dict[str, str] | None = None,
    ) -> list[str]:
        """The command line of a server-side JVM of the peer (a bookie, an autorecovery daemon):
        the peer's classpath and the flags its scripts give a bookie, its log at INFO to
        ``log_dir``/``log_file`` (log4j2's file appender) or, without them, to stdout;
        ``-Dpeer.role=role`` to tell it apart."""
        launch = launch or self.launch_settings()
        if log_dir is None or log_file is None:
            logging = ["-Dbookkeeper.log.root.appender=CONSOLE"]
        else:
            logging = [
                "-Dbookkeeper.log.root.appender=ROLLINGFILE",
                f"-Dbookkeeper.log.dir={log_dir}",
                f"-Dbookkeeper.log.file={log_file}",
            ]
        return [
            launch["JAVA"],
            f"-Dpeer.role={role}",
            *launch["BOOKIE_MEM_OPTS"].split(),
            *launch["BOOKIE_GC_OPTS"].split(),
            *launch["NETTY_OPTS"].split(),
            *launch["BK_OPTS"].split(),
            f"-Dlog4j.configurationFile={self.root / 'conf' / 'log4j2.xml'}",
            "-Dbookkeeper.log.root.level=INFO",
            *logging,
            "-cp",
            launch["PEER_CP"],
            main_class,
            *args,
        ]

    def format_metadata(self, zk: str, root: str, bookie_ids: list[str]) -> None:
        """Java's metadata format of ``zk``/``root`` (BookKeeperAdmin.format, through ``bktool prepare-clean``)."""
        out = subprocess.run(
            [
                str(self.scripts / "bktool.sh"),
                "prepare-clean",
                f"zk={zk}",
                f"root={root}",
                f"ours={','.join(bookie_ids)}",
            ],
            env=self._env(zk, root),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if out.returncode != 0:
            raise RuntimeError(f"bktool prepare-clean failed: {out.stdout}{out.stderr}")

    def start_bookies_in(
        self,
        directory: str | Path,
        ports: list[tuple[int, int]],
        zk: str,
        root: str,
        *,
        autorecovery: bool = False,
        extra_conf: str = "",
    ) -> list[JavaBookie]:
        """Java bookies of this run's own, one per ``(bookie port, HTTP port)``, each in
        ``directory``/bookie-N with its conf and logs: the peer's template and JVM
        flags, but neither its fixed ports (3181..) nor its ``run/`` folder, so a
        run beside other users of the same peer leaves their bookies alone.  The
        metadata must be formatted (:meth:`format_metadata`).  Returns once every
        bookie is registered; the caller stops them (:meth:`stop_bookies_in`)."""
        from bkctl.wire.metadata.zk import ZKMetadataStore

        launch = self.launch_settings()
        template = (self.root / "conf" / "bookie.conf.tmpl").read_text()
        extra = dict(line.split("=", 1) for line in extra_conf.splitlines() if "=" in line)
        bookies: list[JavaBookie] = []
        try:
            for n, (port, http) in enumerate(ports, 1):
                d = Path(directory) / f"bookie-{n}"
                (d / "journal").mkdir(parents=True, exist_ok=True)
                (d / "ledgers").mkdir(parents=True, exist_ok=True)
                conf = template
                for key, value in (
                    ("@PORT@", port),
                    ("@HTTP@", http),
                    ("@DIR@", d),
                    ("@ZK@", zk),
                    ("@ROOT@", root),
                    ("@AUTORECOVERY@", str(autorecovery).lower()),
                    ("@N@", n),
                ):
                    conf = conf.replace(key, str(value))
                lines = [line for line in conf.splitlines() if line.split("=", 1)[0].strip() not in extra]
                lines += [f"{k.strip()}={v.strip()}" for k, v in extra.items()]
                (d / "bk_server.conf").write_text("\n".join(lines) + "\n")
                cmd = self.java_command(
                    f"bench-bookie-{n}",
                    "org.apache.bookkeeper.server.Main",
                    ["--conf", str(d / "bk_server.conf")],
                    log_dir=d,
                    log_file="bookie.log",
                    launch=launch,
                )
                out = open(d / "bookie.out", "wb")
                proc = subprocess.Popen(cmd, cwd=d, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                bookies.append(JavaBookie(f"127.0.0.1:{port}", port, http, proc, d))
            store = ZKMetadataStore(f"zk+hierarchical://{zk}{root}", timeout=20, twins=fastpath.selected()).start()
            try:
                deadline = time.monotonic() + 120
                while not {b.bookie_id for b in bookies} <= set(store.registration.writable_bookies()):
                    for b in bookies:
                        if b.process.poll() is not None:
                            raise RuntimeError(
                                f"Java bookie {b.bookie_id} exited ({b.process.returncode}); see "
                                f"{b.directory}/bookie.log"
                            )
                    if time.monotonic() > deadline:
                        raise RuntimeError("the Java bookies did not register within 120 s")
                    time.sleep(0.2)
            finally:
                store.close()
        except BaseException:
            self.stop_bookies_in(bookies)
            raise
        return bookies

    def replicas_check(
        self,
        directory: str | Path,
        zk: str,
        root: str,
        *,
        on_start=None,
        timeout: float = 7200,
    ) -> ReplicasCheck:
        """Java's auditor replicas check, once, over the cluster of ``zk``/``root``: an
        ``AutoRecoveryMain`` of the peer (its own conf and log in ``directory``) with only the
        replicas check scheduled (``auditorReplicasCheckInterval`` a day; the check-all-ledgers and
        placement checks off; the auditor's one bookie check at start, which it runs anyhow,
        before it), its last-run time set 21 days back first as ``forceauditchecks`` does so that
        it starts at once.  ``on_start()`` is called when the auditor logs "Starting
        ReplicasCheck" (to sample counters); returns when it logs its end, then stops the daemon.
        No other auditor may be running on that cluster (the election would not pick this one)."""
        import socket

        from bkctl.wire.metadata import paths as P
        from bkctl.wire.metadata.zk import ZKMetadataStore

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        conf = d / "autorecovery.conf"
        conf.write_text(
            "\n".join(
                [
                    f"metadataServiceUri=zk+hierarchical://{zk}{root}",
                    "zkTimeout=10000",
                    f"bookiePort={port}",
                    "advertisedAddress=127.0.0.1",
                    "useHostNameAsBookieID=false",
                    "allowLoopback=true",
                    f"journalDirectories={d / 'journal'}",
                    f"ledgerDirectories={d / 'ledgers'}",
                    "httpServerEnabled=false",
                    "auditorReplicasCheckInterval=86400",
                    "auditorPeriodicCheckInterval=0",
                    "auditorPeriodicPlacementPolicyCheckInterval=0",
                    "auditorPeriodicBookieCheckInterval=0",
                ]
            )
            + "\n"
        )
        with ZKMetadataStore(f"zk+hierarchical://{zk}{root}", timeout=20, twins=fastpath.selected()) as store:
            waited = time.monotonic() + 30  # a stopped auditor's vote goes with its session
            while store.auditor.votes() and time.monotonic() < waited:
                time.sleep(0.5)
            if store.auditor.votes():
                # Java's elector would wait behind it for good: say so instead
                return ReplicasCheck(
                    None,
                    float("nan"),
                    failure=f"an auditor is running already ({store.auditor.current() or 'votes cast'}): stop it first",
                )
            store.underreplication.set_check_ctime(
                P.UR_REPLICAS_CHECK_CTIME, int(time.time() * 1000) - 21 * 86400 * 1000
            )
        cmd = self.java_command(
            "bench-auditor", "org.apache.bookkeeper.replication.AutoRecoveryMain", ["-c", str(conf)]
        )
        log_path = d / "autorecovery.log"
        result = ReplicasCheck(None, float("nan"), log=log_path)
        unanswered: set[str] = set()
        missing: set[str] = set()
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
            )
            deadline = time.monotonic() + timeout
            started = None
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    log.write(line)
                    if started is None and _RC_START in line:
                        started = time.monotonic()
                        if on_start is not None:
                            on_start()
                    elif "Unable to GetListOfEntriesOfLedger" in line:
                        result.not_answered += 1
                    elif m := re.search(r"Ledger : (\d+) has following (unavailable bookies|missing entries)", line):
                        (unanswered if m.group(2) == "unavailable bookies" else missing).add(m.group(1))
                    elif m := _RC_DONE.search(line):
                        result.check_ms = int(m.group(1))
                        result.no_replica, result.below_ack, result.below_write = map(int, m.groups()[1:])
                        break
                    elif any(s in line for s in _RC_FAILED + _RC_SKIPPED) or "so giving up" in line:
                        result.failure = line.strip()
                        if "so giving up" not in line:
                            break
                    if time.monotonic() > deadline:
                        result.failure = f"no end of the replicas check within {timeout:.0f} s"
                        break
                else:
                    result.failure = result.failure or f"the autorecovery daemon exited ({proc.wait()})"
                if started is not None:
                    result.seconds = time.monotonic() - started
            finally:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                for rest in proc.stdout or ():
                    log.write(rest)
        result.ledgers_unanswered = len(unanswered)
        result.ledgers_missing_entries = len(missing)
        return result

    @staticmethod
    def stop_bookies_in(bookies: list[JavaBookie], grace: float = 30) -> None:
        """Stop bookies :meth:`start_bookies_in` started (SIGTERM, SIGKILL after ``grace`` s), by their process."""
        for b in bookies:
            if b.process.poll() is None:
                b.process.terminate()
        for b in bookies:
            try:
                b.process.wait(grace)
            except subprocess.TimeoutExpired:
                b.process.kill()
                b.process.wait()
