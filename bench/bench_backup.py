"""Benchmark ``bkctl backup`` and ``bkctl restore`` beside the bookies' own throughput.

    .venv/bin/python bench/bench_backup.py                         # 20,000 entries of 4 KiB in 8 ledgers, then 200,000
    .venv/bin/python bench/bench_backup.py --entries 50000 --size 1024 --s3

Starts a sandbox (ZooKeeper + 3 bookieds, and with --s3 its S3 server) in a temporary
folder, writes the entries with the client, then runs, each as an operator would (a
``bkctl`` process, its wall time measured):

* ``bkctl bench`` at the same entry size: the client's add and read throughput;
* ``bkctl backup --to ARCHIVE --ledgers ...`` (a new local folder, or prefix of the sandbox's bucket, each turn);
* ``bkctl restore --from ARCHIVE --remap`` into the same sandbox (the ids are taken);
* ``bkctl export --ledgers ...``: the raw export to Parquet, for scale;

and, in one process of its own with the imports and connections done (``--no-split`` skips
it), the same ledgers read as a copy reads them (the same batches, ``--parallel`` threads,
nothing written) and backed up, alternated: the CPU per MiB of each, the client's reactor
thread's apart and the bookies' beside it -- what the copy costs on top of reading, without
Python's start and a command's fixed costs in the figure -- the whole machine's busy CPU over
each (:func:`common.machine_cpu_seconds`: the kernel's writeback of the copy's durable writes
is in no process's clock) and how many of the cores that kept busy, and the wall MiB/s of each: backup
over a read of the same ledgers, flushed to the bookies' entry logs as the backup finds them.
``bkctl bench``'s read is not that: it reads back the ledger it has just added, from the
bookies' write caches, which cost the bookies 1.2 ms of CPU a MiB against 2.0 from the entry
logs (measured in one process, 78 MiB of 4 KiB entries, alternated).

and, in another process (``--no-split`` skips it too), ``bkctl bench``'s add pass and a restore
of the same bytes, alternated: the CPU per MiB of each side, the client's and the bookies'.

Before each ``bkctl bench``, ``bkctl backup`` and ``bkctl restore`` (and each add pass in that
process, and the large backup below, right after its 781 MiB were written) the bench waits until the bookies' write caches are empty (:func:`common.settle_bookies`): a bookie
flushes its cache at a checkpoint every flushInterval (10 s), at about half a core; left to
chance, a checkpoint flushing the entries of the commands before lands in the next one --
in bench write's add pass one turn, in the restore the next -- and that, more than either
command, is what moved their ratio between runs (1.06x, 0.79x, 0.72x).  Beside each of them
the bookies' journals are printed: fsyncs, records a fsync (the group commit), and what a
checkpoint flushed meanwhile (0 MiB but for one of the command's own entries).

Then, with ``--large-entries`` (200,000 by default; 0 skips it), ``bkctl backup`` of that many
entries in new ledgers (781 MiB of 4 KiB entries): at the default 78 MiB a command's fixed cost
(its first connections, the plan, the last objects synced) is a good part of its own time, which
``bkctl bench``'s read (a warm client reading one ledger) does not have; both ratios are printed,
each named by its size.

Beside each backup into a local folder (right after it, alternated with it: the 78 MiB turns
and each large turn) the disk's own durable write throughput is measured in the same folder,
as many bytes in as many files (a ledger's size each), written in 4 MiB writes and each
``fdatasync``'d (:func:`common.disk_write`): a backup must write every byte it copies and make
it durable before its manifest, a read writes nothing, so where the disk takes less than the
bookies read (a shared virtual disk: 330-460 MiB/s, minute to minute, against bench read's
460-590) 0.8x of bench read is out of any backup's reach.  Both ratios are printed: backup /
bench read (the target's) and, beside it, backup / min(bench read, disk write) -- the fair one
(the issue's "its accounting and a fair replacement"), with the load average.

It prints MiB/s of each (payload bytes over the time the command reports for its own work,
and over its process's wall time, Python's start included), the load average beside each
figure, and where the CPU went: the ``bkctl`` process's own CPU seconds and the bookies'
(and ZooKeeper's) over the same run -- on a machine of 2 cores the bookies serving the
reads or taking the adds share the cores with ``bkctl``, so a command's pace is bounded by
the CPU both sides spend per MiB.  The targets (issue 74): a backup at least 0.8x
``bkctl bench``'s read, a restore at least 0.8x its add.  Everything it starts is stopped
at the end.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from common import (  # noqa: E402
    bookie_metrics,
    cpu_seconds,
    disk_write,
    load_note,
    machine_cpu_seconds,
    settle_bookies,
    writes_note,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MIB = 1 << 20


class Cpu:
    """CPU seconds over one ``bkctl`` run: the process's own, the bookies' and ZooKeeper's;
    and what the bookies' journals and write caches did meanwhile (:func:`writes_note`)."""

    def __init__(self, info: dict):
        self.bookies = [b["pid"] for b in info["bookies"]]
        self.http_ports = [b["http_port"] for b in info["bookies"]]
        self.zookeeper = info["zookeeper"]["pid"]
        self.last: dict[str, float] = {}
        self.writes = ""

    def settle(self) -> str:
        """The bookies' write caches flushed before a command that adds (:func:`settle_bookies`)."""
        return f"(write caches flushed first: waited {settle_bookies(*self.http_ports):.1f} s)"

    def sample(self) -> tuple[float, float, float]:
        children = os.times()
        mine = children.children_user + children.children_system
        return mine, sum(cpu_seconds(p) for p in self.bookies), cpu_seconds(self.zookeeper)

    def note(self) -> str:
        if not self.last:
            return ""
        return "cpu: bkctl {bkctl:.2f} s, bookies {bookies:.2f} s, zk {zk:.2f} s".format(**self.last)


CPU: Cpu | None = None


def bkctl(env: dict, *args: str, timeout: float = 3600) -> tuple[float, dict]:
    """``bkctl --json ARGS``: wall seconds and its JSON document (:data:`CPU` the CPU it took)."""
    before = CPU.sample() if CPU is not None else None
    metrics = bookie_metrics(*CPU.http_ports) if CPU is not None else None
    t = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "bkctl", "--json", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    seconds = time.monotonic() - t
    if CPU is not None and before is not None:
        after = CPU.sample()
        CPU.last = dict(zip(("bkctl", "bookies", "zk"), (a - b for a, b in zip(after, before))))
        if metrics is not None:
            CPU.writes = writes_note(metrics, bookie_metrics(*CPU.http_ports))
    if done.returncode != 0:
        raise SystemExit(f"bkctl {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return seconds, json.loads(lines[-1]) if lines else {}


def connect(uri: str):
    """A child measurement's ZooKeeper store and bookie client, made as a command makes them
    (the garbage collector settled first, as the commands that talk to bookies do)."""
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.fastpath import selected
    from bkctl.wire.metadata.zk import ZKMetadataStore
    from bkctl.wire.process.runtime import settle_garbage_collector

    settle_garbage_collector()
    store = ZKMetadataStore(uri, twins=selected())
    store.start()
    return store, BlockingBookKeeper(store)


def split_child(uri: str, spec: str, parallel: str, bookie_pids: str, folder: str, *, repeat: int, total: int) -> dict:
    """In this process: the ledgers ``spec`` read as a copy reads them, then backed up into a
    new archive under ``folder``, ``repeat`` times alternated; CPU seconds of each (the whole
    process's, its reactor thread's, the bookies'), medians per MiB."""
    import resource

    from bkctl.backup.storage import open_storage
    from bkctl.backup.take import Selection, batch_entries, take_backup
    from bkctl.wire.client.blocking import run_in_reactor
    from bkctl.wire.fastpath import selected

    pids = [int(p) for p in bookie_pids.split(",")]
    ids = [int(i) for i in spec.split(",")]
    store, bk = connect(uri)

    def read_one(ledger_id: int) -> int:
        ledger = bk.open(ledger_id)
        md = ledger.handle.metadata
        batch = batch_entries(md.length, md.last_entry_id + 1)
        return sum(len(got) for got in ledger.read_range(0, md.last_entry_id, batch=batch))

    def read() -> None:
        with ThreadPoolExecutor(int(parallel)) as pool:
            list(pool.map(read_one, ids))

    def backup(turn: int) -> None:
        storage = open_storage(str(Path(folder) / f"split-{turn}"))
        take_backup(store, bk, storage, Selection(ledgers=spec), uri, parallel=int(parallel), twins=selected())

    def process_cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def clocks() -> tuple[float, float, float, float, float]:
        """The process's CPU, its reactor thread's, the bookies', the wall's and the machine's."""
        return (
            process_cpu(),
            run_in_reactor(time.thread_time),
            sum(map(cpu_seconds, pids)),
            time.monotonic(),
            machine_cpu_seconds(),
        )

    got: dict[str, list[tuple[float, float, float, float, float]]] = {"read": [], "backup": []}
    try:
        read()  # warm: every connection made, every module imported
        for turn in range(repeat):
            for what, run_it in (("read", read), ("backup", functools.partial(backup, turn))):
                before = clocks()
                run_it()
                got[what].append(tuple(a - b for a, b in zip(clocks(), before)))  # type: ignore[arg-type]
    finally:
        bk.close()
        store.close()
    mib = total / MIB
    return {
        what: {
            **{
                k: statistics.median(r[i] for r in runs) / mib * 1000
                for i, k in enumerate(("bkctl", "reactor", "bookies"))
            },
            "mib_s": statistics.median(mib / r[3] for r in runs),
            "machine": statistics.median(r[4] for r in runs) / mib * 1000,
            "cores": statistics.median(r[4] / r[3] for r in runs),
        }
        for what, runs in got.items()
    }


def add_child(
    uri: str,
    spec: str,
    parallel: str,
    bookie_pids: str,
    bookie_ports: str,
    archive: str,
    *,
    repeat: int,
    entries: int,
    size: int,
) -> dict:
    """In this process: ``bkctl bench``'s add pass (one ledger 3/2/2, 256 adds outstanding,
    ``entries`` of ``size``) and ``restore --remap`` of ``archive`` (the ledgers ``spec``, a new
    backup of them taken first, nothing copied, so that each restore has a journal of its
    own), ``repeat`` times alternated, the bookies' write caches flushed before each: CPU
    seconds of each (the whole process's, its reactor thread's, the bookies'), medians per
    MiB, what the bookies' journals did, and the wall MiB/s of each (no Python start in
    either; the restore's metadata steps -- manifest, journal, ids, ledgers created and
    closed -- in its, bench's add pass has none)."""
    import resource

    from bkctl.backup.restore import restore_backup
    from bkctl.backup.storage import open_storage
    from bkctl.backup.take import Selection, take_backup
    from bkctl.ops.bench import drive_adds, handle_window
    from bkctl.wire.client.blocking import run_in_reactor
    from bkctl.wire.fastpath import selected

    ports = [int(p) for p in bookie_ports.split(",")]
    pids = [int(p) for p in bookie_pids.split(",")]
    store, bk = connect(uri)
    storage = open_storage(archive)

    def write() -> int:
        lh = bk.create(3, 2, 2, "CRC32C", b"", {"Bookie": b"bench"}, max_inflight=handle_window(256))
        run_in_reactor(drive_adds, bk.client, lh.handle, entries, os.urandom(size), 256, None, timeout=None)
        lh.close()
        store.ledgers.delete(lh.ledger_id)
        return entries * size

    def restore() -> int:
        return restore_backup(store, bk, storage, uri, remap=True, parallel=int(parallel), twins=selected()).bytes

    def process_cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    got: dict[str, list[tuple[float, ...]]] = {"write": [], "restore": []}
    notes: dict[str, list[str]] = {"write": [], "restore": []}
    try:
        take_backup(store, bk, storage, Selection(ledgers=spec), uri, parallel=int(parallel))
        restore()  # warm: every connection made, every module imported
        write()
        for _turn in range(repeat):
            for what, run_it in (("write", write), ("restore", restore)):
                if what == "restore":
                    take_backup(store, bk, storage, Selection(ledgers=spec), uri, parallel=int(parallel))
                settle_bookies(*ports)
                metrics = bookie_metrics(*ports)
                before = (process_cpu(), run_in_reactor(time.thread_time), sum(map(cpu_seconds, pids)))
                began = time.monotonic()
                written = run_it()
                wall = time.monotonic() - began
                after = (process_cpu(), run_in_reactor(time.thread_time), sum(map(cpu_seconds, pids)))
                notes[what].append(writes_note(metrics, bookie_metrics(*ports)))
                per_mib = tuple((a - b) / (written / MIB) * 1000 for a, b in zip(after, before))
                got[what].append((*per_mib, written / MIB / wall))
    finally:
        bk.close()
        store.close()
    out: dict = {
        what: {k: statistics.median(r[i] for r in runs) for i, k in enumerate(("bkctl", "reactor", "bookies", "mib_s"))}
        for what, runs in got.items()
    }
    out["notes"] = notes
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=4096, help="entry size in bytes")
    ap.add_argument("--ledgers", type=int, default=8)
    ap.add_argument("--parallel", type=int, default=2, help="--parallel of backup and restore")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each measurement, in turns; medians printed")
    ap.add_argument(
        "--large-entries",
        type=int,
        default=200_000,
        help="entries (of --size, in --ledgers ledgers) of the large backup, where a command's fixed cost "
        "is amortised: measured besides the default size, both printed (0: skip it)",
    )
    ap.add_argument("--large-repeat", type=int, default=1, help="runs of the large backup; median printed")
    ap.add_argument("--s3", action="store_true", help="the archive in the sandbox's S3 bucket")
    ap.add_argument("--no-export", action="store_true", help="skip the raw export (Spark)")
    ap.add_argument("--dir", help="work folder (default: a new temporary one, removed at the end)")
    ap.add_argument("--no-split", action="store_true", help="skip the in-process read / backup comparison")
    ap.add_argument(
        "--split-child",
        nargs=5,
        metavar=("URI", "LEDGERS", "PARALLEL", "BOOKIE_PIDS", "FOLDER"),
        help=argparse.SUPPRESS,
    )
    ap.add_argument("--add-child", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.add_child:
        entries = min(args.entries, 50_000)
        print(json.dumps(add_child(*args.add_child, repeat=args.repeat, entries=entries, size=args.size)))
        return 0
    if args.split_child:
        print(json.dumps(split_child(*args.split_child, repeat=args.repeat, total=args.entries * args.size)))
        return 0

    from bkctl.sandbox.cluster import sandbox_down, sandbox_up

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-backup-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder {work}; {args.entries:,} entries of {args.size} B in {args.ledgers} ledgers")
    try:
        info = sandbox_up(work / "sandbox", bookies=3, s3=args.s3)
        return run(args, info, work)
    finally:
        try:
            sandbox_down(work / "sandbox")
        except Exception as exc:  # noqa: BLE001
            print(f"sandbox down failed: {exc}", file=sys.stderr)
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


def run(args, info: dict, work: Path) -> int:
    global CPU
    from bkctl.wire.client.blocking import BlockingBookKeeper

    CPU = Cpu(info)

    uri = info["uri"]
    env = dict(os.environ, BKCTL_METADATA_URI=uri, NO_COLOR="1")
    archive = str(work / "archive")
    extra: list[str] = []
    if args.s3:
        s3 = info["s3"]
        env.update(
            AWS_SHARED_CREDENTIALS_FILE=s3["credentials_file"],
            AWS_DEFAULT_REGION=s3["region"],
            AWS_CONFIG_FILE="/dev/null",
        )
        archive = f"s3://{s3['bucket']}/bench"
        extra = ["--s3-endpoint", s3["endpoint"]]
    total = args.entries * args.size

    def write_ledgers(entries: int) -> str:
        """``entries`` of ``--size`` written in ``--ledgers`` ledgers: their ledger spec."""
        ids = []
        t = time.monotonic()
        with BlockingBookKeeper(uri, add_timeout=60.0, timeout=3600) as bk:
            for i in range(args.ledgers):
                n = entries // args.ledgers + (1 if i < entries % args.ledgers else 0)
                with bk.create(3, 2, 2, password=b"bench", custom_metadata={"bench": b"backup"}) as lh:
                    lh.add_many(os.urandom(args.size) for _ in range(n))
                ids.append(lh.ledger_id)
        print(f"written in {time.monotonic() - t:.1f}s; {entries * args.size / MIB:.1f} MiB of payload")
        return ",".join(map(str, ids))

    spec = write_ledgers(args.entries)

    def line(what: str, seconds: float, own: float | None = None) -> float:
        """MiB/s over the command's own time (``own``: what it reports, its start and the
        cluster's metadata walk aside) and over its process's wall time."""
        mib_s = total / MIB / (own if own else seconds)
        wall = f"wall {seconds:.2f} s, {total / MIB / seconds:.1f} MiB/s"
        print(
            f"{what:<34} {mib_s:8.1f} MiB/s  ({'own ' + format(own, '.2f') + ' s; ' if own else ''}{wall})  [{load_note()}]"
        )
        return mib_s

    runs: dict[str, list[tuple[float, float | None]]] = {}
    cpus: dict[str, list[dict[str, float]]] = {}

    def measure(what: str, seconds: float, own: float | None = None) -> None:
        runs.setdefault(what, []).append((seconds, own))
        cpus.setdefault(what, []).append(dict(CPU.last))
        line(f"  {what}", seconds, own)
        print(f"  {'':<32} {CPU.note()}")

    print()
    reads, writes = [], []
    disks: list[float] = []  # the disk's durable MiB/s beside each local backup (:func:`disk_write`)
    for turn in range(args.repeat):
        print(f"turn {turn + 1} of {args.repeat}")
        settled = CPU.settle()
        _s, doc = bkctl(env, "bench", "--size", str(args.size), "--entries", str(min(args.entries, 50_000)))
        writes.append(doc["add"]["mb_per_second"] * 1e6 / MIB)
        reads.append(doc["read"]["mb_per_second"] * 1e6 / MIB)
        print(f"  {'bkctl bench write / read':<32} {writes[-1]:8.1f} / {reads[-1]:.1f} MiB/s  [{load_note()}]")
        print(f"  {'':<32} {CPU.note()} (its adds and reads together)")
        print(f"  {'':<32} {CPU.writes} {settled}")
        where = f"{archive}-{turn}"  # a new archive each turn: everything copied
        settled = CPU.settle()  # (bench's adds flushed: a checkpoint's CPU is not the copy's)
        seconds, doc = bkctl(env, "backup", "--to", where, "--ledgers", spec, "--parallel", str(args.parallel), *extra)
        assert doc["copied_bytes"] == total, doc
        measure(f"bkctl backup -> {'S3' if args.s3 else 'local dir'}", seconds, doc["seconds"])
        print(f"  {'':<32} {settled}")
        if not args.s3:
            disks.append(disk_line(work, total, args.ledgers))
        settled = CPU.settle()
        seconds, doc = bkctl(
            env, "restore", "--from", where, "--remap", "--force", "--parallel", str(args.parallel), *extra
        )
        assert doc["bytes"] == total, doc
        measure("bkctl restore --remap", seconds, doc["seconds"])
        print(f"  {'':<32} {CPU.writes} {settled}")
    seconds, doc = bkctl(env, "backup", "verify", f"{archive}-0", *extra)
    assert doc["ok"], doc
    line("bkctl backup verify", seconds)
    seconds, doc = bkctl(env, "backup", "--to", f"{archive}-0", "--ledgers", spec, *extra)
    assert doc["copied_bytes"] == 0, doc
    print(f"{'second backup (nothing new)':<34} {seconds:8.2f} s  copied {doc['copied_bytes']} B  [{load_note()}]")
    print(f"  {'':<32} {CPU.note()}")
    fixed = CPU.last["bkctl"]  # Python's start, ZooKeeper, the plan: what a copy costs on top is per byte
    if not args.no_export:
        seconds, doc = bkctl(env, "export", "--out", str(work / "export"), "--ledgers", spec)
        line("bkctl export (raw, Parquet)", seconds)
    print()
    print(f"medians of {args.repeat} turns:")
    read = statistics.median(reads)
    write = statistics.median(writes)
    print(f"{'bkctl bench write (client)':<34} {write:8.1f} MiB/s")
    print(f"{'bkctl bench read (client)':<34} {read:8.1f} MiB/s")
    medians = {}
    for what, got in runs.items():
        medians[what] = statistics.median(total / MIB / (own or wall) for wall, own in got)
        wall = statistics.median(total / MIB / wall for wall, _own in got)
        print(f"{what:<34} {medians[what]:8.1f} MiB/s  (wall, with Python's start: {wall:.1f} MiB/s)")
        per = {
            k: statistics.median(c[k] for c in cpus[what]) / (total / MIB) * 1000 for k in ("bkctl", "bookies", "zk")
        }
        net = (statistics.median(c["bkctl"] for c in cpus[what]) - fixed) / (total / MIB) * 1000
        print(
            f"{'':<34} CPU ms per MiB: bkctl {per['bkctl']:.1f} (Python's start included; {net:.1f} net of "
            f"the second backup's), bookies {per['bookies']:.1f}"
        )
    if not args.no_split:
        split = child_json(
            args, "--split-child", uri, spec, str(args.parallel), ",".join(map(str, CPU.bookies)), str(work)
        )
        if isinstance(split, str):
            print(f"in-process comparison failed: {split}")
        else:
            print()
            print(f"in one process, imports and connections done (CPU ms per MiB, medians of {args.repeat}):")
            for what in ("read", "backup"):
                c = split[what]
                print(
                    f"  {what:<10} bkctl {c['bkctl']:5.2f} (its reactor thread {c['reactor']:5.2f}), bookies {c['bookies']:5.2f};"
                    f" the machine {c['machine']:5.2f} ({c['cores']:.2f} of its {os.cpu_count()} cores busy)"
                )
            r, b = split["read"], split["backup"]
            print(
                f"  backup / read: bkctl {b['bkctl'] / r['bkctl']:.2f}, with the bookies "
                f"{(b['bkctl'] + b['bookies']) / (r['bkctl'] + r['bookies']):.2f} (target <= 1.25)  [{load_note()}]"
            )
            print(
                f"  and on the wall: read {r['mib_s']:.1f} MiB/s, backup {b['mib_s']:.1f} MiB/s:"
                f" backup / read of the same flushed ledgers = {b['mib_s'] / r['mib_s']:.2f}"
                f" (bench read {read:.1f} MiB/s reads its ledger from the write caches)"
            )
    if not args.no_split:
        add_comparison(args, uri, spec, f"{archive}-0")
    backup = next(v for k, v in medians.items() if k.startswith("bkctl backup"))
    restore = next(v for k, v in medians.items() if k.startswith("bkctl restore"))
    large = large_backup(args, env, archive, extra, write_ledgers, work) if args.large_entries > 0 else None
    print()
    if disks:
        print(f"{'disk, durable writes':<34} {statistics.median(disks):8.1f} MiB/s  (beside the backups)")
    print(
        f"backup / bench read = {backup / read if read else float('nan'):.2f} at the default size "
        f"({total / MIB:.0f} MiB: a command's fixed cost in it) (target >= 0.80)  [{load_note()}]"
    )
    print(f"  {fair_note(backup, read, disks)}")
    if large is not None:
        print(
            f"backup / bench read = {large.mib_s / read if read else float('nan'):.2f} at {large.total / MIB:.0f} MiB "
            f"(the fixed cost amortised; bench read is a rate with none: a warm client, one ledger)"
        )
        print(f"  {fair_note(large.mib_s, read, large.disks)}")
    print(f"restore / bench write = {restore / write if write else float('nan'):.2f} (target >= 0.80)")
    return 0


def child_json(args, flag: str, *operands: str, env: dict[str, str] | None = None) -> dict | str:
    """This script run again with ``flag OPERANDS`` (a child measurement, in a process of its
    own) at this run's ``--repeat``, ``--entries`` and ``--size``: the JSON document it
    prints last, or the end of its stderr if it failed."""
    child = subprocess.run(
        [sys.executable, __file__, "--repeat", str(args.repeat), "--entries", str(args.entries)]
        + ["--size", str(args.size), flag, *operands],
        capture_output=True,
        text=True,
        timeout=3600,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, **(env or {})),
    )
    if child.returncode != 0:
        return child.stderr.strip()[-2000:]
    return json.loads(child.stdout.splitlines()[-1])


def add_comparison(args, uri: str, spec: str, archive: str) -> None:
    """:func:`add_child` in a process of its own: ``bkctl bench``'s adds and a restore, like
    with like (the same bytes, the bookies' caches flushed first), CPU per MiB of each side."""
    assert CPU is not None
    got = child_json(
        args,
        "--add-child",
        uri,
        spec,
        str(args.parallel),
        ",".join(map(str, CPU.bookies)),
        ",".join(map(str, CPU.http_ports)),
        archive,
    )
    if isinstance(got, str):
        print(f"in-process add comparison failed: {got}")
        return
    print()
    print(f"in one process, the bookies' write caches flushed before each (CPU ms per MiB, medians of {args.repeat}):")
    for what, name in (("write", "bench's adds"), ("restore", "restore")):
        c = got[what]
        print(
            f"  {name:<13} bkctl {c['bkctl']:5.2f} (its reactor thread {c['reactor']:5.2f}), bookies {c['bookies']:5.2f}"
        )
        for note in got["notes"][what]:
            print(f"  {'':<13} {note}")
    w, r = got["write"], got["restore"]
    print(
        f"  restore / bench's adds: bkctl {r['bkctl'] / w['bkctl']:.2f}, bookies {r['bookies'] / w['bookies']:.2f}, "
        f"both {(r['bkctl'] + r['bookies']) / (w['bkctl'] + w['bookies']):.2f}  [{load_note()}]"
    )
    print(
        f"  and on the wall: bench's adds {w['mib_s']:.1f} MiB/s, restore {r['mib_s']:.1f} MiB/s: restore / adds = "
        f"{r['mib_s'] / w['mib_s']:.2f} (no Python start in either; the restore's metadata steps in its time)"
    )


def disk_line(work: Path, total: int, files: int) -> float:
    """The disk's durable write throughput (:func:`common.disk_write`) in the folder the
    archives are in, ``total`` bytes in ``files`` files (a ledger's size each), right after a
    backup of as many: its MiB/s, printed."""
    mib_s = disk_write(work / "disk-probe", total, files) / MIB
    what = f"disk: {files} files fdatasync'd"
    print(f"  {what:<32} {mib_s:8.1f} MiB/s  ({total / MIB:.0f} MiB in writes of 4 MiB)  [{load_note()}]")
    return mib_s


def fair_note(backup: float, read: float, disks: list[float]) -> str:
    """Backup MiB/s over what bounds it: the slower of bench read and the disk's durable
    writes (the median of those measured beside it); the old ratio beside it stays the
    target's."""
    if not disks or not read:
        return "backup / min(bench read, disk write): no disk measured (an S3 archive)"
    disk = statistics.median(disks)
    bound = "the disk" if disk < read else "bench read"
    return (
        f"backup / min(bench read, disk write) = {backup / min(read, disk):.2f} (disk {disk:.1f} MiB/s durable, "
        f"read {read:.1f} MiB/s: {bound} bounds it)"
    )


class Large(NamedTuple):
    """The large backup's median MiB/s (its own time), its bytes, and the disk's durable MiB/s
    measured beside each turn."""

    mib_s: float
    total: int
    disks: list[float]


def large_backup(args, env: dict, archive: str, extra: list[str], write_ledgers, work: Path) -> Large:
    """``bkctl backup`` of ``--large-entries`` (new ledgers), ``--large-repeat`` times into a new
    archive each, the disk's durable writes of as many bytes measured after each (a local
    archive): its median MiB/s over the command's own time, the bytes, the disk's figures."""
    total = args.large_entries * args.size
    print()
    print(f"large: {args.large_entries:,} entries of {args.size} B in {args.ledgers} ledgers")
    spec = write_ledgers(args.large_entries)
    own: list[float] = []
    per: list[float] = []
    disks: list[float] = []
    for turn in range(args.large_repeat):
        where = f"{archive}-large-{turn}"
        assert CPU is not None
        settled = CPU.settle()  # the 781 MiB just written flushed first, as before every measured command
        seconds, doc = bkctl(env, "backup", "--to", where, "--ledgers", spec, "--parallel", str(args.parallel), *extra)
        assert doc["copied_bytes"] == total, doc
        mib_s = total / MIB / doc["seconds"]
        own.append(mib_s)
        per.append(CPU.last["bkctl"] / (total / MIB) * 1000)
        print(
            f"  {'bkctl backup (large)':<32} {mib_s:8.1f} MiB/s  (own {doc['seconds']:.2f} s; wall {seconds:.2f} s, "
            f"{total / MIB / seconds:.1f} MiB/s)  [{load_note()}]"
        )
        print(f"  {'':<32} {CPU.note()} {settled}")
        if not where.startswith("s3://"):
            shutil.rmtree(where, ignore_errors=True)  # (its bytes are not needed again)
            disks.append(disk_line(work, total, args.ledgers))
    print(
        f"{'bkctl backup (large)':<34} {statistics.median(own):8.1f} MiB/s  "
        f"(CPU ms per MiB: bkctl {statistics.median(per):.1f}, Python's start included)"
    )
    return Large(statistics.median(own), total, disks)


if __name__ == "__main__":
    sys.exit(main())
