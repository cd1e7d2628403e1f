"""``bkctl bookie replace-id``, ``readonly``, ``gc``, ``state``, ``inspect`` and ``check``:
day-2 operations on one bookie, added to the ``bookie`` group in bkctl.cli."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from ..app import App, ProgressBar, confirm_destructive
from ..completers import complete_bookie_id, complete_ledger_id
from ..render import emit, table
from . import pass_app

if TYPE_CHECKING:
    from ..ops.bookie_http import GcRun
    from ..ops.bookies import BookieRow
    from ..ops.inspect import EntryKeys


@click.command("replace-id")
@click.argument("old", metavar="FROM", shell_complete=complete_bookie_id)
@click.argument("new", metavar="TO", shell_complete=complete_bookie_id)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Make every check of the real run, count the ledgers and segments that name FROM; change nothing.",
)
@click.option(
    "--allow-unknown-id",
    "allow_unknown",
    is_flag=True,
    help="Accept a TO that is not registered and has no cookie (a bookie not started yet).",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0),
    default=0,
    metavar="N",
    help="At most N ledger updates per second (default: no limit).",
)
@click.option("--parallel", type=click.IntRange(1, 64), default=1, show_default=True, help="Ledger updates at once.")
@click.option("--force", is_flag=True, help="Do not ask.")
@pass_app
def replace_id(
    app: App, old: str, new: str, dry_run: bool, allow_unknown: bool, rate: float, parallel: int, force: bool
):
    """Rewrite bookie id FROM to TO in every ledger's metadata (Java's updateledgers).

    Use it after a bookie got a new id (`cookie admin --hostname`, a new
    address) with its data.  Each segment naming FROM gets TO, by
    compare-and-set on the version just read (a concurrent change is
    re-read and retried).  Ledgers that no longer name FROM are left alone,
    so a second run, or a run after an interruption, finishes the job.  A
    segment that already names TO is a conflict: left unchanged, exit 4.
    FROM must not be registered (exit 4); TO must be a bookie id the cluster
    knows, registered or with a cookie (exit 3), unless --allow-unknown-id.
    --dry-run makes the same checks.  --json: from, to, dry_run,
    ledgers_scanned, ledgers[] (ledger_id, status: updated, planned,
    unchanged, deleted, conflict, failed; segments, error), totals
    (matched, updated, planned, unchanged, deleted, conflict, failed,
    segments).
    """
    from ..exitcodes import CONFLICT, FAILED, CommandError
    from ..ops.replace_id import Rewrite, replace_bookie_id

    bar: ProgressBar | None = None

    def start(n: int) -> None:
        nonlocal bar
        bar = app.progress(n, f"{old} -> {new}").__enter__()

    try:
        doc = replace_bookie_id(
            app.store,
            old,
            new,
            dry_run=dry_run,
            rate=rate,
            parallel=parallel,
            allow_unknown=allow_unknown,
            confirm=lambda n: confirm_destructive(
                app, f"Rewrite {old} to {new} in {n} ledgers?", force, f"rewrite {old} in {n} ledgers"
            ),
            on_start=start,
            on_ledger=lambda _row: bar.advance(1) if bar is not None else None,
        )
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
    t = doc.totals

    def human():
        bad = [r for r in doc.ledgers if r.status in (Rewrite.CONFLICT, Rewrite.FAILED)]
        if bad:
            table(app, ["ledger", "status", "error"], [(r.ledger_id, r.status.value, r.error) for r in bad])
        if dry_run:
            app.console.print(
                f"dry run: {t.planned} ledgers ({t.segments} segments) name {old}; "
                f"nothing changed ({doc.ledgers_scanned} ledgers scanned)"
            )
        else:
            app.console.print(
                f"{t.updated} ledgers ({t.segments} segments) rewritten from {old} to {new}"
                + (f"; {t.unchanged + t.deleted} already done or deleted" if t.unchanged + t.deleted else "")
                + (f"; {t.conflict} conflicts" if t.conflict else "")
                + (f"; {t.failed} FAILED" if t.failed else "")
            )

    emit(app, doc, human)
    if t.failed:
        raise CommandError(f"{t.failed} ledgers could not be updated", FAILED)
    if t.conflict:
        raise CommandError(f"{t.conflict} ledgers already name {new} in a segment that names {old}", CONFLICT)


# -- capacity -------------------------------------------------------------------------------


def list_with_disk(app: App, rows: list[BookieRow]) -> None:
    """`bookie list --disk` of the bookies ``rows`` (from ``ops.bookies.list_bookies``)."""
    from ..ops.bookies import Registration
    from ..ops.capacity import BookieCapacity, with_disk
    from ..render import human_size as _size

    asked = sum(1 for r in rows if r.state is not Registration.DOWN)
    with app.progress(asked, "asking bookies") as bar:
        doc = with_disk(app.bk, rows, on_answer=bar.advance)

    def human():
        def line(r: BookieCapacity):
            if r.total_bytes is None or r.free_bytes is None:
                return (r.bookie_id, r.state.value, "", "", "", r.error or "")
            return (r.bookie_id, r.state.value, _size(r.total_bytes), _size(r.free_bytes), f"{r.used_percent:.1f}%", "")

        t = doc.total
        rows_out = [line(r) for r in doc.bookies]
        rows_out.append(
            (
                f"total ({t.answered}/{t.bookies} answered)",
                "",
                _size(t.total_bytes) if t.answered else "",
                _size(t.free_bytes) if t.answered else "",
                f"{t.used_percent:.1f}%" if t.used_percent is not None else "",
                "",
            )
        )
        table(app, ["bookie", "state", "total", "free", "used", "error"], rows_out)

    if app.json:  # a list: JSON lines, the totals last
        for row in doc.bookies:
            app.emit_json(row)
        app.emit_json({"total": doc.total})
    else:
        human()
    if asked and not doc.total.answered:
        from ..exitcodes import UNREACHABLE, CommandError

        first = next((r.error for r in doc.bookies if r.error), None)
        raise CommandError(f"no bookie answered (0/{asked})" + (f": {first}" if first else ""), UNREACHABLE)


# -- runtime control through the bookie's HTTP admin -------------------------------------------

_HTTP = click.option(
    "--http",
    metavar="HOST:PORT",
    help="The bookie's HTTP admin address (default: from its registration's http endpoint).",
)


@click.command("state")
@click.argument("bookie_id", metavar="BOOKIE", shell_complete=complete_bookie_id)
@_HTTP
@pass_app
def state(app: App, bookie_id: str, http: str | None):
    """A running bookie's state from its HTTP admin (GET /api/v1/bookie/state).

    Not registered: exit 3; no HTTP endpoint or an error answer: exit 1; not
    answering: exit 5.  --json: bookie_id, http, state {running, readOnly,
    shuttingDown, availableForHighPriorityWrites, ...; bookied adds
    readOnlyReasons: cause -> why, while read-only}, registration.
    """
    from ..ops.bookie_http import state as get_state
    from ..render import fields

    doc = get_state(app.store, bookie_id, http)

    def value(v):  # bookied's readOnlyReasons: cause -> why
        return "; ".join(f"{cause}: {why}" for cause, why in v.items()) if isinstance(v, dict) else v

    emit(
        app,
        doc,
        lambda: fields(
            app,
            [("bookie", bookie_id), ("http", doc.http), ("registration", doc.registration.value)]
            + [(k, value(v)) for k, v in doc.state.items()],
        ),
    )


@click.command("readonly")
@click.argument("bookie_id", metavar="BOOKIE", shell_complete=complete_bookie_id)
@click.argument("mode", type=click.Choice(["on", "off"]))
@_HTTP
@pass_app
def readonly(app: App, bookie_id: str, mode: str, http: str | None):
    """Turn a running bookie read-only (on) or writable again (off), through its HTTP admin.

    PUT /api/v1/bookie/state/readonly, then waits (up to 10 s) until the
    registration in ZooKeeper shows it.  A bookie that refuses (forced
    read-only, full disk, failed journal): exit 1 with its reason.  --json:
    bookie_id, http, read_only, registration.
    """
    from bkctl.wire.metadata.registration_state import RegistrationState

    from ..exitcodes import FAILED, CommandError
    from ..ops.bookie_http import set_readonly

    doc = set_readonly(app.store, bookie_id, mode == "on", http)
    emit(
        app,
        doc,
        lambda: app.console.print(
            f"bookie {bookie_id} is {'read-only' if doc.read_only else 'writable'} "
            f"(registered as {doc.registration.value})"
        ),
    )
    if doc.registration is not (RegistrationState.READ_ONLY if mode == "on" else RegistrationState.WRITABLE):
        raise CommandError(f"the registration of {bookie_id} still says {doc.registration.value}", FAILED)


@click.command("gc")
@click.argument("bookie_id", metavar="BOOKIE", shell_complete=complete_bookie_id)
@click.option(
    "--major",
    "kind",
    flag_value="major",
    default=None,
    help='Only major compaction (body {"forceMajor": true, "forceMinor": false}).',
)
@click.option("--minor", "kind", flag_value="minor", help="Only minor compaction.")
@click.option("--wait", is_flag=True, help="Wait until the pass is over (bookied only), then show the status.")
@click.option(
    "--wait-timeout",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="How long --wait waits (exit 1 after it). The global --timeout is ZooKeeper's, as everywhere.",
)
@click.option("--status", "status_only", is_flag=True, help="Only show the garbage collector's status.")
@_HTTP
@pass_app
def gc(
    app: App, bookie_id: str, kind: str | None, wait: bool, wait_timeout: float, status_only: bool, http: str | None
):
    """Force garbage collection on a running bookie (PUT /api/v1/bookie/gc), or show its status.

    A forced pass removes deleted ledgers, then runs major compaction (or, with --minor, minor
    compaction; the bookie's thresholds apply, and forceAllowCompaction when its intervals are 0).
    The status: what the collector does now (collecting deleted ledgers, minor or major
    compacting, idle), last and next runs, compactions (the last one that reclaimed space, and
    the last pass when it reclaimed nothing: how many logs were below the threshold, what
    stopped it, the time spent on the rate limit), bytes reclaimed, entries moved, the entry
    logs' live ratio, and where dead data stays and why: the entry log being written (it is
    compacted only after it rolls at logSizeLimit, 1 GiB by default, so a quiet bookie keeps
    up to that much dead data), live ratios not below the thresholds, compaction not periodic
    or suspended, a log that could not be reclaimed; damaged records compaction met.  With --http HOST:PORT nothing else is
    needed (no ZooKeeper, no cluster); without it the address is read from the bookie's
    registration.  --wait says what the collector does while it waits (a line on stderr at each
    change when stderr is not a terminal).  --json (on a --wait that runs out too, before the
    exit 1): bookie_id, http, triggered, message, kind, is_in_force_gc, status (GET
    /api/v1/bookie/gc), details (Java's gc_details list), error, no_compaction (why the
    forced pass compacts nothing, as bookied says: its intervals, thresholds and
    forceAllowCompaction; null when it compacts or the bookie does not say).
    """
    from ..exitcodes import FAILED, USAGE, CommandError
    from ..ops.bookie_http import gc as run_gc
    from ..ops.bookie_http import gc_activity

    if status_only and (kind or wait):
        raise CommandError("--status only reads the status: no --major, --minor or --wait with it", USAGE)
    store = None if http else app.store
    if wait:
        label = f"garbage collection of {bookie_id}"
        with app.progress(None, f"{label}: triggered", lines=True) as bar:
            doc = run_gc(
                store,
                bookie_id,
                http=http,
                kind=kind,
                wait=wait_timeout,
                on_status=lambda st: bar.update(description=f"{label}: {gc_activity(st)}"),
            )
    else:
        doc = run_gc(store, bookie_id, status_only, http, kind=kind)
    emit(app, doc, lambda: _print_gc(app, bookie_id, doc))
    if doc.error:
        raise CommandError(doc.error, FAILED)


#: how many entry logs holding dead data ``bookie gc --status`` names (the most dead data first)
KEPT_SHOWN = 3


def _pass_limits(run: dict) -> str:
    """What bounded a compaction pass: its time limit, its rate limit."""
    out = ""
    if run.get("stoppedBy"):
        out += f"; stopped: {run['stoppedBy']}"
    if run.get("throttledMs"):
        out += f"; {run['throttledMs'] / 1000:.1f} s waiting for the rate limit (compactionRateBy*)"
    return out


def _print_gc(app: App, bookie_id: str, doc: GcRun) -> None:
    from ..ops.bookie_http import gc_activity
    from ..render import fields, human_size, human_time, plural

    st, details = doc.status, doc.details
    d = details[0] if isinstance(details, list) and details and isinstance(details[0], dict) else {}
    pairs = [("bookie", bookie_id)]
    if doc.triggered:
        pairs.append(
            (
                "gc",
                f"triggered{' (' + doc.kind + ' compaction only)' if doc.kind else ''}"
                f"{', over' if st.get('gcRuns') is not None and not st.get('gcRunning') else ''}",
            )
        )
    if doc.no_compaction:
        pairs.append(("compaction", f"none: {doc.no_compaction} (only deleted ledgers were collected)"))
    pairs.append(("in forced gc", "yes" if doc.is_in_force_gc else "no"))
    if "gcRunning" in st:
        pairs.append(("state", gc_activity(st)))
    if "gcRuns" in st:
        pairs.append(
            (
                "last gc",
                f"{human_time(st.get('lastGcTime')) or 'none yet'} "
                f"({plural(st['gcRuns'], 'run')}, {plural(st.get('ledgersRemoved', 0), 'ledger')} "
                "removed)",
            )
        )
        pairs.append(("next gc", human_time(st.get("nextGcTime"))))
    for kind in ("major", "minor"):
        count = d.get(f"{kind}CompactionCounter", st.get(f"{kind}CompactionCounter"))
        if count is None:
            continue
        text = plural(count, "run")
        if count:
            text += f", last {human_time(d.get(f'last{kind.title()}CompactionTime'))}"
        nxt = st.get(f"next{kind.title()}CompactionTime")
        if nxt:
            text += f", next {human_time(nxt)}"
        elif "gcRuns" in st:
            text += ", not periodic"
        if st.get(f"{kind}CompactionSuspended"):
            text += " (suspended: disk nearly full)"
        pairs.append((f"{kind} compaction", text))
    nearly = st.get("nearlyEmptyCompactionCounter")
    rules = []
    if st.get("nearlyEmptyCompactionThreshold"):
        rules.append(f"below {st['nearlyEmptyCompactionThreshold']:g} live")
    if st.get("settledCompactionThreshold"):
        rules.append(
            f"settled below {st['settledCompactionThreshold']:g} live (live bytes unchanged for "
            f"{st.get('settledCompactionDelayMs', 0) / 1000:g} s)"
        )
    if nearly is not None and rules:
        pairs.append(
            (
                "nearly empty compaction",
                f"{plural(nearly, 'run')}, at any pass without another, of the logs over half "
                f"logSizeLimit {' or '.join(rules)} (bookied's)",
            )
        )
    last = st.get("lastCompaction")
    if last:
        pairs.append(
            (
                "last compaction",
                f"{last['kind']}, {human_time(last.get('timeMs'))}, "
                f"{plural(last['logsCompacted'], 'log')} compacted, "
                f"{plural(last['entriesMoved'], 'entry', 'entries')} "
                f"({human_size(last['bytesMoved'])}) moved, "
                f"{human_size(last['reclaimedBytes'])} reclaimed",
            )
        )
    run = st.get("lastCompactionRun")
    if run and run != last:
        text = (
            f"{run['kind']}, {human_time(run.get('timeMs'))}, {run['logsCompacted']} of "
            f"{plural(run.get('candidateLogs', 0), 'log')} below the threshold compacted, "
            f"{human_size(run['reclaimedBytes'])} reclaimed"
        )
        pairs.append(("last compaction pass", text + _pass_limits(run)))
    if "entriesMoved" in st:
        deleted, compacted = st.get("logsDeleted"), st.get("logsCompacted")
        pairs.append(
            (
                "reclaimed",
                f"{human_size(st.get('reclaimedSpaceViaDeletes'))} by deleting "
                f"{'logs' if deleted is None else plural(deleted, 'log')} whole (nothing live "
                f"left), {human_size(st.get('reclaimedSpaceViaCompaction'))} by compacting "
                f"{'logs' if compacted is None else plural(compacted, 'log')}",
            )
        )
        pairs.append(
            ("moved", f"{plural(st['entriesMoved'], 'entry', 'entries')} ({human_size(st.get('bytesMoved'))})")
        )
    logs = d.get("entryLogs")
    if isinstance(logs, list):
        size = sum(log.get("sizeBytes", 0) for log in logs)
        live = sum(log.get("liveBytes", 0) for log in logs)
        lowest = min((log.get("liveRatio", 1.0) for log in logs), default=None)
        pairs.append(
            (
                "entry logs",
                f"{len(logs)}, {human_size(live)} live of {human_size(size)}"
                + (f", lowest live ratio {lowest:.2f}" if lowest is not None else ""),
            )
        )
        kept = sorted(
            (log for log in logs if log.get("keptBecause")),
            key=lambda log: log.get("liveBytes", 0) - log.get("sizeBytes", 0),
        )
        for log in kept[:KEPT_SHOWN]:
            dead = max(0, log.get("sizeBytes", 0) - log.get("liveBytes", 0))
            pairs.append(
                (
                    "dead data kept",
                    f"{human_size(dead)} in entry log {log['logId']}"
                    f"{' (active)' if log.get('active') else ''}: {log['keptBecause']}",
                )
            )
        if len(kept) > KEPT_SHOWN:
            pairs.append(
                (
                    "dead data kept",
                    f"... and in {plural(len(kept) - KEPT_SHOWN, 'more log')} "
                    "(--json: details[0].entryLogs[].keptBecause)",
                )
            )
    if st.get("damagedRecordCount"):
        last = st["damagedRecords"][-1] if st.get("damagedRecords") else None
        text = plural(st["damagedRecordCount"], "record")
        if last:
            dropped = ", ".join(f"{lid}/{eid}" for lid, eid in last["droppedEntries"])
            text += (
                f"; last: entry log {last['logId']} offset {last['offset']} ({last['reason']}"
                + (f"; live entries dropped: {dropped}" if dropped else "")
                + ")"
            )
        pairs.append(("damaged", text))
    fields(app, pairs)


# -- on-disk inspection of a stopped bookie -----------------------------------------------------


@click.group("inspect")
def inspect():
    """Read a stopped bookie's files (Java's and bookied's formats); nothing is written.

    Java: journal *.txn, entry logs *.log, InterleavedLedgerStorage index
    xx/yy/*.idx, lastMark; bookied: *.bjn, *.bel, index.lmdb,
    bookied.lastmark.  DbLedgerStorage's RocksDB index (ledgers/,
    locations/) is read through the optional rocksdb extra (pip install
    'bkctl[rocksdb]'; without it: exit 1 saying so), opened read-only.
    --json prints JSON lines, one per record.
    """


_INSPECT_CONF = click.option(
    "-c",
    "--conf",
    "conf",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="The bookie's bk_server.conf (its directories are read).",
)
_LEDGER = click.option(
    "--ledger",
    "ledger",
    type=click.IntRange(0),
    metavar="ID",
    shell_complete=complete_ledger_id,
    help="Only this ledger.",
)
_ENTRY = click.option("--entry", "entry", type=click.IntRange(0), metavar="ID", help="Only this entry (with --ledger).")
_DIGEST = click.option(
    "--digest",
    type=click.Choice(["crc32", "crc32c", "mac", "dummy"], case_sensitive=False),
    help="The ledgers' digest type: strip the digest and show payloads as text.",
)


def _stream(app: App, rows, columns: list[str], line) -> int:
    """JSON lines, or a table of ``line(row)``; returns the number of rows."""
    n = 0
    if app.json:
        for row in rows:
            app.emit_json(row)
            n += 1
        return n
    out = []
    for row in rows:
        out.append(line(row))
    table(app, columns, out)
    return len(out)


def _payload(row: EntryKeys) -> str:
    """An inspected record's entry for the table: its payload, the start of its body (or of a
    special record's data), or the error it read with."""
    if row.error is not None:
        return f"ERROR: {row.error}"
    if row.payload is not None:
        return row.payload
    if row.body is not None:
        return row.body[:48] + ("..." if len(row.body) > 48 else "")
    return (getattr(row, "data", None) or "")[:48]


def _dirs(conf: str):
    from ..ops.bookie_conf import bookie_dirs

    return bookie_dirs(conf, need_id=False)  # files only: the conf may be another host's


@inspect.command("journal")
@_INSPECT_CONF
@_LEDGER
@_ENTRY
@_DIGEST
@pass_app
def inspect_journal(app: App, conf: str, ledger: int | None, entry: int | None, digest: str | None):
    """Journal records: entries, master keys, fences, explicit LACs (file, offset, ledger, entry, kind).

    --json lines: file, format (java|bookied), version, offset, ledger_id,
    entry_id (null for special records), kind (entry, master_key, fence,
    explicit_lac, ...), and for entries size, lac, length and body (hex; with
    --digest: payload as text), else data (hex).
    """
    from ..ops import inspect as ops

    ops.check_filters(ledger, entry)
    _stream(
        app,
        ops.journal(_dirs(conf), ledger, entry, digest),
        ["file", "offset", "ledger", "entry", "kind", "size", "payload"],
        lambda r: (
            os.path.basename(r.file),
            r.offset,
            r.ledger_id,
            "" if r.entry_id is None else r.entry_id,
            r.kind,
            "" if r.size is None else r.size,
            _payload(r),
        ),
    )


@inspect.command("entrylog")
@_INSPECT_CONF
@_LEDGER
@_ENTRY
@_DIGEST
@pass_app
def inspect_entrylog(app: App, conf: str, ledger: int | None, entry: int | None, digest: str | None):
    """Entries in the entry logs, in file order (Java's readlog).

    --json lines: file, format, offset (Java: the location offset, just
    past the size field; bookied: the record's), ledger_id, entry_id, state
    (bookied: live; stale, a deleted ledger's or a copy that compaction or a
    re-add replaced; uncommitted, a crash's leftover removed at the next
    start), size, lac, length, body (hex) or with --digest payload.
    """
    from ..ops import inspect as ops

    ops.check_filters(ledger, entry)
    _stream(
        app,
        ops.entrylog(_dirs(conf), ledger, entry, digest),
        ["file", "offset", "ledger", "entry", "state", "lac", "size", "payload"],
        lambda r: (
            os.path.basename(r.file),
            r.offset,
            r.ledger_id,
            r.entry_id,
            getattr(r, "state", None) or "",
            "" if r.lac is None else r.lac,
            r.size,
            _payload(r),
        ),
    )


@inspect.command("index")
@_INSPECT_CONF
@_LEDGER
@_ENTRY
@_DIGEST
@pass_app
def inspect_index(app: App, conf: str, ledger: int | None, entry: int | None, digest: str | None):
    """The ledger index: one row per ledger, or with --ledger one per entry with its location
    and the entry read from there.

    --json lines, per ledger: format, file, ledger_id, fenced, master_key,
    explicit_lac, entries, first_entry_id, last_entry_id; per entry:
    format, dir, file, ledger_id, entry_id, location {log_id, offset},
    size, lac, length, body or payload (or error).
    """
    from ..ops import inspect as ops

    ops.check_filters(ledger, entry)
    dirs = _dirs(conf)
    if ledger is None:
        _stream(
            app,
            ops.index(dirs),
            ["ledger", "format", "fenced", "entries", "first", "last"],
            lambda r: (r.ledger_id, r.format, r.fenced, r.entries, r.first_entry_id, r.last_entry_id),
        )
    else:
        _stream(
            app,
            ops.index(dirs, ledger, entry, digest),
            ["ledger", "entry", "format", "location", "payload"],
            lambda r: (
                r.ledger_id,
                r.entry_id,
                r.format,
                f"{r.location['log_id']:x}:{r.location['offset']}",
                _payload(r),
            ),
        )


@inspect.command("lastmark")
@_INSPECT_CONF
@pass_app
def inspect_lastmark(app: App, conf: str):
    """The journal position the ledger storage is checkpointed to (Java's lastMark files,
    bookied's bookied.lastmark).  --json lines: file, format, journal_file_id, journal_file, offset."""
    from ..ops import inspect as ops

    _stream(
        app,
        ops.lastmark(_dirs(conf)),
        ["file", "journal file", "offset"],
        lambda r: (r.file, r.journal_file, r.offset),
    )


@inspect.command("files")
@_INSPECT_CONF
@pass_app
def inspect_files(app: App, conf: str):
    """Every file in the bookie's directories with its kind and format (Java's listfilesondisc).
    --json lines: dir, path, name, kind, format, size."""
    from ..ops import inspect as ops

    _stream(
        app,
        ops.files(_dirs(conf)),
        ["dir", "file", "kind", "format", "size"],
        lambda r: (r.dir, r.name, r.kind, r.format, r.size),
    )


@click.command("check")
@_INSPECT_CONF
@click.option("--offline", is_flag=True, help="Do not read ledger metadata: check ids only, no digests.")
@pass_app
def check(app: App, conf: str, offline: bool):
    """Local consistency check of a stopped bookie (Java's localconsistencycheck).

    Every indexed entry is read through its location; its header must name
    the indexed ledger and entry, and its digest must verify with the
    ledger's digest type and password, read from the cluster's metadata
    (entries of ledgers without metadata, or with --offline, are counted
    unverified).  bookied entry logs its index does not know (a flush or a
    compaction killed before its commit; removed at the bookie's next start)
    are listed, not counted bad.  bookied entry logs are also scanned as
    compaction scans them: a damaged record (bytes that are not a valid
    record; the scan goes on past it) is listed with its log and offset, and
    is also a bad entry when the index points at it.  Exit 0 when no entry
    is bad, 1 otherwise.  --json: entries, ledgers, ok, unverified, bad,
    problems [{ledger_id, entry_id, format, location, error}],
    uncommitted_logs, damaged_records [{file, log_id, offset, length,
    ledger_id, entry_id, reason, live}].
    """
    from ..exitcodes import FAILED, CommandError
    from ..ops import inspect as ops

    dirs = _dirs(conf)
    if not app.metadata_uri and dirs.metadata_uri:
        app.metadata_uri = dirs.metadata_uri
    store = None if offline or not app.metadata_uri else app.store
    bar: ProgressBar | None = None

    def total(n: int) -> None:
        nonlocal bar
        bar = app.progress(n, "checking entries").__enter__()

    try:
        doc = ops.check(dirs, store, on_total=total, on_entry=lambda: bar.advance(1) if bar is not None else None)
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)

    def human():
        if doc.problems:
            table(
                app,
                ["ledger", "entry", "format", "error"],
                [(p.ledger_id, p.entry_id, p.format, p.error) for p in doc.problems],
            )
        app.console.print(
            f"{doc.entries} entries of {doc.ledgers} ledgers: {doc.ok} ok, "
            f"{doc.unverified} unverified (no metadata), {doc.bad} bad"
        )
        for path in doc.uncommitted_logs:
            app.console.print(
                f"{path}: not committed to the index (a flush or compaction cut short); "
                "the bookie removes it when it starts"
            )
        for r in doc.damaged_records:
            claims = f", header says entry {r.ledger_id}/{r.entry_id}" if r.ledger_id is not None else ""
            app.console.print(
                f"{r.file}: damaged record at offset {r.offset} ({r.length} bytes, "
                f"{r.reason}{claims}; {'live: a bad entry' if r.live else 'not live'}); "
                "compaction moves the records after it and reclaims the log"
            )

    emit(app, doc, human)
    if doc.bad:
        raise CommandError(f"{doc.bad} entries are bad", FAILED)
