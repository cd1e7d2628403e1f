"""``bkctl cluster nuke`` (Java's nukeexistingcluster), added to the ``cluster`` group in bkctl.cli."""
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
    confirm_destructive(app, f"Delete the whole BookKeeper cluster at {app.metadata_uri}? All its ledgers are lost.",
                        force, f"nuke the cluster at {app.metadata_uri}")
    nuked = store.cluster.nuke(instance_id=instance_id) if instance_id is not None else store.cluster.nuke(force=True)
    doc = {"uri": app.metadata_uri, "nuked": nuked}
    emit(app, doc, lambda: app.console.print("cluster nuked" if nuked else "no cluster there: nothing to nuke"))
