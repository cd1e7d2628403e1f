"""What every benchmark prints beside its figures: the machine's load, CPU seconds of a process,
percentiles, the bookies' own histograms and section titles; and a ZooKeeper client of the
bench's own, for what it writes as another program would.

The benchmarks run as scripts (``python bench/bench_x.py``), so ``bench/`` is
on ``sys.path`` and they import this module as ``common``.

Importing it makes SIGTERM end a bench as Ctrl-C does, through its ``finally`` blocks: a
bench stopped with ``kill`` (a timeout, a CI step ended) stops the sandbox it started --
ZooKeeper, bookieds, the S3 server -- instead of leaving them running with no parent.

Importing it also byte-compiles the project's sources whose ``__pycache__`` is older than
they are (:func:`compile_sources`), as ``./dev`` does when it sets up.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from contextlib import contextmanager, suppress

__all__ = [
    "bookie_metrics",
    "compile_sources",
    "cpu_seconds",
    "disk_write",
    "histogram_quantile",
    "in_sandbox",
    "load_note",
    "pct",
    "pct_ms",
    "raw_zookeeper",
    "section",
    "settle_bookies",
    "writes_note",
]

_TICK = os.sysconf("SC_CLK_TCK")
#: the low bits of a process's CPU clock id (linux/posix-timers.h): the scheduler's count
_CPUCLOCK_SCHED = 2


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    sys.exit(128 + signum)  # SystemExit: every finally block on the way out runs


if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)


def compile_sources() -> None:
    """Byte-compile the project's sources whose compiled form is missing or older than they
    are.  Where PYTHONDONTWRITEBYTECODE is set, nothing else writes it between two ``./dev``
    setups, and every ``bkctl`` and bookied a bench starts would compile each source changed
    since at its start: with six such modules a ``bkctl ledger read`` took 6% more
    instructions, and a command's or a bookie's start-up figure measured the commits landed
    since rather than the code."""
    import compileall
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for folder in ("wire", "bookied", "bkctl", "shell"):
        compileall.compile_dir(root / folder, quiet=2)


compile_sources()


def load_note() -> str:
    """The machine's load while we measure (others may share it): the 1, 5 and 15 minute load
    averages and, where the kernel has it, CPU pressure; and whether the tree's C builds are
    current (:func:`builds_note`)."""
    one, five, fifteen = os.getloadavg()
    note = f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"
    try:
        with open("/proc/pressure/cpu") as f:
            note += f", CPU pressure {f.read().split()[1].split('=')[1]}% (avg10)"
    except (OSError, IndexError):
        pass
    return f"{note}; {builds_note()}"


def builds_note() -> str:
    """Whether this tree's C builds are the ones its fast paths use: a build older than its
    sources is not used, silently (:func:`bkctl.wire.fastpath.c_twins_report`), and a figure
    "with the C paths on" from such a tree is the Python twins'."""
    from bkctl.wire import fastpath

    note = fastpath.report_line(fastpath.c_twins_report(True))
    if not fastpath.selected().enabled:  # the bench's environment, which the processes it starts inherit
        note += f", switched off here ({fastpath.SWITCH}=0)"
    return note


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process so far, every thread's, those ended too.

    Read from the process's CPU clock (the clock id ``clock_getcpuclockid`` would give, which
    ``time`` does not offer), counted in nanoseconds, where ``/proc/<pid>/stat`` counts in ticks
    of 10 ms: a bookie serving 78 MiB of reads spends 40-70 ms, so three bookies' figure moved
    by up to 0.4 ms a MiB from one run to the next on rounding alone -- a median of three turns
    showed the bookies 1.43x dearer serving a backup than a read, where their clocks, over nine
    turns alternated, say 1.07x.  Falls back to the ticks where the clock cannot be read (not
    Linux, a process being reaped)."""
    if sys.platform == "linux":
        with suppress(OSError):
            return time.clock_gettime(((~pid) << 3) | _CPUCLOCK_SCHED)
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def machine_cpu_seconds() -> float:
    """Every CPU's busy seconds since boot (``/proc/stat``: all but idle and I/O wait), in
    ticks of 10 ms: the kernel's own threads too -- the writeback and the interrupts a durable
    write costs, which no process's clock shows -- and the time a virtual machine's host stole.
    Over a run, against its wall time, it says how many of the cores were busy."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in f.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / _TICK


def disk_write(folder: str | os.PathLike[str], total: int, files: int, *, block: int = 4 << 20) -> float:
    """The disk's own durable write throughput under ``folder``, in bytes a second: ``total``
    bytes written into ``files`` new files there, one after another, in writes of ``block``
    bytes (of random bytes: nothing a file system could shortcut), each file ``fdatasync``'d
    before the next is begun -- what a backup's copies make the disk do, with nothing else
    (no bookie read, no checksum, no thread but this one).  The files are removed afterwards,
    their removal not timed.  A backup must write every byte it copies and make it durable
    before its manifest, a read writes nothing: beside a backup, this says what the disk let it
    do at the same moment (it varies minute to minute on a shared or virtual disk)."""
    from pathlib import Path

    where = Path(folder)
    where.mkdir(parents=True, exist_ok=True)
    chunk = memoryview(os.urandom(block))
    each = [total // files + (1 if i < total % files else 0) for i in range(files)]
    paths = [where / f"disk-probe-{os.getpid()}-{i}" for i in range(files)]
    began = time.monotonic()
    try:
        for path, size in zip(paths, each):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                left = size
                while left > 0:
                    left -= os.write(fd, chunk[: min(block, left)])
                os.fdatasync(fd)
            finally:
                os.close(fd)
        seconds = time.monotonic() - began
    finally:
        for path in paths:
            with suppress(FileNotFoundError):
                path.unlink()
    return total / seconds


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank; NaN when empty."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def pct_ms(seconds: list[float], q: float) -> float:
    """:func:`pct` of durations in seconds, in milliseconds."""
    return pct(seconds, q) * 1000


def section(title: str) -> None:
    print(f"\n== {title}", flush=True)


def bookie_metrics(*http_ports: int) -> dict[str, float]:
    """Every sample of the bookies' ``/metrics`` (Prometheus text) on these HTTP ports, keyed by
    series (name and labels) and summed over the bookies."""
    import urllib.request

    total: dict[str, float] = {}
    for port in http_ports:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        for line in text.splitlines():
            if line and not line.startswith("#"):
                series, value = line.rsplit(" ", 1)
                series = _le_last(series)
                total[series] = total.get(series, 0.0) + float(value)
    return total


def settle_bookies(*http_ports: int, timeout: float = 30.0) -> float:
    """Wait until every bookie's write cache is empty -- the entries added so far flushed by a
    checkpoint (every flushInterval, 10 s by default, each bookie on its own clock) -- and
    return the seconds waited.  A checkpoint flushes all the cache holds, paced at about half
    a core: one that lands in a measured command takes the CPU of the entries every command
    before it added, a random share of a 2-core machine; measured after this, a command
    pays at most for a flush of its own entries.  Gives up (returns) after ``timeout``."""
    began = time.monotonic()
    while bookie_metrics(*http_ports).get("bookie_write_cache_bytes", 0.0) > 0:
        if time.monotonic() - began > timeout:
            break
        time.sleep(0.1)
    return time.monotonic() - began


def writes_note(before: dict[str, float], after: dict[str, float]) -> str:
    """What the bookies' journals and write caches did between two :func:`bookie_metrics`
    (summed over the bookies): fsyncs, records a fsync (the group commit), and how much a
    checkpoint flushed meanwhile (what the caches took in and no longer hold)."""

    def delta(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    fsyncs, records = delta("bookie_journal_fsyncs_total"), delta("bookie_journal_records_total")
    cache = "bookie_write_cache_bytes"
    flushed = before.get(cache, 0.0) + delta("bookie_WRITE_BYTES") - after.get(cache, 0.0)
    return (
        f"journals: {fsyncs:.0f} fsyncs, {records / fsyncs if fsyncs else 0:.0f} records a fsync; "
        f"a checkpoint flushed {max(0.0, flushed) / (1 << 20):.0f} MiB of the write caches meanwhile"
    )


def _le_last(series: str) -> str:
    """A histogram bucket's series with ``le`` as its last label (prometheus_client writes
    labels sorted, ``le`` before ``op``; :func:`histogram_quantile` reads ``op`` first)."""
    import re

    name, brace, rest = series.partition("{")
    if not brace or 'le="' not in rest:
        return series
    labels = re.findall(r'\w+="(?:[^"\\]|\\.)*"', rest)
    labels.sort(key=lambda label: label.startswith("le="))
    return name + "{" + ",".join(labels) + "}"


def histogram_quantile(
    before: dict[str, float], after: dict[str, float], name: str, q: float, labels: str = ""
) -> float:
    """Upper bound of the bucket holding quantile ``q`` (0..1) of what histogram ``name`` observed
    between two :func:`bookie_metrics` scrapes; ``labels`` as the bookie renders them before
    ``le`` (e.g. ``op="add",``).  NaN when it observed nothing."""
    prefix = f'{name}_bucket{{{labels}le="'
    buckets = sorted(
        (float(series[len(prefix) : -2]), value - before.get(series, 0.0))
        for series, value in after.items()
        if series.startswith(prefix)
    )
    if not buckets or buckets[-1][1] <= 0:
        return float("nan")
    for bound, seen in buckets:
        if seen >= q * buckets[-1][1]:
            return bound
    return float("inf")


@contextmanager
def raw_zookeeper(uri: str):
    """A kazoo client of the bench's own on the ZooKeeper of metadata service ``uri``, and
    the ledgers root: for znodes the bench writes as another program would (a Pulsar
    broker's managed ledgers, ledgers created faster than one client at a time does).
    The metadata store keeps its own client to itself."""
    from kazoo.client import KazooClient

    from bkctl.wire.metadata.layout import MetadataServiceURI

    parsed = MetadataServiceURI.parse(uri)
    client = KazooClient(hosts=parsed.hosts, timeout=20)
    client.start(timeout=20)
    try:
        yield client, parsed.root
    finally:
        client.stop()
        client.close()


def in_sandbox(folder: str | None, prefix: str, run, *, zk_heap_mb: int | None = None) -> int:
    """``run(uri, work)`` against a sandbox (ZooKeeper + 3 bookieds) in ``folder`` (None: a new
    temporary one, removed afterwards); the sandbox is stopped at the end.  ``zk_heap_mb``: its
    ZooKeeper's heap (None: the sandbox's default, 256 MiB)."""
    import shutil
    import tempfile
    from pathlib import Path

    from bkctl.sandbox.cluster import sandbox_down, sandbox_up

    work = Path(folder) if folder else Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    try:
        info = sandbox_up(work / "sandbox", bookies=3, zk_heap_mb=zk_heap_mb)
        return run(info["uri"], work)
    finally:
        try:
            sandbox_down(work / "sandbox")
        except Exception as exc:  # noqa: BLE001
            print(f"sandbox down failed: {exc}", file=sys.stderr)
        if not folder:
            shutil.rmtree(work, ignore_errors=True)


def commit_or_exit(tx, where: str) -> None:
    """Commit a kazoo transaction of a fill; any failed operation ends the benchmark, naming ``where``."""
    bad = [r for r in tx.commit() if isinstance(r, Exception)]
    if bad:
        raise SystemExit(f"filling failed at {where}: {bad[0]!r}")
