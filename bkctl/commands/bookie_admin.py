"""``bkctl bookie replace-id``, ``readonly``, ``gc``, ``state``, ``inspect`` and ``check``:
day-2 operations on one bookie, added to the ``bookie`` group in bkctl.cli."""
from __future__ import annotations

import click

from ..app import App, confirm_destructive
from ..completion import complete_bookie_id
from ..render import emit, table
from . import pass_app


@click.command("replace-id")
@click.argument("old", metavar="FROM", shell_complete=complete_bookie_id)
@click.argument("new", metavar="TO", shell_complete=complete_bookie_id)
@click.option("--dry-run", is_flag=True, help="Count the ledgers and segments that name FROM; change nothing.")
@click.option("--rate", type=click.FloatRange(min=0), default=0, metavar="N",
              help="At most N ledger updates per second (default: no limit).")
@click.option("--parallel", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Ledger updates at once.")
@click.option("--force", is_flag=True, help="Do not ask.")
@pass_app
def replace_id(app: App, old: str, new: str, dry_run: bool, rate: float, parallel: int, force: bool):
    """Rewrite bookie id FROM to TO in every ledger's metadata (Java's updateledgers).

    Use it after a bookie got a new id (`cookie admin --hostname`, a new
    address) with its data.  Each segment naming FROM gets TO, by
    compare-and-set on the version just read (a concurrent change is
    re-read and retried).  Ledgers that no longer name FROM are left alone,
    so a second run, or a run after an interruption, finishes the job.  A
    segment that already names TO is a conflict: left unchanged, exit 4.
    FROM must not be registered (exit 4).  --json: from, to, dry_run,
    ledgers_scanned, ledgers[] (ledger_id, status: updated, planned,
    unchanged, deleted, conflict, failed; segments, error), totals
    (matched, updated, planned, unchanged, deleted, conflict, failed,
    segments).
    """
    from ..exitcodes import CONFLICT, FAILED, CommandError
    from ..ops.replace_id import replace_bookie_id

    bar = None

    def start(n: int) -> None:
        nonlocal bar
        bar = app.progress(n, f"{old} -> {new}").__enter__()

    try:
        doc = replace_bookie_id(
            app.store, old, new, dry_run=dry_run, rate=rate, parallel=parallel,
            confirm=lambda n: confirm_destructive(app, f"Rewrite {old} to {new} in {n} ledgers?", force,
                                                  f"rewrite {old} in {n} ledgers"),
            on_start=start, on_ledger=lambda _row: bar.advance(1))
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
    t = doc["totals"]

    def human():
        bad = [r for r in doc["ledgers"] if r["status"] in ("conflict", "failed")]
        if bad:
            table(app, ["ledger", "status", "error"], [(r["ledger_id"], r["status"], r.get("error")) for r in bad])
        if dry_run:
            app.console.print(f"dry run: {t['planned']} ledgers ({t['segments']} segments) name {old}; "
                              f"nothing changed ({doc['ledgers_scanned']} ledgers scanned)")
        else:
            app.console.print(f"{t['updated']} ledgers ({t['segments']} segments) rewritten from {old} to {new}"
                              + (f"; {t['unchanged'] + t['deleted']} already done or deleted"
                                 if t["unchanged"] + t["deleted"] else "")
                              + (f"; {t['conflict']} conflicts" if t["conflict"] else "")
                              + (f"; {t['failed']} FAILED" if t["failed"] else ""))

    emit(app, doc, human)
    if t["failed"]:
        raise CommandError(f"{t['failed']} ledgers could not be updated", FAILED)
    if t["conflict"]:
        raise CommandError(f"{t['conflict']} ledgers already name {new} in a segment that names {old}", CONFLICT)
