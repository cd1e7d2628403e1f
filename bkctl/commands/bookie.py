"""``bkctl bookie ...``, ``bkctl bookieformat`` and ``bkctl upgrade``."""

from __future__ import annotations

import click

from ..app import App, confirm_destructive
from ..completers import complete_bookie_id
from ..render import emit, emit_rows, fields, table
from ..render import human_size as _size
from . import pass_app


@click.group()
def bookie():
    """Bookies: registration, cookies, disk space."""


@bookie.command("list")
@click.option("--writable", "states", flag_value="writable", multiple=True, help="Writable bookies.")
@click.option("--readonly", "states", flag_value="read-only", multiple=True, help="Read-only bookies.")
@click.option(
    "--down", "states", flag_value="down", multiple=True, help="Bookies with a cookie, not registered: stopped or lost."
)
@click.option("--all", "states", flag_value="all", multiple=True, help="Every state (the default).")
@click.option("--disk", is_flag=True, help="Free/total/used disk per bookie (GET_BOOKIE_INFO) and the cluster's total.")
@pass_app
def bookie_list(app: App, states: tuple[str, ...], disk: bool):
    """Every bookie with its state: writable, read-only or down.

    Down bookies are those with a cookie that are not registered.  The
    state flags filter and add up (--writable --readonly: both).  --json:
    JSON lines {"bookie_id", "state"}.

    With --disk each registered bookie is asked for its disk space at once
    (a progress bar on a terminal; GET_BOOKIE_INFO exists only in protocol
    v3, so under --protocol v2 every bookie shows an error): --json prints
    JSON lines {bookie_id, state, total_bytes, free_bytes, used_bytes,
    used_percent, error}, then a last line {"total": {bookies, answered,
    total_bytes, free_bytes, used_bytes, used_percent}}.  Exit 5 when
    bookies were asked and none answered.
    """
    from ..ops.bookies import list_bookies

    rows = list_bookies(app.store, "all")
    if states and "all" not in states:
        rows = [r for r in rows if r.state.value in states]
    if disk:
        from .bookie_admin import list_with_disk

        return list_with_disk(app, rows)
    emit_rows(app, rows, lambda rows: table(app, ["bookie", "state"], [(r.bookie_id, r.state.value) for r in rows]))


_CONF = click.option(
    "-c",
    "--conf",
    "conf",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="The bookie's bk_server.conf.",
)


@click.command()
@_CONF
@click.option("-f", "--force", is_flag=True, help="Do not ask, even when the journal holds data.")
@click.option("-d", "--delete-cookie", is_flag=True, help="Also delete the bookie's cookie in ZooKeeper.")
@pass_app
def bookieformat(app: App, conf: str, force: bool, delete_cookie: bool):
    """Wipe a stopped bookie's journal, ledger and index directories (run on the bookie's host)."""
    from ..ops.bookie_conf import bookie_dirs
    from ..ops.bookies import BookieFormatted
    from ..ops.bookies import bookieformat as do_format

    dirs = bookie_dirs(conf)
    if not app.metadata_uri and dirs.metadata_uri:
        app.metadata_uri = dirs.metadata_uri

    def confirm() -> bool:
        confirm_destructive(app, "Are you sure to format Bookie data..?", force, f"format bookie {dirs.bookie_id}")
        return True

    store = app.store if (delete_cookie or app.metadata_uri) else None
    doc = do_format(dirs, store, confirm, delete_cookie)
    emit(
        app,
        doc,
        lambda: app.console.print(
            f"bookie {dirs.bookie_id} formatted ({len(doc.directories)} directories)"
            + ("; cookie deleted" if doc.cookie_deleted else "")
            if isinstance(doc, BookieFormatted)
            else "not formatted"
        ),
    )


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
    from ..ops.bookie_conf import bookie_dirs

    if action is None:
        raise CommandError("give one of --upgrade, --rollback or --finalize", USAGE)
    dirs = bookie_dirs(conf)
    if not app.metadata_uri and dirs.metadata_uri:
        app.metadata_uri = dirs.metadata_uri
    doc: ops.Upgraded | ops.Finalized | ops.RolledBack
    if action == "upgrade":
        doc = upgraded = ops.upgrade(dirs, app.store)
        text = f"upgraded {len(upgraded.upgraded)} directories" if upgraded.upgraded else "already current"
    elif action == "finalize":
        doc = finalized = ops.finalize(dirs)
        text = f"finalized {len(finalized.finalized)} directories"
    else:
        doc = rolled = ops.rollback(dirs, app.store)
        text = f"rolled back {len(rolled.rolled_back)} directories; cookie deleted"
    emit(app, doc, lambda: app.console.print(text))


@bookie.command("info")
@click.argument("bookie_id", metavar="BOOKIE", shell_complete=complete_bookie_id)
@pass_app
def bookie_info(app: App, bookie_id: str):
    """A bookie's registration, cookie, endpoints and disk space.

    Registration state and cookie come from ZooKeeper, the endpoints from
    the BookieServiceInfo the bookie published, total and free disk from
    the bookie itself (GET_BOOKIE_INFO).  Unknown bookie: exit 3.  A bookie
    that does not answer is shown as "unreachable" with what ZooKeeper
    knows (exit 5 after printing it).  --json: bookie_id, state, reachable,
    error (why it is unreachable, else null), address, cookie
    {bookie_host, journal_dirs, ledger_dirs, index_dirs, instance_id,
    layout_version, version}, service_info {endpoints [{id, protocol, host,
    port, auth, extensions}], properties}, disk {total_bytes, free_bytes};
    a read-only bookie also read_only_reasons (cause -> why, as its HTTP admin
    says: bookied's does; else a line saying why it is not known).
    """
    from bkctl.wire.client.ledger_admin import describe_bookie

    from ..ops.recovery import check_bookie_ids

    check_bookie_ids([bookie_id])
    doc = app.bk.run(describe_bookie, bookie_id)
    if doc["state"] == "read-only":  # why, as the bookie's HTTP admin says (bookied's does)
        from ..ops.bookie_http import read_only_reasons

        doc["read_only_reasons"] = read_only_reasons(app.store, bookie_id)

    def human():
        disk = doc["disk"]
        state = doc["state"] if doc["reachable"] else f"{doc['state']}, unreachable ({doc['error']})"
        pairs = [("bookie", doc["bookie_id"]), ("state", state), ("address", doc["address"])]
        reasons = doc.get("read_only_reasons")
        if reasons:
            pairs.append(
                (
                    "read-only because",
                    "; ".join(f"{k}: {v}" for k, v in reasons.items()) if isinstance(reasons, dict) else reasons,
                )
            )
        if disk["total_bytes"] is not None:
            used = disk["total_bytes"] - (disk["free_bytes"] or 0)
            pairs.append(
                (
                    "disk",
                    f"{_size(disk['free_bytes'])} free of {_size(disk['total_bytes'])} "
                    f"({used * 100 // max(1, disk['total_bytes'])}% used)",
                )
            )
        cookie = doc["cookie"]
        if cookie is None:
            pairs.append(("cookie", "none"))
        else:
            pairs += [
                ("cookie instance", cookie["instance_id"]),
                ("journal dirs", ", ".join(cookie["journal_dirs"])),
                ("ledger dirs", ", ".join(cookie["ledger_dirs"])),
            ]
            if cookie["index_dirs"]:
                pairs.append(("index dirs", ", ".join(cookie["index_dirs"])))
        info = doc["service_info"]
        for ep in (info or {}).get("endpoints", []):
            pairs.append(
                (
                    f"endpoint {ep['id']}",
                    f"{ep['protocol']}://{ep['host']}:{ep['port']}"
                    + (f" ({', '.join(ep['extensions'])})" if ep["extensions"] else ""),
                )
            )
        for key, value in (info or {}).get("properties", {}).items():
            pairs.append((f"property {key}", value))
        fields(app, pairs)

    emit(app, doc, human)
    if not doc["reachable"]:
        from ..exitcodes import UNREACHABLE, CommandError

        raise CommandError(f"bookie {bookie_id} does not answer: {doc['error']}", UNREACHABLE)
