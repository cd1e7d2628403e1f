"""``bkctl export``: ledgers or a topic to Parquet through Spark, committed atomically.

:func:`run_export` does the whole job for any :class:`~bkctl.export.source.ExportSource`:

1. lock the output directory and check it holds nothing but a compatible
   previous export (:class:`~bkctl.export.output.OutputDir`);
2. have the source plan in this process from the metadata (so a missing
   ledger is a :class:`~bkctl.wire.domain.ledger_plan.NoSuchLedgers`, exit 3, before
   Spark starts);
3. run one Spark task per planned task: each writes what the source reads
   for it as Parquet (:func:`~bkctl.export.writing.run_task`), below its
   attempt's folder in a staging directory; the files of the successful
   attempts are moved into place (:mod:`~bkctl.export.writing` says why the
   tasks write the files);
4. have the source check what was written against the plan;
5. add the previous partitions that are kept, write ``_manifest.json`` and
   ``_SUCCESS``, and swap the staging directory into place.

A SparkSession already running in this process is used as it is (and left
running); otherwise one is made for ``master`` and stopped at the end
(:mod:`~bkctl.export.spark_session`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bkctl.wire.domain import ledger_plan
from bkctl.wire.text import utc_date, utc_iso

from .executor import DEFAULT_BATCH_SIZE, DEFAULT_READ_TIMEOUT, DEFAULT_READ_WINDOW, LedgerReader, ReadSettings
from .output import MANIFEST, OutputDir
from .source import ExportError, ExportSource, SourcePlan, TaskReport, Written
from .spark_session import spark_session, stop_spark
from .summary import ExportSummary

__all__ = [
    "Export",
    "ExportOptions",
    "ExportProgress",
    "ExportTasks",
    "TaskFailed",
    "attempt_number",
    "cause_exit_code",
    "run_export",
    "run_export_task",
    "spark_error_cause",
    "task_attempts",
    "write_all",
]

MANIFEST_FORMAT = "bkctl-export/1"
#: Parquet codecs (pyarrow's names).
COMPRESSION = ("zstd", "snappy", "none")
#: How many previous exports the manifest remembers.
_HISTORY = 50


@dataclass
class ExportOptions:
    """How to export, whatever the source."""

    out: str
    compression: str = "zstd"
    master: str = "local[*]"
    rows_per_file: int = 0
    mode: str = "replace"
    decode: str | None = None
    split_entries: int = ledger_plan.DEFAULT_SPLIT_ENTRIES
    batch_size: int = DEFAULT_BATCH_SIZE
    protocol: str = "v3"
    password: str | None = None
    read_timeout: float = DEFAULT_READ_TIMEOUT
    read_window: int = DEFAULT_READ_WINDOW
    spark_conf: dict[str, str] = field(default_factory=dict)
    #: the JVM (and its Python workers) write nothing at all (``bkctl -q export``)
    quiet: bool = False
    verbose: bool = False  # -v: Spark's logs of failed tasks too
    #: TLS to the bookies (:class:`bkctl.wire.tls.TLSFiles`), None for plain text
    bookie_tls: Any = None
    #: how offloaded ledgers are reached (:class:`bkctl.wire.pulsar.offload_store.OffloadSettings`)
    offload: Any = None

    def __post_init__(self) -> None:
        if self.compression not in COMPRESSION:
            raise ledger_plan.SpecError(f"compression must be one of {', '.join(COMPRESSION)}")
        if self.decode not in (None, "utf8"):
            raise ledger_plan.SpecError(f"decode must be utf8, not {self.decode!r}")
        if self.rows_per_file < 0:
            raise ledger_plan.SpecError("rows per file must be 0 (no limit) or more")

    def read_settings(self, uri: str) -> ReadSettings:
        """How the readers reach the cluster at ``uri`` (authenticating to
        ZooKeeper as this process does)."""
        from bkctl.wire.metadata import zksecurity

        security = zksecurity.get_default()
        return ReadSettings(
            uri,
            protocol=self.protocol,
            read_timeout=self.read_timeout,
            read_window=self.read_window,
            batch_size=self.batch_size,
            password=None if self.password is None else self.password.encode("utf-8"),
            zk_security=None if security == zksecurity.ZKSecurity() else security,
            bookie_tls=self.bookie_tls or None,
            offload=self.offload,
        )

    def describe(self, source: ExportSource) -> dict[str, Any]:
        """The options as recorded in the manifest (no password)."""
        return {
            "partition_by": source.partition_by,
            "compression": self.compression,
            "master": self.master,
            "rows_per_file": self.rows_per_file,
            "mode": self.mode,
            "decode": self.decode,
            "split_entries": self.split_entries,
            "batch_size": self.batch_size,
            "protocol": self.protocol,
            "password_override": self.password is not None,
            **source.describe(),
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


# ---------------------------------------------------------------- the job


def _progress_estimate(ranges: list[Any], plans: list[ledger_plan.LedgerPlan]):
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


@dataclass
class TaskFailed:
    """A task of a tolerant job (:func:`write_all`) that failed on its last attempt: the error,
    ``module.Class: message`` (the shape of :func:`spark_error_cause`'s line)."""

    task: int
    cause: str


@dataclass(frozen=True)
class ExportTasks:
    """What a Spark task of one export needs (picklable): its source, how to read, how to write."""

    source: ExportSource
    settings: ReadSettings
    files: Any  # :class:`~bkctl.export.writing.FileOptions`


def run_export_task(
    jobs: list[ExportTasks], attempts: int, item: tuple[int, int, Any]
) -> tuple[int, TaskReport | TaskFailed]:
    """One Spark task of :func:`write_all`'s job, ``item = (export, index, task)``: the export's
    number and what :func:`~bkctl.export.writing.run_task` reports.  With ``attempts`` (a tolerant
    job: how many times Spark tries a task), an error on the last attempt is returned as
    :class:`TaskFailed` instead of failing the job, which would fail every export in it."""
    from .writing import run_task

    k, index, task = item
    job = jobs[k]
    try:
        return k, run_task(job.source, job.settings, job.files, (index, task))
    except Exception as exc:
        if not attempts or attempt_number() + 1 < attempts:
            raise  # Spark tries it again
        return k, TaskFailed(index, f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}")


def attempt_number() -> int:
    """This Spark task's attempt, from 0 (0 outside Spark)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return 0 if context is None else context.attemptNumber()


def task_attempts(master: str, max_failures: str | None) -> int:
    """How many times Spark tries a task: once on ``local``/``local[N]`` (its local scheduler's
    rule), F times on ``local[N,F]``, else ``spark.task.maxFailures`` (default 4)."""
    import re

    m = re.fullmatch(r"local\[[^,\]]+,\s*(\d+)\]", master)
    if m:
        return int(m.group(1))
    if master == "local" or re.fullmatch(r"local\[[^,\]]+\]", master):
        return 1
    return int(max_failures or 4)


class Export:
    """One export through :func:`run_export`'s steps: planned (:meth:`make_plan`), checked
    against ``DIR`` under its lock (:meth:`check`), written by :func:`write_all` -- which runs
    the tasks of several exports in one Spark job (:mod:`~bkctl.export.topics_job`) --,
    then verified and committed (:meth:`complete`)."""

    def __init__(self, source: ExportSource, options: ExportOptions, uri: str):
        self.source = source
        self.options = options
        self.started = time.time()
        self.t0 = time.monotonic()
        self.timings: dict[str, float] = {}
        self.out = OutputDir(options.out)
        self.settings = options.read_settings(uri)
        self.plan = SourcePlan([], [])
        self.previous: dict[str, Any] | None = None
        self.reports: list[TaskReport] = []
        #: why a task failed, ``module.Class: message`` (a tolerant :func:`write_all`); None: none did
        self.failure: str | None = None

    def make_plan(self, store, reader: LedgerReader) -> None:
        """Refuse early (without creating anything) what cannot work -- an incompatible
        target, a ledger that does not exist --, then plan."""
        self.out.check_target(self.options.mode, self.source.partition_by)
        self.plan = self.source.plan(store, reader, self.options.split_entries)
        self.timings["plan"] = time.monotonic() - self.t0

    def check(self) -> None:
        """Under the lock of ``DIR``: its previous export, and whether the rows may join it."""
        self.previous = self.out.check_target(self.options.mode, self.source.partition_by)
        if self.options.mode != "overwrite":
            self.source.refuse_mixing(self.plan, self.previous, self.out.path)

    @property
    def to_read(self) -> list[ledger_plan.LedgerPlan]:
        return [p for p in self.plan.plans if p.entries]

    def planned(self) -> ExportProgress:
        plan = self.plan
        return ExportProgress(
            "plan",
            0,
            len(plan.tasks),
            0,
            sum(r.entries for r in plan.tasks),
            len(plan.plans) - len(self.to_read),
            len(plan.plans),
        )

    def complete(self, master: str) -> ExportSummary:
        """Check what was written, bring in the kept partitions, write the manifest and swap
        the staging directory into place (under the lock); returns the summary (its source's:
        a topic's is a :class:`~bkctl.export.summary.TopicExportSummary`)."""
        source, plan, out, timings = self.source, self.plan, self.out, self.timings
        t = time.monotonic()
        written = source.verify(plan, self.reports, out.staging)
        timings["verify"] = time.monotonic() - t
        t = time.monotonic()
        out.compose(self.options.mode, [p.ledger_id for p in plan.plans])
        files = _files_by_ledger(out.staging)
        seconds = time.monotonic() - self.t0
        manifest = _manifest(
            self.previous, self.options, source, plan, written, self.reports, files, self.started, seconds, master
        )
        out.finish(manifest)
        timings["commit"] = time.monotonic() - t
        summary = ExportSummary(
            out=str(out.path),
            ledgers=len(plan.plans),
            entries=sum(s["rows"] for s in written.stats.values()),  # the rows (the source says what they are)
            bytes=sum(s["bytes"] for s in written.stats.values()),
            files=written.files,
            seconds=round(time.monotonic() - self.t0, 3),
            master=master,
            mode=self.options.mode,
            partition_by=source.partition_by,
            ledger_ids=[p.ledger_id for p in plan.plans],
            skipped=plan.skipped,
            manifest=str(out.path / MANIFEST),
            timings={k: round(v, 3) for k, v in timings.items()},
        )
        return source.summary(plan, self.reports, summary)


def write_all(
    spark,
    exports: list[Export],
    progress: ProgressCallback | None = None,
    say: Callable[[str], None] = lambda _msg: None,
    tolerant: bool = False,
) -> None:
    """Run the tasks of ``exports`` (those with entries to read) in one Spark job, then those
    their sources want read again (a topic's transactions: :meth:`ExportSource.redo`) in a
    second; each export's files are committed into its staging directory and its
    :attr:`Export.reports` set.  ``tolerant``: a task that fails (on its last attempt) fails
    its own export only (:attr:`Export.failure`), and so does a job that fails whole; else
    the job's failure is raised (:class:`ExportError`, or a :class:`CommandError` with the
    exit code of the task's error)."""
    exports = [e for e in exports if e.to_read]
    t = time.monotonic()
    for e, reports in _run(spark, [(e, None) for e in exports], progress, tolerant).items():
        e.reports = reports
    for e in exports:
        e.timings["write"] = time.monotonic() - t
    again = [(e, e.source.redo(e.plan, e.reports)) for e in exports if e.failure is None]
    again = [(e, tasks) for e, tasks in again if tasks]
    if not again:
        return
    from .writing import remove_files

    t = time.monotonic()
    say(
        f"reading {sum(len(tasks) for _, tasks in again)} of {sum(len(e.plan.tasks) for e, _ in again)} tasks "
        "again: they hold messages of a transaction that was aborted or is still open, which only the other "
        "tasks' entries told..."
    )
    for e, tasks in again:  # (their files are replaced)
        remove_files(e.out.staging, [f for r in e.reports if r.task in tasks for f in r.files])
        e.reports = [r for r in e.reports if r.task not in tasks]
    for e, reports in _run(spark, again, progress, tolerant).items():
        e.reports += reports
    for e, _ in again:
        e.timings["write_again"] = time.monotonic() - t


def _run(
    spark, runs: Sequence[tuple[Export, list[int] | None]], progress: ProgressCallback | None, tolerant: bool
) -> dict[Export, list[TaskReport]]:
    """One Spark job of the tasks of each export (those numbered ``only``, else all), in a
    thread, reporting task progress; the files of each export whose tasks all succeeded are
    committed; returns their reports."""
    import functools
    import uuid

    from .writing import FileOptions, commit_files

    sc = spark.sparkContext
    group = f"bkctl-export-{os.getpid()}-{time.monotonic_ns()}"
    jobs, items, ranges, plans = [], [], [], []
    for k, (e, only) in enumerate(runs):
        files = FileOptions(
            staging=str(e.out.staging),
            job=uuid.uuid4().hex,
            compression=e.options.compression,
            partition_by=e.source.partition_by,
            decode=e.options.decode,
            rows_per_file=e.options.rows_per_file,
        )
        jobs.append(ExportTasks(e.source, e.settings, files))
        numbers = range(len(e.plan.tasks)) if only is None else only
        items += [(k, i, e.plan.tasks[i]) for i in numbers]
        ranges += [e.plan.tasks[i] for i in numbers]
        plans += e.plan.plans
    attempts = task_attempts(sc.master, sc.getConf().get("spark.task.maxFailures")) if tolerant else 0
    task = functools.partial(run_export_task, jobs, attempts)
    outcome = _JobOutcome()
    what = runs[0][0].options.out if len(runs) == 1 else f"{len(runs)} folders"

    def write() -> None:
        try:
            sc.setJobGroup(group, f"bkctl export to {what}", interruptOnCancel=True)
            outcome.results = sc.parallelize(items, len(items)).map(task).collect()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome.error = exc

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
                for stage_id in job.stageIds if job else []:
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        done += stage.numCompletedTasks
            entries, ledgers = estimate(done)
            progress(ExportProgress("write", done, len(ranges), entries, entries_total, ledgers, len(plans)))
    except BaseException:
        sc.cancelJobGroup(group)
        thread.join(60)
        raise
    if outcome.error is not None:
        error = outcome.error
        cause = spark_error_cause(error)
        if tolerant and isinstance(error, Exception):  # (not Ctrl-C)
            for e, _ in runs:
                e.failure = e.failure or cause or f"the Spark job failed: {error}"
            return {}
        if cause is not None:
            code = cause_exit_code(cause)
            if code is not None:  # a task's refused store or missing object: its own exit code
                from ..exitcodes import CommandError

                raise CommandError(f"the Spark job failed: {cause}", code) from error
            raise ExportError(f"the Spark job failed: {cause}") from error
        raise error
    reports: dict[Export, list[TaskReport]] = {e: [] for e, _ in runs}
    for k, result in outcome.results:
        e = runs[k][0]
        if isinstance(result, TaskFailed):
            e.failure = e.failure or result.cause
        else:
            reports[e].append(result)
    for e, _ in runs:
        if e.failure is None:
            commit_files(e.out.staging, [f for r in reports[e] for f in r.files])
    if progress is not None:
        progress(
            ExportProgress("write", len(ranges), len(ranges), entries_total, entries_total, len(plans), len(plans))
        )
    return {e: r for e, r in reports.items() if e.failure is None}


@dataclass
class _JobOutcome:
    """What the thread that ran :func:`_run`'s Spark job left: each task's result, or the error."""

    results: list[tuple[int, TaskReport | TaskFailed]] = field(default_factory=list)
    error: BaseException | None = None


def cause_exit_code(cause: str) -> int | None:
    """The exit code of the error a task failed with (``bkctl.wire....Class: message``), when it is
    one of the library's categories (not found, unreachable, access denied...); None otherwise."""
    import importlib

    name = cause.partition(":")[0].strip()
    module, _, cls_name = name.rpartition(".")
    if not module.startswith("bkctl.wire."):
        return None
    try:
        cls = getattr(importlib.import_module(module), cls_name)
    except (ImportError, AttributeError):
        return None
    from bkctl.wire.errors import AccessDenied, BKError, Conflict, NotFound, Unreachable

    from ..exitcodes import CONFLICT, DENIED, NOT_FOUND, UNREACHABLE

    if not (isinstance(cls, type) and issubclass(cls, BKError)):
        return None
    for category, code in (
        (NotFound, NOT_FOUND),
        (Unreachable, UNREACHABLE),
        (AccessDenied, DENIED),
        (Conflict, CONFLICT),
    ):
        if issubclass(cls, category):
            return code
    return None


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


def _files_by_ledger(root) -> dict[int, list[str]]:
    from .output import data_files, leaf_partitions

    out: dict[int, list[str]] = {}
    for rel, ledger_id in leaf_partitions(root).items():
        out.setdefault(ledger_id, []).extend(
            f"{rel}/{p.relative_to(root / rel).as_posix()}" for p in data_files(root / rel)
        )
    return out


def _manifest(
    previous: dict[str, Any] | None,
    options: ExportOptions,
    source: ExportSource,
    plan: SourcePlan,
    written: Written,
    reports: list[TaskReport],
    files: dict[int, list[str]],
    started: float,
    seconds: float,
    master: str,
) -> dict[str, Any]:
    now = utc_iso(int(time.time() * 1000))
    stats = written.stats
    ledgers: dict[str, dict[str, Any]] = {}
    if previous and options.mode != "overwrite":
        ledgers.update(previous.get("ledgers") or {})
    for p in plan.plans:
        key = str(p.ledger_id)
        got = stats.get(p.ledger_id, {"rows": 0, "bytes": 0})
        record: dict[str, Any] = {
            "ledger_id": p.ledger_id,
            "state": p.state,
            "ctime": utc_iso(p.ctime_ms),
            "ctime_ms": p.ctime_ms,
            "date": utc_date(p.ctime_ms),
            "custom_metadata": dict(p.metadata),
            "segments": p.segments,
            "exported_at": now,
        }
        new_range = [[p.first, p.last]] if p.entries else []
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
    part = source.manifest(plan, reports, options.decode)
    this_export = {
        "at": utc_iso(int(started * 1000)),
        "seconds": round(seconds, 3),
        "master": master,
        "options": options.describe(source),
        "ledgers": [p.ledger_id for p in plan.plans],
        source.rows_are: sum(s["rows"] for s in stats.values()),
        "bytes": sum(s["bytes"] for s in stats.values()),
        "skipped": [left.to_json() for left in plan.skipped],
        **part.pop("export", {}),
    }
    history = list((previous or {}).get("exports") or []) if options.mode != "overwrite" else []
    history = (history + [this_export])[-_HISTORY:]
    return {
        "format": MANIFEST_FORMAT,
        "partition_by": source.partition_by,
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
        **part,  # columns, layout and the source's own sections
    }


def run_export(
    store,
    uri: str,
    source: ExportSource,
    options: ExportOptions,
    *,
    progress: ProgressCallback | None = None,
    info: Callable[[str], None] | None = None,
) -> ExportSummary:
    """Export what ``source`` selects; returns its summary (a topic's:
    :class:`~bkctl.export.summary.TopicExportSummary`)."""
    say = info or (lambda _msg: None)
    export = Export(source, options, uri)
    with LedgerReader.on_driver(export.settings, store) as reader:
        export.make_plan(store, reader)
    with export.out.locked():
        export.check()
        if progress is not None:
            progress(export.planned())
        master = options.master
        if export.to_read:
            t = time.monotonic()
            say(f"starting Spark ({master})...")
            spark, created = spark_session(master, options.spark_conf, quiet=options.quiet, verbose=options.verbose)
            master = spark.sparkContext.master
            export.timings["spark_start"] = time.monotonic() - t
            try:
                say(
                    f"exporting {sum(p.entries for p in export.to_read)} entries of {len(export.to_read)} ledgers "
                    f"in {len(export.plan.tasks)} tasks..."
                )
                write_all(spark, [export], progress, say)
            finally:
                if created:
                    stop_spark(spark)
        return export.complete(master)
