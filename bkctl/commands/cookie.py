"""``bkctl cookie ...``: bookie cookies in ZooKeeper and in a stopped bookie's directories."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..app import App, confirm_destructive
from ..completers import complete_bookie_id
from ..render import emit, fields, table
from . import pass_app

if TYPE_CHECKING:
    from ..ops.cookies import CookieInfo


@click.group()
def cookie():
    """Bookie cookies: the ZooKeeper node cookies/<bookie> and every directory's current/VERSION.

    Formats are Java's (cookie layout 5, protobuf text), so files made by
    `cookie generate` or copied from a VERSION file work with Java's tools.
    """


_BOOKIE = click.argument("bookie_id", metavar="BOOKIE", shell_complete=complete_bookie_id)
_FROM_FILE = click.option(
    "--from-file",
    "-f",
    "path",
    required=True,
    metavar="FILE",
    type=click.Path(exists=True, dir_okay=False),
    help="The cookie text (as `cookie generate` writes it, or a current/VERSION file).",
)


def _show(app: App, doc: CookieInfo) -> None:
    pairs: list[tuple[str, object]] = [
        ("bookie", doc.bookie_id),
        ("instance id", doc.instance_id),
        ("journal dirs", ", ".join(doc.journal_dirs)),
        ("ledger dirs", ", ".join(doc.ledger_dirs)),
    ]
    if doc.index_dirs is not None:
        pairs.append(("index dirs", ", ".join(doc.index_dirs)))
    pairs += [("layout", doc.layout_version), ("znode version", doc.version)]
    fields(app, pairs)


@cookie.command("get")
@_BOOKIE
@click.option("--raw", is_flag=True, help="Print the cookie text exactly as stored.")
@pass_app
def cookie_get(app: App, bookie_id: str, raw: bool):
    """Print a bookie's cookie from ZooKeeper (exit 3 if it has none).

    --json: bookie_id, bookie_host, journal_dirs, ledger_dirs, index_dirs,
    instance_id, layout_version, version (the znode's), text.
    """
    from ..ops.cookies import get

    doc = get(app.store, bookie_id)
    emit(app, doc, (lambda: click.echo(doc.text, nl=False)) if raw else (lambda: _show(app, doc)))


@cookie.command("create")
@_BOOKIE
@_FROM_FILE
@pass_app
def cookie_create(app: App, bookie_id: str, path: str):
    """Create a bookie's cookie in ZooKeeper from FILE (exit 4 if it has one).

    The file must be a cookie of BOOKIE (exit 2 otherwise).  --json: as
    `cookie get`.
    """
    from ..ops.cookies import create

    doc = create(app.store, bookie_id, path)
    emit(app, doc, lambda: app.console.print(f"cookie of {bookie_id} created"))


@cookie.command("update")
@_BOOKIE
@_FROM_FILE
@pass_app
def cookie_update(app: App, bookie_id: str, path: str):
    """Replace a bookie's cookie in ZooKeeper with FILE (exit 3 if it has none).

    Written by compare-and-set on the version just read (exit 4 if it
    changed meanwhile).  --json: as `cookie get`, plus previous.
    """
    from ..ops.cookies import update

    doc = update(app.store, bookie_id, path)
    emit(app, doc, lambda: app.console.print(f"cookie of {bookie_id} updated (znode version {doc.version})"))


@cookie.command("delete")
@_BOOKIE
@click.option("--force", is_flag=True, help="Do not ask.")
@pass_app
def cookie_delete(app: App, bookie_id: str, force: bool):
    """Delete a stopped bookie's cookie from ZooKeeper.

    Exit 3 without a cookie, 4 while the bookie is registered.  Prompts on a
    terminal; elsewhere refuses (exit 2) without --force.  --json:
    bookie_id, deleted, version.
    """
    from ..ops.cookies import delete

    doc = delete(
        app.store,
        bookie_id,
        lambda: confirm_destructive(
            app, f"Delete the cookie of bookie {bookie_id}?", force, f"delete the cookie of {bookie_id}"
        ),
    )
    emit(app, doc, lambda: app.console.print(f"cookie of {bookie_id} deleted"))


@cookie.command("generate")
@_BOOKIE
@click.option(
    "--instance-id", "-i", metavar="ID", help="The cluster's instance id (default: read from the cluster's INSTANCEID)."
)
@click.option(
    "--journal-dirs",
    "-j",
    multiple=True,
    required=True,
    metavar="DIRS",
    help="Journal directories, comma-separated (repeatable).",
)
@click.option(
    "--ledger-dirs",
    "-l",
    multiple=True,
    required=True,
    metavar="DIRS",
    help="Ledger directories, comma-separated (repeatable).",
)
@click.option(
    "--index-dirs",
    "-x",
    multiple=True,
    metavar="DIRS",
    help="Index directories, comma-separated (only when configured apart from the ledger dirs).",
)
@click.option(
    "-o",
    "--output",
    "out",
    required=True,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Where to write the cookie.",
)
@pass_app
def cookie_generate(app: App, bookie_id: str, instance_id: str | None, journal_dirs, ledger_dirs, index_dirs, out: str):
    """Write a cookie for BOOKIE and these directories to a file (nothing else changes).

    The file is what `cookie create`/`update` take, and what bookies keep in
    every directory's current/VERSION.  --json: as `cookie get` (version
    null), plus file.
    """
    from ..ops.cookies import generate, split_dirs

    if instance_id is None:
        instance_id = app.store.cluster.instance_id()
    doc = generate(
        bookie_id, instance_id, split_dirs(journal_dirs), split_dirs(ledger_dirs), split_dirs(index_dirs), out
    )
    emit(app, doc, lambda: app.console.print(f"cookie of {bookie_id} written to {out}"))


@cookie.command("admin")
@click.option(
    "-c",
    "--conf",
    "conf",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="The stopped bookie's bk_server.conf.",
)
@click.option(
    "--hostname",
    "action",
    flag_value="hostname",
    help="Switch to host-name bookie ids (useHostNameAsBookieID=true must be set already).",
)
@click.option(
    "--ip", "action", flag_value="ip", help="Switch to IP bookie ids (useHostNameAsBookieID=false must be set already)."
)
@click.option(
    "--from-id", metavar="OLD", help="Move the cookie from bookie id OLD to the configured id (an address change)."
)
@click.option(
    "--expand",
    "action",
    flag_value="expand",
    help="Accept new, empty ledger/index directories added to the configuration.",
)
@click.option("--list", "action", flag_value="list", help="Show the local VERSION files and the ZooKeeper cookie.")
@click.option(
    "--delete", "action", flag_value="delete", help="Delete the local VERSION files and the ZooKeeper cookie."
)
@click.option("--force", is_flag=True, help="With --delete: do not ask.")
@pass_app
def cookie_admin(app: App, conf: str, action: str | None, from_id: str | None, force: bool):
    """Cookies of a stopped bookie's local directories (Java's updatecookie), for Java's
    bookies and bookied's.

    Give one of --hostname, --ip, --from-id, --expand, --list, --delete.
    --hostname/--ip/--from-id rewrite the cookie under the configured
    bookie id in every directory's current/VERSION, create it in ZooKeeper
    and delete the old id's cookie (safe to run again if interrupted).
    --expand stamps new empty directories and rewrites the ZooKeeper cookie.
    Refuses (exit 4) while the bookie is registered.  --json: bookie_id and
    what changed.
    """
    from ..exitcodes import USAGE, CommandError
    from ..ops import cookies
    from ..ops.bookie_conf import bookie_dirs, other_id_form

    if from_id is not None:
        if action is not None:
            raise CommandError("give only one of --hostname, --ip, --from-id, --expand, --list, --delete", USAGE)
        action = "rename"
    if action is None:
        raise CommandError("give one of --hostname, --ip, --from-id, --expand, --list, --delete", USAGE)
    dirs = bookie_dirs(conf)
    if not app.metadata_uri and dirs.metadata_uri:
        app.metadata_uri = dirs.metadata_uri
    if action in ("hostname", "ip"):
        from_id, new = other_id_form(conf, action == "hostname")
        action = "rename"
    if action == "rename":
        if from_id is None:  # (set with the action above)
            raise CommandError("give the bookie id to rename from (--from-id)", USAGE)
        renamed = cookies.admin_rename(app.store, dirs, from_id)
        emit(
            app,
            renamed,
            lambda: app.console.print(
                f"cookie moved from {renamed.old_bookie_id} to {renamed.bookie_id} "
                f"({len(renamed.rewritten_dirs)} directories rewritten)"
            ),
        )
    elif action == "expand":
        expanded = cookies.admin_expand(app.store, dirs)
        emit(
            app,
            expanded,
            lambda: app.console.print(
                f"storage expanded with {', '.join(expanded.added_dirs)}"
                if expanded.added_dirs
                else "nothing to expand"
            ),
        )
    elif action == "list":
        listing = cookies.admin_list(app.store, dirs)

        def human():
            zk = listing.zookeeper
            table(
                app,
                ["cookie", "exists", "bookie"],
                [(zk.path, "yes" if zk.exists else "no", zk.bookie_host or "")]
                + [(r.path, "yes" if r.exists else "no", r.bookie_host or r.error or "") for r in listing.local],
            )

        emit(app, listing, human)
    else:

        def confirm(n_files: int, zk: bool) -> None:
            what = f"{n_files} VERSION files" + (" and the ZooKeeper cookie" if zk else "")
            confirm_destructive(
                app, f"Delete {what} of bookie {dirs.bookie_id}?", force, f"delete the cookies of {dirs.bookie_id}"
            )

        deleted = cookies.admin_delete(app.store, dirs, confirm)
        emit(
            app,
            deleted,
            lambda: app.console.print(
                f"deleted {len(deleted.deleted_files)} VERSION files"
                + (" and the ZooKeeper cookie" if deleted.zookeeper_deleted else "")
            ),
        )
