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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bkctl.wire.domain import ledger_plan
from bkctl.wire.text import utc_date, utc_iso

from .executor import DEFAULT_BATCH_SIZE, DEFAULT_READ_TIMEOUT, DEFAULT_READ_WINDOW, LedgerReader, ReadSettings
from .output import MANIFEST, OutputDir
from .source import ExportError, ExportSource, SourcePlan, TaskReport, Written
from .spark_session import spark_session, stop_spark

__all__ = ["ExportOptions", "ExportProgress", "run_export", "spark_error_cause"]

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


def _write(
    spark,
    settings: ReadSettings,
    staging: str,
    options: ExportOptions,
    source: ExportSource,
    plan: SourcePlan,
    progress: ProgressCallback | None,
    only: list[int] | None = None,
) -> list[TaskReport]:
    """Run the tasks of ``plan`` (those numbered ``only``, else all) into
    ``staging`` (in a thread, reporting task progress), then commit their
    files; returns what the tasks reported."""
    import functools
    import uuid

    from .writing import FileOptions, commit_files, run_task

    sc = spark.sparkContext
    group = f"bkctl-export-{os.getpid()}-{time.monotonic_ns()}"
    file_options = FileOptions(
        staging=staging,
        job=uuid.uuid4().hex,
        compression=options.compression,
        partition_by=source.partition_by,
        decode=options.decode,
        rows_per_file=options.rows_per_file,
    )
    tasks = list(enumerate(plan.tasks)) if only is None else [(i, plan.tasks[i]) for i in only]
    ranges, plans = [t for _, t in tasks], plan.plans
    task = functools.partial(run_task, source, settings, file_options)
    outcome: dict[str, Any] = {}

    def write() -> None:
        try:
            sc.setJobGroup(group, f"bkctl export to {options.out}", interruptOnCancel=True)
            outcome["reports"] = sc.parallelize(tasks, len(tasks)).map(task).collect()
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
    if "error" in outcome:
        error = outcome["error"]
        cause = spark_error_cause(error)
        if cause is not None:
            code = cause_exit_code(cause)
            if code is not None:  # a task's refused store or missing object: its own exit code
                from ..exitcodes import CommandError

                raise CommandError(f"the Spark job failed: {cause}", code) from error
            raise ExportError(f"the Spark job failed: {cause}") from error
        raise error
    reports: list[TaskReport] = outcome["reports"]
    commit_files(staging, [f for r in reports for f in r.files])
    if progress is not None:
        progress(
            ExportProgress("write", len(ranges), len(ranges), entries_total, entries_total, len(plans), len(plans))
        )
    return reports


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
        "skipped": plan.skipped,
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
) -> dict[str, Any]:
    """Export what ``source`` selects; returns the summary document
    (``out, ledgers, entries, bytes, files, seconds, master`` and more)."""
    started = time.time()
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    say = info or (lambda _msg: None)
    out = OutputDir(options.out)
    # refuse early (without creating anything) what cannot work: an
    # incompatible target, a ledger that does not exist
    out.check_target(options.mode, source.partition_by)
    settings = options.read_settings(uri)
    with LedgerReader.on_driver(settings, store) as reader:
        plan = source.plan(store, reader, options.split_entries)
    timings["plan"] = time.monotonic() - t0
    with out.locked():
        previous = out.check_target(options.mode, source.partition_by)
        if options.mode != "overwrite":
            source.refuse_mixing(plan, previous, out.path)
        to_read = [p for p in plan.plans if p.entries]
        master = options.master
        reports: list[TaskReport] = []
        if progress is not None:
            progress(
                ExportProgress(
                    "plan",
                    0,
                    len(plan.tasks),
                    0,
                    sum(r.entries for r in plan.tasks),
                    len(plan.plans) - len(to_read),
                    len(plan.plans),
                )
            )
        if to_read:
            t = time.monotonic()
            say(f"starting Spark ({master})...")
            spark, created = spark_session(master, options.spark_conf, quiet=options.quiet, verbose=options.verbose)
            master = spark.sparkContext.master
            timings["spark_start"] = time.monotonic() - t
            try:
                t = time.monotonic()
                say(
                    f"exporting {sum(p.entries for p in to_read)} entries of {len(to_read)} ledgers "
                    f"in {len(plan.tasks)} tasks..."
                )
                reports = _write(spark, settings, str(out.staging), options, source, plan, progress)
                timings["write"] = time.monotonic() - t
                again = source.redo(plan, reports)
                if again:  # tasks whose rows what the others read changes (a topic's transactions)
                    from .writing import remove_files

                    t = time.monotonic()
                    say(
                        f"reading {len(again)} of {len(plan.tasks)} tasks again: they hold messages of a "
                        "transaction that was aborted or is still open, which only the other tasks' entries "
                        "told..."
                    )
                    remove_files(out.staging, [f for r in reports if r.task in again for f in r.files])
                    reports = [r for r in reports if r.task not in again] + _write(
                        spark, settings, str(out.staging), options, source, plan, progress, only=again
                    )
                    timings["write_again"] = time.monotonic() - t
            finally:
                if created:
                    stop_spark(spark)
        t = time.monotonic()
        written = source.verify(plan, reports, out.staging)
        timings["verify"] = time.monotonic() - t
        t = time.monotonic()
        out.compose(options.mode, [p.ledger_id for p in plan.plans])
        files = _files_by_ledger(out.staging)
        seconds = time.monotonic() - t0
        out.finish(_manifest(previous, options, source, plan, written, reports, files, started, seconds, master))
        timings["commit"] = time.monotonic() - t
    seconds = time.monotonic() - t0
    summary = {
        "out": str(out.path),
        "ledgers": len(plan.plans),
        source.rows_are: sum(s["rows"] for s in written.stats.values()),
        "bytes": sum(s["bytes"] for s in written.stats.values()),
        "files": written.files,
        "seconds": round(seconds, 3),
        "master": master,
        "mode": options.mode,
        "partition_by": source.partition_by,
        "ledger_ids": [p.ledger_id for p in plan.plans],
        "skipped": plan.skipped,
        "manifest": str(out.path / MANIFEST),
        "timings": {k: round(v, 3) for k, v in timings.items()},
    }
    source.summary(plan, reports, summary)
    return summary
