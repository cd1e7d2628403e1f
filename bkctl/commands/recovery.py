"""``bkctl recover`` and ``bkctl decommission``: re-replicate what lost or leaving bookies held."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import click

from ..app import App, confirm_destructive
from ..completers import complete_bookie_id, complete_down_bookie_id, complete_ledger_id
from ..render import emit, stream_table
from ..render import plural as _plural
from . import pass_app
from .progress import LedgerProgress

if TYPE_CHECKING:
    from bkctl.wire.client.ledger_report import LedgerReport

    from ..ops.decommission import Decommissioned
    from ..ops.recovery import RecoverTotals


def _fragment_rows(ledgers: Iterable[LedgerReport]):
    """Table rows; a failed ledger's row names its cause, its reason is said below the table
    (:class:`_Reasons`; ``--json`` has the whole error)."""
    from ..ops.recovery import cause_label

    def with_error(note: str, r: LedgerReport) -> str:
        if not r.error:
            return note
        return note + (f" ({cause_label(r.cause)})" if r.cause else f": {r.error}")

    for r in ledgers:
        if not r.fragments:
            yield (r.ledger_id, r.state, "", "", with_error(r.status, r))
            continue
        for f in r.fragments:
            end = "open" if f.last_entry_id is None else f.last_entry_id
            moves = ", ".join(f"{old} -> {new}" for old, new in f.replacements.items()) or ", ".join(f.lost)
            count = "?" if f.entries is None else f.entries
            note = r.status
            if r.closed_first:
                note += " (closed first)" if r.status != "planned" else " (would be closed first)"
            yield (r.ledger_id, f"{f.first_entry_id}..{end}", moves, count, with_error(note, r))


class _Reasons:
    """The failures' reasons as results stream past, each said once below the table with
    how many ledgers it stopped (the most common first, at most ``shown`` of them)."""

    def __init__(self, shown: int = 20):
        from collections import Counter

        self.counts: Counter[str] = Counter()
        self.shown = shown

    def passing(self, results: Iterable[LedgerReport]) -> Iterator[LedgerReport]:
        for r in results:
            if r.error:
                self.counts[r.reason or r.error] += 1
            yield r

    def say(self, app: App) -> None:
        for reason, n in self.counts.most_common(self.shown):
            app.console.print(f"{_plural(n, 'ledger')}: {reason}", markup=False)
        if len(self.counts) > self.shown:
            app.console.print(f"... and {len(self.counts) - self.shown} more reasons (--json has every ledger's)")


def _show_plan_or_result(
    app: App, results: Iterable[LedgerReport], totals: RecoverTotals, dry_run: bool, what: str
) -> None:
    """The rows as they come (a chunk at a time past 1,000), the reasons, the totals."""
    reasons = _Reasons()
    rows = _fragment_rows(reasons.passing(results))
    first = next(rows, None)
    if first is not None:
        stream_table(
            app, ["ledger", "entries", "lost -> replacement", "count", "status"], itertools.chain([first], rows)
        )
    reasons.say(app)
    t = totals
    if dry_run:
        app.console.print(
            f"dry run: {_plural(t.planned, 'ledger')} to recover off {what}, nothing changed"
            + (f"; {t.skipped} skipped" if t.skipped else "")
            + (f"; {t.failed} cannot be planned" if t.failed else "")
        )
    else:
        app.console.print(
            f"{_plural(t.recovered, 'ledger')} recovered off {what}, "
            f"{_plural(t.entries_copied, 'entry', 'entries')} copied"
            + (f"; {t.skipped} skipped" if t.skipped else "")
            + (f"; {t.failed} FAILED" if t.failed else "")
        )


def _stream_json(app: App, head: dict, results: Iterable[LedgerReport], tail: Callable[[], dict]) -> None:
    """One JSON document, the bytes :meth:`App.emit_json` writes for ``{**head, "ledgers":
    [...], **tail()}`` (keys sorted; ``head``'s sort before ``ledgers``, ``tail()``'s after),
    its ledgers written as they come."""
    from ..app import encode_json

    out = sys.stdout
    out.write("{" + "".join(f"{encode_json(k)}:{encode_json(v)}," for k, v in sorted(head.items())) + '"ledgers":[')
    for i, r in enumerate(results):
        out.write(("," if i else "") + encode_json(r))
    out.write("]" + "".join(f",{encode_json(k)}:{encode_json(v)}" for k, v in sorted(tail().items())) + "}\n")
    out.flush()


@click.command()
@click.argument("bookies", nargs=-1, required=True, metavar="BOOKIE...", shell_complete=complete_bookie_id)
@click.option(
    "--target",
    metavar="BOOKIE",
    shell_complete=complete_bookie_id,
    help="Copy to this bookie (default: a random writable bookie outside each ensemble).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option("--skip-open-ledgers", is_flag=True, help="Leave ledgers that are not closed alone.")
@click.option(
    "--parallel", type=click.IntRange(1, 64), default=4, show_default=True, help="Ledgers re-replicated at once."
)
@click.option(
    "--ledger",
    "ledger_id",
    type=click.IntRange(0),
    metavar="ID",
    shell_complete=complete_ledger_id,
    help="Only this ledger (exit 3 if it does not exist).",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0),
    default=0,
    metavar="BYTES_PER_S",
    help="At most this many bytes per second written to the replacements (default: no limit).",
)
@click.option(
    "--delete-cookie",
    is_flag=True,
    help="Afterwards, if every ledger was recovered, delete the bookies' cookies (not with --dry-run).",
)
@click.option("-f", "--force", is_flag=True, help="Do not ask.")
@pass_app
def recover(
    app: App,
    bookies: tuple[str, ...],
    target: str | None,
    dry_run: bool,
    skip_open_ledgers: bool,
    parallel: int,
    force: bool,
    ledger_id: int | None = None,
    rate: float = 0,
    delete_cookie: bool = False,
):
    """Re-replicate every entry the given (lost) bookies held (Java's `recover`).

    Re-replication copies fragments to other bookies; ledger recovery (fence
    and close, `ledger recover`) is a different operation, done here first
    for an open ledger whose last segment contains a lost bookie (skipped
    with --skip-open-ledgers).  Then for each such segment a replacement is
    chosen per lost bookie, every entry the lost bookie held (entry e lives
    on ensemble positions (e+i) mod E, i < Qw) is read from a surviving
    replica, verified, and written to the replacement; finally that segment
    of the metadata is updated by compare-and-set.  Metadata changes only
    after the copy, so an interrupted run leaves the ledger as it was and a
    second run completes it.  A ledger that fails is reported and the others
    go on; the exit status is 1 if any failed.  An entry none of whose copies
    is good (every surviving replica answered: none holds it, or each copy
    fails its digest) does not stop its ledger: the others are copied, the
    swap made, and the lost entry recorded as the autorecovery workers record
    theirs (`autorecovery status` and `ledger fsck` name it); the run then
    exits 9 (data lost), saying how many.  An id that is not a bookie id
    (host:1.2) is exit 2; a bookie with no cookie, no registration and in no
    ledger is exit 3; a running (registered) bookie is exit 4 unless
    --force (or --dry-run), and a warning with it.  One walk over every
    ledger finds the bookies' ledgers; then they are planned and copied 500
    at a time from their metadata read again pipelined, and printed as each
    500 are done (the table and the --json document alike; memory does not
    grow with their number).  On a terminal a bar shows the ledgers and
    bytes left, the rate and the ETA; nothing on a pipe.  A failed ledger's
    row names its cause; each reason is said once below the table, with how
    many ledgers it stopped.

    --dry-run prints, per ledger and segment, the lost bookie, the
    replacement it would get now and how many entries it held.  --json
    prints one summary: bookies, target, dry_run, skip_open_ledgers,
    ledgers[] (ledger_id, state, status, closed_first, fragments[]
    (first_entry_id, last_entry_id, lost, replacements, entries,
    entries_copied), entries_copied, lost_entries, bytes (about how many it moves),
    error, and for a ledger failed or skipped cause (no-bookie,
    copies-down, grace, metadata-gone, unreadable, open, other) and reason
    (one short line)) and totals (ledgers, recovered,
    planned, skipped, failed, entries_copied, lost_entries); with --delete-cookie also
    cookies {bookie: deleted | none | kept: registered}.
    """
    from ..exitcodes import CONFLICT, FAILED, FSCK_DATA_LOST, CommandError
    from ..ops.recovery import (
        RecoverTotals,
        check_bookie_ids,
        delete_cookies,
        live_bookies,
        lost_entries_line,
        rereplicate_stream,
        summary,
    )

    what = ", ".join(bookies)
    live = live_bookies(app.store, check_bookie_ids(bookies))
    if live and not (force or dry_run):
        raise CommandError(
            f"{', '.join(live)} {'is' if len(live) == 1 else 'are'} running (registered): "
            "stop it first, or give --force to copy its data anyway",
            CONFLICT,
        )
    for b in live:
        click.echo(
            f"bkctl: warning: bookie {b} is running (registered); its data is copied although it still serves it",
            err=True,
        )

    def confirm(ids: list[int]) -> None:
        confirm_destructive(app, f"Re-replicate {_plural(len(ids), 'ledger')} off {what}?", force, f"recover {what}")

    only = None
    if ledger_id is not None:
        app.store.ledgers.read(ledger_id)  # not found: exit 3
        only = [ledger_id]
    reporter = LedgerProgress(app, "re-replicating")
    bookies = tuple(check_bookie_ids(bookies))
    totals = RecoverTotals()
    # one streaming document (its rows printed as their chunk is done, never all held), unless
    # the cookies' fate, which sorts before the rows, is to be known first, or the shell pretty-prints
    keep = (delete_cookie and not dry_run) or (app.json and app.interactive and app.console.is_terminal)
    try:
        chunks = rereplicate_stream(
            app.bk,
            app.store,
            bookies,
            target=target,
            dry_run=dry_run,
            skip_open=skip_open_ledgers,
            parallel=parallel,
            confirm=confirm,
            on_start=reporter.start,
            on_ledger=lambda row: reporter.ledger(row.bytes),
            on_entry=reporter.entry,
            ledger_ids=only,
            rate=rate,
            progress=lambda: app.walk_progress("finding the ledgers on " + what),
        )
        next(chunks)  # the checks, the walk and the question: refused before any output

        def results() -> Iterator[LedgerReport]:
            for chunk in chunks:
                totals.add(chunk)
                yield from chunk

        if keep:
            doc = summary(list(bookies), list(results()), dry_run=dry_run, target=target, skip_open=skip_open_ledgers)
        elif app.json:
            _stream_json(
                app,
                {"bookies": list(bookies), "dry_run": dry_run},
                results(),
                lambda: {"skip_open_ledgers": skip_open_ledgers, "target": target, "totals": totals},
            )
        else:
            _show_plan_or_result(app, results(), totals, dry_run, what)
    finally:
        reporter.stop()
    if keep:
        if delete_cookie and not dry_run:
            retired = {} if doc.totals.failed or doc.totals.skipped else delete_cookies(app.store, doc.bookies)
            doc = replace(doc, cookies=retired)

        def human():
            _show_plan_or_result(app, doc.ledgers, doc.totals, dry_run, what)
            for b, outcome in (doc.cookies or {}).items():
                app.console.print(f"cookie of {b}: {outcome}")
            if delete_cookie and not dry_run and not doc.cookies:
                app.console.print("cookies kept: not every ledger was recovered")

        emit(app, doc, human)
        totals = doc.totals
    failed = f"{_plural(totals.failed, 'ledger')} could not be re-replicated" if totals.failed else ""
    if totals.lost_entries:
        raise CommandError(
            f"{lost_entries_line(totals.lost_entries)}" + (f"; {failed}" if failed else ""), FSCK_DATA_LOST
        )
    if failed:
        raise CommandError(failed, FAILED)


@click.command()
@click.argument("bookie", metavar="BOOKIE", shell_complete=complete_down_bookie_id)
@click.option(
    "--daemons/--no-daemons",
    "daemons",
    default=None,
    help="Let the autorecovery daemons copy (default when autorecovery is enabled and an auditor is "
    "elected), or copy from this process.",
)
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=3600,
    show_default=True,
    metavar="SECONDS",
    help="With the daemons: how long to wait for them to move every ledger.",
)
@click.option("--dry-run", is_flag=True, help="Make every check and show what would be re-replicated; change nothing.")
@click.option(
    "--parallel",
    type=click.IntRange(1, 64),
    default=8,
    show_default=True,
    help="Without the daemons: ledgers moved at once.",
)
@click.option(
    "--max-rate",
    metavar="BYTES_PER_S",
    default="0",
    help="Without the daemons: at most this many bytes per second written to the targets (10M, 512k; "
    "default: no limit).",
)
@click.option("-f", "--force", is_flag=True, help="Do not ask.")
@pass_app
def decommission(
    app: App,
    bookie: str,
    daemons: bool | None,
    wait: float,
    dry_run: bool,
    force: bool,
    parallel: int = 8,
    max_rate: str = "0",
):
    """Retire a stopped bookie: move its data off, then delete its cookie.

    The bookie must not be registered (exit 4: stop it first; one that is
    registered but does not answer was probably just killed: ZooKeeper keeps
    its registration until its session expires, and the message says so;
    --dry-run shows the plan of a running bookie too, saying it runs)
    and must be known to the cluster (a cookie or a ledger naming it; else
    exit 3).  When autorecovery is enabled and an auditor is elected, the
    autorecovery daemons copy its data, as Java's decommissionbookie lets
    them: the audit is triggered and the progress shown until no ledger
    names the bookie (exit 1 after --wait seconds, cookie kept; the global
    --timeout is, as everywhere, how long to wait for ZooKeeper).  While it
    waits it says so: on a terminal a bar with the ledgers and bytes left,
    the rate and the ETA, else progress lines on stderr (the start, each
    change of the count, and every 15 s what the ledgers left wait for, as
    `autorecovery status` says it: waiting for lostBookieRecoveryDelay, held
    while autorecovery is disabled, waiting for a worker, an open ledger
    waiting for its writer, being re-replicated by which worker, held after
    a failed attempt with the worker's reason).  Ledgers left at the end
    are listed, every one, in one short line each, grouped by cause: no
    bookie to copy to, every copy down, writer's grace period, metadata
    gone, an entry unreadable, or the repair state they wait in.  Otherwise (or --no-daemons)
    this process moves every replica on it as `drain` moves a running bookie's, through the
    same executor (the ledger's replication lock, the copy from the other copies, digests
    verified, one version-checked metadata write; --parallel moves at once, --max-rate):
    open ledgers using it in their last segment are recovered (fenced and closed) first,
    then the plan is carried out and the metadata scanned until no ledger names it (up to
    3 passes; no more once a pass moved none).  A decommission is the cluster's one
    running mover while it lasts: refused (exit 4, naming it) while a rebalance, a drain
    or another decommission runs; `bkctl rebalance --cancel` stops it (exit 1, cookie
    kept).  An entry with no good copy left does not stop its ledger: the others are
    copied, the swap made and the entry recorded lost, as `recover` does (exit 9, data
    lost, once the rest is done).  Ledgers with entries whose
    every copy is on the bookie (or on bookies down too) are said first, plan
    and failure alike: lost unless the bookie returns, with the way out (bring
    it back, or delete them and decommission again); the daemons are not
    waited for once only those are left.  Only then is its cookie deleted.  --dry-run makes the
    same checks and shows the ledgers that would move (locally: each move, the
    replacement and the entries it copies, the ledgers to close first); nothing changes.
    It names every ledger that would lose data -- an entry with no good copy off the
    bookie, found by `ledger fsck`'s data_lost rule (the surviving copies read and
    digest-checked) -- first, each with its entries, bookies and cause, and then exits 9
    (data lost); the --json rows say it in data_lost (null: none).  --json (printed on failure too,
    before the exit 1): bookie_id, mode (autorecovery or local), passes,
    ledgers[] (as `recover`; with the daemons ledger_id, status, and for a
    ledger left repair {state, text, worker, since, until, attempts, reason} -- the repair
    model of `autorecovery status` -- and error),
    entries_copied and lost_entries (null with the daemons), remaining_ledgers, left[]
    (ledger_id, cause, reason: each ledger left, grouped by cause, the lost
    ones first), lost[] (ledger_id, reason), registered (a dry run of a
    running bookie), cookie_deleted, dry_run, stopped (null, or why it stopped
    before the end: cancelled), error (null, or the failure's message, starting
    with the lost ledgers).
    """
    from bkctl.wire.rebalance.executor import Throttle

    from ..exitcodes import FAILED, FSCK_DATA_LOST, CommandError
    from ..ops.decommission import DecommissionMode
    from ..ops.decommission import decommission as run
    from ..ops.rebalance import parse_rate
    from ..ops.recovery import lost_entries_line

    rate = parse_rate(max_rate)

    def confirm(ids: list[int]) -> None:
        confirm_destructive(
            app,
            f"Move {_plural(len(ids), 'ledger')} off {bookie} and delete its cookie?",
            force,
            f"decommission {bookie}",
        )

    reporter = LedgerProgress(app, f"decommissioning {bookie}", lines=True)
    try:
        doc = run(
            app.bk,
            app.store,
            bookie,
            confirm=confirm,
            on_start=reporter.start,
            on_ledger=lambda _row: reporter.ledger(),  # its bytes were heard as copied
            on_bytes=reporter.copied,
            on_note=reporter.note,
            use_daemons=daemons,
            timeout=wait,
            dry_run=dry_run,
            placement=app.placement_policy(),
            throttle=Throttle(parallel, parallel, rate),
            progress=lambda: app.walk_progress(f"finding the ledgers on {bookie}"),
        )
    finally:
        reporter.stop()
    if dry_run:
        _show_decommission_plan(app, doc)
        if doc.lost:
            raise CommandError(
                f"dry run: {_plural(len(doc.lost), 'ledger')} of {bookie} would lose data "
                "(entries with no good copy off it: listed above); nothing changed",
                FSCK_DATA_LOST,
            )
        return
    lost = lost_entries_line(doc.lost_entries) if doc.lost_entries else ""
    if doc.error:
        emit(app, doc, lambda: _show_left(app, doc))
        raise CommandError(f"{lost}; {doc.error}" if lost else doc.error, FSCK_DATA_LOST if lost else FAILED)
    copied = (
        "by the autorecovery daemons"
        if doc.mode is DecommissionMode.AUTORECOVERY
        else f"{_plural(doc.entries_copied or 0, 'entry', 'entries')} copied"
    )
    emit(
        app,
        doc,
        lambda: app.console.print(
            f"bookie {bookie} decommissioned: {_plural(len(doc.ledgers), 'ledger')} moved, {copied}; "
            f"cookie {'deleted' if doc.cookie_deleted else 'not found'}"
        ),
    )
    if lost:
        raise CommandError(lost, FSCK_DATA_LOST)


def _show_left(app: App, doc: Decommissioned) -> None:
    """Every ledger a failed decommission left, one short line each, grouped by why."""
    from ..ops.recovery import cause_label

    cause = None
    for row in doc.left:
        if row.cause != cause:
            cause = row.cause
            n = sum(1 for r in doc.left if r.cause == cause)
            app.console.print(f"{cause_label(cause)} ({_plural(n, 'ledger')}):", markup=False)
        app.console.print(f"  {row.ledger_id}: {row.reason}", markup=False)


def _show_decommission_plan(app: App, doc: Decommissioned) -> None:
    from ..ops.decommission import ByTheDaemons, DecommissionMode, PlannedLedger
    from ..ops.recovery import lost_line

    def human():
        n = _plural(len(doc.remaining_ledgers), "ledger")
        if doc.lost:
            app.console.print(f"warning: {lost_line([r.ledger_id for r in doc.lost], doc.bookie_id)}", markup=False)
            for r in doc.lost:
                app.console.print(f"  {r.ledger_id}: {r.reason}", markup=False)
        if doc.registered:
            app.console.print(
                f"note: {doc.bookie_id} is registered (running): stop it before decommissioning it", markup=False
            )
        if doc.mode is DecommissionMode.AUTORECOVERY:
            by_daemons = [r for r in doc.ledgers if isinstance(r, ByTheDaemons)]
            if by_daemons:
                stream_table(app, ["ledger", "status"], ((r.ledger_id, r.status) for r in by_daemons))
            app.console.print(
                f"dry run: {n} to move off {doc.bookie_id} by the autorecovery daemons, then "
                "its cookie deleted; nothing changed"
            )
            return
        planned = [r.report for r in doc.ledgers if isinstance(r, PlannedLedger)]  # a local dry run's rows
        if planned:
            stream_table(app, ["ledger", "entries", "lost -> replacement", "count", "status"], _fragment_rows(planned))
        app.console.print(
            f"dry run: {n} to re-replicate off {doc.bookie_id} from this process, then its "
            "cookie deleted; nothing changed"
        )

    emit(app, doc, human)
