"""``bkctl ledger fsck``: where the metadata and the bookies disagree (added to the ``ledger``
group in bkctl.cli)."""

from __future__ import annotations

import click

from ..app import App, confirm_destructive
from ..completers import complete_bookie_id
from ..exitcodes import FSCK_DATA_LOST, FSCK_REPAIRABLE, FSCK_STALE_MARKS, NOT_FOUND, USAGE, CommandError
from . import pass_app

_EXIT_BY_SEVERITY = {1: FSCK_STALE_MARKS, 2: FSCK_REPAIRABLE, 3: FSCK_DATA_LOST}


def _line(finding, outcome) -> str:
    line = finding.text()
    if outcome is not None:
        line += f" [{outcome.fix.value}: {outcome.status}: {outcome.detail}]"
    return line


def _grouped(held, registered, say) -> None:
    """The findings all about one bookie holding none of its entries: one line per bookie (with
    how their fixes went), the ledgers left alone in a group of one each on their own line."""
    groups, alone = held.groups(registered)
    for g, fixed in groups:
        say(g.text() + (f" [{', '.join(f'{n} {what}' for what, n in sorted(fixed.items()))}]" if fixed else ""))
    for f, outcome in alone:
        say(_line(f, outcome))


@click.command("fsck")
@click.argument("ledgers", nargs=-1, metavar="[LEDGER...]")
@click.option(
    "--bookie", metavar="BOOKIE", shell_complete=complete_bookie_id, help="Only ledgers with a segment on this bookie."
)
@click.option(
    "--sample",
    default=8,
    show_default=True,
    type=click.IntRange(0, 1_000_000),
    help="Entries per ledger read from every replica and compared, besides each segment's first and last.",
)
@click.option("--all", "compare_all", is_flag=True, help="Compare every entry's replicas (reads everything).")
@click.option(
    "--in-flight",
    default=128,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Bookie requests in flight at most (over every ledger being checked).",
)
@click.option(
    "--fix",
    "fixes",
    multiple=True,
    type=click.Choice(["mark", "ensemble", "unmark"]),
    help="Repair in the metadata as findings come (repeatable): mark marks a ledger with missing or corrupt "
    "copies under-replicated (a data_lost one for its other entries' copies), ensemble points a misplaced ledger's segments at the bookies holding its "
    "entries, unmark removes a deleted ledger's mark.  Each is checked against the metadata version read.",
)
@click.option("--dry-run", is_flag=True, help="With --fix: say what each fix would write; write nothing.")
@click.option("-f", "--force", is_flag=True, help="With --fix: do not ask.")
@pass_app
def fsck(
    app: App,
    ledgers: tuple[str, ...],
    bookie: str | None,
    sample: int,
    compare_all: bool,
    in_flight: int,
    fixes: tuple[str, ...],
    dry_run: bool,
    force: bool,
):
    """Check every ledger (or LEDGER...: ids, ranges A-B, lists 1,2,5-9) against its bookies.

    Each bookie of each segment's ensemble is asked which entries it holds
    (GET_LIST_OF_ENTRIES_OF_LEDGER; a bookie that cannot answer has the
    entries it should hold read one by one), and what it holds is compared
    with what the write sets say it must.  Some entries (--sample, each
    segment's first and last; --all: every one) are read from every replica
    and compared, each copy's digest checked; every entry short of a copy
    has its surviving copies read and checked too.  An open ledger's last
    segment is not judged.  One finding per ledger, naming one cause:

    \b
      missing         copies missing on bookies of the ensemble
      misplaced       entries on bookies outside the ensemble (the metadata
                      names bookies that never held them): where they are
                      (copies on a read-only or decommissioned bookie are a
                      moved replica's leftovers, never a fix's target)
      corrupt         replicas whose bytes differ (the bad one named)
      data_lost       entries with no good copy on any live bookie (none
                      holds one, or each copy fails its digest): each
                      run named with its bookies and cause
      metadata_only   no bookie holds any entry of the ledger
      bad_metadata    its metadata does not decode
      bookie_only     bookies hold entries of a ledger no metadata names
                      (deleted since their last garbage collection, or
                      its metadata lost): checked in a run over every
                      ledger, on bookies that list what they hold
                      (bookied; a Java bookie is "not checked")
      marked_healthy  marked under-replicated, every copy in place
      marked_deleted  marked under-replicated, the ledger deleted

    Findings stream in ledger id order; for people, the ledgers whose only
    finding is that one bookie holds none of their entries are grouped in
    one line per bookie at the end ("bookie X holds none of its 125
    ledgers' entries: disk lost?") (--json: one object per line, per ledger, with
    ledger_id, kind, severity, message, marked, and missing, lost_entries,
    lost, moves, leftovers, held, bad_replicas as they apply, and owner: the topic,
    cursor or schema a damaged ledger of Pulsar's belongs to); a summary goes to stderr.  Exit 0
    when nothing is found, else by the worst finding: 7 only stale marks, 8
    repairable copies, 9 data lost; 3 when a LEDGER named on its own does
    not exist (and is not marked) and nothing else is found.  --fix applies the guarded repairs as
    findings come (metadata only, never an entry; asks first on a terminal,
    refused elsewhere without --force); --dry-run says what they would write.
    """
    from ..ops.ledger_fsck import FsckRun, fix_all
    from ..ops.ledgers import parse_ledger_ids

    if dry_run and not fixes:
        raise CommandError("--dry-run goes with --fix", USAGE)
    ids: list[int] | None = None
    ranges: list[tuple[int, int]] = []
    if ledgers:
        try:
            ids, ranges = parse_ledger_ids(ledgers)
        except ValueError as exc:
            raise CommandError(str(exc), USAGE) from None
    if fixes and not dry_run:
        confirm_destructive(
            app, f"Apply fsck's fixes ({', '.join(fixes)}) to the metadata?", force, "apply fsck's fixes"
        )
    with app.walk_progress("checking ledgers") as progress:
        run = FsckRun(
            app.bk,
            ledger_ids=ids,
            ranges=ranges,
            bookie=bookie,
            sample=sample,
            compare_all=compare_all,
            requests_in_flight=in_flight,
            progress=progress,
        )
        from bkctl.wire.fsck.findings import Grouping

        held = Grouping()  # findings all about one bookie holding none of its entries: a line each at the end

        def say(line: str) -> None:
            if getattr(progress, "shown", False):
                progress.note(line)
            else:
                click.echo(line)

        for finding, outcome in fix_all(app.store, run.findings(), set(fixes), dry_run):
            if app.json:
                doc = finding.to_json()
                if outcome is not None:
                    doc["fix"] = outcome.to_json()
                app.emit_json(doc)
            elif not held.add(finding, outcome, None if outcome is None else f"{outcome.fix.value}: {outcome.status}"):
                say(_line(finding, outcome))
        if held:
            _grouped(held, run.registered, say)
    totals = run.totals
    if not app.quiet:
        app.err_console.print(
            f"checked {totals.ledgers} ledgers in {totals.seconds:.1f} s: "
            + (
                ", ".join(f"{n} {kind}" for kind, n in sorted(totals.by_kind.items()))
                if totals.findings
                else "no findings"
            )
            + f" ({sum(totals.bookie_requests.values())} bookie requests)"
            + (
                f"; no entry list from {', '.join(totals.unlisted)}: their entries were read one by one"
                if totals.unlisted
                else ""
            )
            + (
                f"; no batch reads from {', '.join(totals.unbatched)}: their entries were read one by one"
                if totals.unbatched
                else ""
            )
            + "".join(f"; bookie_only not checked on {b}: {why}" for b, why in sorted(totals.not_checked.items())),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    for ledger_id in run.not_found:
        app.err_console.print(f"bkctl: ledger {ledger_id}: no such ledger", markup=False, highlight=False)
    if totals.worst:
        worst = {1: "stale marks", 2: "repairable copies", 3: "data lost"}[totals.worst]
        raise CommandError(f"{totals.findings} ledgers with findings (worst: {worst})", _EXIT_BY_SEVERITY[totals.worst])
    if run.not_found:
        raise CommandError(f"{len(run.not_found)} ledgers named do not exist", NOT_FOUND)
