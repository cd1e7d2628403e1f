"""``bkctl cluster nuke`` (Java's nukeexistingcluster) and ``cluster backup|restore``, added to the
``cluster`` group in bkctl.cli."""

from __future__ import annotations

import click

from ..app import App, confirm_destructive
from ..render import emit
from . import pass_app


@click.command("nuke")
@click.option("--instance-id", "-i", metavar="ID", help="Nuke only if the cluster's INSTANCEID is ID.")
@click.option("--force", is_flag=True, help="Do not ask; without --instance-id also skip the instance id check.")
@pass_app
def nuke(app: App, instance_id: str | None, force: bool):
    """Delete the whole cluster: every ledger, cookie, LAYOUT, INSTANCEID, the
    autorecovery tree and the root itself (Java's nukeexistingcluster).

    Give --instance-id ID (checked against INSTANCEID; exit 4 on a
    mismatch) or --force.  Refuses (exit 4) while any bookie is registered,
    or when the root holds znodes that are not BookKeeper's.  Prompts on a
    terminal; elsewhere refuses (exit 2) without --force.  A cluster that is
    not there: exit 3 with --instance-id, nothing to do with --force.
    --json: uri, nuked.
    """
    from ..exitcodes import USAGE, CommandError

    if instance_id is None and not force:
        raise CommandError("give --instance-id ID (the cluster's INSTANCEID) or --force", USAGE)
    # --force also finishes a nuke that was interrupted (LAYOUT already gone)
    store = app.connect_store() if instance_id is None else app.store
    confirm_destructive(
        app,
        f"Delete the whole BookKeeper cluster at {app.metadata_uri}? All its ledgers are lost.",
        force,
        f"nuke the cluster at {app.metadata_uri}",
    )
    nuked = store.cluster.nuke(instance_id=instance_id) if instance_id is not None else store.cluster.nuke(force=True)
    doc = {"uri": app.metadata_uri, "nuked": nuked}
    emit(app, doc, lambda: app.console.print("cluster nuked" if nuked else "no cluster there: nothing to nuke"))


@click.command("backup")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Replace FILE if it exists.")
@pass_app
def backup(app: App, path: str, force: bool):
    """Save the cluster's metadata to one FILE: every ledger's metadata, the cookies, INSTANCEID, LAYOUT,
    the autorecovery switch and lostBookieRecoveryDelay.

    Each ledger is kept byte for byte as `ledger metadata dump` writes it
    (Java's ledgermetadata -dumptofile format: v1/v2/v3), in one JSON
    document.  Not kept: registrations (the bookies write them),
    under-replication marks and locks (an auditor marks again what is
    missing), the auditor election, the rack map, Pulsar's managed-ledger
    znodes (Pulsar's own metadata: back them up with Pulsar's tools).  An
    existing FILE: exit 4 unless --force.  --json: file, ledgers, cookies,
    bytes, instance_id.
    """
    from ..ops.metadata_backup import backup as run

    doc = run(app.store, path, app.require_uri(), overwrite=force)
    emit(
        app,
        doc,
        lambda: app.console.print(
            f"{doc.ledgers} ledgers and {doc.cookies} cookies of instance {doc.instance_id} saved to {path}"
        ),
    )


@click.command("restore")
@click.argument("path", metavar="FILE", type=click.Path(exists=True, dir_okay=False))
@click.option("--force", is_flag=True, help="Replace existing ledgers, cookies and INSTANCEID without asking.")
@pass_app
def restore(app: App, path: str, force: bool):
    """Write a `cluster backup` FILE back: ledgers, cookies, INSTANCEID, the autorecovery settings.

    A cluster whose root is gone (`cluster nuke`) is initialised first.
    Ledgers or cookies that exist, or another INSTANCEID (after
    `metaformat`), are replaced only after a prompt on a terminal, or with
    --force (elsewhere: exit 2).  The ledger id generator is moved past the
    highest restored id (ZooKeeper's sequence cannot be set: ids are drawn),
    so that new ledgers do not get restored ids.  A FILE that is not a
    backup: exit 2.  --json: file, ledgers, replaced_ledgers, cookies,
    replaced_cookies, instance_id, instance_id_replaced, cluster_created,
    next_ledger_id_above (null if the generator was not moved: more than
    200,000 ids to draw).
    """
    from ..ops.metadata_backup import restore as run

    def confirm(ledgers: list[int], cookies: list[str], instance: bool) -> None:
        what = ", ".join(
            filter(
                None,
                [
                    f"{len(ledgers)} existing ledgers" if ledgers else "",
                    f"{len(cookies)} existing cookies" if cookies else "",
                    "the cluster's INSTANCEID" if instance else "",
                ],
            )
        )
        confirm_destructive(app, f"Replace {what} with {path}'s?", force, f"replace {what}")

    doc = run(app.connect_store(), path, confirm)
    emit(
        app,
        doc,
        lambda: app.console.print(
            f"restored {doc.ledgers} ledgers ({len(doc.replaced_ledgers)} replaced) and {doc.cookies} cookies "
            f"from {path}; instance {doc.instance_id}"
            + (
                ""
                if doc.next_ledger_id_above is not None or not doc.ledgers
                else "; the ledger id generator could not be moved past the restored ids"
            )
        ),
    )
