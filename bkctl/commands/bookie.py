"""``bkctl bookie ...``, ``bkctl bookieformat`` and ``bkctl upgrade``."""
from __future__ import annotations

import click

from ..app import App, confirm_destructive
from ..render import emit, fields, table
from . import pass_app


@click.group()
def bookie():
    """Bookies: registration, cookies, disk space."""


@bookie.command("list")
@click.option("--readonly", "which", flag_value="readonly", help="Only read-only bookies.")
@click.option("--all", "which", flag_value="all", help="Every bookie with a cookie, running or not.")
@pass_app
def bookie_list(app: App, which: str | None):
    """Writable bookies (or read-only ones, or all)."""
    from ..ops.bookies import list_bookies

    rows = list_bookies(app.store, which or "writable")
    emit(app, rows, lambda: table(app, ["bookie", "state"], [(r["bookie_id"], r["state"]) for r in rows]))


_CONF = click.option("-c", "--conf", "conf", required=True, type=click.Path(exists=True, dir_okay=False),
                     help="The bookie's bk_server.conf.")


@click.command()
@_CONF
@click.option("-f", "--force", is_flag=True, help="Do not ask, even when the journal holds data.")
@click.option("-d", "--delete-cookie", is_flag=True, help="Also delete the bookie's cookie in ZooKeeper.")
@pass_app
def bookieformat(app: App, conf: str, force: bool, delete_cookie: bool):
    """Wipe a stopped bookie's journal, ledger and index directories (run on the bookie's host)."""
    from ..ops.bookies import bookie_dirs, bookieformat as do_format

    dirs = bookie_dirs(conf)
    if not app.metadata_uri and dirs.metadata_uri:
        app.metadata_uri = dirs.metadata_uri

    def confirm() -> bool:
        confirm_destructive(app, "Are you sure to format Bookie data..?", force, f"format bookie {dirs.bookie_id}")
        return True

    store = app.store if (delete_cookie or app.metadata_uri) else None
    doc = do_format(dirs, store, confirm, delete_cookie)
    emit(app, doc, lambda: app.console.print(
        f"bookie {dirs.bookie_id} formatted ({len(doc['directories'])} directories)"
        + ("; cookie deleted" if doc["cookie_deleted"] else "")))


@click.command()
@_CONF
@click.option("-u", "--upgrade", "action", flag_value="upgrade", help="Move old layouts into current/.")
@click.option("-r", "--rollback", "action", flag_value="rollback", help="Undo an upgrade not yet finalized.")
@click.option("-f", "--finalize", "action", flag_value="finalize", help="Delete the old layout's files.")
@pass_app
def upgrade(app: App, conf: str, action: str | None):
    """Upgrade a stopped bookie's directory layout (BookKeeper's FileSystemUpgrade)."""
    from ..exitcodes import USAGE, CommandError
    from ..ops import bookies as ops

    if action is None:
        raise CommandError("give one of --upgrade, --rollback or --finalize", USAGE)
    dirs = ops.bookie_dirs(conf)
    if not app.metadata_uri and dirs.metadata_uri:
        app.metadata_uri = dirs.metadata_uri
    if action == "upgrade":
        doc = ops.upgrade(dirs, app.store)
        text = f"upgraded {len(doc['upgraded'])} directories" if doc["upgraded"] else "already current"
    elif action == "finalize":
        doc = ops.finalize(dirs)
        text = f"finalized {len(doc['finalized'])} directories"
    else:
        doc = ops.rollback(dirs, app.store)
        text = f"rolled back {len(doc['rolled_back'])} directories; cookie deleted"
    emit(app, doc, lambda: app.console.print(text))
