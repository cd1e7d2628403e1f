"""Benchmark ``bkctl export`` against the raw ``wire`` client read rate.

    .venv/bin/python bench/bench_export.py                  # 1,000,000 entries of 100 B
    .venv/bin/python bench/bench_export.py --entries 200000 --masters 'local[1],local[2]'

Starts a sandbox (ZooKeeper + 3 bookieds) in a temporary folder, writes the
entries with the client (spread over --ledgers ledgers), then measures:

* raw read in this process: the client's CPU per entry;
* Arrow conversion: turning those entries into the data source's record
  batches (in memory, one core);
* Parquet encoding: pyarrow writing those batches (zstd), for scale;
* per Spark master, --repeat times in turns: the raw read
  at the same parallelism (as many reader processes as the master has
  slots, started and warmed up beforehand as Spark's Python workers are,
  each reading a share of the ranges the export cuts), the same raw read
  in Spark tasks (the export's own workers and client, reading and
  counting), and the full export (``run_export``: plan, Spark tasks that
  read and write Parquet, verify, commit); then the ``bookkeeper`` data
  source into Spark's ``noop`` sink (read + Arrow + hand-over to the JVM:
  the data source on its own, which the export does not use).

Runs in turns, compared by their medians: on a shared 2-core machine one
run of a few seconds can be 25% off the next, and the bookies flushing
what was just written slow whichever run comes first.

Then it prints entries/s and MB/s of each, the export rate as a share of
the raw read rate at the same parallelism (target: at least 90%; with
``local[2]`` and striped ledgers also at least 35,000 entries/s), the
client's CPU per entry of the raw read, the load average, where the
export's time goes, and the CPU each kind of process (bookies, readers or
Spark's Python workers, Spark's JVM) used per entry in each run, from
``/proc``.
Everything it starts is stopped at the end.

``--plan-ledgers N`` measures the export's plan alone instead (``bkctl export`` has no
plan-only run, and bench_scale's commands run whole): a sandbox of ZooKeeper alone is filled
with N ledgers' metadata (bench/scale_fill.py, as bench_scale fills it: Pulsar's and plain
ledgers, the last of each topic open), and ``plan_ledgers`` -- what the export's driver runs
before Spark -- plans ``all``, a wide range of every id and 4,000 ids named, each in a process
of its own (bench_scale's ``timed``): its wall and CPU seconds, the ZooKeeper requests it made
(ZooKeeper's ``mntr`` count) and its peak RSS.  At 10^5 (load 4-5 on 2 CPUs), ``all`` took
1.7 s (CPU 1.6 s), 531 requests and 70 MiB, where reading a ledger a round trip took 54.0 s
(CPU 23.4 s), 100,016 requests and 67 MiB; 4,000 ids named 0.19 s (CPU 0.19 s), 25 requests,
where they were read three times each: 3.9 s (CPU 1.9 s), 8,025 requests.  At 10^6 (load
11-13): ``all`` 59.6 s (CPU 22.5 s), 5,235 requests, 384 MiB -- the 980,000 plans themselves
(a process that plans 4,000 is 38 MiB).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import load_note  # noqa: E402

from bkctl.wire import fastpath

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def payload(i: int, size: int) -> bytes:
    head = b"%012d|" % i
    filler = bytes((i * 31 + k * 7) % 251 for k in range(max(0, size - len(head))))
    return (head + filler)[:size]


def rate(n: int, nbytes: int, seconds: float) -> str:
    if seconds <= 0:
        return "n/a"
    return f"{n / seconds:>10,.0f} entries/s  {nbytes / seconds / 1e6:7.2f} MB/s  ({seconds:7.2f} s)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, default=1_000_000, help="entries in all (default 1,000,000)")
    ap.add_argument("--payload-size", type=int, default=100, help="bytes per entry (default 100)")
    ap.add_argument("--ledgers", type=int, default=4, help="ledgers to spread the entries over (default 4)")
    ap.add_argument("--masters", default="local[1],local[2]", help="Spark masters to measure, comma-separated")
    ap.add_argument("--split-entries", type=int, default=100_000, help="entries per Spark task")
    ap.add_argument("--batch-size", type=int, default=1000, help="entries per read batch")
    ap.add_argument("--read-window", type=int, default=256, help="entries in flight per reader")
    ap.add_argument("--protocol", default="v3", choices=["v3", "v2"])
    ap.add_argument(
        "--ensemble",
        default="3,2,2",
        metavar="E,QW,QA",
        help="ledger shape (default 3,2,2); with --protocol v2 and E = Qw (Pulsar's 2,2,2) reads are batch reads",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of the raw read and the export, taken in turns, per master (default 3; the medians are compared)",
    )
    ap.add_argument("--dir", help="work folder (default: a new temporary one, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument(
        "--plan-ledgers",
        type=int,
        metavar="N",
        help="instead: time the export's ledger plan alone over N ledgers' metadata (no bookies, no Spark)",
    )
    ap.add_argument("--plan-child", nargs=2, metavar=("URI", "SPEC"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.plan_child:
        return plan_child(*args.plan_child)
    if args.entries < args.ledgers or args.ledgers < 1:
        ap.error("need at least one entry per ledger")

    from bkctl.sandbox.cluster import sandbox_down, sandbox_up

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-export-"))
    work.mkdir(parents=True, exist_ok=True)
    if not args.plan_ledgers:
        print(f"work folder {work}; {args.entries:,} entries of {args.payload_size} B in {args.ledgers} ledger(s)")
    try:
        if args.plan_ledgers:
            heap = 512 + args.plan_ledgers // 1024  # bench_scale's: 1 KiB a ledger
            return plan_only(args.plan_ledgers, sandbox_up(work / "sandbox", bookies=0, zk_heap_mb=heap))
        t = time.monotonic()
        info = sandbox_up(work / "sandbox", bookies=3)
        print(f"sandbox up in {time.monotonic() - t:.1f}s: {info['uri']}")
        return run(args, info["uri"], work)
    finally:
        try:
            sandbox_down(work / "sandbox")
        except Exception as exc:  # noqa: BLE001
            print(f"sandbox down failed: {exc}", file=sys.stderr)
        if not args.keep and not args.dir:
            shutil.rmtree(work, ignore_errors=True)


def plan_only(n: int, info: dict) -> int:
    """The export's plan alone over ``n`` ledgers (the module's ``--plan-ledgers``)."""
    from bench_scale import timed
    from scale_fill import Population, fill

    uri, zk = info["uri"], f"127.0.0.1:{info['zookeeper']['port']}"
    t = time.monotonic()
    fill(uri, zk, [], Population(ledgers=n, topics=max(1, n // 100), marks=0))
    print(f"{n:,} ledgers' metadata filled in {time.monotonic() - t:.0f} s")
    named = range(1, n + 1, max(1, n // 4000))
    specs = {"all": "all", f"1-{n}": "a wide range", ",".join(map(str, named)): f"{len(named):,} ids named"}
    for spec, label in specs.items():
        fig = timed(label, [sys.executable, __file__, "--plan-child", uri, spec], dict(os.environ), zk)
        print(
            f"plan {label:18} {fig.lines:>9,} planned  {fig.seconds:7.2f} s  CPU {fig.cpu:6.2f} s  "
            f"{fig.zk_requests:>9,} ZooKeeper requests  {fig.peak_rss_mib:6.0f} MiB peak RSS; {fig.load}"
        )
    return 0


def plan_child(uri: str, spec: str) -> int:
    """Plan the export of ``spec`` as ``bkctl export`` does before Spark; a line a plan."""
    from bkctl.wire.domain.ledger_plan import parse_ledger_spec, plan_ledgers
    from bkctl.wire.metadata.zk import ZKMetadataStore

    with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
        planning = plan_ledgers(store, parse_ledger_spec(spec))
    sys.stdout.writelines(f"{plan.ledger_id} {plan.last}\n" for plan in planning.plans)
    return 0


def run(args, uri: str, work: Path) -> int:
    from bkctl.wire.client.blocking import BlockingBookKeeper

    size = args.payload_size
    shape = tuple(int(x) for x in args.ensemble.split(","))
    total_bytes = args.entries * size
    per_ledger = [
        args.entries // args.ledgers + (1 if i < args.entries % args.ledgers else 0) for i in range(args.ledgers)
    ]

    # -- write -------------------------------------------------------------------
    ledger_ids = []
    t = time.monotonic()
    with BlockingBookKeeper(uri, add_timeout=60.0, read_timeout=30.0, timeout=3600) as bk:
        # for warming Spark's workers and the readers up: one with an entry per worker, one with one entry
        with bk.create(*shape, password=b"bench") as lh:
            lh.add_many(b"warm-up" for _ in range(8))
        warm_id = lh.ledger_id
        with bk.create(*shape, password=b"bench") as lh:
            lh.add(b"warm-up")
        one_entry_id = lh.ledger_id
        start = 0
        for count in per_ledger:
            with bk.create(*shape, password=b"bench") as lh:
                lh.add_many(payload(i, size) for i in range(start, start + count))
            ledger_ids.append(lh.ledger_id)
            start += count
    label = f"write (client, E{shape[0]} Qw{shape[1]} Qa{shape[2]})"
    print(f"{label:32} {rate(args.entries, total_bytes, time.monotonic() - t)}")
    n = args.entries
    masters = [m.strip() for m in args.masters.split(",") if m.strip()]

    # -- raw read, in-process: the client's CPU per entry, and the entries for the steps below ------
    batches = []
    t = time.monotonic()
    cpu = time.process_time()
    with BlockingBookKeeper(
        uri, protocol=args.protocol, read_timeout=30.0, read_window=args.read_window, timeout=3600
    ) as bk:
        for ledger_id, count in zip(ledger_ids, per_ledger):
            for entries in bk.open(ledger_id).read_range(0, count - 1, batch=args.batch_size):
                batches.append((ledger_id, entries))
    seconds = time.monotonic() - t
    cpu = time.process_time() - cpu
    assert sum(len(e) for _, e in batches) == n
    print(
        f"{'raw read (in this process)':32} {rate(n, total_bytes, seconds)}  "
        f"[client CPU {cpu / n * 1e6:.1f} us/entry; {load_note()}]"
    )

    # -- Arrow conversion ----------------------------------------------------------
    import pyarrow.compute  # noqa: F401 - imported before the clock starts, as a warm worker has it

    from bkctl.export.ledger_source import LedgerBatchBuilder
    from bkctl.wire.domain.ledger_plan import EntryRange

    t = time.monotonic()
    builders = {}
    arrow_batches = []
    for ledger_id, entries in batches:
        b = builders.get(ledger_id)
        if b is None:
            part = EntryRange(ledger_id, 0, 0, int(time.time() * 1000), "CLOSED", {"application": "bench"})
            b = builders[ledger_id] = LedgerBatchBuilder(part, args.batch_size)
        arrow_batches.append(b.build(entries))
    arrow_seconds = time.monotonic() - t
    print(f"{'Arrow conversion (1 core)':32} {rate(n, total_bytes, arrow_seconds)}")
    del batches

    # -- Parquet encoding (pyarrow, for scale) -------------------------------------
    import pyarrow.parquet as pq

    t = time.monotonic()
    with pq.ParquetWriter(work / "pyarrow.parquet", arrow_batches[0].schema, compression="zstd") as w:
        for rb in arrow_batches:
            w.write_batch(rb)
    pq_seconds = time.monotonic() - t
    print(f"{'Parquet encode (pyarrow, zstd)':32} {rate(n, total_bytes, pq_seconds)}")
    del arrow_batches

    # -- per master: the raw read at the same parallelism and the export, in turns ----------------
    from bkctl.export.datasource import source_frame
    from bkctl.export.spark_session import spark_session, stop_spark
    from bkctl.wire.domain.ledger_plan import LedgerPlan, parse_ledger_spec, plan_ledgers, split_ranges
    from bkctl.wire.metadata.zk import ZKMetadataStore

    ranges = split_ranges(
        [LedgerPlan(lid, "CLOSED", None, {}, 0, count - 1) for lid, count in zip(ledger_ids, per_ledger)],
        args.split_entries,
    )
    results = []
    meter = CpuMeter()
    with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
        spec = parse_ledger_spec(",".join(str(i) for i in ledger_ids))
        plans = plan_ledgers(store, spec).plans
        for master in masters:
            slots = _slots(master)
            raw_times: list[float] = []
            export_times: list[float] = []
            raw_cpu: list[dict[str, float]] = []
            worker_times: list[float] = []
            worker_cpu: list[dict[str, float]] = []
            export_cpu: list[dict[str, float]] = []
            t = time.monotonic()
            spark, created = spark_session(master)
            start_seconds = time.monotonic() - t
            try:
                with ReaderPool(uri, slots, warm_id, args) as readers:
                    # a first job starts Spark's Python workers, one per task slot (8 one-entry tasks), and
                    # their clients, with the options of the runs below: a fixed cost per Spark session
                    t = time.monotonic()
                    _export(store, uri, args, work, master, parse_ledger_spec(str(warm_id)), "warm-up", split_entries=1)
                    warm_seconds = time.monotonic() - t
                    t = time.monotonic()
                    _export(store, uri, args, work, master, parse_ledger_spec(str(one_entry_id)), "one-entry")
                    fixed_seconds = time.monotonic() - t
                    print(
                        f"{'spark start ' + master:32} {start_seconds:.1f} s, first export (8 tasks of one entry) "
                        f"{warm_seconds:.1f} s: fixed costs, not counted below; a one-entry export "
                        f"{fixed_seconds:.2f} s (what every export below pays on top of its reads)"
                    )
                    for rep in range(args.repeat):
                        before = meter.snapshot()
                        raw_times.append(readers.read(ranges))
                        after = meter.snapshot()
                        raw_cpu.append(meter.used(before, after))
                        print(
                            f"{f'  raw read, {slots} proc(s), run {rep + 1}':32} "
                            f"{rate(n, total_bytes, raw_times[-1])}  [{load_note()}; {cpu_note(raw_cpu[-1], n)}]"
                        )
                        t = time.monotonic()
                        spark_raw_read(spark, uri, ranges, _export_options(args, work, master, rep))
                        worker_times.append(time.monotonic() - t)
                        before = meter.snapshot()
                        worker_cpu.append(meter.used(after, before))
                        print(
                            f"{f'  raw read in Spark tasks, run {rep + 1}':32} "
                            f"{rate(n, total_bytes, worker_times[-1])}  [{load_note()}; "
                            f"{cpu_note(worker_cpu[-1], n)}]"
                        )
                        summary = _export(store, uri, args, work, master, spec, rep)
                        export_cpu.append(meter.used(before, meter.snapshot()))
                        assert summary.entries == n, summary
                        timings = summary.timings
                        export_times.append(timings["plan"] + timings["write"] + timings["verify"] + timings["commit"])
                        print(
                            f"{f'  export {master}, run {rep + 1}':32} {rate(n, total_bytes, export_times[-1])}  "
                            f"[{summary.files} files; write {timings['write']:.2f} s, verify "
                            f"{timings['verify']:.2f} s, commit {timings['commit']:.2f} s; {load_note()}; "
                            f"{cpu_note(export_cpu[-1], n)}]"
                        )
                # last, so that neither its own Python daemons nor the JIT work it causes fall on the runs above
                t = time.monotonic()
                options = _export_options(args, work, master, 0)
                source_frame(spark, options.read_settings(uri), options.split_entries, plans).write.format("noop").mode(
                    "overwrite"
                ).save()
                noop_seconds = time.monotonic() - t
                print(
                    f"{'data source -> noop ' + master:32} {rate(n, total_bytes, noop_seconds)}  "
                    "[a first use: Spark starts a Python daemon per kind of data source worker]"
                )
            finally:
                if created:
                    stop_spark(spark)
            results.append(
                (master, slots, fixed_seconds, raw_times, export_times, raw_cpu, export_cpu, worker_times, worker_cpu)
            )

    # -- summary ---------------------------------------------------------------------
    print()
    ok = True
    striped = shape[0] > shape[1]
    for master, slots, fixed_seconds, raw_times, export_times, raw_cpu, export_cpu, worker_times, worker_cpu in results:
        raw_s, export_s = statistics.median(raw_times), statistics.median(export_times)
        share = raw_s / export_s
        ok = ok and share >= 0.9
        spread = f"runs {min(n / s for s in export_times):,.0f}..{max(n / s for s in export_times):,.0f}"
        print(
            f"export {master}: {n / export_s:,.0f} entries/s ({n / export_s * size / 1e6:.2f} MB/s, {spread}) = "
            f"{share:.0%} of the raw read with {slots} reader process(es) ({n / raw_s:,.0f} entries/s, runs "
            f"{min(n / s for s in raw_times):,.0f}..{max(n / s for s in raw_times):,.0f}) "
            f"[{'meets' if share >= 0.9 else 'BELOW'} the 90% target]; medians of {len(export_times)} runs "
            f"taken in turns; {load_note()}"
        )
        pairs = sorted(r / e for r, e in zip(raw_times, export_times))
        print(
            f"  run by run (each export against the raw read just before it): {statistics.median(pairs):.0%} "
            f"median, {pairs[0]:.0%}..{pairs[-1]:.0%}"
        )
        worker_s = statistics.median(worker_times)
        print(
            f"  the same raw read in Spark tasks (the export's workers, without Arrow or Parquet): "
            f"{n / worker_s:,.0f} entries/s; the export is {worker_s / export_s:.0%} of it"
        )
        if slots == 2 and striped and size == 100:
            print(
                f"  striped ledgers with local[2]: {n / export_s:,.0f} entries/s "
                f"[{'meets' if n / export_s >= 35_000 else 'below'} the 35,000/s target]"
            )
        encode_part = (arrow_seconds + pq_seconds) / slots
        rest = export_s - raw_s - encode_part - fixed_seconds
        print(f"  where the time goes ({export_s:.1f} s, {slots} worker(s); the first three measured on their own):")
        for what, secs in (
            ("bookie reads (the raw read's median)", raw_s),
            ("Arrow batches + Parquet encoding", encode_part),
            ("fixed cost of an export (1-entry export)", fixed_seconds),
            ("the rest: contention and noise", rest),
        ):
            noise = "  (below zero: run-to-run noise)" if secs < 0 else ""
            print(f"    {what:42} {secs:7.2f} s  {secs / export_s:5.0%}{noise}")
        print(
            f"  CPU per entry (us, medians): raw read, raw read in Spark tasks, export; "
            f"the machine has {os.cpu_count()} CPUs:"
        )
        for group in CpuMeter.GROUPS + ("all",):

            def per_entry(runs, group=group):
                return statistics.median((sum(r.values()) if group == "all" else r[group]) / n * 1e6 for r in runs)

            print(f"    {group:42} {per_entry(raw_cpu):7.1f} {per_entry(worker_cpu):7.1f} {per_entry(export_cpu):7.1f}")
    return 0 if ok else 1


def _export_options(args, work: Path, master: str, rep, **changes):
    from bkctl.export.job import ExportOptions

    name = f"export-{master.replace('[', '').replace(']', '')}-{rep}"
    return ExportOptions(
        out=str(work / name),
        master=master,
        split_entries=args.split_entries,
        batch_size=args.batch_size,
        protocol=args.protocol,
        read_window=args.read_window,
        read_timeout=30.0,
        **changes,
    )


def _export(store, uri: str, args, work: Path, master: str, spec, rep, **changes):
    """``run_export`` of the ledgers ``spec`` selects, with the benchmark's options."""
    from bkctl.export.job import run_export
    from bkctl.export.ledger_source import LedgerSelection, LedgerSource

    return run_export(
        store, uri, LedgerSource(LedgerSelection(spec)), _export_options(args, work, master, rep, **changes)
    )


def _read_share(bk, share, batch: int) -> int:
    """Read every ``(ledger_id, first, last)`` of ``share`` with the blocking
    client ``bk``; the number of entries read."""
    n = 0
    for ledger_id, first, last in share:
        for entries in bk.open(ledger_id).read_range(first, last, batch=batch):
            n += len(entries)
    return n


def _read_in_task(settings, share) -> int:
    """A Spark task of :func:`spark_raw_read`: its ranges read with the
    export's own client (``executor.process_client``), the entries counted."""
    from bkctl.export.executor import process_client

    return _read_share(process_client(settings), share, settings.batch_size)


def spark_raw_read(spark, uri: str, ranges, export_options) -> None:
    """The raw read in Spark's Python workers: one task per range, as the
    export cuts them, with the read options the export gives its tasks,
    reading and counting (what the export does less the Arrow batches and
    the Parquet files)."""
    from functools import partial

    options = export_options.read_settings(uri)
    shares = [[(r.ledger_id, r.first, r.last)] for r in ranges]
    total = sum(spark.sparkContext.parallelize(shares, len(shares)).map(partial(_read_in_task, options)).collect())
    assert total == sum(r.entries for r in ranges), total


def _reader(uri: str, warm_id: int, batch: int, window: int, protocol: str, conn) -> None:
    """A reader process: one client, warmed up on ``warm_id``; reads the
    shares it is sent and answers with the number of entries read."""
    from bkctl.wire.client.blocking import BlockingBookKeeper

    with BlockingBookKeeper(uri, protocol=protocol, read_timeout=30.0, read_window=window, timeout=3600) as bk:
        for _ in bk.open(warm_id).read_range(0, 0):
            pass
        conn.send("ready")
        while True:
            share = conn.recv()
            if share is None:
                return
            conn.send(_read_share(bk, share, batch))


class ReaderPool:
    """``procs`` reader processes, started and warmed up before anything is
    timed (like Spark's Python workers, which a warm-up export starts)."""

    def __init__(self, uri: str, procs: int, warm_id: int, args):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conns = []
        self.procs = []
        for _ in range(procs):
            parent, child = ctx.Pipe()
            p = ctx.Process(
                target=_reader,
                args=(uri, warm_id, args.batch_size, args.read_window, args.protocol, child),
                daemon=True,
            )
            p.start()
            self.conns.append(parent)
            self.procs.append(p)
        for conn in self.conns:
            assert conn.recv() == "ready"

    def read(self, ranges) -> float:
        """Seconds for the readers to read every range, each a share (cut like the export cuts them)."""
        k = len(self.conns)
        t = time.monotonic()
        for i, conn in enumerate(self.conns):
            conn.send([(r.ledger_id, r.first, r.last) for r in ranges[i::k]])
        total = sum(conn.recv() for conn in self.conns)
        seconds = time.monotonic() - t
        assert total == sum(r.entries for r in ranges), total
        return seconds

    def __enter__(self) -> ReaderPool:
        return self

    def __exit__(self, *exc) -> None:
        for conn in self.conns:
            try:
                conn.send(None)
            except OSError:
                pass
        for p in self.procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()


class CpuMeter:
    """CPU seconds used by each kind of process on the machine between two
    :meth:`snapshot` calls, from ``/proc`` (what the export and the raw read
    cost each process, rather than a residual of wall-clock times)."""

    GROUPS = ("bookies", "readers / Python workers", "Spark JVM", "ZooKeeper", "this process", "other")

    def __init__(self):
        self.tick = os.sysconf("SC_CLK_TCK")
        self.me = os.getpid()

    def _group(self, pid: int, cmdline: str) -> str:
        if pid == self.me:
            return "this process"
        if "bkctl.bookied" in cmdline:
            return "bookies"
        if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline or "multiprocessing" in cmdline:
            return "readers / Python workers"
        if "org.apache.spark.deploy.SparkSubmit" in cmdline:  # not ZooKeeper's JVM, which may run from pyspark's jars
            return "Spark JVM"
        if "org.apache.zookeeper" in cmdline:
            return "ZooKeeper"
        return "other"

    def snapshot(self) -> dict[int, tuple[str, float]]:
        out = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            pid = int(name)
            out[pid] = (self._group(pid, cmdline), (int(fields[11]) + int(fields[12])) / self.tick)
        return out

    def used(self, before: dict, after: dict) -> dict[str, float]:
        """CPU seconds per group from ``before`` to ``after`` (processes that
        ended in between are not counted)."""
        used = dict.fromkeys(self.GROUPS, 0.0)
        for pid, (group, cpu) in after.items():
            used[group] += cpu - before.get(pid, (group, 0.0))[1]
        return used


def cpu_note(used: dict[str, float], n: int) -> str:
    return "CPU us/entry: " + ", ".join(
        f"{group} {secs / n * 1e6:.1f}" for group, secs in used.items() if secs / n * 1e6 >= 0.05
    )


def _slots(master: str) -> int:
    import re

    m = re.fullmatch(r"local\[(\d+|\*)\]", master)
    if not m:
        return 1
    return (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))


if __name__ == "__main__":
    sys.exit(main())
