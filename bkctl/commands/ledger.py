"""``bkctl ledger ...``: create, write, read, close, fence, recover, list, show, delete."""
from __future__ import annotations

import click

from ..app import App, confirm_destructive
from ..render import emit, fields, table
from . import pass_app

STATES = click.Choice(["open", "in_recovery", "closed"], case_sensitive=False)


@click.group()
def ledger():
    """Ledgers: create, write, read, close, fence, recover, list, show, delete."""


@ledger.command("list")
@click.option("--state", type=STATES, help="Only ledgers in this state.")
@click.option("--bookie", metavar="BOOKIE", help="Only ledgers with a segment on this bookie.")
@pass_app
def ledger_list(app: App, state: str | None, bookie: str | None):
    """Ledger ids in ascending order (with details when filtering)."""
    from ..ops.ledgers import list_ledgers

    rows = list_ledgers(app.store, state, bookie)
    if app.json:  # a stream: JSON lines, one per ledger
        for row in rows:
            app.emit_json(row)
        return
    if state is None and bookie is None:
        for row in rows:
            click.echo(row["ledger_id"])
        return
    table(app, ["ledger", "state", "E/Qw/Qa", "last entry", "length", "bookies"],
          ((r["ledger_id"], r.get("state", r.get("error")), _quorums(r), r.get("last_entry_id"),
            r.get("length"), ", ".join(sorted({b for s in r.get("segments", []) for b in s["bookies"]})))
           for r in rows))


def _quorums(r: dict) -> str:
    return f"{r['ensemble_size']}/{r['write_quorum']}/{r['ack_quorum']}" if "ensemble_size" in r else ""


@ledger.command("show")
@click.argument("ledger_id", type=click.IntRange(0))
@pass_app
def ledger_show(app: App, ledger_id: int):
    """A ledger's metadata: state, quorums, last entry, segments."""
    from ..ops.ledgers import show_ledger

    doc = show_ledger(app.store, ledger_id)

    def human():
        fields(app, [
            ("ledger", doc["ledger_id"]), ("state", doc["state"]),
            ("ensemble/write/ack", _quorums(doc)), ("last entry", doc["last_entry_id"]),
            ("length", doc["length"]), ("digest", doc["digest"]),
            ("password", "set" if doc["password_set"] else "empty"), ("ctime", doc["ctime"]),
            ("metadata format", doc["format_version"]), ("znode version", doc["version"]),
        ] + [(f"meta {k}", v) for k, v in doc["custom_metadata"].items()])
        table(app, ["first entry", "ensemble"],
              [(s["first_entry_id"], ", ".join(s["bookies"])) for s in doc["segments"]])

    emit(app, doc, human)


@ledger.command("delete")
@click.argument("ledger_id", type=click.IntRange(0))
@click.option("-f", "--force", is_flag=True, help="Do not ask.")
@pass_app
def ledger_delete(app: App, ledger_id: int, force: bool):
    """Delete a ledger's metadata; bookies reclaim its entries at their next GC."""
    from ..ops.ledgers import delete_ledger

    app.store.read_ledger(ledger_id)  # not found -> exit 3 before asking
    confirm_destructive(app, f"Delete ledger {ledger_id}?", force, f"delete ledger {ledger_id}")
    doc = delete_ledger(app.store, ledger_id)
    emit(app, doc, lambda: app.console.print(f"ledger {ledger_id} deleted"))
