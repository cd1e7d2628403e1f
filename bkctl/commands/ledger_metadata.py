"""``bkctl ledger metadata dump|restore``: ledger metadata backups in Java's byte format
(added to the ``ledger`` group in bkctl.cli)."""

from __future__ import annotations

import click

from ..app import App, confirm_destructive
from ..completers import complete_ledger_id
from ..render import emit
from . import pass_app


@click.group("metadata")
def metadata():
    """Ledger metadata backups, byte-compatible with Java's ledgermetadata -dumptofile/-restorefromfile."""


@metadata.command("dump")
@click.argument("ledger_id", type=click.IntRange(0), shell_complete=complete_ledger_id)
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False, writable=True, allow_dash=True))
@pass_app
def metadata_dump(app: App, ledger_id: int, path: str):
    """Write a ledger's metadata to FILE exactly as stored (the ledger's own format, v1/v2/v3).

    FILE '-' is stdout (the summary then goes to stderr; not with --json).
    Unknown ledger: exit 3.  --json: ledger_id, file, bytes,
    format_version, state, version (the znode's).
    """
    from ..ops.ledger_meta import dump

    if path == "-" and app.json:
        from ..exitcodes import USAGE, CommandError

        raise CommandError("--json and FILE '-' would share stdout: give a file name", USAGE)
    doc = dump(app.store, ledger_id, path)
    text = f"ledger {ledger_id}: {doc.bytes} bytes of format-v{doc.format_version} metadata written to "
    if path == "-":
        app.info(text + "stdout")
        return
    emit(app, doc, lambda: app.console.print(text + path))


@metadata.command("restore")
@click.argument("path", metavar="FILE", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--ledger-id",
    "-l",
    type=click.IntRange(0),
    metavar="ID",
    shell_complete=complete_ledger_id,
    help="The ledger to restore (default: the one number in FILE's name, e.g. ledger-42.meta).",
)
@click.option("--force", is_flag=True, help="Replace the metadata of a ledger that exists, without asking.")
@pass_app
def metadata_restore(app: App, path: str, ledger_id: int | None, force: bool):
    """Create a ledger's metadata znode from FILE (any metadata format, written byte for byte).

    A ledger that exists is replaced only after a prompt on a terminal, or
    with --force (elsewhere: exit 2).  A FILE that is not ledger metadata:
    exit 2.  --json: ledger_id, file, bytes, format_version, state,
    replaced, version.
    """
    from ..exitcodes import USAGE, CommandError
    from ..ops.ledger_meta import ledger_id_from_file_name, restore

    if ledger_id is None:
        ledger_id = ledger_id_from_file_name(path)
        if ledger_id is None:
            raise CommandError(f"cannot tell the ledger id from the file name {path!r}: give --ledger-id", USAGE)
    doc = restore(
        app.store,
        ledger_id,
        path,
        lambda: confirm_destructive(
            app,
            f"Ledger {ledger_id} exists. Replace its metadata with {path}?",
            force,
            f"replace the metadata of ledger {ledger_id}",
        ),
    )
    emit(
        app,
        doc,
        lambda: app.console.print(
            f"ledger {ledger_id} {'replaced' if doc.replaced else 'restored'} from {path} ({doc.state})"
        ),
    )
