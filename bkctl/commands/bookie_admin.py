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


# -- capacity -------------------------------------------------------------------------------

def list_with_disk(app: App, which: str) -> None:
    """`bookie list --disk`."""
    from ..ops.bookies import list_bookies
    from ..ops.capacity import with_disk
    from .bookie import _size

    rows = list_bookies(app.store, which)
    asked = sum(1 for r in rows if r["state"] != "down")
    with app.progress(asked, "asking bookies") as bar:
        doc = with_disk(app.bk, rows, on_answer=bar.advance)

    def human():
        def line(r):
            if r["total_bytes"] is None:
                return (r["bookie_id"], r["state"], "", "", "", r.get("error") or "")
            return (r["bookie_id"], r["state"], _size(r["total_bytes"]), _size(r["free_bytes"]),
                    f"{r['used_percent']:.1f}%", "")

        t = doc["total"]
        rows_out = [line(r) for r in doc["bookies"]]
        rows_out.append((f"total ({t['answered']}/{t['bookies']} answered)", "",
                         _size(t["total_bytes"]) if t["answered"] else "", _size(t["free_bytes"]) if t["answered"] else "",
                         f"{t['used_percent']:.1f}%" if t["used_percent"] is not None else "", ""))
        table(app, ["bookie", "state", "total", "free", "used", "error"], rows_out)

    emit(app, doc, human)


# -- runtime control through the bookie's HTTP admin -------------------------------------------

_HTTP = click.option("--http", metavar="HOST:PORT",
                     help="The bookie's HTTP admin address (default: from its registration's http endpoint).")


@click.command("state")
@click.argument("bookie_id", metavar="BOOKIE", shell_complete=complete_bookie_id)
@_HTTP
@pass_app
def state(app: App, bookie_id: str, http: str | None):
    """A running bookie's state from its HTTP admin (GET /api/v1/bookie/state).

    Not registered: exit 3; no HTTP endpoint or an error answer: exit 1; not
    answering: exit 5.  --json: bookie_id, http, state {running, readOnly,
    shuttingDown, availableForHighPriorityWrites, ...}, registration.
    """
    from ..ops.bookie_http import state as get_state
    from ..render import fields

    doc = get_state(app.store, bookie_id, http)
    emit(app, doc, lambda: fields(app, [("bookie", bookie_id), ("http", doc["http"]),
                                        ("registration", doc["registration"])]
                                  + [(k, v) for k, v in doc["state"].items()]))


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
    from ..exitcodes import FAILED, CommandError
    from ..ops.bookie_http import set_readonly

    doc = set_readonly(app.store, bookie_id, mode == "on", http)
    emit(app, doc, lambda: app.console.print(f"bookie {bookie_id} is {'read-only' if doc['read_only'] else 'writable'}"
                                             f" (registered as {doc['registration']})"))
    if doc["registration"] != ("read-only" if mode == "on" else "writable"):
        raise CommandError(f"the registration of {bookie_id} still says {doc['registration']}", FAILED)


@click.command("gc")
@click.argument("bookie_id", metavar="BOOKIE", shell_complete=complete_bookie_id)
@click.option("--status", "status_only", is_flag=True, help="Only show whether a forced GC runs, and its details.")
@_HTTP
@pass_app
def gc(app: App, bookie_id: str, status_only: bool, http: str | None):
    """Start garbage collection on a running bookie (PUT /api/v1/bookie/gc), or show its status.

    --json: bookie_id, http, triggered, message, is_in_force_gc, details
    (Java's gc_details list: forceCompacting, majorCompacting, ...).
    """
    from ..ops.bookie_http import gc as run_gc
    from ..render import fields

    doc = run_gc(app.store, bookie_id, status_only, http)

    def human():
        pairs = [("bookie", bookie_id)]
        if doc["triggered"]:
            pairs.append(("gc", "triggered"))
        pairs.append(("in forced gc", doc["is_in_force_gc"]))
        for d in doc["details"] if isinstance(doc["details"], list) else []:
            pairs += [(k, v) for k, v in d.items()]
        fields(app, pairs)

    emit(app, doc, human)
