"""``bkctl export``: ledgers to Parquet through Spark, committed atomically.

:func:`run_export` does the whole job:

1. lock the output directory and check it holds nothing but a compatible
   previous export (:class:`~bkctl.export.output.OutputDir`);
2. plan in this process from the ledger metadata (so a missing ledger is a
   :class:`~bkctl.export.planning.NoSuchLedgers`, exit 3, before Spark starts);
3. run one Spark task per entry range: each reads its entries as the
   ``bookkeeper`` data source does and writes them as Parquet, partitioned by
   ``ledger_id`` (or ``date``/``ledger_id``), below its attempt's folder in a
   staging directory; the files of the successful attempts are moved into
   place (:mod:`~bkctl.export.writing` says why the tasks write the files);
4. check what was written against the plan (rows, first and last entry per
   ledger, from the Parquet footers);
5. add the previous partitions that are kept, write ``_manifest.json`` and
   ``_SUCCESS``, and swap the staging directory into place.

A SparkSession already running in this process is used as it is (and left
running); otherwise one is made for ``master`` and stopped at the end.
"""
from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from . import planning
from .output import MANIFEST, OutputDir
from .planning import LedgerPlan, LedgerSpec

__all__ = ["ExportOptions", "ExportProgress", "ExportError", "run_export", "source_frame", "spark_session",
           "stop_spark", "EXPORT_COLUMNS"]

MANIFEST_FORMAT = "bkctl-export/1"
#: Columns of the exported files, in order (``payload_text`` only with decode).
EXPORT_COLUMNS = ["ledger_id", "entry_id", "payload", "payload_size", "ledger_ctime", "ledger_state",
                  "ledger_metadata"]
#: Parquet codecs (pyarrow's names).
COMPRESSION = ("zstd", "snappy", "none")
#: How many previous exports the manifest remembers.
_HISTORY = 50


class ExportError(RuntimeError):
    """The export could not be completed (nothing was changed in the output)."""


@dataclass
class ExportOptions:
    out: str
    spec: LedgerSpec
    since_ms: int | None = None
    until_ms: int | None = None
    partition_by: str = "ledger_id"
    compression: str = "zstd"
    master: str = "local[*]"
    rows_per_file: int = 0
    mode: str = "replace"
    decode: str | None = None
    include_open: bool = False
    split_entries: int = planning.DEFAULT_SPLIT_ENTRIES
    batch_size: int = planning.DEFAULT_BATCH_SIZE
    protocol: str = "v3"
    password: str | None = None
    read_timeout: float = 10.0
    read_window: int = 256
    spark_conf: dict[str, str] = field(default_factory=dict)
    #: the JVM (and its Python workers) write nothing at all (``bkctl -q export``)
    quiet: bool = False
    #: TLS to the bookies (:class:`bkctl.wire.tls.TLSFiles`), None for plain text
    bookie_tls: Any = None
    #: a Pulsar topic to export message by message instead of ledgers (:mod:`.topic`)
    topic: str | None = None
    subscription: str | None = None
    unacked_only: bool = False
    #: publish times ``from_ms <= t < to_ms`` (topic exports)
    from_ms: int | None = None
    to_ms: int | None = None
    skip_missing: bool = False
    #: a corrupt entry becomes an error ``row`` or is ``skip``ped (reported either way)
    on_corrupt: str = "row"
    #: Pulsar's managed-ledger root (default: beside the ledger root)
    managed_ledgers: str | None = None

    def __post_init__(self) -> None:
        if self.topic is not None:
            self.partition_by = "topic"
            if self.unacked_only and self.subscription is None:
                raise planning.SpecError("--unacked-only needs --subscription")
            if self.on_corrupt not in ("row", "skip"):
                raise planning.SpecError(f"on corrupt entries: row or skip, not {self.on_corrupt!r}")
        elif self.partition_by not in ("ledger_id", "date"):
            raise planning.SpecError(f"partition by ledger_id or date, not {self.partition_by!r}")
        if self.compression not in COMPRESSION:
            raise planning.SpecError(f"compression must be one of {', '.join(COMPRESSION)}")
        if self.decode not in (None, "utf8"):
            raise planning.SpecError(f"decode must be utf8, not {self.decode!r}")
        if self.rows_per_file < 0:
            raise planning.SpecError("rows per file must be 0 (no limit) or more")

    def describe(self) -> dict[str, Any]:
        """The options as recorded in the manifest (no password)."""
        return {
            "ledgers": str(self.spec), "since": planning.format_ctime(self.since_ms),
            "until": planning.format_ctime(self.until_ms), "partition_by": self.partition_by,
            "compression": self.compression, "master": self.master, "rows_per_file": self.rows_per_file,
            "mode": self.mode, "decode": self.decode, "include_open": self.include_open,
            "split_entries": self.split_entries, "batch_size": self.batch_size, "protocol": self.protocol,
            "password_override": self.password is not None,
            **({"topic": self.topic, "subscription": self.subscription, "unacked_only": self.unacked_only,
                "from": planning.format_ctime(self.from_ms), "to": planning.format_ctime(self.to_ms),
                "skip_missing": self.skip_missing, "on_corrupt": self.on_corrupt} if self.topic else {}),
        }


@dataclass
class ExportProgress:
    """What the progress callback is told (entries and ledgers done are
    estimated from the number of finished Spark tasks)."""

    phase: str
    tasks_done: int = 0
    tasks_total: int = 0
    entries_done: int = 0
    entries_total: int = 0
    ledgers_done: int = 0
    ledgers_total: int = 0


ProgressCallback = Callable[[ExportProgress], None]


# ---------------------------------------------------------------- Spark session

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""


def _log4j2_file() -> str:
    path = os.path.join(tempfile.gettempdir(), f"bkctl-export-log4j2-{os.getuid()}.properties")
    try:
        with open(path) as f:
            if f.read() == _LOG4J2:
                return path
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(prefix="bkctl-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(_LOG4J2)
    os.replace(tmp, path)
    return path


@contextmanager
def _stdout_to_stderr(quiet: bool = False):
    """Point file descriptor 1 at stderr while the JVM starts, so that neither
    it nor the Python workers it spawns ever write to our stdout; ``quiet``
    points both 1 and 2 at /dev/null (its warnings included)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    sink = os.open(os.devnull, os.O_WRONLY) if quiet else 2
    try:
        os.dup2(sink, 1)
        os.dup2(sink, 2)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, *([sink] if quiet else [])):
            os.close(fd)


def _is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster")


#: The export's driver JVM only plans, schedules and collects file names (the
#: tasks read and write in Python), so it needs neither C2's compiled code nor
#: G1's concurrent threads: measured during exports with local[1], those two
#: used 10% of a core, taken from the bookies and the readers sharing it.
_DRIVER_JIT_AND_GC = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_session(master: str = "local[*]", conf: dict[str, str] | None = None, quiet: bool = False):
    """``(spark, created)``: the SparkSession running in this process, else a
    new one for ``master`` (WARN logs on stderr, none at all with ``quiet``;
    no console progress, no UI)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        return SparkSession.builder.getOrCreate(), False
    builder = (SparkSession.builder.master(master).appName("bkctl export")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.extraJavaOptions",
                       f"-Dlog4j2.configurationFile=file:{_log4j2_file()} {_DRIVER_JIT_AND_GC}"))
    if _is_local(master):
        # the workers must be this interpreter (where bkctl is installed), and
        # a single machine has no business listening on other interfaces
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (builder.config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    with _stdout_to_stderr(quiet):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark, True


def stop_spark(spark, timeout: float = 60.0) -> None:
    """Stop the session and the JVM behind it (``SparkSession.stop`` alone
    leaves the gateway JVM running until this process exits)."""
    import subprocess

    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - the JVM goes away below anyway
        pass
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is None:
        return
    try:
        if proc.stdin is not None:
            proc.stdin.close()  # the gateway JVM exits when its stdin closes
        proc.wait(timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait(timeout=timeout)


# ---------------------------------------------------------------- the job


def _lac_reader(store, options: ExportOptions):
    """``(lac_of, close)`` for open ledgers, through the blocking client
    (``lac_of.bk()`` is that client, made on first use)."""
    state: dict[str, Any] = {}

    def bk():
        if "bk" not in state:
            from bkctl.wire.client.blocking import BlockingBookKeeper

            tls = {"tls": options.bookie_tls} if options.bookie_tls else {}
            state["bk"] = BlockingBookKeeper(store, protocol=options.protocol, read_timeout=options.read_timeout,
                                             **tls)
        return state["bk"]

    def lac_of(ledger_id: int) -> int:
        password = None if options.password is None else options.password.encode("utf-8")
        return bk().open(ledger_id, password).last_add_confirmed

    def close() -> None:
        client = state.pop("bk", None)
        if client is not None:
            client.close()

    lac_of.bk = bk
    return lac_of, close


def _reader_options(uri: str, options: ExportOptions, plans: list[LedgerPlan]) -> dict[str, str]:
    opts = {
        "metadataServiceUri": uri,
        "plan": planning.plans_to_json(plans),
        "splitEntries": str(options.split_entries),
        "batchSize": str(options.batch_size),
        "protocol": options.protocol,
        "readTimeout": str(options.read_timeout),
        "readWindow": str(options.read_window),
    }
    if options.password is not None:
        opts["password"] = options.password
    from bkctl.wire.metadata import zksecurity

    if zksecurity.get_default() != zksecurity.ZKSecurity():  # executors authenticate as the driver does
        opts["zkSecurity"] = zksecurity.get_default().to_json()
    if options.bookie_tls:
        import dataclasses
        import json

        opts["bookieTls"] = json.dumps(dataclasses.asdict(options.bookie_tls), sort_keys=True)
    return opts


def source_frame(spark, uri: str, options: ExportOptions, plans: list[LedgerPlan]):
    """The ``bookkeeper`` data source's DataFrame of what ``plans`` select
    (the rows an export writes, before ``payload_text`` and ``date``)."""
    from .datasource import register

    register(spark)
    return spark.read.format("bookkeeper").options(**_reader_options(uri, options, plans)).load()


def _progress_estimate(ranges: list[planning.EntryRange], plans: list[LedgerPlan]):
    """``estimate(tasks_done) -> (entries, ledgers)``: tasks mostly finish in
    order, so count the first ``tasks_done`` ranges."""
    cumulative = []
    total = 0
    last_index: dict[int, int] = {}
    for i, r in enumerate(ranges):
        total += r.entries
        cumulative.append(total)
        last_index[r.ledger_id] = i
    ends = sorted(last_index.values())
    empty = sum(1 for p in plans if p.entries == 0)

    def estimate(done: int) -> tuple[int, int]:
        if done <= 0:
            return 0, empty
        done = min(done, len(cumulative))
        import bisect

        return cumulative[done - 1], empty + bisect.bisect_left(ends, done)

    return estimate


def _write(spark, uri: str, staging: str, options: ExportOptions, ranges, plans,
           progress: ProgressCallback | None, source=None) -> list[dict[str, Any]]:
    """Run the tasks that write ``ranges`` into ``staging`` (in a thread,
    reporting task progress), then commit their files; returns what the tasks reported."""
    import functools
    import uuid

    from .datasource import LedgerRangePartition, ReadOptions
    from .writing import FileOptions, commit_files, write_range

    sc = spark.sparkContext
    group = f"bkctl-export-{os.getpid()}-{time.monotonic_ns()}"
    # no plan: every task carries its own range, and reading needs no other
    read_options = ReadOptions(_reader_options(uri, options, []))
    file_options = FileOptions(staging=staging, job=uuid.uuid4().hex, compression=options.compression,
                               partition_by=options.partition_by, decode=options.decode,
                               rows_per_file=options.rows_per_file)
    if source is None:
        tasks = [(index, LedgerRangePartition.of(r)) for index, r in enumerate(ranges)]
        run_task = functools.partial(write_range, read_options, file_options)
    else:
        tasks = list(enumerate(ranges))
        run_task = functools.partial(source.write_fn, read_options, file_options)
    outcome: dict[str, Any] = {}

    def write() -> None:
        try:
            sc.setJobGroup(group, f"bkctl export to {options.out}", interruptOnCancel=True)
            reports = sc.parallelize(tasks, len(tasks)).map(run_task).collect()
            outcome["reports"] = [file for task in reports for file in task]
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome["error"] = exc

    estimate = _progress_estimate(ranges, plans)
    entries_total = sum(r.entries for r in ranges)
    thread = threading.Thread(target=write, name="bkctl-export-write", daemon=True)
    thread.start()
    tracker = sc.statusTracker()
    try:
        while thread.is_alive():
            thread.join(0.25)
            if progress is None:
                continue
            done = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                for stage_id in (job.stageIds if job else []):
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        done += stage.numCompletedTasks
            entries, ledgers = estimate(done)
            progress(ExportProgress("write", done, len(ranges), entries, entries_total, ledgers, len(plans)))
    except BaseException:
        sc.cancelJobGroup(group)
        thread.join(60)
        raise
    if "error" in outcome:
        error = outcome["error"]
        cause = spark_error_cause(error)
        if cause is not None:
            raise ExportError(f"the Spark job failed: {cause}") from error
        raise error
    commit_files(staging, [r for r in outcome["reports"] if "name" in r])
    if progress is not None:
        progress(ExportProgress("write", len(ranges), len(ranges), entries_total, entries_total,
                                len(plans), len(plans)))
    return outcome["reports"]


def spark_error_cause(error: BaseException) -> str | None:
    """The Python exception line (``module.Class: message``) that failed a
    Spark task, out of the JVM error PySpark raises; None if there is none."""
    text = str(error)
    at = text.rfind("Traceback (most recent call last):")
    if at < 0:
        return None
    for line in text[at:].splitlines()[1:]:
        if not line.strip() or line[0].isspace():
            continue
        return line.strip()
    return None


def written_stats(root) -> tuple[dict[int, dict[str, int]], int]:
    """Per ledger id: rows, first and last entry id, payload bytes, as written
    below ``root``; and the number of data files.  Rows and entry ids come from
    the Parquet footers, bytes from the ``payload_size`` column alone."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .output import data_files, leaf_partitions

    stats: dict[int, dict[str, int]] = {}
    files = 0
    for rel, ledger_id in leaf_partitions(root).items():
        for path in data_files(root / rel):
            files += 1
            pf = pq.ParquetFile(path)
            md = pf.metadata
            if md.num_rows == 0:
                continue
            leaves = [md.schema.column(i).path for i in range(md.num_columns)]
            entry_col = leaves.index("entry_id")
            first = last = None
            for g in range(md.num_row_groups):
                col = md.row_group(g).column(entry_col)
                st = col.statistics
                if st is None or not st.has_min_max:
                    first = None
                    break
                first = st.min if first is None else min(first, st.min)
                last = st.max if last is None else max(last, st.max)
            if first is None:
                ids = pf.read(columns=["entry_id"]).column(0)
                first, last = pc.min(ids).as_py(), pc.max(ids).as_py()
            nbytes = pc.sum(pf.read(columns=["payload_size"]).column(0)).as_py() or 0
            s = stats.setdefault(ledger_id, {"rows": 0, "first": first, "last": last, "bytes": 0})
            s["rows"] += md.num_rows
            s["first"] = min(s["first"], first)
            s["last"] = max(s["last"], last)
            s["bytes"] += int(nbytes)
    return stats, files


def _verify(plans: list[LedgerPlan], stats: dict[int, dict[str, int]]) -> None:
    wanted = {p.ledger_id: p for p in plans if p.entries}
    problems = []
    for ledger_id, plan in wanted.items():
        got = stats.get(ledger_id)
        if got is None:
            problems.append(f"ledger {ledger_id}: nothing written, expected {plan.entries} entries")
        elif (got["rows"], got["first"], got["last"]) != (plan.entries, plan.first, plan.last):
            problems.append(f"ledger {ledger_id}: wrote {got['rows']} rows for entries {got['first']}.."
                            f"{got['last']}, expected {plan.entries} for {plan.first}..{plan.last}")
    for ledger_id in sorted(set(stats) - set(wanted)):
        problems.append(f"ledger {ledger_id}: {stats[ledger_id]['rows']} rows written that were not planned")
    if problems:
        raise ExportError("the written data does not match the plan: " + "; ".join(problems[:5]))


def _files_by_ledger(root) -> dict[int, list[str]]:
    from .output import data_files, leaf_partitions

    out: dict[int, list[str]] = {}
    for rel, ledger_id in leaf_partitions(root).items():
        out.setdefault(ledger_id, []).extend(
            f"{rel}/{p.relative_to(root / rel).as_posix()}" for p in data_files(root / rel))
    return out


def _manifest(previous: dict[str, Any] | None, options: ExportOptions, plans: list[LedgerPlan],
              stats: dict[int, dict[str, int]], files: dict[int, list[str]], skipped: list[dict],
              started: float, seconds: float, master: str) -> dict[str, Any]:
    now = planning.format_ctime(int(time.time() * 1000))
    ledgers: dict[str, dict[str, Any]] = {}
    if previous and options.mode != "overwrite":
        ledgers.update(previous.get("ledgers") or {})
    for plan in plans:
        key = str(plan.ledger_id)
        got = stats.get(plan.ledger_id, {"rows": 0, "bytes": 0})
        record = {
            "ledger_id": plan.ledger_id,
            "state": plan.state,
            "ctime": planning.format_ctime(plan.ctime_ms),
            "ctime_ms": plan.ctime_ms,
            "date": planning.ctime_date(plan.ctime_ms),
            "custom_metadata": dict(plan.metadata),
            "segments": plan.segments,
            "exported_at": now,
        }
        new_range = [[plan.first, plan.last]] if plan.entries else []
        old = ledgers.get(key) if options.mode == "append" else None
        if old:
            record["ranges"] = list(old.get("ranges") or []) + new_range
            record["entries"] = int(old.get("entries") or 0) + got["rows"]
            record["bytes"] = int(old.get("bytes") or 0) + got["bytes"]
        else:
            record["ranges"] = new_range
            record["entries"] = got["rows"]
            record["bytes"] = got["bytes"]
        record["first_entry"] = min((r[0] for r in record["ranges"]), default=None)
        record["last_entry"] = max((r[1] for r in record["ranges"]), default=None)
        ledgers[key] = record
    for key, record in ledgers.items():
        record["files"] = files.get(int(key), [])
    ordered = {k: ledgers[k] for k in sorted(ledgers, key=int)}
    this_export = {
        "at": planning.format_ctime(int(started * 1000)),
        "seconds": round(seconds, 3),
        "master": master,
        "options": options.describe(),
        "ledgers": [p.ledger_id for p in plans],
        "entries": sum(s["rows"] for s in stats.values()),
        "bytes": sum(s["bytes"] for s in stats.values()),
        "skipped": skipped,
    }
    history = list((previous or {}).get("exports") or []) if options.mode != "overwrite" else []
    history = (history + [this_export])[-_HISTORY:]
    columns = EXPORT_COLUMNS + (["payload_text"] if options.decode == "utf8" else [])
    return {
        "format": MANIFEST_FORMAT,
        "partition_by": options.partition_by,
        "layout": "date=YYYY-MM-DD/ledger_id=N/" if options.partition_by == "date" else "ledger_id=N/",
        "columns": columns,
        "updated_at": now,
        "ledgers": ordered,
        "totals": {
            "ledgers": len(ordered),
            "entries": sum(int(r.get("entries") or 0) for r in ordered.values()),
            "bytes": sum(int(r.get("bytes") or 0) for r in ordered.values()),
            "files": sum(len(r.get("files") or []) for r in ordered.values()),
        },
        "last_export": this_export,
        "exports": history,
    }


def run_export(store, uri: str, options: ExportOptions, *, progress: ProgressCallback | None = None,
               info: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Export the ledgers ``options`` select; returns the summary document
    (``out, ledgers, entries, bytes, files, seconds, master`` and more)."""
    started = time.time()
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    say = info or (lambda _msg: None)
    out = OutputDir(options.out)
    # refuse early (without creating anything) what cannot work: an
    # incompatible target, a ledger that does not exist
    out.check_target(options.mode, options.partition_by)
    lac_of, close_lac = _lac_reader(store, options)
    source = None
    try:
        if options.topic is not None:
            from .topic import TopicSource

            source = TopicSource(options)
            plans, ranges, skipped = source.make_plan(store, lac_of, lac_of.bk)
        else:
            plans, skipped = planning.plan_ledgers(
                store, options.spec, include_open=options.include_open, since_ms=options.since_ms,
                until_ms=options.until_ms, lac_of=lac_of)
            ranges = planning.split_ranges(plans, options.split_entries)
    finally:
        close_lac()
    timings["plan"] = time.monotonic() - t0
    with out.locked():
        previous = out.check_target(options.mode, options.partition_by)
        to_read = [p for p in plans if p.entries]
        master = options.master
        stats: dict[int, dict[str, int]] = {}
        reports: list[dict[str, Any]] = []
        if progress is not None:
            progress(ExportProgress("plan", 0, len(ranges), 0, sum(r.entries for r in ranges),
                                    len(plans) - len(to_read), len(plans)))
        if to_read:
            t = time.monotonic()
            say(f"starting Spark ({master})...")
            spark, created = spark_session(master, options.spark_conf, quiet=options.quiet)
            master = spark.sparkContext.master
            timings["spark_start"] = time.monotonic() - t
            try:
                t = time.monotonic()
                say(f"exporting {sum(p.entries for p in to_read)} entries of {len(to_read)} ledgers "
                    f"in {len(ranges)} tasks...")
                reports = _write(spark, uri, str(out.staging), options, ranges, plans, progress, source)
                timings["write"] = time.monotonic() - t
            finally:
                if created:
                    stop_spark(spark)
        t = time.monotonic()
        if source is None:
            stats, new_files = written_stats(out.staging)
            _verify(to_read, stats)
        else:
            stats, new_files = source.verify(to_read, reports)
        timings["verify"] = time.monotonic() - t
        t = time.monotonic()
        out.compose(options.mode, [p.ledger_id for p in plans])
        files = _files_by_ledger(out.staging)
        seconds = time.monotonic() - t0
        manifest = _manifest(previous, options, plans, stats, files, skipped, started, seconds, master)
        if source is not None:
            source.amend_manifest(manifest)
        out.finish(manifest)
        timings["commit"] = time.monotonic() - t
    seconds = time.monotonic() - t0
    entries = sum(s["rows"] for s in stats.values())
    nbytes = sum(s["bytes"] for s in stats.values())
    summary = {
        "out": str(out.path),
        "ledgers": len(plans),
        "entries": entries,
        "bytes": nbytes,
        "files": new_files,
        "seconds": round(seconds, 3),
        "master": master,
        "mode": options.mode,
        "partition_by": options.partition_by,
        "ledger_ids": [p.ledger_id for p in plans],
        "skipped": skipped,
        "manifest": str(out.path / MANIFEST),
        "timings": {k: round(v, 3) for k, v in timings.items()},
    }
    if source is not None:
        source.amend_summary(summary)
    return summary


