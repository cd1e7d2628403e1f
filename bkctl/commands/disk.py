"""``bkctl disk``: where each bookie's disk space went (bkctl.ops.disk)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import click

from ..app import App
from ..completers import complete_bookie_id
from ..exitcodes import USAGE, CommandError
from ..ops.disk import BY
from ..render import emit, human_size, plural, table
from . import pass_app

if TYPE_CHECKING:
    from ..ops.disk import DiskReport


@click.command("disk")
@click.argument("bookie_id", metavar="[BOOKIE]", required=False, shell_complete=complete_bookie_id)
@click.option(
    "--by",
    type=click.Choice(BY),
    default="bookie",
    show_default=True,
    help="Also list the live data grouped by Pulsar tenant, namespace or topic (other ledgers by "
    "their 'application' metadata); bookie: one row per bookie only.",
)
@click.option(
    "--older-than",
    metavar="AGE",
    default="1h",
    show_default=True,
    help="Call unlisted Pulsar ledgers orphans only when created more than AGE ago (as `pulsar "
    "orphans`); younger ones are shown as not yet listed.",
)
@click.option(
    "--managed-ledgers",
    "base",
    metavar="PATH",
    help="Pulsar's managed-ledger root in ZooKeeper (default: managed-ledgers beside the ledger root).",
)
@click.option(
    "--offload-lag",
    metavar="AGE",
    default="4h",
    show_default=True,
    help="Count a ledger offloaded to tiered storage longer ago than AGE and still on the bookies "
    "as held twice (Pulsar's managedLedgerOffloadDeletionLagMs; 4h is its default).",
)
@pass_app
def disk(app: App, bookie_id: str | None, by: str, older_than: str, base: str | None, offload_lag: str):
    """Where each bookie's disk went: live data, orphans, garbage, journal.

    The first line answers the question: how much of the space the bookies
    use is live data, how much waits for compaction (and what to do about
    it), how much is deleted ledgers the next GC pass removes, how much is
    orphans.  Then, per bookie (or only BOOKIE): its filesystem's used and
    total space and its data attributed -- live ledger data from the
    metadata (each segment's entries whose write set includes the bookie, at
    the ledger's bytes per entry as stored: an estimate for open ledgers,
    whose length is read from their bookies), orphans (`pulsar orphans`'
    rule), what the bookie still counts live beyond that (deleted ledgers
    not yet collected), dead bytes in its entry logs by what would reclaim
    them (minor or major compaction, by each log's live ratio; the log
    being written), the journal and the index where the bookie reports them
    (bookied does, through its HTTP admin).  Entry-log
    figures come from bookied's gc_details; a Java bookie's HTTP admin has
    none: its used space is then split only into live data and the rest.
    What could not be read is said per bookie.

    Reads every ledger's metadata (one streaming walk; a progress bar on a terminal) and each bookie's HTTP admin;
    writes nothing.  Pulsar ledgers offloaded to tiered storage more than
    --offload-lag ago whose BookKeeper copy is still there are counted as
    held twice (a broker deletes that copy only past its deletion lag, when
    it trims).  --json: one document: summary, bookies (each with live,
    compaction, gc, unread, groups), groups, totals, ledgers, orphans,
    offloaded_twice (ledgers, length_bytes, stored_bytes,
    deletion_lag_seconds, ledger_ids).
    """
    from ..ops.disk import disk_report
    from ..ops.disk_offload import held_twice, summary_part
    from ..ops.ledger_meta import parse_duration

    try:
        age = parse_duration(older_than)
        lag = parse_duration(offload_lag)
    except ValueError as exc:
        raise CommandError(f"--older-than/--offload-lag: {exc}", USAGE) from None
    with app.walk_progress("reading ledger metadata") as progress:
        doc = disk_report(app.store, lambda: app.bk, bookie_id, by, base, older_than=age, progress=progress)
    twice = held_twice(app.store, base, lag)
    said = summary_part(twice)
    summary = "; ".join(filter(None, [doc.summary, said])) if said else doc.summary
    doc = replace(doc, offloaded_twice=twice, summary=summary)
    emit(app, doc, lambda: show(app, doc, older_than))


def _size(n) -> str:
    return "" if n is None else human_size(n)


def show(app: App, doc: DiskReport, older_than: str) -> None:
    app.console.print(doc.summary, highlight=False, soft_wrap=True)
    app.console.print()
    rows = []
    for b in doc.bookies:
        disk_text = "" if b.used_bytes is None else f"{_size(b.used_bytes)} / {_size(b.total_bytes)}"
        live = b.live
        rows.append(
            (
                b.bookie_id,
                b.state.value,
                disk_text,
                (_size(b.data_bytes) if b.data_bytes is not None else "?") if b.kind else "",
                _size(live.topics + live.applications + live.unlisted) if b.kind else "",
                _size(b.estimated_bytes) if b.estimated_bytes else "",
                _size(live.orphans) if b.kind else "",
                _size(b.awaiting_gc_bytes),
                _size(b.compaction.dead_bytes if b.compaction else None),
                _size(b.journal_bytes),
                _size(b.index_bytes),
                _size(b.other_files_bytes),
            )
        )
    table(
        app,
        [
            "bookie",
            "state",
            "fs used / total",
            "bookie data",
            "live",
            "of it open (est.)",
            "orphans",
            "awaiting GC",
            "compaction",
            "journal",
            "index",
            "other",
        ],
        rows,
    )
    for b in doc.bookies:
        c = b.compaction
        if c and c.entry_logs:
            lowest = "" if c.lowest_live_ratio is None else f", lowest live ratio {c.lowest_live_ratio:.2f}"
            app.console.print(
                f"{b.bookie_id}: {plural(c.entry_logs, 'entry log')} ({_size(c.entry_log_bytes)}{lowest}); "
                f"dead {_size(c.dead_bytes)}: {_size(c.below_minor_dead_bytes)} under the minor threshold "
                f"{b.minor_threshold:g}, {_size(c.below_major_dead_bytes)} under the major "
                f"{b.major_threshold:g}, {_size(c.above_major_dead_bytes)} over it, "
                f"{_size(c.active_log_dead_bytes)} in the log being written"
                + (" (taken to be the newest)" if c.active_assumed else "")
                + ("" if b.thresholds_reported else "; thresholds: the defaults (the bookie does not report its own)"),
                highlight=False,
                soft_wrap=True,
            )
        for what, why in b.unread.items():
            app.console.print(f"{b.bookie_id}: not read: {what}: {why}", highlight=False, soft_wrap=True)
    if doc.by != "bookie":
        app.console.print()
        table(
            app,
            [
                "kind",
                doc.by if doc.by != "topic" else "topic",
                "component",
                "ledgers",
                "length",
                "stored (all copies)",
                "open",
            ],
            [
                (
                    g.kind,
                    g.name,
                    g.component or "",
                    g.ledgers,
                    _size(g.length_bytes),
                    _size(g.stored_bytes),
                    g.open_ledgers or "",
                )
                for g in doc.groups
            ],
        )
    led, orph = doc.ledgers, doc.orphans
    note = f"{plural(led.walked, 'ledger')} read"
    if led.open_estimated:
        note += f"; {led.open_estimated} open (their size read from the bookies: an estimate)"
    if led.open_unknown:
        note += f"; {led.open_unknown} open ones not counted ({'; '.join(led.open_unknown_why)})"
    if led.unreadable:
        note += f"; {led.unreadable} whose metadata does not decode"
    note += f"; orphans: {orph.ledgers} (older than {older_than}; {orph.young} younger not judged)"
    app.console.print(note, highlight=False, soft_wrap=True)
