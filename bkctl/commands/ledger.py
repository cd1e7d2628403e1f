"""``bkctl ledger ...``: the group, and the commands that read or change the metadata only: list, show,
delete (create, add, read, close, fence, recover and tail, which go through the client, are in
:mod:`.ledger_client`, added to the group in bkctl.cli)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ..app import App, confirm_destructive
from ..completers import complete_bookie_id, complete_ledger_id
from ..exitcodes import CONFLICT, NOT_FOUND, USAGE, CommandError
from ..render import emit, fields, human_size, human_time, plural, stream_table, table
from . import LEDGER_ID, pass_app
from .ledger_client import drop_held

if TYPE_CHECKING:
    from ..ops.ledgers import LedgerInfo, LedgerRow

STATES = click.Choice(["open", "in_recovery", "closed"], case_sensitive=False)


@click.group()
def ledger():
    """Ledgers: create, write, read, close, fence, recover, list, show, delete."""


@ledger.command("list")
@click.option("--state", type=STATES, help="Only ledgers in this state.")
@click.option(
    "--bookie", metavar="BOOKIE", shell_complete=complete_bookie_id, help="Only ledgers with a segment on this bookie."
)
@click.option(
    "--meta",
    "meta",
    multiple=True,
    metavar="KEY=GLOB",
    help="Only ledgers whose custom metadata has KEY matching GLOB (repeatable; all must match), "
    "e.g. --meta 'pulsar/managed-ledger=tenant/ns/persistent/topic*'.",
)
@click.option(
    "--min-size",
    metavar="SIZE",
    help="Only ledgers of at least SIZE bytes (512k, 10M, 1G; the metadata's length, known once closed).",
)
@click.option("--older-than", metavar="AGE", help="Only ledgers created more than AGE ago (90s, 30m, 1h, 7d, 2w).")
@click.option("--open-longer-than", metavar="AGE", help="Only OPEN ledgers created more than AGE ago.")
@click.option(
    "--totals",
    "with_totals",
    is_flag=True,
    help='End with the totals (count, entries, bytes); with --json a last line {"totals": ...}.',
)
@click.option(
    "--not-adhering",
    is_flag=True,
    help="Only ledgers with a segment whose ensemble breaks the placement policy (--placement; "
    "with --json, not_adhering lists those segments' first entries).",
)
@pass_app
def ledger_list(
    app: App,
    state: str | None,
    bookie: str | None,
    meta: tuple[str, ...],
    min_size: str | None,
    older_than: str | None,
    open_longer_than: str | None,
    with_totals: bool,
    not_adhering: bool,
):
    """Ledger ids in ascending order (with details when filtering).

    With a filter (--state, --bookie, --meta, --min-size, --older-than,
    --open-longer-than) a table of the matching ledgers, ending with the
    totals: count, entries (of closed ledgers) and bytes (their length); an
    open ledger's "last entry" is its last add confirmed, read from its
    bookies (marked "LAC"), since its metadata says -1 until it is closed.
    The bookies column is in ensemble order (the first segment's ensemble,
    then bookies later segments brought in).  --json always prints JSON lines with every ledger's metadata, as
    `ledger show --json` does (last_add_confirmed included).  With
    --not-adhering, only ledgers with a segment whose ensemble breaks the
    placement policy in use (--placement), each with not_adhering: those
    segments' first entries.
    """
    from ..ops.ledgers import list_ledgers

    match = _ledger_filter(meta, min_size, older_than, open_longer_than)
    if with_totals and match is None:
        match = _every_ledger  # totals need every ledger's metadata
    details = app.json or state is not None or bookie is not None or match is not None or not_adhering
    with app.walk_progress("reading ledger metadata") as progress:
        rows = list_ledgers(
            app.store,
            state,
            bookie,
            match,
            details=details,
            placement=app.placement_policy() if not_adhering else None,
            lacs=(lambda: app.bk) if details else None,
            protocol=app.protocol,
            progress=progress,
        )
        _print_listing(app, rows, state, bookie, match, not_adhering, with_totals)


def _print_listing(app: App, rows, state, bookie, match, not_adhering: bool, with_totals: bool) -> None:
    """Print the listing as it streams in: JSON lines, ids, or a table and its totals."""
    from ..ops.ledger_meta import Totals

    seen = Totals()
    rows = map(seen.add, rows)
    if app.json:  # a stream: JSON lines, one per ledger
        for row in rows:
            app.emit_json(row, flush=False)
        if with_totals:
            app.emit_json({"totals": seen})
        return
    if state is None and bookie is None and match is None and not not_adhering:
        for row in rows:
            click.echo(row.ledger_id)
        return
    stream_table(
        app,
        ["ledger", "state", "E/Qw/Qa", "last entry", "length", "created", "bookies"],
        (_row(r) for r in rows),
    )
    app.console.print(
        f"{plural(seen.count, 'ledger')}, {plural(seen.entries, 'entry', 'entries')}, {human_size(seen.bytes)}"
    )


def _ledger_filter(meta, min_size, older_than, open_longer_than):
    """The metadata filter of `ledger list`, or None; bad values are usage errors."""
    from ..ops.ledger_meta import LedgerFilter, parse_duration, parse_meta_filters, parse_size

    try:
        f = LedgerFilter(
            tuple(parse_meta_filters(meta)),
            None if min_size is None else parse_size(min_size),
            None if older_than is None else parse_duration(older_than),
            None if open_longer_than is None else parse_duration(open_longer_than),
        )
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    return f if f.active else None


def _every_ledger(_md) -> bool:
    return True


def _row(r: LedgerRow) -> tuple:
    """A line of the listing's table: a ledger whose metadata does not decode says why."""
    from ..ops.ledgers import LedgerInfo

    if not isinstance(r, LedgerInfo):
        return (r.ledger_id, getattr(r, "error", None), "", "", "", "", "")
    return (
        r.ledger_id,
        r.state,
        _quorums(r),
        _last_entry(r),
        human_size(r.length) if r.is_closed else "open",
        human_time(r.ctime),
        ", ".join(dict.fromkeys(b for s in r.segments for b in s.bookies)),
    )


def _quorums(r: LedgerInfo) -> str:
    return f"{r.ensemble_size}/{r.write_quorum}/{r.ack_quorum}"


def _last_entry(r: LedgerInfo) -> str:
    if r.is_closed:
        return str(r.last_entry_id)
    return "? (LAC unknown)" if r.last_add_confirmed is None else f"{r.last_add_confirmed} (LAC)"


@ledger.command("show")
@click.argument("ledger_id", type=LEDGER_ID, shell_complete=complete_ledger_id)
@pass_app
def ledger_show(app: App, ledger_id: int):
    """A ledger's metadata: state, quorums, last entry, segments.

    For a ledger that is not closed, its metadata's last entry (-1) and
    length (0) are only set when it closes: the last add confirmed is read
    from its bookies and shown too (--json: last_add_confirmed, null with
    lac_error when the bookies cannot tell; a closed ledger's is its last
    entry).  Over --protocol v2, which has no READ_LAC request, it is the
    LAC the bookies' last entries carry, which can be lower than v3's (a
    pipelining writer's entries carry an older one, and a LAC it published
    explicitly is not seen): said under it (--json: lac_note).  Times are
    ISO 8601 in UTC (2026-11-23T06:04:05.123Z, as every command writes them)
    and sizes KiB/MiB for people; --json keeps the raw values
    (ctime in epoch ms, length in bytes).
    """
    from ..ops.ledgers import add_confirmed_lac, show_ledger

    doc = add_confirmed_lac(lambda: app.bk, show_ledger(app.store, ledger_id), app.protocol)

    def human():
        pairs = [("ledger", doc.ledger_id), ("state", doc.state), ("ensemble/write/ack", _quorums(doc))]
        if doc.is_closed:
            pairs += [
                ("last entry", doc.last_entry_id),
                ("length", f"{human_size(doc.length)} ({doc.length} bytes)"),
            ]
        else:
            lac = doc.last_add_confirmed
            pairs += [
                (
                    "last add confirmed",
                    f"{lac} ({doc.lac_note or 'read from the bookies'})"
                    if lac is not None
                    else f"unknown ({doc.lac_error})",
                ),
                ("last entry", f"{doc.last_entry_id} (metadata: set when the ledger is closed)"),
                ("length", f"{doc.length} (metadata: set when the ledger is closed)"),
            ]
        pairs += [
            ("digest", doc.digest),
            ("password", "set" if doc.password_set else "empty"),
            ("created", human_time(doc.ctime) or "unknown"),
            ("metadata format", doc.format_version),
            ("znode version", doc.version),
        ]
        fields(app, pairs + [(f"meta {k}", v) for k, v in doc.custom_metadata.items()])
        table(app, ["first entry", "ensemble"], [(s.first_entry_id, ", ".join(s.bookies)) for s in doc.segments])

    emit(app, doc, human)


@ledger.command("delete")
@click.argument("ledgers", nargs=-1, required=True, metavar="LEDGER...", shell_complete=complete_ledger_id)
@click.option("-f", "--force", is_flag=True, help="Do not ask.")
@click.option(
    "--even-if-owned",
    is_flag=True,
    help="Delete ledgers that Pulsar uses too: listed by a topic or a cursor, a schema or "
    "compaction ledger, or a Pulsar ledger younger than an hour that nothing lists yet.",
)
@click.option(
    "--older-than",
    metavar="AGE",
    help="Call a Pulsar ledger that nothing lists an orphan once it is older than AGE (90s, 30m, 1h; "
    "default 1h), as `pulsar orphans --older-than` does: younger ones are refused.",
)
@click.option(
    "--dry-run", is_flag=True, help="Say what would be deleted and what refused; change nothing; exit as the run would."
)
@pass_app
def ledger_delete(
    app: App, ledgers: tuple[str, ...], force: bool, even_if_owned: bool, older_than: str | None, dry_run: bool
):
    """Delete ledgers' metadata; bookies reclaim their entries at their next GC.

    LEDGER is a ledger id, an inclusive range A-B (the ledgers that exist in
    it), a comma-separated list of both (1,2,5-9, as `export --ledgers`) or -
    (read ids, ranges, or the JSON lines `pulsar orphans --json` prints, one
    per line, from stdin).  A ledger that Pulsar uses -- a data ledger a
    topic's managed ledger lists, a cursor's ledger, a schema version's
    ledger (its locator names it; an orphan schema ledger is not refused),
    a compaction ledger, or a Pulsar ledger created less than --older-than (1h) ago that
    nothing lists yet (its broker may be about to) -- is refused, named with
    its owner, unless --even-if-owned (each such ledger deleted is named
    with its owner on stderr); the others are deleted after one
    confirmation (--force, or refused without a terminal).  Exit 4 if any
    ledger was refused, 3 if an id given on its own does not exist (the
    others are still deleted); --dry-run exits the same.  --json: deleted,
    refused (each with owner, topic, cursor and reason), not_found,
    even_if_owned (the owned ledgers deleted anyway), dry_run (and
    would_delete).
    """
    from ..ops.ledger_meta import parse_duration
    from ..ops.ledgers import delete_ledgers, parse_ledger_ids, plan_delete

    try:
        young = None if older_than is None else parse_duration(older_than)
    except ValueError as exc:
        raise CommandError(f"--older-than: {exc}", USAGE) from None
    try:
        ids, ranges = parse_ledger_ids(ledgers, sys.stdin if "-" in ledgers else None)
    except ValueError as exc:
        raise CommandError(str(exc), USAGE) from None
    plan = plan_delete(app.store, ids, ranges, even_if_owned, older_than=young)
    if not plan.delete and not plan.refused and len(plan.not_found) == 1 and not ranges and len(ids) == 1:
        raise CommandError(f"no such ledger: {plan.not_found[0]}", NOT_FOUND)  # before asking
    for refused in plan.refused:
        app.err_console.print(
            f"bkctl: ledger {refused['ledger_id']} refused: {refused['reason']}", markup=False, soft_wrap=True
        )
    for missing in plan.not_found:
        app.err_console.print(f"bkctl: ledger {missing}: no such ledger", markup=False, soft_wrap=True)
    deleted: list[int] | None = None
    if dry_run:
        for owned in plan.overridden:
            app.err_console.print(
                f"bkctl: ledger {owned['ledger_id']} would be deleted although it is "
                f"{owned['reason']} (--even-if-owned)",
                markup=False,
                soft_wrap=True,
            )
        emit(
            app,
            plan.to_json(),
            lambda: app.console.print(
                f"would delete {plural(len(plan.delete), 'ledger')}: {_id_list(plan.delete)}"
                if plan.delete
                else "would delete nothing",
                highlight=False,
            ),
        )
        _delete_outcome(plan, "would refuse")
        return
    if plan.delete:
        question = (
            f"Delete ledger {plan.delete[0]}?"
            if len(plan.delete) == 1
            else f"Delete {len(plan.delete)} ledgers ({_id_list(plan.delete)})?"
        )
        action = f"delete ledger {plan.delete[0]}" if len(plan.delete) == 1 else f"delete {len(plan.delete)} ledgers"
        confirm_destructive(app, question, force, action)
        for ledger_id in plan.delete:
            drop_held(app, ledger_id)
        deleted = delete_ledgers(app.store, plan.delete)
        for owned in plan.overridden:
            app.err_console.print(
                f"bkctl: ledger {owned['ledger_id']} deleted although it was {owned['reason']} (--even-if-owned)",
                markup=False,
                soft_wrap=True,
            )

    def human():
        if deleted and len(deleted) == 1 and not plan.refused and not plan.not_found:
            app.console.print(f"ledger {deleted[0]} deleted", highlight=False)
            return
        app.console.print(
            f"deleted {plural(len(deleted or []), 'ledger')}; refused {len(plan.refused)}; "
            f"not found {len(plan.not_found)}",
            highlight=False,
        )

    emit(app, plan.to_json(deleted or []), human)
    _delete_outcome(plan, "refused")


def _delete_outcome(plan, refused: str) -> None:
    """The exit of a delete, and of its dry run: 4 for a refusal, 3 for a ledger not found."""
    if plan.refused:
        raise CommandError(
            f"{refused} {plural(len(plan.refused), 'ledger')} that Pulsar uses (--even-if-owned deletes them)", CONFLICT
        )
    if plan.not_found:
        raise CommandError(f"{plural(len(plan.not_found), 'ledger')} not found: {_id_list(plan.not_found)}", NOT_FOUND)


def _id_list(ids: list[int], most: int = 10) -> str:
    shown = ", ".join(map(str, ids[:most]))
    return shown + (f", ... ({len(ids) - most} more)" if len(ids) > most else "")
